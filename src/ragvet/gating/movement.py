"""What a change moved on every case, labelled or not: how far a configuration's top k moved
from the ranking its baseline kept (:func:`ragvet.gating.baselines.baseline_ranking_path`),
summarised over the cases and per slice, with the cases that moved most.

The figures per case are :mod:`ragvet.measures.overlap`'s (``overlap@k``,
``topk_changed@k``, ``rbo@k``); here they are read from the two files and summarised.
A distribution is its mean and its 10th, 50th and 90th percentiles (linear interpolation
between the two nearest cases, numpy's default); all None over no case.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ragvet.errors import InputError
from ragvet.gating.baselines import baseline_ranking_path, files_at
from ragvet.measures.overlap import RANKING_COLUMNS, moved
from ragvet.settings import MOST_MOVED, Gate
from ragvet.storage.files import FLOAT_PLACES
from ragvet.storage.results import column, per_case_path, read_results
from ragvet.storage.tables import run_path

PERCENTILES = (10, 50, 90)
Sides = tuple[pl.DataFrame, pl.DataFrame]  # the baseline's ranking and the current run (RANKING_COLUMNS)


def distribution(values: np.ndarray) -> dict[str, float | None]:
    """``mean, p10, p50, p90`` of ``values``; each None when there is none."""
    if len(values) == 0:
        return {"mean": None, **{f"p{q}": None for q in PERCENTILES}}
    return {"mean": float(np.mean(values)), **{f"p{q}": float(np.percentile(values, q)) for q in PERCENTILES}}


def _figures(moves: pl.DataFrame, k: int) -> dict[str, Any]:
    """The cases counted, the share whose top k changed, and the two distributions."""
    changed = moves[f"topk_changed@{k}"].to_numpy()
    return {
        "cases": len(moves),
        "topk_changed": float(changed.mean()) if len(changed) else None,
        "overlap": distribution(moves[f"overlap@{k}"].to_numpy()),
        "rbo": distribution(moves[f"rbo@{k}"].to_numpy()),
    }


def movement_summary(
    moves: pl.DataFrame, tags: pl.DataFrame, slices: Sequence[str], k: int, p: float, most: int
) -> dict[str, Any]:
    """The movement of every case of ``moves`` (:func:`ragvet.measures.overlap.moved`): over all of
    them, per value of each slice key (``tags`` holds ``case_id`` and the per-case
    table's ``tags.<key>`` columns; a case without the tag is not in that slice), and
    the ``most`` cases that moved most (lowest ``rbo@k``, then lowest ``overlap@k``,
    then case id), only those whose top k changed or whose order did."""
    summary: dict[str, Any] = {"k": k, "p": p, **_figures(moves, k), "slices": {}}
    joined = moves.join(tags, on="case_id", how="left")
    for key in sorted(slices):  # sorted, as the verdict file (sorted keys) gives them back
        name = column("tags", key)
        if name not in joined.columns:
            continue
        values = sorted(value for value in joined[name].unique().to_list() if value is not None)
        summary["slices"][key] = {value: _figures(joined.filter(pl.col(name) == value), k) for value in values}
    ranked = moves.filter(pl.col(f"rbo@{k}") < 1.0).sort([f"rbo@{k}", f"overlap@{k}", "case_id"]).head(most)
    summary["most_moved"] = [
        {"case_id": case_id, "overlap": overlap, "rbo": rbo}
        for case_id, overlap, rbo in ranked.select("case_id", f"overlap@{k}", f"rbo@{k}").iter_rows()
    ]
    return summary


def per_case_moves(
    configs: Sequence[str], sides_of: Callable[[str], Sides | str], k: int, p: float
) -> dict[str, pl.DataFrame | str]:
    """Each configuration's :func:`ragvet.measures.overlap.moved` between its two rankings
    (``sides_of``, :func:`ranked_sides`) at ``k`` with RBO's persistence ``p``, or why there
    are not two."""
    found: dict[str, pl.DataFrame | str] = {}
    for config in sorted(configs):
        sides = sides_of(config)
        found[config] = sides if isinstance(sides, str) else moved(*sides, k, p)
    return found


def movement_by_config(
    moves: Mapping[str, pl.DataFrame | str], cases: Path, slices: Sequence[str], k: int, p: float
) -> dict[str, dict[str, Any]]:
    """:func:`movement_summary` of each configuration's :func:`per_case_moves`, sliced by
    the tags of its per-case table in ``cases``, naming the
    :data:`ragvet.settings.MOST_MOVED` cases that moved most. A configuration with no
    ranking to compare (a baseline accepted before rankings were kept) says so in its
    entry (``unavailable``) with the fix, since nothing was measured."""
    found: dict[str, dict[str, Any]] = {}
    for config, moved_here in moves.items():
        if isinstance(moved_here, str):
            found[config] = {"unavailable": moved_here}
            continue
        table = read_results(per_case_path(cases, config), columns=("tags",))
        tags = table.select("case_id", *(name for name in table.columns if name.startswith("tags.")))
        found[config] = movement_summary(moved_here, tags, slices, k, p, MOST_MOVED)
    return found


def movement_table(moves: Mapping[str, pl.DataFrame | str], k: int) -> pl.DataFrame:
    """Every measured configuration's per-case figures in one table, ``config, case_id,
    overlap@k, topk_changed@k, rbo@k``, by configuration and case, floats rounded as every
    output ragvet writes: what a program reads of every case's movement."""
    frames = [
        frame.select(pl.lit(config).alias("config"), pl.all())
        for config, frame in sorted(moves.items())
        if not isinstance(frame, str)
    ]
    empty = {"config": pl.String, "case_id": pl.String, f"overlap@{k}": pl.Float64}
    empty |= {f"topk_changed@{k}": pl.Int8, f"rbo@{k}": pl.Float64}
    table = pl.concat(frames) if frames else pl.DataFrame(schema=empty)
    return table.with_columns(pl.col(f"overlap@{k}", f"rbo@{k}").round(FLOAT_PLACES))


def ranked_sides(config: str, baseline: Path, against: str | None, runs: Path) -> Sides | str:
    """The two rankings movement is measured between, as ``case_id, rank, chunk_id``
    frames: the one the committed ``baseline`` folder kept (or, with ``against``, that
    revision's run of ``config``, from git or DVC), and the work tree's run in ``runs``;
    or why there are not two, as text."""
    run = run_path(runs, config)
    if not run.is_file():
        return f"{run.as_posix()} is not in the work tree: run `dvc repro` (or `dvc checkout` it)"
    if against is None:
        path = baseline_ranking_path(baseline, config)
        if not path.is_file():
            return f"the baseline keeps no ranking ({path.as_posix()}): accept it again with `ragvet baseline accept`"
        base = pl.read_parquet(path, columns=list(RANKING_COLUMNS))
    else:
        where = run.as_posix()
        try:
            found = files_at(against, [where], Path.cwd())[where]
        except InputError as err:  # DVC cannot bring it: no comparison, and why
            problem = err.problems[0]
            return f"{problem.where}: {problem.what} (fix: {problem.fix})"
        if found is None:
            return f"{against} has no {where}"
        base = pl.read_parquet(io.BytesIO(found), columns=list(RANKING_COLUMNS))
    return base, pl.read_parquet(run, columns=list(RANKING_COLUMNS))


def movement_entry(metric: str, moves: pl.DataFrame | str, max_drop: float) -> dict[str, Any]:
    """A guarded movement metric (``topk_changed@k``) as an entry of a configuration's
    verdict, shaped as a paired comparison's: the baseline's share is 0 by definition (its
    own ranking), the current share is over every case either side ranks, and the entry
    fails when it exceeds ``max_drop``; exactly the limit passes. Every case is measured, so
    there is no interval or test. Unmeasured (``moves`` is the reason) it fails: a gate
    never passes what it did not measure."""
    untested = {"metric": metric, "baseline": 0.0, "ci_low": None, "ci_high": None, "p_value": None}
    untested |= {"p_corrected": None, "higher_is_better": False}
    if isinstance(moves, str):
        counts = {"current": None, "delta": None, "cases": 0, "wins": 0, "losses": 0, "ties": 0}
        return {**untested, **counts, "exceeds": True, "failed": True, "unmeasured": moves}
    changed = moves[metric].to_numpy()
    share = float(changed.mean()) if len(changed) else 0.0
    counts = {"current": share, "delta": share, "cases": len(changed), "wins": 0, "losses": int(changed.sum())}
    counts["ties"] = len(changed) - counts["losses"]
    return {**untested, **counts, "exceeds": share > max_drop, "failed": share > max_drop}


def guard_movement(
    verdict: dict[str, Any],
    gate: Gate,
    sides_of: Callable[[str], Sides | str],
    other_chunking: Mapping[str, str | None],
) -> dict:
    """``verdict`` with each gated configuration's guarded movement metrics
    (``gate.movement``) between its two rankings (``sides_of``, :func:`ranked_sides`)
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
        sides = sides_of(result["config"])
        entries = []
        for metric in gate.movement:
            k = int(metric.partition("@")[2])
            moves = sides if isinstance(sides, str) else moved(*sides, k, gate.rbo_p)
            entries.append(movement_entry(metric, moves, gate.max_drop))
        passed = result["passed"] and not any(entry["failed"] for entry in entries)
        configs.append({**result, "metrics": [*result["metrics"], *entries], "passed": passed})
    return {**verdict, "configs": configs, "passed": bool(configs) and all(c["passed"] for c in configs)}
