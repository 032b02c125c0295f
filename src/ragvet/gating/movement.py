"""What a change moved on every case, labelled or not: how far a configuration's top k moved
from the ranking its baseline kept (:func:`ragvet.gating.baselines.baseline_ranking_path`),
summarised over the cases and per slice, with the cases that moved most.

The figures per case are :mod:`ragvet.measures.overlap`'s (``overlap@k``,
``topk_changed@k``, ``rbo@k``). The two rankings, and the per-case table's tags, are read
a batch of cases at a time and paired by case id (:mod:`ragvet.storage.rankings`), so a
run of ten million cases is never held: what stays is one float64 per case for overlap@k
and for RBO, an int8 for the change and an int32 per slice key (the exact percentiles need
every value), and the cases that moved most so far. The per-case figures go to a sink (the
verdict stage writes them as row groups) as each batch is measured.

A distribution is its mean and its 10th, 50th and 90th percentiles (linear interpolation
between the two nearest cases, numpy's default); all None over no case. The mean is
numpy's over the values in case-id order, the whole column at once, so it is the same
whatever the batches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ragvet.errors import InputError
from ragvet.gating.baselines import Revision, baseline_ranking_path, fetch_file
from ragvet.measures.overlap import MOVED, figures_at, moved_at, numbered_rankings
from ragvet.settings import MOST_MOVED, Gate
from ragvet.storage.files import FLOAT_PLACES
from ragvet.storage.rankings import (
    NUMBERED_COLUMNS,
    case_batches,
    case_ids_of,
    numbered_batches,
    numbering,
    paired_batches,
)
from ragvet.storage.results import column, per_case_path
from ragvet.storage.tables import run_path

PERCENTILES = (10, 50, 90)
Ranking = tuple[Path, str]  # a ranking's Parquet file and its name in errors
Sides = tuple[Ranking, Ranking]  # the baseline's ranking and the current run
Sink = Callable[[pl.DataFrame], None]  # receives the per-case figures a batch at a time (:func:`table_rows`)


def distribution(values: np.ndarray) -> dict[str, float | None]:
    """``mean, p10, p50, p90`` of ``values``; each None when there is none."""
    if len(values) == 0:
        return {"mean": None, **{f"p{q}": None for q in PERCENTILES}}
    return {"mean": float(np.mean(values)), **{f"p{q}": float(np.percentile(values, q)) for q in PERCENTILES}}


def _figures(overlap: np.ndarray, rbo: np.ndarray, changed: np.ndarray) -> dict[str, Any]:
    """The cases counted, the share whose top k changed (None over no case), and the two distributions."""
    return {
        "cases": len(changed),
        "topk_changed": float(changed.mean()) if len(changed) else None,
        "overlap": distribution(overlap),
        "rbo": distribution(rbo),
    }


def _most_moved(frame: pl.DataFrame, k: int, most: int) -> pl.DataFrame:
    """The ``most`` cases of ``frame`` that moved most: lowest ``rbo@k``, then lowest
    ``overlap@k``, then case id, only those whose top k or its order changed (RBO below 1)."""
    moving = frame.filter(pl.col(f"rbo@{k}") < 1.0).select("case_id", f"overlap@{k}", f"rbo@{k}")
    return moving.sort([f"rbo@{k}", f"overlap@{k}", "case_id"]).head(most)


class MovementTally:
    """The movement at ``k`` of every case, gathered a batch at a time in case-id order
    (:meth:`add`) and summarised at the end (:meth:`summary`): over all cases, per value
    of each slice key in ``keys`` (a case without the tag is in none of that key's
    slices), and the ``most`` cases that moved most (:func:`_most_moved`). The cases that
    moved most over all batches are those of the batches' own, so only ``most`` are kept."""

    def __init__(self, k: int, keys: Sequence[str], most: int) -> None:
        self.k, self.keys, self.most = k, sorted(keys), most
        self.overlap: list[np.ndarray] = []
        self.rbo: list[np.ndarray] = []
        self.changed: list[np.ndarray] = []
        self.codes: dict[str, list[np.ndarray]] = {key: [] for key in self.keys}
        self.values: dict[str, dict[str, int]] = {key: {} for key in self.keys}  # each tag value's code
        self.moved = pl.DataFrame(schema={"case_id": pl.String, f"overlap@{k}": pl.Float64, f"rbo@{k}": pl.Float64})

    def add(self, moves: pl.DataFrame, tags: pl.DataFrame) -> None:
        """One batch: ``moves`` (:func:`ragvet.measures.overlap.moved_at` at ``k``) and
        ``tags`` (``case_id`` and ``tags.<key>`` columns of those cases; cases it lacks
        have no tags)."""
        k = self.k
        self.overlap.append(moves[f"overlap@{k}"].to_numpy())
        self.rbo.append(moves[f"rbo@{k}"].to_numpy())
        self.changed.append(moves[f"topk_changed@{k}"].to_numpy())
        joined = moves.select("case_id").join(tags, on="case_id", how="left", maintain_order="left")
        for key in self.keys:
            values, codes = joined[column("tags", key)], self.values[key]
            for value in values.drop_nulls().unique().to_list():
                codes.setdefault(value, len(codes))
            self.codes[key].append(values.replace_strict(codes, default=-1, return_dtype=pl.Int32).to_numpy())
        self.moved = _most_moved(pl.concat([self.moved, _most_moved(moves, k, self.most)]), k, self.most)

    def summary(self, p: float) -> dict[str, Any]:
        """The figures over every case added, per slice value (sorted), and the cases that moved most."""
        overlap, rbo, changed = (
            np.concatenate(parts) if parts else np.zeros(0) for parts in (self.overlap, self.rbo, self.changed)
        )
        summary: dict[str, Any] = {"k": self.k, "p": p, **_figures(overlap, rbo, changed), "slices": {}}
        for key in self.keys:
            codes = np.concatenate(self.codes[key]) if self.codes[key] else np.zeros(0, dtype=np.int32)
            summary["slices"][key] = {
                value: _figures(overlap[codes == code], rbo[codes == code], changed[codes == code])
                for value, code in sorted(self.values[key].items())
            }
        summary["most_moved"] = [
            {"case_id": case_id, "overlap": overlap, "rbo": rbo} for case_id, overlap, rbo in self.moved.iter_rows()
        ]
        return summary


def table_rows(config: str, moves: pl.DataFrame, k: int) -> pl.DataFrame:
    """One batch of the per-case movement table, ``config, case_id, overlap@k,
    topk_changed@k, rbo@k``, floats rounded as every output ragvet writes: what a program
    reads of every case's movement, by configuration and case."""
    rows = moves.select(pl.lit(config, dtype=pl.String).alias("config"), pl.all())
    return rows.with_columns(pl.col(f"overlap@{k}", f"rbo@{k}").round(FLOAT_PLACES))


def empty_table(k: int) -> pl.DataFrame:
    """:func:`table_rows` of no case: the table when no configuration was measured."""
    schema = {"config": pl.String, "case_id": pl.String, f"overlap@{k}": pl.Float64}
    return pl.DataFrame(schema=schema | {f"topk_changed@{k}": pl.Int8, f"rbo@{k}": pl.Float64})


Changed = tuple[int, int]  # the cases measured at a guarded k, and how many of them changed their top k


def _no_tags() -> tuple[list[str], Iterator[pl.DataFrame]]:
    """No slice keys, and one frame of no tags: a configuration without a per-case table."""
    return [], iter([pl.DataFrame(schema={"case_id": pl.String})])


@dataclass(frozen=True)
class Measured:
    """What one configuration's rankings moved: at each guarded k, :data:`Changed`; and at
    the verdict's depth, :meth:`MovementTally.summary` (None when no depth was asked)."""

    changed: dict[int, Changed]
    summary: dict[str, Any] | None


def _tags(per_case: Path, slices: Sequence[str]) -> tuple[list[str], Iterator[pl.DataFrame]]:
    """The slice keys the per-case table at ``per_case`` tags cases with, and its
    ``case_id`` and those ``tags.<key>`` columns a batch of cases at a time; none (one
    empty frame) where evaluate has not written the table."""
    if not per_case.is_file():
        return _no_tags()
    names = pl.read_parquet_schema(per_case)
    keys = [key for key in slices if column("tags", key) in names]
    return keys, case_batches(per_case, per_case.as_posix(), ["case_id", *(column("tags", key) for key in keys)])


def _named(cases: np.ndarray, baseline: pl.DataFrame, run: Path) -> pl.Series:
    """The ids of the case numbers ``cases``: from the baseline's rows (``case, case_id``),
    and, for a case only the run ranks, from the run (:func:`case_ids_of`)."""
    known = baseline.select("case", "case_id").unique("case")
    named = pl.DataFrame({"case": cases.astype(np.int32)}).join(known, on="case", how="left", maintain_order="left")
    unnamed = named.filter(pl.col("case_id").is_null())["case"].to_numpy()
    if len(unnamed):
        named = named.update(case_ids_of(run, unnamed), on="case")
    return named["case_id"]


def moved_batches(sides: Sides, ks: Sequence[int], p: float) -> Iterator[pl.DataFrame]:
    """:func:`moved_at` of the two rankings at every k of ``ks``, a batch of whole cases at
    a time in case-id order (at least one frame). Two rankings numbered alike
    (:func:`numbering`) are paired by their numbers, the others by their ids: the same
    figures either way."""
    (base, _), (run, _) = sides
    depth = max(ks, default=0)
    numbered = numbering(base)
    if numbered is None or numbered != numbering(run):
        pairs = paired_batches([case_batches(source, where) for source, where in sides])
        found = (moved_at(base_rows, run_rows, ks, p) for base_rows, run_rows in pairs)
    else:
        columns = [[*NUMBERED_COLUMNS, "case_id"], list(NUMBERED_COLUMNS)]
        streams = [numbered_batches(source, where, read) for (source, where), read in zip(sides, columns)]
        found = (
            figures_at(_named(cases, base_rows, run), *matrices, ks, p)
            for base_rows, run_rows in paired_batches(streams, key="case")
            for cases, matrices in [numbered_rankings(base_rows, run_rows, depth)]
        )
    first = next(found, None)
    none = np.zeros((0, depth), dtype=np.int64)
    yield figures_at(pl.Series("case_id", [], pl.String), none, none, ks, p) if first is None else first
    yield from found


def _measured(
    config: str,
    sides: Sides,
    guarded: Sequence[int],
    depth: int | None,
    p: float,
    per_case: Path,
    slices: Sequence[str],
    sink: Sink | None,
) -> Measured:
    """:class:`Measured` of one configuration, in one pass over its two rankings and, with a
    ``depth``, its per-case table's tags; each batch's rows at ``depth`` go to ``sink``."""
    keys, tags = _tags(per_case, slices) if depth is not None else _no_tags()
    tally = MovementTally(depth, keys, MOST_MOVED) if depth is not None else None
    ks = sorted({*guarded, *([] if depth is None else [depth])})
    counts = dict.fromkeys(guarded, (0, 0))
    for moves, tagged in paired_batches([moved_batches(sides, ks, p), tags]):
        by_k = {k: moves.select("case_id", *(f"{name}@{k}" for name in MOVED)) for k in ks}
        for k in guarded:
            changed = by_k[k][f"topk_changed@{k}"]
            counts[k] = (counts[k][0] + len(changed), counts[k][1] + int(changed.sum()))
        if tally is not None:
            tally.add(by_k[tally.k], tagged)
            if sink is not None:
                sink(table_rows(config, by_k[tally.k], tally.k))
    return Measured(counts, None if tally is None else tally.summary(p))


def measure_movement(
    configs: Sequence[str],
    sides_of: Callable[[str], Sides | str],
    guarded: Sequence[int],
    depth: int | None,
    p: float,
    cases: Path,
    slices: Sequence[str],
    sink: Sink | None = None,
) -> dict[str, Measured | str]:
    """Each configuration's movement between its two rankings (``sides_of``,
    :func:`ranked_sides`), or why there are not two: at each ``guarded`` k, how many cases
    changed their top k; with a ``depth``, the summary at that depth with RBO's persistence
    ``p``, sliced by the tags of the per-case tables in ``cases``, each case's figures going
    to ``sink`` (:func:`table_rows`) in configuration and case order."""
    found: dict[str, Measured | str] = {}
    for config in sorted(configs):
        sides = sides_of(config)
        if isinstance(sides, str):
            found[config] = sides
        else:
            found[config] = _measured(config, sides, guarded, depth, p, per_case_path(cases, config), slices, sink)
    return found


def moved_by_config(measured: Mapping[str, Measured | str]) -> dict[str, dict[str, Any]]:
    """The verdict's ``moved``: each configuration's summary, or, where nothing was measured
    (a baseline accepted before rankings were kept), the reason with its fix (``unavailable``)."""
    return {
        config: {"unavailable": found} if isinstance(found, str) else found.summary or {}
        for config, found in measured.items()
    }


def rankings_kept_by_ids(configs: Sequence[str], baseline: Path, runs: Path) -> list[Path]:
    """The baseline's kept rankings of ``configs`` that keep ids only while the work tree's
    run is numbered: :func:`moved_batches` pairs those by their ids, the same figures read
    several times slower on millions of cases. Accepting the baseline again keeps the run's
    numbers."""
    kept = [(baseline_ranking_path(baseline, config), run_path(runs, config)) for config in configs]
    return [
        ranking
        for ranking, run in kept
        if ranking.is_file() and run.is_file() and numbering(ranking) is None and numbering(run) is not None
    ]


def ranked_sides(config: str, baseline: Path, against: Revision | None, runs: Path) -> Sides | str:
    """The two rankings movement is measured between: the one the committed ``baseline``
    folder kept (or, with ``against``, that revision's run of ``config``, from git or DVC,
    fetched into its folder: :func:`ragvet.gating.baselines.fetched`), and the work tree's
    run in ``runs``; or why there are not two, as text."""
    run = run_path(runs, config)
    if not run.is_file():
        return f"{run.as_posix()} is not in the work tree: run `dvc repro` (or `dvc checkout` it)"
    if against is None:
        path = baseline_ranking_path(baseline, config)
        if not path.is_file():
            return f"the baseline keeps no ranking ({path.as_posix()}): accept it again with `ragvet baseline accept`"
        return (path, path.as_posix()), (run, run.as_posix())
    where = run.as_posix()
    try:
        found = fetch_file(against.name, where, Path.cwd(), against.folder)
    except InputError as err:  # DVC cannot bring it: no comparison, and why
        problem = err.problems[0]
        return f"{problem.where}: {problem.what} (fix: {problem.fix})"
    if found is None:
        return f"{against.name} has no {where}"
    return (found, f"{against.name}:{where}"), (run, where)


def movement_entry(metric: str, changed: Changed | str, max_drop: float) -> dict[str, Any]:
    """A guarded movement metric (``topk_changed@k``) as an entry of a configuration's
    verdict, shaped as a paired comparison's: the baseline's share is 0 by definition (its
    own ranking), the current share is over every case either side ranks (0.0 over none),
    and the entry fails when it exceeds ``max_drop``; exactly the limit passes. Every case
    is measured, so there is no interval or test. Unmeasured (``changed`` is the reason) it
    fails: a gate never passes what it did not measure."""
    untested = {"metric": metric, "baseline": 0.0, "ci_low": None, "ci_high": None, "p_value": None}
    untested |= {"p_corrected": None, "higher_is_better": False}
    if isinstance(changed, str):
        counts = {"current": None, "delta": None, "cases": 0, "wins": 0, "losses": 0, "ties": 0}
        return {**untested, **counts, "exceeds": True, "failed": True, "unmeasured": changed}
    cases, losses = changed
    share = losses / cases if cases else 0.0
    counts = {"current": share, "delta": share, "cases": cases, "wins": 0, "losses": losses, "ties": cases - losses}
    return {**untested, **counts, "exceeds": share > max_drop, "failed": share > max_drop}


def guarded_ks(gate: Gate) -> list[int]:
    """The depths of the gate's guarded movement metrics (``topk_changed@k``)."""
    return sorted({_k_of(metric) for metric in gate.movement})


def _k_of(metric: str) -> int:
    """The k of a movement metric's name (``topk_changed@10``: 10)."""
    return int(metric.partition("@")[2])


def guard_movement(
    verdict: dict[str, Any],
    gate: Gate,
    measured: Mapping[str, Measured | str],
    other_chunking: Mapping[str, str | None],
) -> dict:
    """``verdict`` with each gated configuration's guarded movement metrics
    (``gate.movement``), as :func:`measure_movement` measured them at :func:`guarded_ks`,
    added to its ``metrics``, and its pass decided again. Where the chunking is not the
    baseline's (``other_chunking`` holds why), chunk ids name other passages, so they are
    skipped with that reason, as the gate skips chunk-level metrics."""
    if not gate.movement:
        return verdict
    configs = []
    for result in verdict["configs"]:
        reason = other_chunking.get(result["config"])
        if reason:
            skipped = [*result["skipped"], *({"metric": metric, "reason": reason} for metric in gate.movement)]
            configs.append({**result, "skipped": skipped})
            continue
        found = measured[result["config"]]
        entries = [
            movement_entry(metric, found if isinstance(found, str) else found.changed[_k_of(metric)], gate.max_drop)
            for metric in gate.movement
        ]
        passed = result["passed"] and not any(entry["failed"] for entry in entries)
        configs.append({**result, "metrics": [*result["metrics"], *entries], "passed": passed})
    return {**verdict, "configs": configs, "passed": bool(configs) and all(c["passed"] for c in configs)}
