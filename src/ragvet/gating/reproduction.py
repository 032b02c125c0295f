"""Does a recomputed result reproduce a committed one, within float noise?

DESIGN.md ("Determinism and reproducibility") promises results byte for byte
through the shared DVC cache, and *within a stated tolerance* when a machine
recomputes them. This module is that tolerance, and it is what CI's determinism
check runs (``ragvet verify``).

**What may differ.** Dense scores are float sums; on another CPU, or where
ragvet cannot pin its float kernels (see :mod:`ragvet.retrieval.embedding`), they can move
in the last bits. Everything else ragvet writes is a function of the *rankings*:
counts, ranks, recall, nDCG, context sizes. So:

- a score may differ by at most :data:`EPSILON` (absolute);
- every rank-derived field of a per-case row must be equal, exactly;
- a case whose rank-derived fields differ is a **near tie** when its two runs
  differ only between chunks whose scores are within 2ε
  (two scores each moved by up to ε can swap only if they were within 2ε), and
  a chunk in one run's top ``depth`` but not the other's scored within
  2ε of the other run's last score (it straddled the cut).
  Near-tie cases are named, and the comparison still passes;
- anything else is a real difference, named with the fields that moved.

**Why ε = 1e-4.** Measured on the sample's three dense configurations
(docs/reproducibility.md has the table): recomputed under AVX-512, AVX2 and
portable torch kernels, native or pinned MKL, one or two threads, a score moved
by at most 2e-6 (scores are rounded to 6 places), and one case of 181 swapped
two chunks that scored 0.197127 and 0.197126. A tiny cross-encoder's logits
moved by at most 5.5e-7 of their size. ε sits 50 times above that noise and far
below the gaps that decide real rankings; a per-case *metric* is never compared
with ε, so a real swap cannot hide inside it.

**Figures.** A metrics JSON and a slice table are functions of their per-case table:
on each side (the work tree and the revision) they are recomputed from it with
evaluate's own functions (:func:`ragvet.measures.summary.config_summary`,
:func:`~ragvet.measures.summary.slice_table`), under the params of that side, and
must be what is written, to the printed digit. A summary that says what its table
does not is a difference, however equal the tables are.

**Evidence.** Per-case rows come from the revision's per-case tables (git,
or DVC where the project keeps them there). Rankings need both runs: the recomputed one in the work tree and
the committed one through DVC (cache, else remote). Without the committed run a
changed case cannot be told from a near tie, so it counts as a difference and
the message says to ``dvc pull``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from ragvet.errors import InputError
from ragvet.gating.baselines import file_at, read_results_at
from ragvet.measures.summary import config_summary, slice_table
from ragvet.settings import Budget
from ragvet.storage.files import dumps
from ragvet.storage.results import cases_dir, per_case_path, read_results, result_rows
from ragvet.storage.tables import run_path
from ragvet.text.escaping import visible

Row = dict[str, Any]
Ranking = list[tuple[str, float]]  # (chunk_id, score), best first

EPSILON = 1e-4
SCORE_FIELDS = ("top1_score",)  # the per-case fields that are retriever scores, not ranks
RUN_COLUMNS = ("case_id", "rank", "chunk_id", "score")


@dataclass
class ConfigCheck:
    """The verdict for one configuration: near-tie cases and real differences, each named."""

    config: str
    cases: int = 0
    rankings_checked: bool = False
    max_score_delta: float = 0.0
    near_ties: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    note: str = ""  # why rankings could not be checked
    unread: str = ""  # why the committed slice table could not be checked

    @property
    def reproduced(self) -> bool:
        return not self.differences


# --------------------------------------------------------------------------- kernels


def score_delta(committed: Any, recomputed: Any) -> float | None:
    """|a - b| for two scores, 0.0 for two missing ones, None when only one is missing."""
    if committed is None or recomputed is None:
        return 0.0 if committed is recomputed else None
    return abs(float(committed) - float(recomputed))


def row_differences(committed: Row, recomputed: Row, epsilon: float = EPSILON) -> tuple[list[str], float]:
    """Names of the fields that differ beyond tolerance, and the largest score move.

    Score fields may move by up to ``epsilon``; every other field must be equal.
    Nested dicts (``metrics``, ``counts``) are compared key by key, so the names
    say exactly what moved (``metrics.recall@5``).
    """
    moved: list[str] = []
    largest = 0.0
    for name in sorted(committed.keys() | recomputed.keys()):
        a, b = committed.get(name), recomputed.get(name)
        if name in SCORE_FIELDS:
            delta = score_delta(a, b)
            if delta is None or delta > epsilon:
                moved.append(name)
            else:
                largest = max(largest, delta)
        elif isinstance(a, dict) and isinstance(b, dict):
            moved += [f"{name}.{key}" for key in sorted(a.keys() | b.keys()) if a.get(key) != b.get(key)]
        elif a != b:
            moved.append(name)
    return moved, largest


def ranking_difference(committed: Ranking, recomputed: Ranking, epsilon: float = EPSILON) -> str | None:
    """Why two rankings of one case differ beyond a near tie; None when they are equal up to near ties.

    Near tie (module doc): shared chunks keep their scores within ``epsilon``,
    any two shared chunks that swap order were within ``2 * epsilon``, and a chunk
    kept by only one run scored within ``2 * epsilon`` of the other run's last one.
    Empty rankings are equal.
    """
    tie = 2 * epsilon
    a, b = dict(committed), dict(recomputed)
    for chunk in sorted(a.keys() & b.keys()):
        if abs(a[chunk] - b[chunk]) > epsilon:
            return f"{chunk} scored {a[chunk]:.6f}, now {b[chunk]:.6f}"
    for only, other, side in ((b.keys() - a.keys(), committed, b), (a.keys() - b.keys(), recomputed, a)):
        for chunk in sorted(only):
            if not other or side[chunk] < other[-1][1] - tie or side[chunk] > other[-1][1] + tie:
                return f"{chunk} entered or left the ranking with score {side[chunk]:.6f}, not at the cut"
    order_b = {chunk: position for position, (chunk, _) in enumerate(recomputed)}
    shared = [chunk for chunk, _ in committed if chunk in order_b]
    for i, first in enumerate(shared):
        for second in shared[i + 1 :]:
            if order_b[second] < order_b[first] and abs(a[first] - a[second]) > tie:
                return f"{second} moved above {first} (scores {a[second]:.6f} and {a[first]:.6f})"
    return None


def check_config(
    config: str,
    committed_rows: Sequence[Row] | None,
    recomputed_rows: Sequence[Row] | None,
    runs: tuple[Mapping[str, Ranking], Mapping[str, Ranking]] | None,
    epsilon: float = EPSILON,
) -> ConfigCheck:
    """Compare one configuration's per-case rows, and its rankings when both runs are given."""
    check = ConfigCheck(config, rankings_checked=runs is not None)
    if committed_rows is None or recomputed_rows is None:
        side = "committed" if committed_rows is None else "recomputed"
        check.differences.append(f"no {side} per-case table")
        return check
    before = {row["case_id"]: row for row in committed_rows}
    after = {row["case_id"]: row for row in recomputed_rows}
    check.cases = len(before.keys() | after.keys())
    for case_id in sorted(before.keys() ^ after.keys()):
        side = "committed" if case_id in before else "recomputed"
        check.differences.append(f"case {case_id}: only in the {side} table")
    for case_id in sorted(before.keys() & after.keys()):
        moved, largest = row_differences(before[case_id], after[case_id], epsilon)
        check.max_score_delta = max(check.max_score_delta, largest)
        if runs is None:
            if moved:
                check.differences.append(f"case {case_id}: {', '.join(moved)} changed (committed run not available)")
            continue
        committed, recomputed = runs[0].get(case_id, []), runs[1].get(case_id, [])
        check.max_score_delta = max(check.max_score_delta, largest_score_move(committed, recomputed))
        reason = ranking_difference(committed, recomputed, epsilon)
        if reason is not None:
            check.differences.append(f"case {case_id}: {reason}" + (f"; {', '.join(moved)} changed" if moved else ""))
        elif [c for c, _ in committed] != [c for c, _ in recomputed]:
            check.near_ties.append(case_id)
        elif moved:
            check.differences.append(f"case {case_id}: {', '.join(moved)} changed, though its ranking did not")
    return check


def largest_score_move(committed: Ranking, recomputed: Ranking) -> float:
    """The largest |score change| of a chunk ranked in both runs; 0.0 when they share none."""
    before = dict(committed)
    return max((abs(before[chunk] - score) for chunk, score in recomputed if chunk in before), default=0.0)


# --------------------------------------------------------------------------- reading


def rankings(rows: Iterable[Mapping[str, Any]]) -> dict[str, Ranking]:
    """Run rows (``case_id, rank, chunk_id, score``) as each case's ranking, best first."""
    grouped: dict[str, list[tuple[int, str, float]]] = {}
    for row in rows:
        grouped.setdefault(str(row["case_id"]), []).append((int(row["rank"]), str(row["chunk_id"]), row["score"]))
    return {case: [(chunk, float(score)) for _, chunk, score in sorted(ranked)] for case, ranked in grouped.items()}


def run_rankings(source: Any) -> dict[str, Ranking]:
    """Each case's ranking in a run file (a path or a binary file object of its bytes)."""
    return rankings(pl.read_parquet(source, columns=list(RUN_COLUMNS)).iter_rows(named=True))


def recomputed_rankings(path: Path) -> dict[str, Ranking] | None:
    """The run the work tree holds at ``path``; None when there is none."""
    return run_rankings(path) if path.is_file() else None


def committed_rankings(path: str, rev: str, repo: Path) -> tuple[dict[str, Ranking] | None, str]:
    """The run at ``path`` as committed at ``rev``, through DVC (its cache, else the remote).

    Returns ``(None, why)`` when DVC cannot provide it: no remote configured, the
    object missing there, or a revision that never had that output.
    """
    data, why = _committed_bytes(rev, path, repo)
    return (None, why) if data is None else (run_rankings(io.BytesIO(data)), "")


def _committed_bytes(rev: str, path: str, repo: Path) -> tuple[bytes | None, str]:
    """``path`` as committed at ``rev`` (git, else DVC), or ``(None, why)`` when neither
    can provide it: a file DVC keeps that this clone's cache and remote lack is a
    check left undone, said so, never a failed verification."""
    try:
        data = file_at(rev, path, repo)
    except InputError as err:
        return None, "; ".join(problem.what for problem in err.problems)
    return (None, f"{rev} has no {path}") if data is None else (data, "")


# --------------------------------------------------------------------------- figures

SHOWN_FIGURES = 10  # differing figures named per file; the rest are counted


def _leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf of a JSON value by its dotted path (``eval.metrics.recall@5``)."""
    if isinstance(value, Mapping) and value:
        return {path: leaf for key, item in value.items() for path, leaf in _leaves(item, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): value}


def figure_differences(written: Any, derived: Any, where: str) -> list[str]:
    """Each figure of ``written`` (a file as read) that ``derived`` (what the per-case table
    gives, printed as evaluate prints it: :func:`ragvet.storage.files.dumps`) does not hold."""
    expected, found = _leaves(json.loads(dumps(derived))), _leaves(written)
    missing = object()
    moved = [
        f"{where}: {path} is {_shown(found.get(path, missing))}, its per-case table gives "
        f"{_shown(expected.get(path, missing))}"
        for path in sorted(expected.keys() | found.keys())
        if found.get(path, missing) != expected.get(path, missing)
    ]
    extra = [f"{where}: and {len(moved) - SHOWN_FIGURES} more figures"] if len(moved) > SHOWN_FIGURES else []
    return moved[:SHOWN_FIGURES] + extra


def _shown(value: Any) -> str:
    return "nothing" if not isinstance(value, (str, int, float, bool, list, type(None))) else json.dumps(value)


def _measured(settings: Mapping[str, Any]) -> tuple[list[int], tuple[int, ...]]:
    """The cutoffs and context budgets evaluate measured by, from that side's params."""
    return list(settings.get("ks") or []), Budget.from_params(settings).values


def summary_differences(
    config: str, table: pl.DataFrame, summary: Mapping[str, Any], settings: Mapping[str, Any], where: str
) -> list[str]:
    """What the metrics JSON ``summary`` says that ``table`` does not give, recomputed with
    :func:`config_summary`. What no table holds is taken as the summary records it: the
    spec names, the fingerprints, the abstention threshold, its source and a stale mark."""
    ks, budgets = _measured(settings)
    abstention = summary.get("abstention") or {}
    spec = {"chunking": summary.get("chunking"), "retriever": summary.get("retriever")}
    fingerprints = summary.get("fingerprints") or {}
    if not {"eval_split", "corpus"} <= set(fingerprints):
        return [f"{where}: it has no eval_split and corpus fingerprints: not a metrics JSON of evaluate"]
    derived = config_summary(
        config, spec, table, ks, abstention.get("abstain_below"), fingerprints,
        abstention.get("abstain_below_source"), budgets,
    )  # fmt: skip
    if "stale" in abstention:
        derived["abstention"]["stale"] = abstention["stale"]
    return figure_differences(summary, derived, where)


def slices_differences(
    table: pl.DataFrame, slices: Mapping[str, Any], settings: Mapping[str, Any], where: str
) -> list[str]:
    """What the slice table ``slices`` says that ``table`` does not give (:func:`slice_table`)."""
    ks, budgets = _measured(settings)
    return figure_differences(slices, slice_table(table, list(settings.get("slices") or []), ks, budgets), where)


def _side_differences(
    config: str, table: pl.DataFrame | None, texts: Mapping[str, str | None], settings: Any, label: str
) -> list[str]:
    """The figure differences of one side (``texts``: its summary and slice JSON, None when
    absent); ``label`` prefixes the file names (``REV:`` for the committed side)."""
    if table is None or settings is None:
        return []
    found: list[str] = []
    for kind, text in texts.items():
        where = f"{label}{_figure_path(kind, config)}"
        if text is None:
            continue
        try:
            written = json.loads(text)
        except json.JSONDecodeError as err:
            found.append(f"{where}: malformed JSON ({err.msg}, line {err.lineno})")
            continue
        if kind == "summary":
            found += summary_differences(config, table, written, settings, where)
        else:
            found += slices_differences(table, written, settings, where)
    return found


def _figure_path(kind: str, config: str) -> str:
    """Where evaluate writes a configuration's summary or slice table, under ``metrics``."""
    return f"metrics/{config}.json" if kind == "summary" else f"metrics/slices/{config}.json"


def _params_at(rev: str, repo: Path) -> Any:
    """The params ``rev`` committed (what produced its figures), or None without them."""
    data = file_at(rev, "params.yaml", repo)
    try:
        return yaml.safe_load(data.decode("utf-8")) if data is not None else None
    except (yaml.YAMLError, UnicodeDecodeError):
        return None


def verify_results(
    configs: Sequence[str],
    against: str,
    repo: Path,
    metrics_dir: Path,
    runs_dir: Path,
    settings: Mapping[str, Any] | None = None,
) -> list[ConfigCheck]:
    """Check each configuration's work-tree results against those committed at ``against``,
    and each side's summary and slice table against its own per-case table (``settings``:
    the work tree's params; the committed side is checked under its own)."""
    committed = read_results_at(against, configs, repo)
    committed_settings = _params_at(against, repo)
    checks = []
    for config in sorted(configs):
        table = per_case_path(cases_dir(metrics_dir), config)
        recomputed = read_results(table) if table.is_file() else None
        run = run_path(runs_dir, config)
        before, why = committed_rankings(run.as_posix(), against, repo)
        after = recomputed_rankings(repo / run)
        runs = (before, after) if before is not None and after is not None else None
        result = committed.get(config)
        recomputed_rows = None if recomputed is None else result_rows(recomputed)
        check = check_config(config, None if result is None else result_rows(result[1]), recomputed_rows, runs)
        if runs is None:
            check.note = why or f"no recomputed run at {run}"
        work_tree = {kind: _read_text(metrics_dir, kind, config) for kind in ("summary", "slices")}
        check.differences += _side_differences(config, recomputed, work_tree, settings, "")
        if result is not None:
            slices, check.unread = _committed_bytes(against, _figure_path("slices", config), repo)
            at_rev = {
                "summary": json.dumps(result[0]),
                "slices": None if slices is None else slices.decode("utf-8", "replace"),
            }
            check.differences += _side_differences(config, result[1], at_rev, committed_settings, f"{against}:")
        checks.append(check)
    return checks


def _read_text(metrics_dir: Path, kind: str, config: str) -> str | None:
    path = Path(metrics_dir) / Path(_figure_path(kind, config)).relative_to("metrics")
    return path.read_text(encoding="utf-8") if path.is_file() else None


# --------------------------------------------------------------------------- rendering


def render(checks: Sequence[ConfigCheck], against: str) -> str:
    """The verdict as text: one line per configuration, then every named case
    (:func:`visible`: CI runs ``ragvet verify``, so no case id may start a log command)."""
    lines = []
    for check in checks:
        status = "reproduced" if check.reproduced else "DIFFERS"
        how = "identical rankings at every k" if check.rankings_checked else "identical per-case metrics"
        lines.append(
            f"{status} {check.config}: {check.cases} cases, {how} except {len(check.near_ties)} near-tie "
            f"case(s), scores within {EPSILON:g} (largest move {check.max_score_delta:.1e})"
        )
        if check.note:
            lines.append(f"  rankings not compared: {check.note}; `dvc pull` brings them")
        if check.unread:
            lines.append(f"  {against}'s slice table not checked: {check.unread}; `dvc pull` brings it")
        lines += [f"  near tie: {visible(case_id)}" for case_id in check.near_ties]
        lines += [f"  differs: {visible(what, None)}" for what in check.differences]
    ok = all(check.reproduced for check in checks)
    verdict = "reproduced" if ok else "NOT reproduced"
    lines.append(f"{verdict}: {len(checks)} configuration(s) against {against}")
    return "\n".join(lines)
