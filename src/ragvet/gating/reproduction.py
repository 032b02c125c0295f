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

**Memory.** The revision's files are fetched into a temporary folder
(:func:`ragvet.gating.baselines.revision_folder`), never held. Both per-case tables and both
runs are read together a batch of cases at a time, paired by case id
(:func:`ragvet.storage.rankings.paired_batches`; each is in case-id order as
evaluate and retrieve write them), and each side's summary and slice table is added
up batch by batch (:class:`ragvet.measures.summary.Summaries`), so a run of ten
million cases costs a few batches. Within a batch, rows equal but for scores within
ε and rankings of the same chunks in the same order are told by column comparisons;
every other case goes through the kernels below, one case at a time. Two runs the
retrieve stage numbered alike are paired and compared by their case and chunk
numbers (:func:`ranking_outcomes`): of their billions of string ids, only one per
unmoved case and the rows of the other cases are read. Named near
ties and differing cases are kept up to :data:`SHOWN_CASES` each, the rest counted.
A run in another order (written by another tool) is sorted into a temporary copy
first, which holds it whole (:func:`ragvet.storage.rankings.case_ordered`); a table
with recorded answers is summarised whole, as evaluate summarises it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import yaml

from ragvet.errors import InputError
from ragvet.gating.baselines import Revision, fetch_file, revision_folder, tables_at
from ragvet.gating.compare import table_batches
from ragvet.measures.summary import Summaries, config_summary, summaries
from ragvet.settings import Budget
from ragvet.storage.atomic import ROW_GROUP_ROWS
from ragvet.storage.files import dumps
from ragvet.storage.pipelining import ahead
from ragvet.storage.progress import progress_bar
from ragvet.storage.rankings import (
    ID_COLUMNS,
    NUMBERED_COLUMNS,
    case_batches,
    case_ids_of,
    case_ordered,
    numbered_batches,
    numbered_rows,
    numbering,
    paired_batches,
)
from ragvet.storage.results import cases_dir, in_id_order, per_case_path, read_results, result_rows
from ragvet.storage.tables import run_path
from ragvet.text.escaping import visible

Row = dict[str, Any]
Ranking = list[tuple[str, float]]  # (chunk_id, score), best first
RankingOutcome = tuple[str | None, bool, float]  # why it differs (None: a near tie at most), reordered, largest move
Judge = Callable[[str], RankingOutcome]  # a case's ranking outcome by its id

EPSILON = 1e-4
SCORE_FIELDS = ("top1_score",)  # the per-case fields that are retriever scores, not ranks
RUN_COLUMNS = ("case_id", "rank", "chunk_id", "score")
SHOWN_CASES = 100  # near-tie and differing cases named per configuration; the rest are counted
# Per-case rows read at once: a row group as evaluate writes them. A batch of a run holds about
# 10,000 cases, so the tables' batches wait for it, and a larger read would only be held longer.
TABLE_ROWS = ROW_GROUP_ROWS


@dataclass
class ConfigCheck:
    """The verdict for one configuration: near-tie cases and real differences, each named
    (near ties beyond :data:`SHOWN_CASES` counted in ``more_near_ties``)."""

    config: str
    cases: int = 0
    rankings_checked: bool = False
    max_score_delta: float = 0.0
    near_ties: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    note: str = ""  # why rankings could not be checked
    unread: str = ""  # why the committed slice table could not be checked
    more_near_ties: int = 0

    @property
    def reproduced(self) -> bool:
        return not self.differences

    @property
    def near_tie_cases(self) -> int:
        return len(self.near_ties) + self.more_near_ties


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


def largest_score_move(committed: Ranking, recomputed: Ranking) -> float:
    """The largest |score change| of a chunk ranked in both runs; 0.0 when they share none."""
    before = dict(committed)
    return max((abs(before[chunk] - score) for chunk, score in recomputed if chunk in before), default=0.0)


def ranking_outcome(committed: Ranking, recomputed: Ranking, epsilon: float = EPSILON) -> RankingOutcome:
    """What one case's two rankings say: why they differ beyond a near tie (None when
    they do not), whether their chunks come in another order, and the largest score move."""
    reordered = [chunk for chunk, _ in committed] != [chunk for chunk, _ in recomputed]
    return ranking_difference(committed, recomputed, epsilon), reordered, largest_score_move(committed, recomputed)


@dataclass
class Named:
    """Texts found in case order, the first ``cap`` kept and the rest counted: a list
    that grows with the cases (a million near ties) stays a few lines, in memory and in a log."""

    cap: int = SHOWN_CASES
    shown: list[str] = field(default_factory=list)
    more: int = 0

    def add(self, text: str) -> None:
        if len(self.shown) < self.cap:
            self.shown.append(text)
        else:
            self.more += 1


class CaseComparison:
    """Every per-case verdict of one configuration, added a batch of cases at a time in
    case-id order (:meth:`add` of rows and rankings, :meth:`add_frames` of table and run
    batches), the same whatever the batches: the cases only one table holds, then each
    shared case's row differences and, with both runs (``ranked``), whether its ranking
    moved beyond a near tie. Named cases are kept up to ``cap`` per list (:class:`Named`)."""

    def __init__(self, ranked: bool, epsilon: float = EPSILON, cap: int = SHOWN_CASES):
        self.ranked, self.epsilon, self.cap = ranked, epsilon, cap
        self.cases, self.max_score_delta = 0, 0.0
        self.only, self.changed, self.near_ties = Named(cap), Named(cap), Named(cap)

    def add(
        self,
        committed_rows: Sequence[Row],
        recomputed_rows: Sequence[Row],
        runs: tuple[Mapping[str, Ranking], Mapping[str, Ranking]] | None,
    ) -> CaseComparison:
        """Add the rows of a run of cases (both sides' rows of the same cases, after every
        case added before) and, when ranked, their rankings by case id."""
        ranking_of = None if runs is None else _kernel_judge(*runs, self.epsilon)
        return self._add_rows(committed_rows, recomputed_rows, ranking_of)

    def _add_rows(
        self, committed_rows: Sequence[Row], recomputed_rows: Sequence[Row], ranking_of: Judge | None
    ) -> CaseComparison:
        """:meth:`add`, each case's rankings judged by ``ranking_of``."""
        before = {row["case_id"]: row for row in committed_rows}
        after = {row["case_id"]: row for row in recomputed_rows}

        def rows_of(case_id: str) -> tuple[list[str], float]:
            return row_differences(before[case_id], after[case_id], self.epsilon)

        self._judge(before.keys(), after.keys(), rows_of, ranking_of)
        return self

    def add_frames(
        self, committed: pl.DataFrame, recomputed: pl.DataFrame, outcomes: pl.DataFrame | None
    ) -> CaseComparison:
        """:meth:`add` of a batch of both per-case tables and, when ranked, of their cases'
        ranking outcomes (:func:`ranking_outcomes`; a case they lack ranks nothing on either
        side). The cases with nothing to name (:func:`_quiet`) are counted and their score
        moves taken by columns; only the others are judged one by one in Python, their rows
        the column comparisons find unmoved (:func:`unmoved_rows`) without the kernel."""
        if not (in_id_order(committed["case_id"]) and in_id_order(recomputed["case_id"])):
            ranking_of = None if outcomes is None else _outcome_judge(outcomes)
            return self._add_rows(result_rows(committed), result_rows(recomputed), ranking_of)
        rows = unmoved_rows(committed, recomputed, self.epsilon)
        quiet = _quiet(rows, outcomes)
        self.cases += quiet.height
        self.max_score_delta = max(self.max_score_delta, float(quiet["move"].max() or 0.0))
        loud = ~pl.col("case_id").is_in(quiet["case_id"].implode())
        committed, recomputed, rows = (frame.filter(loud) for frame in (committed, recomputed, rows))
        same = dict(zip(rows["case_id"].to_list(), rows["move"].to_list(), strict=True))
        before, after = (_rows_by_id(frame, same) for frame in (committed, recomputed))

        def rows_of(case_id: str) -> tuple[list[str], float]:
            move = same.get(case_id)
            return ([], move) if move is not None else row_differences(before[case_id], after[case_id], self.epsilon)

        ranking_of = None if outcomes is None else _outcome_judge(outcomes.filter(loud))
        ids = (set(committed["case_id"].to_list()), set(recomputed["case_id"].to_list()))
        self._judge(*ids, rows_of, ranking_of)
        return self

    def _judge(
        self,
        before: Set[str],
        after: Set[str],
        rows_of: Callable[[str], tuple[list[str], float]],
        ranking_of: Judge | None,
    ) -> None:
        """The verdict on each case of a batch (``before``, ``after``: the ids each table
        holds), from its row differences and its ranking outcome (None: no committed run)."""
        self.cases += len(before | after)
        for case_id in sorted(before ^ after):
            side = "committed" if case_id in before else "recomputed"
            self.only.add(f"case {case_id}: only in the {side} table")
        for case_id in sorted(before & after):
            moved, largest = rows_of(case_id)
            self.max_score_delta = max(self.max_score_delta, largest)
            if ranking_of is None:
                if moved:
                    self.changed.add(f"case {case_id}: {', '.join(moved)} changed (committed run not available)")
                continue
            reason, reordered, move = ranking_of(case_id)
            self.max_score_delta = max(self.max_score_delta, move)
            if reason is not None:
                self.changed.add(f"case {case_id}: {reason}" + (f"; {', '.join(moved)} changed" if moved else ""))
            elif reordered:
                self.near_ties.add(case_id)
            elif moved:
                self.changed.add(f"case {case_id}: {', '.join(moved)} changed, though its ranking did not")

    def check(self, config: str) -> ConfigCheck:
        """The configuration's check: the cases only one table holds come first, then the
        changed ones, at most ``cap`` named and the rest counted in a last line."""
        named = self.only.shown + self.changed.shown
        hidden = self.only.more + self.changed.more + max(0, len(named) - self.cap)
        differences = named[: self.cap] + ([f"and {hidden} more case(s)"] if hidden else [])
        figures = (self.cases, self.ranked, self.max_score_delta, self.near_ties.shown, differences)
        return ConfigCheck(config, *figures, more_near_ties=self.near_ties.more)


def check_config(
    config: str,
    committed_rows: Sequence[Row] | None,
    recomputed_rows: Sequence[Row] | None,
    runs: tuple[Mapping[str, Ranking], Mapping[str, Ranking]] | None,
    epsilon: float = EPSILON,
) -> ConfigCheck:
    """Compare one configuration's per-case rows, and its rankings when both runs are given."""
    if committed_rows is None or recomputed_rows is None:
        return _unpaired(config, committed_rows is None, runs is not None)
    return CaseComparison(runs is not None, epsilon).add(committed_rows, recomputed_rows, runs).check(config)


def _unpaired(config: str, committed_missing: bool, ranked: bool) -> ConfigCheck:
    """The check of a configuration one side has no per-case table for."""
    side = "committed" if committed_missing else "recomputed"
    return ConfigCheck(config, rankings_checked=ranked, differences=[f"no {side} per-case table"])


# --------------------------------------------------------------------------- batches


def unmoved_rows(committed: pl.DataFrame, recomputed: pl.DataFrame, epsilon: float = EPSILON) -> pl.DataFrame:
    """The shared cases whose rows :func:`row_differences` finds nothing moved in, with
    their largest score ``move`` (``case_id, move``), told by comparing columns: every field equal (null to null),
    every score within ``epsilon`` or missing on both sides. A case it cannot tell so is
    left out for the kernel: tables of other columns or types, NaN, a list of numbers."""
    schema, other = committed.schema, recomputed.schema
    none = pl.DataFrame(schema={"case_id": pl.String, "move": pl.Float64})
    if schema.keys() != other.keys() or any(other[name] != dtype for name, dtype in schema.items()):
        return none
    if any(dtype.is_nested() and dtype != pl.List(pl.String) for dtype in schema.values()):
        return none
    same, move = pl.lit(True), pl.lit(0.0)
    for name, dtype in schema.items():
        a, b = pl.col(name), pl.col(f"{name}~")
        if name in SCORE_FIELDS:
            delta = (a.cast(pl.Float64) - b.cast(pl.Float64)).abs()
            same &= ((a.is_null() & b.is_null()) | (delta <= epsilon)).fill_null(False)
            move = pl.max_horizontal(move, delta.fill_null(0.0))
        elif name != "case_id":
            equal = a.eq_missing(b)
            same &= equal & ~(a.is_nan() | b.is_nan()).fill_null(False) if dtype.is_float() else equal
    if committed["case_id"].equals(recomputed["case_id"]):  # the usual batch: the same cases, row by row
        joined = pl.concat([committed, recomputed.drop("case_id").select(pl.all().name.suffix("~"))], how="horizontal")
    else:
        joined = committed.join(recomputed, on="case_id", how="inner", suffix="~")
    return joined.select("case_id", move.alias("move"), same.alias("same")).filter("same").drop("same")


def _quiet(rows: pl.DataFrame, outcomes: pl.DataFrame | None) -> pl.DataFrame:
    """The cases of ``rows`` (:func:`unmoved_rows`) that :meth:`CaseComparison._judge`
    would neither name nor count as near ties: without runs all of them, with runs those
    whose ranking outcome is neither a change nor a reordering, or that neither run ranks;
    ``move`` the larger of their row's and their ranking's score moves."""
    if outcomes is None:
        return rows
    joined = rows.join(outcomes, on="case_id", how="left", suffix="~")
    calm = pl.col("reason").is_null() & ~pl.col("reordered").fill_null(False)
    return joined.filter(calm).select("case_id", pl.max_horizontal("move", pl.col("move~").fill_null(0.0)))


def _rows_by_id(frame: pl.DataFrame, unmoved: Mapping[str, float]) -> dict[str, Row]:
    """The nested rows (:func:`result_rows`) of the cases not in ``unmoved``, by case id."""
    rest = frame.filter(~pl.col("case_id").is_in(list(unmoved)))
    return {row["case_id"]: row for row in result_rows(rest)}


def _in_ranking_order(run: pl.DataFrame, case: str, chunk: str) -> pl.DataFrame:
    """Run rows (a batch of whole cases in case order, ``case`` and ``chunk`` naming them:
    ids, or a numbered run's numbers, which sort as the ids do) in each case's ranking order
    as :func:`rankings` sorts them (rank, then chunk), scores as floats: two cases ranking
    as many chunks then pair row by row. A run as the retrieve stage writes it, each case's
    ranks ascending, is in that order already, and is not sorted."""
    ordered = run.select(case, "rank", chunk, pl.col("score").cast(pl.Float64))
    ordered = ordered.with_columns(pl.col(chunk).cast(pl.String)) if chunk in ID_COLUMNS else ordered
    case_rle, rank = ordered[case].rle_id().to_numpy(), ordered["rank"].to_numpy()
    if ((np.diff(case_rle) > 0) | (np.diff(rank) > 0)).all():
        return ordered
    return ordered.sort(case, "rank", chunk, "score")  # a rank repeated, missing or out of order


def unmoved_rankings(
    committed: pl.DataFrame, recomputed: pl.DataFrame, epsilon: float = EPSILON, names: tuple[str, str] = ID_COLUMNS
) -> pl.DataFrame:
    """The cases whose two rankings (run rows) :func:`ranking_outcome` finds neither changed
    nor reordered, with their largest score ``move``, told by comparing columns: the same
    chunks at the same positions, each chunk once, every score within ``epsilon``. A case
    with a missing rank or score, or a NaN, is left out for the kernel. ``names`` are the
    case and chunk columns: the ids, or the numbers of two runs numbered alike."""
    case, chunk = names
    a, b = _same_lengths(_in_ranking_order(committed, *names), _in_ranking_order(recomputed, *names), case)
    joined = a.with_columns(b.select(pl.col("rank", chunk, "score").name.suffix("~")))
    delta = (pl.col("score") - pl.col("score~")).abs()
    clean = pl.all_horizontal(pl.col("rank", "rank~", "score", "score~").is_not_null()) & ~delta.is_nan()
    ascending = joined.with_columns(pl.col(case).set_sorted())  # as case_batches gives them: a faster group-by
    per_case = ascending.group_by(case, maintain_order=True).agg(
        same=(pl.col(chunk).eq_missing(pl.col(f"{chunk}~")) & clean.fill_null(False)).all(),
        once=pl.col(chunk).n_unique() == pl.len(),
        move=delta.max(),
    )
    return per_case.filter(pl.col("same") & pl.col("once") & (pl.col("move") <= epsilon)).select(case, "move")


def _same_lengths(committed: pl.DataFrame, recomputed: pl.DataFrame, case: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The rows of the cases both runs rank as many chunks for, which pair row by row: the
    other cases' rankings differ in length, so none of them is unmoved. Two runs of the
    same cases and depth (the usual case) are kept as they are."""
    if committed[case].equals(recomputed[case]):
        return committed, recomputed
    lengths = [run.group_by(case).len() for run in (committed, recomputed)]
    kept = lengths[0].join(lengths[1], on=case).filter(pl.col("len") == pl.col("len_right"))[case]
    wanted = pl.col(case).is_in(kept.implode())
    return committed.filter(wanted), recomputed.filter(wanted)


def _kernel_judge(committed: Mapping[str, Ranking], recomputed: Mapping[str, Ranking], epsilon: float) -> Judge:
    """Each case's :func:`ranking_outcome` from the two runs' rankings by case id (a case
    a run lacks ranks nothing there)."""

    def judge(case_id: str) -> RankingOutcome:
        return ranking_outcome(committed.get(case_id, []), recomputed.get(case_id, []), epsilon)

    return judge


OUTCOMES = {"case_id": pl.String, "reason": pl.String, "reordered": pl.Boolean, "move": pl.Float64}


def _outcome_judge(outcomes: pl.DataFrame) -> Judge:
    """Each case's outcome as :func:`ranking_outcomes` found it; a case it lacks ranks
    nothing on either side (:func:`ranking_outcome` of two empty rankings)."""
    found = dict(zip(outcomes["case_id"].to_list(), outcomes.select("reason", "reordered", "move").iter_rows()))
    return lambda case_id: found.get(case_id, (None, False, 0.0))


def _outcomes(
    unmoved: pl.DataFrame, rest: tuple[Mapping[str, Ranking], Mapping[str, Ranking]], epsilon: float
) -> pl.DataFrame:
    """The :data:`OUTCOMES` of a batch's cases in case-id order: the ``unmoved`` ones
    (``case_id, move``) as they are, the ``rest`` (each run's rankings of the others)
    through the kernel."""
    judge = _kernel_judge(*rest, epsilon)
    judged = [(case_id, *judge(case_id)) for case_id in sorted(rest[0].keys() | rest[1].keys())]
    kernel = pl.DataFrame(judged, schema=OUTCOMES, orient="row")
    kept = unmoved.select(
        pl.col("case_id").cast(pl.String), reason=pl.lit(None, pl.String), reordered=pl.lit(False), move=pl.col("move")
    )
    return pl.concat([kept, kernel]).sort("case_id")


def ranking_outcomes(
    runs: tuple[Path, Path], rows: int | None = None, epsilon: float = EPSILON
) -> Iterator[pl.DataFrame]:
    """Each case's :func:`ranking_outcome` between the two runs (in case order), as frames
    of :data:`OUTCOMES` in case-id order, a batch of whole cases at a time (at least one
    frame). The cases :func:`unmoved_rankings` tells by columns are never built in Python.
    Two runs numbered alike (:func:`ragvet.storage.rankings.numbering`) are paired and
    compared by their case and chunk numbers, and only their unmoved cases' ids and the
    other cases' rows are read as text (:func:`ragvet.storage.rankings.numbered_rows`):
    the ids are most of a run's bytes. Other runs are paired by their ids."""
    numbered = numbering(runs[0])
    if numbered is None or numbered != numbering(runs[1]):
        pairs = paired_batches([case_batches(path, str(path), RUN_COLUMNS, rows=rows) for path in runs])
        found = (_id_outcomes(committed, recomputed, epsilon) for committed, recomputed in pairs)
    else:
        columns = [*NUMBERED_COLUMNS, "score"]
        streams = [numbered_batches(path, str(path), columns, rows) for path in runs]
        found = (_numbered_outcomes(runs, *pair, epsilon) for pair in paired_batches(streams, key="case"))
    first = next(found, None)
    yield pl.DataFrame(schema=OUTCOMES) if first is None else first
    yield from found


def _id_outcomes(committed: pl.DataFrame, recomputed: pl.DataFrame, epsilon: float) -> pl.DataFrame:
    """:func:`ranking_outcomes` of a batch of both runs' rows (``RUN_COLUMNS``)."""
    unmoved = unmoved_rankings(committed, recomputed, epsilon)
    moved = ~pl.col("case_id").is_in(unmoved["case_id"].implode())
    rest = (rankings_frame(committed.filter(moved)), rankings_frame(recomputed.filter(moved)))
    return _outcomes(unmoved, rest, epsilon)


def _numbered_outcomes(
    runs: tuple[Path, Path], committed: pl.DataFrame, recomputed: pl.DataFrame, epsilon: float
) -> pl.DataFrame:
    """:func:`ranking_outcomes` of a batch of two runs numbered alike (``case, rank, chunk,
    score``): the unmoved cases' ids read from the committed run, one row per case (each
    case has a row at or above the highest of their first ranks), the other cases' rows
    with their ids from each run."""
    unmoved = unmoved_rankings(committed, recomputed, epsilon, ("case", "chunk"))
    numbers = unmoved["case"].to_numpy()
    first = committed.group_by("case").agg(pl.col("rank").min())["rank"].max()
    named = unmoved.join(case_ids_of(runs[0], numbers, first), on="case", how="left")
    cases = np.union1d(committed["case"].unique().to_numpy(), recomputed["case"].unique().to_numpy())
    others = np.setdiff1d(cases, numbers, assume_unique=True)
    committed_rest, recomputed_rest = (rankings_frame(numbered_rows(path, others, RUN_COLUMNS)) for path in runs)
    return _outcomes(named, (committed_rest, recomputed_rest), epsilon)


# --------------------------------------------------------------------------- reading


def rankings(rows: Iterable[Mapping[str, Any]]) -> dict[str, Ranking]:
    """Run rows (``case_id, rank, chunk_id, score``) as each case's ranking, best first."""
    grouped: dict[str, list[tuple[int, str, float]]] = {}
    for row in rows:
        grouped.setdefault(str(row["case_id"]), []).append((int(row["rank"]), str(row["chunk_id"]), row["score"]))
    return {case: [(chunk, float(score)) for _, chunk, score in sorted(ranked)] for case, ranked in grouped.items()}


def rankings_frame(run: pl.DataFrame) -> dict[str, Ranking]:
    """:func:`rankings` of a batch of run rows."""
    return rankings(run.select(RUN_COLUMNS).iter_rows(named=True))


def _fetched_file(revision: Revision, path: str, repo: Path) -> tuple[Path | None, str]:
    """``path`` as committed at the revision, fetched into its folder (git, else DVC), or
    ``(None, why)`` when neither can provide it: a file DVC keeps that this clone's cache
    and remote lack is a check left undone, said so, never a failed verification."""
    try:
        found = fetch_file(revision.name, path, repo, revision.folder)
    except InputError as err:
        return None, "; ".join(problem.what for problem in err.problems)
    return (None, f"{revision.name} has no {path}") if found is None else (found, "")


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
    config: str,
    table: pl.DataFrame | Summaries,
    summary: Mapping[str, Any],
    settings: Mapping[str, Any],
    where: str,
) -> list[str]:
    """What the metrics JSON ``summary`` says that ``table`` (a per-case table, or its
    :class:`Summaries` added up under these ``settings`` and the summary's threshold)
    does not give, recomputed with :func:`config_summary`. What no table holds is taken as
    the summary records it: the spec names, the fingerprints, the abstention threshold,
    its source and a stale mark."""
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
    table: pl.DataFrame | Summaries, slices: Mapping[str, Any], settings: Mapping[str, Any], where: str
) -> list[str]:
    """What the slice table ``slices`` says that ``table`` (a per-case table, or its
    :class:`Summaries` under these ``settings``) does not give (its slice table)."""
    ks, budgets = _measured(settings)
    keys = list(settings.get("slices") or [])
    tallied = table if isinstance(table, Summaries) else summaries(table, ks, budgets=budgets, slice_keys=keys)
    return figure_differences(slices, tallied.slice_table(), where)


class SideFigures:
    """One side's summary and slice table (``texts``: their JSON, None when absent),
    checked against its per-case table added up a batch at a time (:meth:`add`) under
    that side's ``settings``; ``label`` prefixes the file names (``REV:`` for the
    committed side). A table with recorded answers (``human_review`` columns) is held
    whole, as evaluate holds it: their figures need every row."""

    def __init__(self, config: str, texts: Mapping[str, str | None], settings: Any, label: str, columns: Sequence[str]):
        self.config, self.settings, self.label = config, settings, label
        self.written: dict[str, Any] = {}
        self.malformed: dict[str, str] = {}
        for kind, text in texts.items():
            if text is None:
                continue
            try:
                self.written[kind] = json.loads(text)
            except json.JSONDecodeError as err:
                self.malformed[kind] = f"{self._where(kind)}: malformed JSON ({err.msg}, line {err.lineno})"
        self.kinds = [kind for kind in texts if kind in self.written or kind in self.malformed]
        summary = self.written.get("summary")
        abstention = (summary.get("abstention") or {}) if isinstance(summary, Mapping) else {}
        ks, budgets = _measured(settings)
        self.tallied = Summaries(ks, abstention.get("abstain_below"), budgets, list(settings.get("slices") or []))
        self.whole: list[pl.DataFrame] | None = [] if any(c.startswith("human_review.") for c in columns) else None

    def _where(self, kind: str) -> str:
        return f"{self.label}{_figure_path(kind, self.config)}"

    def add(self, frame: pl.DataFrame) -> None:
        """Add the next batch of the side's per-case table (nothing to add up without files to check)."""
        if not self.kinds:
            return
        if self.whole is not None:
            self.whole.append(frame)
        else:
            self.tallied.add(frame)

    def differences(self) -> list[str]:
        """Every figure the side's files say that its table does not give, file by file."""
        table = pl.concat(self.whole) if self.whole is not None else self.tallied
        found: list[str] = []
        for kind in self.kinds:
            if kind in self.malformed:
                found.append(self.malformed[kind])
            elif kind == "summary":
                found += summary_differences(self.config, table, self.written[kind], self.settings, self._where(kind))
            else:
                found += slices_differences(table, self.written[kind], self.settings, self._where(kind))
        return found


def _figure_path(kind: str, config: str) -> str:
    """Where evaluate writes a configuration's summary or slice table, under ``metrics``."""
    return f"metrics/{config}.json" if kind == "summary" else f"metrics/slices/{config}.json"


def _params_at(revision: Revision, repo: Path) -> Any:
    """The params the revision committed (what produced its figures), or None without them."""
    path, _ = _fetched_file(revision, "params.yaml", repo)
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8")) if path is not None else None
    except (yaml.YAMLError, UnicodeDecodeError):
        return None


# --------------------------------------------------------------------------- verifying


def verify_results(
    configs: Sequence[str],
    against: str,
    repo: Path,
    metrics_dir: Path,
    runs_dir: Path,
    settings: Mapping[str, Any] | None = None,
    rows: int | None = None,
) -> list[ConfigCheck]:
    """Check each configuration's work-tree results against those committed at ``against``,
    and each side's summary and slice table against its own per-case table (``settings``:
    the work tree's params; the committed side is checked under its own). The revision's
    files are fetched into a temporary folder, and every table and run is read ``rows``
    at a time (by default :data:`TABLE_ROWS` of a table,
    :data:`ragvet.storage.rankings.BATCH_ROWS` of a run): the verdict never depends on it."""
    with revision_folder(against) as revision:
        committed = tables_at(against, configs, repo, revision.folder)
        sides_settings = (_params_at(revision, repo), settings)
        return [
            _verify_config(config, revision, committed.get(config), repo, (metrics_dir, runs_dir), sides_settings, rows)
            for config in sorted(configs)
        ]


def _verify_config(
    config: str,
    revision: Revision,
    committed: tuple[Mapping[str, Any], Path] | None,
    repo: Path,
    folders: tuple[Path, Path],
    settings: tuple[Any, Any],
    rows: int | None,
) -> ConfigCheck:
    """One configuration's check (:func:`verify_results`): its tables, runs and figures
    found, then read in one pass (:func:`_compared`)."""
    metrics_dir, runs_dir = folders
    table = per_case_path(cases_dir(metrics_dir), config)
    tables = (None if committed is None else committed[1], table if table.is_file() else None)
    runs, why = _runs(revision, run_path(runs_dir, config), repo)
    figures, unread = _figures(config, revision, committed, metrics_dir, tables, settings, repo)
    check = _compared(config, tables, runs, figures, rows)
    check.note, check.unread = why, unread
    check.differences += [line for side in (figures[1], figures[0]) if side is not None for line in side.differences()]
    return check


def _runs(revision: Revision, run: Path, repo: Path) -> tuple[tuple[Path, Path] | None, str]:
    """The committed run (fetched) and the recomputed one (in the work tree), each in case
    order (:func:`ragvet.storage.rankings.case_ordered`), or ``(None, why not)``."""
    before, why = _fetched_file(revision, run.as_posix(), repo)
    if before is None or not (repo / run).is_file():
        return None, why or f"no recomputed run at {run}"
    ordered = revision.folder / "in-case-order"
    committed = case_ordered(before, ordered / "committed" / run.name, RUN_COLUMNS, str(before))
    return (committed, case_ordered(repo / run, ordered / "recomputed" / run.name, RUN_COLUMNS, str(run))), ""


def _figures(
    config: str,
    revision: Revision,
    committed: tuple[Mapping[str, Any], Path] | None,
    metrics_dir: Path,
    tables: tuple[Path | None, Path | None],
    settings: tuple[Any, Any],
    repo: Path,
) -> tuple[list[SideFigures | None], str]:
    """Each side's :class:`SideFigures` (None without a table or params), and why the
    committed slice table could not be read ("" when it could, or the revision has no results)."""
    work_tree = {kind: _read_text(metrics_dir, kind, config) for kind in ("summary", "slices")}
    texts: list[Mapping[str, str | None]] = [{}, work_tree]
    unread = ""
    if committed is not None:
        slices, unread = _fetched_file(revision, _figure_path("slices", config), repo)
        text = None if slices is None else slices.read_bytes().decode("utf-8", "replace")
        texts[0] = {"summary": json.dumps(committed[0]), "slices": text}
    labels = (f"{revision.name}:", "")
    return [
        None if path is None or found is None else SideFigures(config, written, found, label, _columns(path))
        for path, written, found, label in zip(tables, texts, settings, labels, strict=True)
    ], unread


def _compared(
    config: str,
    tables: tuple[Path | None, Path | None],
    runs: tuple[Path, Path] | None,
    figures: Sequence[SideFigures | None],
    rows: int | None,
) -> ConfigCheck:
    """The case comparison of one configuration and the tallies of each side's figures,
    in one pass over both per-case tables and, with both, their cases' ranking outcomes
    (:func:`ranking_outcomes`, found a batch ahead in a thread of their own while the
    tables' batch is compared: :func:`ragvet.storage.pipelining.ahead`): their batches
    paired by case id (:func:`ragvet.storage.rankings.paired_batches`), ``rows`` at a time."""
    present = [side for side, path in enumerate(tables) if path is not None]
    streams = [table_batches(path, None, rows or TABLE_ROWS) for path in tables if path is not None]
    paired, ranked = len(present) == 2, len(present) == 2 and runs is not None
    streams += [ahead(ranking_outcomes(runs, rows))] if ranked and runs is not None else []
    comparison = CaseComparison(ranked)
    for batch in progress_bar(paired_batches(streams), desc=f"verify {config}", unit=" batches") if streams else ():
        for side, frame in zip(present, batch):
            tally = figures[side]
            if tally is not None:
                tally.add(frame)
        if paired:
            comparison.add_frames(batch[0], batch[1], batch[2] if ranked else None)
    return comparison.check(config) if paired else _unpaired(config, tables[0] is None, runs is not None)


def _columns(table: Path) -> list[str]:
    """The columns of a per-case table, refused (exit 2) when it is not one."""
    return read_results(table, rows=0).columns


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
            f"{status} {check.config}: {check.cases} cases, {how} except {check.near_tie_cases} near-tie "
            f"case(s), scores within {EPSILON:g} (largest move {check.max_score_delta:.1e})"
        )
        if check.note:
            lines.append(f"  rankings not compared: {check.note}; `dvc pull` brings them")
        if check.unread:
            lines.append(f"  {against}'s slice table not checked: {check.unread}; `dvc pull` brings it")
        lines += [f"  near tie: {visible(case_id)}" for case_id in check.near_ties]
        lines += [f"  and {check.more_near_ties} more near-tie case(s)"] if check.more_near_ties else []
        lines += [f"  differs: {visible(what, None)}" for what in check.differences]
    ok = all(check.reproduced for check in checks)
    verdict = "reproduced" if ok else "NOT reproduced"
    lines.append(f"{verdict}: {len(checks)} configuration(s) against {against}")
    return "\n".join(lines)
