"""The regression gate: paired comparison of gated configurations with a baseline.

A gate is only useful if its failures are real and its passes are meaningful, so:

* the comparison is *paired* over the same eval-split cases (case-to-case noise
  cancels, and a case missing on one side cannot move a mean);
* every delta carries a paired bootstrap confidence interval and a paired
  permutation p-value, seeded from params, so the same inputs always give the
  same verdict (:mod:`ragvet.gating.bootstrap`). The bootstrap draws and sign
  vectors are drawn once per paired case set and shared by every metric compared
  over it (:func:`_statistics`): each metric costs a matrix product, and gets the
  same figures as alone; the
  p-values of every guarded metric and slice of every gated
  configuration are corrected as one family (:mod:`ragvet.gating.significance`),
  and with ``require_significance`` a drop fails only when its corrected p < α;
* when no valid comparison is possible (no baseline, relabelled eval split,
  changed corpus, undefined metric) the gate *fails and says why*, instead of
  silently passing on numbers that mean nothing.

:mod:`ragvet.gating.baselines` finds both sides, and the gate and the report compare them
with the same functions, so they cannot disagree. A side is a per-case table as a frame,
or, for the verdict and the report, its Parquet file (the committed baseline folder's, a
revision's fetched one, the work tree's): two files are read
in one pass a batch of cases at a time (:class:`Pairing`), so neither is held whole, and a
frame is one such batch, so both give the same figures.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ragvet.gating.bootstrap import moved_cis
from ragvet.gating.latency import compare_latency, latency_text
from ragvet.gating.paired import PairedBuilder, PairedSample, moved_union
from ragvet.gating.significance import (
    correct_entries,
    describe_family,
    moved_ps,
)
from ragvet.measures.answers import REVIEW_METRICS
from ragvet.measures.registry import METRICS, comparable_across_chunkings, higher_is_better
from ragvet.schema import EVAL
from ragvet.settings import Gate
from ragvet.storage.files import FLOAT_PLACES
from ragvet.storage.progress import progress_bar
from ragvet.storage.rankings import case_batches, paired_batches
from ragvet.storage.results import column, in_id_order, read_results, results_frame
from ragvet.text.escaping import visible
from ragvet.text.formatting import fmt, fmt_p

Row = dict[str, Any]
Summary = dict[str, Any]

# One configuration's per-case results: the table the stages read
# (ragvet.storage.results), or the nested rows it stands for.
Results = pl.DataFrame | Sequence[Row]
# A side of a comparison: per-case results, or the per-case table's Parquet file, read a batch at a time.
Side = Results | Path

# Rows of a per-case table paired at once: a quarter of a million cases, whose frames
# (read, joined, tallied) stay near 200 MB.
TABLE_BATCH_ROWS = 1 << 18

COMPARABLE_FIX = (
    "gate a metric comparable across chunkings (evidence_recall@k, claim_availability@k, "
    "evidence_recall_budget@B; docs/metrics.md), or re-baseline deliberately with `ragvet baseline accept`"
)
RELABEL_FIX = "labels changed: re-baseline deliberately with `ragvet baseline accept`"
CORPUS_FIX = "no corpus fingerprint recorded: re-baseline deliberately with `ragvet baseline accept`"


# --------------------------------------------------------------------------- pairing


def _table(rows: Results) -> pl.DataFrame:
    """Per-case results as the columnar table (:mod:`ragvet.storage.results`): the
    stages pass tables, a list of nested rows is converted."""
    return rows if isinstance(rows, pl.DataFrame) else results_frame(list(rows))


def _eval_columns(rows: Results, *columns: str | pl.Expr) -> pl.DataFrame:
    """``columns`` of the eval-split cases (a per-case table holds each case once),
    selected before the filter so that the other columns are not copied."""
    return _table(rows).lazy().filter(pl.col("split") == EVAL).select(*columns).collect()


def _metrics(rows: pl.DataFrame, metrics: Sequence[str], side: str, tags: Sequence[str] = ()) -> pl.DataFrame:
    """``case_id``, each metric as floats (``{side}0``, ``{side}1``, ...; all null when
    the table does not have it) and the ``tags`` columns it has, of the eval-split cases."""
    names = [column("metrics", metric) for metric in metrics]
    present = set(rows.columns)
    values = [(pl.col(name) if name in present else pl.lit(None)).cast(pl.Float64) for name in names]
    kept = [tag for tag in tags if tag in present]
    return _eval_columns(rows, "case_id", *(value.alias(f"{side}{i}") for i, value in enumerate(values)), *kept)


def _joined(
    base_rows: pl.DataFrame, cur_rows: pl.DataFrame, metrics: Sequence[str], tags: Sequence[str]
) -> pl.DataFrame:
    """``case_id``, then ``b<i>`` and ``c<i>`` (metric i's baseline and current values) and
    the current side's ``tags`` columns it has, of the eval-split cases both frames hold:
    tables of the same cases (the usual case) are paired by position, others by a join on
    case_id; sorted by case_id."""
    base, cur = _metrics(base_rows, metrics, "b"), _metrics(cur_rows, metrics, "c", tags)
    if base["case_id"].equals(cur["case_id"]):
        wide = base.with_columns(cur.drop("case_id"))
    else:
        wide = base.join(cur, on="case_id", how="inner")
    return wide if in_id_order(wide["case_id"]) else wide.sort("case_id")


def _read_columns(path: Path) -> list[str]:
    """The columns of the per-case table at ``path``, refused (exit 2) as
    :func:`ragvet.storage.results.read_results` refuses a table that is not one."""
    return read_results(path, rows=0).columns


def _wide_batches(
    baseline: Side, current: Side, metrics: Sequence[str], tags: Sequence[str] = ()
) -> Iterator[pl.DataFrame]:
    """:func:`_joined` of the two sides a run of cases at a time, ascending
    (:func:`side_batches`: two Parquet files a batch of cases at a time, only the columns
    compared, so neither is held whole; a frame, or rows, is one batch)."""
    wanted = {"case_id", "split", *(column("metrics", metric) for metric in metrics), *tags}
    for base, cur in side_batches([baseline, current], wanted):
        yield _joined(base, cur, metrics, tags)


def side_batches(sides: Sequence[Side], wanted: Collection[str]) -> Iterator[list[pl.DataFrame]]:
    """Each side's rows of the same run of cases, a run at a time in case-id order: when
    every side is a Parquet file, :data:`TABLE_BATCH_ROWS` cases at a time, paired by case id
    (:func:`ragvet.storage.rankings.paired_batches`), only the ``wanted`` columns each
    has, so no side is held whole; else every side whole (a file's ``wanted`` columns),
    as one batch."""
    if all(isinstance(side, Path) for side in sides):
        yield from paired_batches(table_batches(path, wanted) for path in sides if isinstance(path, Path))
        return
    yield [_whole(side, wanted) for side in sides]


def table_batches(path: Path, wanted: Collection[str] | None, rows: int = TABLE_BATCH_ROWS) -> Iterator[pl.DataFrame]:
    """The per-case table at ``path`` ``rows`` cases at a time in case-id order
    (:func:`ragvet.storage.rankings.case_batches`), only the ``wanted`` columns it has
    (None: all of them): one side of :func:`side_batches`, for
    :func:`ragvet.storage.rankings.paired_batches`."""
    columns = [c for c in _read_columns(path) if wanted is None or c in wanted]
    return case_batches(path, str(path), columns, rows=rows)


def _whole(side: Side, wanted: Collection[str]) -> pl.DataFrame:
    """A side as one frame: of a Parquet file, the ``wanted`` columns; rows converted."""
    return read_results(side, columns=list(wanted)) if isinstance(side, Path) else _table(side)


class Pairing:
    """Every figure the gate takes of two per-case tables, gathered in one pass over their
    paired eval-split cases (:func:`_wide_batches`), a batch at a time in case-id order:
    the :class:`PairedSample` of each of ``metrics``, of ``slice_metric`` per slice of
    each of ``keys`` the current side tags, the newly missed and newly found cases at
    ``hit@k`` and how many cases are paired. A whole frame is one batch, so each figure
    has one definition."""

    def __init__(
        self, metrics: Sequence[str], slice_metric: str | None = None, keys: Sequence[str] = (), k: int | None = None
    ):
        extra = [*([slice_metric] if slice_metric else []), *([f"hit@{k}"] if k is not None else [])]
        self.columns = list(dict.fromkeys([*metrics, *extra]))
        self.metrics, self.slice_metric, self.keys, self.k = list(metrics), slice_metric, list(keys), k
        self.samples = [PairedBuilder() for _ in self.metrics]
        self.slices: dict[str, dict[str, PairedBuilder]] = {}
        self.missed: list[pl.Series] = []
        self.found: list[pl.Series] = []
        self.cases = 0
        self.sides: tuple[Side, Side] | None = None  # the two tables read, once read

    def covers(self, wanted: Pairing) -> bool:
        """Whether this pairing gathers every figure ``wanted`` would: its metrics, its slices
        and its newly missed cases' k (a caller then takes them from this one)."""
        return (
            set(wanted.metrics) <= set(self.metrics)
            and (wanted.slice_metric is None or (wanted.slice_metric, wanted.keys) == (self.slice_metric, self.keys))
            and (wanted.k is None or wanted.k == self.k)
        )

    def read(self, baseline: Side, current: Side) -> Pairing:
        """Add every paired case of the two tables; the slices of the keys the current side tags.
        A pairing already read of these same two tables is as it was: callers sharing one
        (the gate's decision and the report's comparison) read the tables once. On a
        terminal, a bar counts the batches read (tens of seconds at millions of cases)."""
        if self.sides is not None:
            if self.sides[0] is baseline and self.sides[1] is current:
                return self
            raise ValueError("a Pairing reads one pair of tables")
        self.sides = (baseline, current)
        tagged = _read_columns(current) if isinstance(current, Path) else _table(current).columns
        tags = [column("tags", key) for key in self.keys]
        self.slices = {key: {} for key, tag in zip(self.keys, tags) if tag in tagged}
        desc = f"pair {current.stem}" if isinstance(current, Path) else "pair"  # a per-case table: <config>.parquet
        for wide in progress_bar(_wide_batches(baseline, current, self.columns, tags), desc=desc, unit=" batches"):
            self.add(wide)
        return self

    def add(self, wide: pl.DataFrame) -> None:
        """Add the next batch of :func:`_joined` rows (after every row added before)."""
        ids, self.cases = wide["case_id"], self.cases + wide.height
        for metric, builder in zip(self.metrics, self.samples):
            builder.add(ids, *self._values(wide, metric))
        if self.slice_metric is not None:
            base, cur = self._values(wide, self.slice_metric)
            for key, builders in self.slices.items():
                for value, members in _slice_positions(wide.with_row_index("position"), column("tags", key)):
                    builders.setdefault(value, PairedBuilder()).add(ids.gather(members), base[members], cur[members])
        if self.k is not None:
            i = self.columns.index(f"hit@{self.k}")
            self.missed.append(wide.filter(_lost(pl.col(f"b{i}"), pl.col(f"c{i}")))["case_id"])
            self.found.append(wide.filter(_lost(pl.col(f"c{i}"), pl.col(f"b{i}")))["case_id"])

    def sample(self, metric: str) -> PairedSample:
        """The paired sample of one of the pairing's metrics."""
        return self.samples[self.metrics.index(metric)].sample()

    def _values(self, wide: pl.DataFrame, metric: str) -> tuple[np.ndarray, np.ndarray]:
        i = self.columns.index(metric)
        return wide[f"b{i}"].to_numpy(), wide[f"c{i}"].to_numpy()

    def sliced(self, key: str) -> list[tuple[str, PairedSample]]:
        """Each slice of ``key`` (by its value, ascending) with its sample; none when untagged."""
        return [(value, builder.sample()) for value, builder in sorted(self.slices.get(key, {}).items())]

    def newly_missed(self) -> list[str]:
        return [case_id for part in self.missed for case_id in part.to_list()]

    def newly_found(self) -> list[str]:
        return [case_id for part in self.found for case_id in part.to_list()]


def _lost(before: pl.Expr, after: pl.Expr) -> pl.Expr:
    """A case hit before (``hit@k == 1``) and missed after (``hit@k == 0``), both values
    finite: newly missed with the baseline before, newly found with the current side before."""
    return before.is_finite() & after.is_finite() & (before >= 1) & (after <= 0)


def _statistics(samples: Sequence[PairedSample], gate: Gate) -> list[tuple]:
    """``(ci_low, ci_high, p_value)`` of every paired sample.

    Samples over the same cases (the same ``digest``) are one group: its bootstrap and
    permutation draws are made once for all of them (:func:`moved_cis`,
    :func:`moved_ps`, over the rows any of them moved: :func:`moved_union`), and each
    gets what it would get alone. Samples over other cases (a None on one side drops a
    case) group apart.
    """
    boot, perm = gate.bootstrap, gate.permutation
    out: list[tuple] = [()] * len(samples)
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, sample in enumerate(samples):
        groups.setdefault(sample.digest, []).append(i)
    for members in groups.values():
        n = samples[members[0]].n
        positions, ids, rows = moved_union([samples[i] for i in members])
        cis = moved_cis(n, positions, ids, rows, boot.resamples, boot.seed, gate.confidence)
        ps = moved_ps(n, positions, rows, perm.resamples, perm.seed)
        for i, ci, p_value in zip(members, cis, ps):
            out[i] = (*ci, p_value)
    return out


class Statistics:
    """Comparisons waiting for their interval and p-value, filled in together.

    The gate and the report register every metric and slice of every configuration
    (:meth:`add`), then :meth:`fill` computes them by :func:`_statistics`: samples over
    the same cases (the configurations of one eval split, compared metric by metric)
    share one draw, and each gets what it would get alone.
    """

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.pending: list[tuple[dict, PairedSample]] = []

    def add(self, entry: dict, sample: PairedSample) -> dict:
        self.pending.append((entry, sample))
        return entry

    def fill(self) -> None:
        samples = [sample for _, sample in self.pending]
        for (entry, _), (low, high, p_value) in zip(self.pending, _statistics(samples, self.gate)):
            entry.update(ci_low=low, ci_high=high, p_value=p_value)
        self.pending = []


# ------------------------------------------------------------------------ comparison


def _k_of(metric: str) -> int | None:
    """``recall@5`` -> 5; ``mrr`` -> None; a budget metric (``evidence_recall_budget@512``,
    cut at a budget, not at a rank) -> None."""
    base, at, k = metric.rpartition("@")
    spends = base in METRICS and METRICS[base].budget
    return int(k) if at and k.isdigit() and not spends else None


def _exceeds(delta: float | None, max_drop: float, higher: bool = True) -> bool:
    """A move beyond tolerance in the metric's bad direction: a drop, or a rise
    where lower is better (an unsupported-answer share)."""
    return delta is not None and (-delta if higher else delta) > max_drop


def _compare(sample: PairedSample, max_drop: float, higher: bool, stats: Statistics, entry: dict) -> dict:
    """Means, delta, CI, raw permutation p-value and the cases won, tied and lost
    (moved in the good direction, not at all, the bad one) of one paired sample,
    and whether it moved beyond ``max_drop`` the wrong way (``exceeds``). Whether that
    fails is decided with the whole family, by :func:`decide_family`. The fields go
    into ``entry``, returned; its CI and p-value are filled in by ``stats``
    (:meth:`Statistics.fill`), with the others'.

    The means are each side's exact sum over the n cases, as the summaries' means
    (:class:`ragvet.measures.tally.ExactSum`). The delta is rounded to the places the
    verdict file keeps, so a drop of exactly ``max_drop`` passes rather than failing
    on float noise, and the decision always agrees with the numbers written next to it.
    No paired case: every figure None, every count 0.
    """
    b, c = sample.means()
    if b is None or c is None:  # no paired case
        return entry | {
            "baseline": None,
            "current": None,
            "delta": None,
            "ci_low": None,
            "ci_high": None,
            "p_value": None,
            "cases": 0,
            "wins": 0,
            "ties": 0,
            "losses": 0,
            "exceeds": False,
        }
    wins, losses = (sample.rises, sample.falls) if higher else (sample.falls, sample.rises)
    delta = round(c - b, FLOAT_PLACES)
    entry.update(
        {
            "baseline": b,
            "current": c,
            "delta": delta,
            "ci_low": None,
            "ci_high": None,
            "p_value": None,
            "cases": sample.n,
            "wins": wins,
            "ties": sample.n - wins - losses,
            "losses": losses,
            "exceeds": _exceeds(delta, max_drop, higher),
        }
    )
    return stats.add(entry, sample)


def slice_comparisons(
    baseline_rows: Side,
    current_rows: Side,
    gate: Gate,
    stats: Statistics | None = None,
    pairing: Pairing | None = None,
) -> list[dict]:
    """One entry per (tag key, value) with at least ``min_slice_cases`` paired cases.

    Slice membership comes from the current rows' tags: with an unchanged eval
    fingerprint they match the baseline's anyway. Smaller slices are left out:
    their deltas are too noisy to gate on. With ``stats``, the CIs and p-values are
    left for its :meth:`Statistics.fill`, else filled before returning. ``pairing``,
    when given, has read the two tables already with ``gate``'s slices.
    """
    metric = gate.slice_metric
    if pairing is None:
        pairing = Pairing([], metric, gate.slices).read(baseline_rows, current_rows)
    out = []
    own = stats is None
    stats = Statistics(gate) if stats is None else stats
    for key in gate.slices:
        for value, sample in pairing.sliced(key):
            if sample.n < gate.min_slice_cases:
                continue
            entry = {"key": key, "value": value, "metric": metric}
            higher = higher_is_better(metric)
            out.append(_compare(sample, float(gate.slice_max_drop), higher, stats, entry))
    if own:
        stats.fill()
    return out


def _slice_positions(tagged: pl.DataFrame, tag: str) -> Iterator[tuple[str, np.ndarray]]:
    """Each value of the column ``tag`` (as text, ascending) with the ``position`` of its
    rows, ascending; rows without the tag are in no slice. One sort, no Python list per
    row."""
    found = tagged.select(pl.col(tag).cast(pl.String), "position").drop_nulls(tag).sort(tag, "position")
    values, positions = found[tag], found["position"].to_numpy()
    starts = np.flatnonzero((values.slice(1) != values.slice(0, max(len(values) - 1, 0))).to_numpy()) + 1
    for start, stop in zip([0, *starts], [*starts, len(values)]):
        if stop > start:
            yield values[int(start)], positions[start:stop]


def compare_metrics(
    baseline_rows: Side,
    current_rows: Side,
    metrics: Sequence[str],
    gate: Gate,
    stats: Statistics | None = None,
    pairing: Pairing | None = None,
) -> list[dict]:
    """Paired means, delta, CI and raw p-value of each of ``metrics``, with no pass/fail
    decision (the report shows every metric this way, the gate decides only on guarded
    ones), the random draws shared by the metrics over the same paired cases
    (:func:`_statistics`).
    With ``stats``, the CIs and p-values are left for its :meth:`Statistics.fill`.
    ``pairing``, when given, has read the two tables with every one of ``metrics``."""
    own = stats is None
    stats = Statistics(gate) if stats is None else stats
    out = []
    if pairing is None:
        pairing = Pairing(metrics).read(baseline_rows, current_rows)
    for metric in metrics:
        entry = _compare(pairing.sample(metric), math.inf, higher_is_better(metric), stats, {"metric": metric})
        del entry["exceeds"]
        out.append(entry)
    if own:
        stats.fill()
    return out


def newly_missed_k(metrics: Sequence[str]) -> int | None:
    ks = [k for k in map(_k_of, metrics) if k is not None]
    return max(ks) if ks else None


def gate_metrics(gate: Gate) -> list[str]:
    """Every metric a gate compares: the guarded ones, the slice metric and ``hit@k`` of
    the newly missed cases. What the gate reads of each per-case table."""
    k = newly_missed_k(gate.metrics)
    return list(dict.fromkeys([*gate.metrics, gate.slice_metric, *([f"hit@{k}"] if k else [])]))


def anchor_note(anchors: Sequence[str]) -> str:
    """The way out when labels are anchored on chunkings: a change to such a chunking's
    params changes the labels, and freezing them into spans frees it."""
    if not anchors:
        return ""
    names = ", ".join(repr(name) for name in anchors)
    plural = "s" if len(anchors) > 1 else ""
    return (
        f". Labels are anchored on chunking{plural} {names} ({{chunk, chunking}} evidence), so a change to its "
        "params changes them: to free it, restore its params, run `ragvet freeze-labels` (the same spans, "
        "same fingerprint), then change it"
    )


def fingerprint_reasons(baseline_fp: dict | None, current_fp: dict | None) -> list[str]:
    """Why two results are not comparable: a different eval split, or no corpus fingerprint.

    The eval-split fingerprint hashes what each label says (:func:`ragvet.schema.case_fingerprint`),
    so it differs exactly when an eval label changed in meaning: a changed label accepted,
    a case edited, added or removed. A corpus edit under which every label was kept or
    moved leaves it alone and is compared (:func:`corpus_note` says so). A missing
    fingerprint on either side is no evidence that the labels or the corpus are the same,
    so it counts as different: no valid comparison means a failing gate (DESIGN.md, Gate),
    and the report says the same as the gate.
    """
    base_fp, cur_fp = baseline_fp or {}, current_fp or {}
    reasons = []
    if base_fp.get("eval_split") is None or base_fp.get("eval_split") != cur_fp.get("eval_split"):
        reasons.append(
            f"eval-split fingerprint differs (baseline {base_fp.get('eval_split')}, current "
            f"{cur_fp.get('eval_split')}): {RELABEL_FIX}{anchor_note(cur_fp.get('anchors') or [])}"
            f"{left_out_note(cur_fp.get('left_out') or {})}"
        )
    if base_fp.get("corpus") is None or cur_fp.get("corpus") is None:
        reasons.append(
            f"corpus fingerprint missing (baseline {base_fp.get('corpus')}, current "
            f"{cur_fp.get('corpus')}): {CORPUS_FIX}"
        )
    return reasons


LEFT_OUT_WHY = {"orphaned": "orphaned", "pending": "pending review"}


def split_fingerprints(record: Mapping[str, Any]) -> dict:
    """What the gate and the report compare a split record by: its fingerprints, with the eval
    cases it left out (``left_out``: case id -> status) when there are any."""
    left_out = (record.get("left_out") or {}).get(EVAL) or {}
    return {**record["fingerprints"], "left_out": left_out} if left_out else dict(record["fingerprints"])


def left_out_note(left_out: Mapping[str, str]) -> str:
    """The eval cases ``ragvet relabel`` marked (case id -> status), which left the eval split:
    its fingerprint moved with them, and the comparison is on the cases still in it."""
    if not left_out:
        return ""
    named = ", ".join(f"{case} ({LEFT_OUT_WHY.get(status, status)})" for case, status in sorted(left_out.items()))
    return (
        f". Left out of the eval split (compared without them): {named}; relabel them "
        "(`ragvet relabel --accept FILE`) or remove them, then re-baseline"
    )


def corpus_note(baseline_fp: dict | None, current_fp: dict | None) -> str | None:
    """What a comparison across a corpus edit stands on: every eval-split label says what it
    said (kept, or moved by ``ragvet relabel``), so every eval case is compared, the edit's
    effect on retrieval included. None when the corpus is the same."""
    base, cur = (baseline_fp or {}).get("corpus"), (current_fp or {}).get("corpus")
    if base == cur:
        return None
    return (
        f"corpus changed (baseline {base}, current {cur}) but no eval-split label changed in meaning "
        "(each was kept or moved): every eval case is compared, the edit's effect on retrieval included"
    )


def chunking_reason(baseline_fp: dict | None, current_fp: dict | None) -> str | None:
    """Why chunk-level metrics cannot be compared: the chunkings' fingerprints
    (:func:`ragvet.schema.chunking_fingerprint`) differ. A fingerprint missing on
    either side (a baseline accepted before summaries recorded it) is no evidence that
    the chunks are the same, so it counts as different; None when they are the same."""
    base, cur = (baseline_fp or {}).get("chunking"), (current_fp or {}).get("chunking")
    if base is not None and base == cur:
        return None
    base, cur = base or "not recorded", cur or "not recorded"
    return f"not comparable across chunkings (baseline chunking {base}, current {cur})"


def comparable_split(metrics: Sequence[str], reason: str | None) -> tuple[list[str], list[str]]:
    """``(compared, skipped)`` of ``metrics``: all compared when the chunkings are the same
    (``reason`` None), else only those the registry marks comparable across chunkings."""
    compared = [metric for metric in metrics if reason is None or comparable_across_chunkings(metric)]
    return compared, [metric for metric in metrics if metric not in compared]


def _measure_config(
    config: str,
    baseline_rows: Side | None,
    current_rows: Side | None,
    baseline_fp: dict | None,
    current_fp: dict | None,
    gate: Gate,
    against: str | None,
    stats: Statistics,
    shared: Pairing | None = None,
) -> dict:
    """Measure one gated configuration against its baseline; nothing decided yet.

    ``baseline_fp`` / ``current_fp`` are the ``fingerprints`` dicts (eval split,
    corpus, chunking). When the chunkings differ (:func:`chunking_reason`), only the
    guarded metrics comparable across chunkings are compared, the others are listed
    in ``skipped`` with the reason (the slices too, when the slice metric is not
    comparable), and a configuration with nothing left to compare is invalid.
    ``baseline_rows=None`` or ``baseline_fp=None`` means there is no
    baseline; ``current_rows=None`` means the configuration has no results. A
    guarded metric with no value (None or NaN) on any paired case is refused.

    ``valid`` is False, with ``reasons``, when no meaningful comparison exists;
    an invalid comparison never passes. An eval split that differs because cases
    left it (``current_fp["left_out"]``: marked by ``ragvet relabel``) is still
    compared on the cases in both, for reviewers to read, and is invalid all the same.
    ``against`` names the git revision the baseline was read from, when it is not the committed baseline folder.
    The CIs and p-values are left for ``stats`` (:meth:`Statistics.fill`), so that
    every configuration's draws are shared. A ``shared`` pairing that covers the gate's
    figures (:meth:`Pairing.covers`) is read, or taken as read, instead of a pairing of its own.
    """
    metrics: list[str] = list(gate.metrics)
    k_missed = newly_missed_k(metrics)
    result: dict[str, Any] = {
        "config": config,
        "valid": False,
        "reasons": [],
        "metrics": [],
        "skipped": [],
        "slices": [],
        "newly_missed": [],
        "newly_missed_k": k_missed,
        "max_drop": float(gate.max_drop),
        "slice_max_drop": float(gate.slice_max_drop),
        "confidence": gate.confidence,
        "passed": False,
    }
    reasons: list[str] = result["reasons"]
    if (baseline_rows is None or baseline_fp is None) and against is not None:
        reasons.append(
            f"no results for {config} at {against} (metrics/{config}.json and metrics/cases/{config}.parquet): "
            f"a new configuration has nothing to compare with there; gate it once it has landed on {against}"
        )
    elif baseline_rows is None or baseline_fp is None:
        reasons.append(
            f"no baseline for {config} (metrics/baseline/{config}.json and "
            f"metrics/baseline/cases/{config}.parquet): create it deliberately with `ragvet baseline accept`"
        )
    if current_rows is None or current_fp is None:
        reasons.append(
            f"no current results for {config} (metrics/{config}.json and "
            f"metrics/cases/{config}.parquet): run `dvc repro` first"
        )
    if reasons:
        return result

    reasons += fingerprint_reasons(baseline_fp, current_fp)
    if reasons:
        result["fingerprints_differ"] = True
    if reasons and not current_fp.get("left_out"):  # with cases left out, the rest is still compared
        return result
    note = None if reasons else corpus_note(baseline_fp, current_fp)
    if note is not None:
        result["notes"] = [note]

    chunking = chunking_reason(baseline_fp, current_fp)
    metrics, skipped = comparable_split(metrics, chunking)
    sliced = bool(comparable_split([gate.slice_metric], chunking)[0])
    wanted = Pairing(metrics, gate.slice_metric if sliced else None, gate.slices if sliced else (), k_missed)
    if shared is not None and shared.covers(wanted):
        wanted = shared  # the report's pairing, which gathers these figures with its own
    pairing = wanted.read(baseline_rows, current_rows)  # one pass over both tables for every figure below
    if not pairing.cases:
        reasons.append(
            "no paired cases: no eval-split case is in both the baseline and the current results; "
            "re-baseline deliberately with `ragvet baseline accept`"
        )
        return result

    result["skipped"] = [{"metric": metric, "reason": chunking} for metric in skipped]
    if not sliced:
        result["skipped"].append({"metric": gate.slice_metric, "slices": True, "reason": chunking})
    if not metrics:
        reasons.append(
            f"no guarded metric is comparable across chunkings, so nothing was compared ({chunking}): {COMPARABLE_FIX}"
        )
        return result

    for metric in metrics:
        higher = higher_is_better(metric)
        entry = _compare(
            pairing.sample(metric), result["max_drop"], higher, stats, {"metric": metric, "higher_is_better": higher}
        )
        if entry["cases"] == 0:
            fix = (
                f"it is a human review figure: record answers in data/answers/{config}.jsonl, then re-baseline "
                "deliberately with `ragvet baseline accept`"
                if metric.partition("@")[0] in REVIEW_METRICS
                else "fix the cases so it has a value"
            )
            reasons.append(
                f"guarded metric {metric} has no paired eval-split cases with a value on both sides: "
                f"{fix}, or stop gating on it"
            )
        result["metrics"].append(entry)

    if sliced:
        result["slices"] = slice_comparisons(baseline_rows, current_rows, gate, stats, pairing)
    if k_missed is not None:
        result["newly_missed"] = pairing.newly_missed()
    result["reasons"] = sorted(set(reasons), key=reasons.index)
    result["valid"] = not result["reasons"]
    return result


def decide_family(results: list[dict], gate: Gate) -> list[dict]:
    """Correct the p-values of every guarded metric and slice of the valid
    ``results`` as one family, then decide each test and each configuration.

    A test fails when it moved beyond tolerance the wrong way (``exceeds``) and,
    with ``require_significance``, its corrected p-value is below α (one minus
    the bootstrap confidence). Invalid configurations are left out of the family:
    they fail anyway, with their reasons. Every result records the family it was
    decided in (size, correction, α), so the gate and the report can state it.
    """
    significance = gate.require_significance
    alpha, method = gate.alpha, gate.correction
    tests = [entry for r in results if r["valid"] for entry in [*r["metrics"], *r["slices"]]]
    size = correct_entries(tests, method)
    family = {"size": size, "correction": method, "alpha": alpha, "significance": significance}
    for result in results:
        for entry in [*result["metrics"], *result["slices"]]:
            entry.setdefault("p_corrected", None)
            significant = entry["p_corrected"] is not None and entry["p_corrected"] < alpha
            entry["failed"] = entry["exceeds"] and (significant or not significance)
        result["family"] = family
        result["passed"] = (
            result["valid"]
            and not any(m["failed"] for m in result["metrics"])
            and not any(s["failed"] for s in result["slices"])
        )
    return results


def gate_verdict(per_config: list[dict]) -> dict:
    """The overall verdict, configurations sorted by name.

    An empty gate fails: "nothing was compared" is not evidence of no regression.
    """
    configs = sorted(per_config, key=lambda c: c["config"])
    return {"passed": bool(configs) and all(c["passed"] for c in configs), "configs": configs}


def gate_all(
    gate: Gate,
    baselines: dict[str, tuple[Summary | None, Results | None]],
    current: dict[str, Results | None],
    fingerprints: dict,
    against: str | None = None,
    rebaselined: Collection[str] = (),
    latency: Mapping[str, tuple[dict | None, dict | None]] | None = None,
    chunkings: Mapping[str, str | None] | None = None,
    pairings: Mapping[str, Pairing] | None = None,
) -> dict:
    """The verdict over every gated configuration: ``baselines`` maps a config to
    its ``(summary, rows)`` (``(None, None)`` when absent), ``current`` to its
    per-case rows (None when absent). Called through
    :func:`ragvet.gating.decision.decide`, once per verdict: the report renders the
    verdict it returned. ``rebaselined`` names the configurations whose committed
    baseline this change re-accepted (see :func:`accept_deliberate`). With
    ``gate.latency.max_p95_rise`` set, ``latency`` maps a config to its
    ``(baseline, current)`` latency records (:mod:`ragvet.gating.latency`), and a
    p95 rise beyond it fails the configuration. ``chunkings`` maps a config to the
    chunking fingerprint of its current results (its ``metrics/<config>.json``); without
    it, ``fingerprints`` stands for every configuration's. ``pairings`` maps a config to
    a :class:`Pairing` of its two tables the caller reads too (the report's), used when it
    covers the gate's figures, so the tables are read once."""
    measured = []
    stats = Statistics(gate)  # one draw per paired case set, shared by every configuration
    for config in gate.configs:
        base_summary, base_rows = baselines.get(config, (None, None))
        rows = current.get(config)
        result = _measure_config(
            config,
            base_rows,
            rows,
            (base_summary or {}).get("fingerprints"),
            _current_fingerprints(fingerprints, chunkings, config) if rows is not None else None,
            gate,
            against,
            stats,
            (pairings or {}).get(config),
        )
        measured.append(result)
    stats.fill()
    results = decide_family(measured, gate)
    limit = gate.max_p95_rise
    if limit is not None and latency is not None:
        for result in results:
            result["latency"] = compare_latency(*latency.get(result["config"], (None, None)), limit)
            result["passed"] = result["passed"] and not result["latency"]["failed"]
    return gate_verdict([accept_deliberate(r, against) if r["config"] in rebaselined else r for r in results])


def _current_fingerprints(fingerprints: dict, chunkings: Mapping[str, str | None] | None, config: str) -> dict:
    """The split's fingerprints with ``config``'s chunking fingerprint, when ``chunkings`` is given."""
    if chunkings is None:
        return fingerprints
    return {**fingerprints, "chunking": chunkings.get(config)}


def accept_deliberate(result: dict, against: str | None) -> dict:
    """Let a change that re-accepted its baseline pass against a revision.

    ``ragvet baseline accept`` is how a drop or a relabelling is accepted on
    purpose, in the same pull request. Compared with the base branch's results,
    that change still shows the drop, and the job would fail forever. So when the
    workspace's committed baseline equals its current results, a failing or
    relabelled comparison against ``against`` passes as *accepted*: the drop stays
    in the verdict for reviewers to read. Missing results or NaN still fail.
    """
    if against is None or result["passed"] or (result["reasons"] and not result.get("fingerprints_differ")):
        return result
    note = (
        f"this change re-accepted metrics/baseline/ (`ragvet baseline accept`) at its current results, "
        f"so the moves against {against} are accepted deliberately: reviewers, check them"
    )
    return {**result, "passed": True, "accepted": note}


# ------------------------------------------------------------------------- rendering

GATE_TESTS = "guarded metrics and slices of the gated configurations"


def family_text(family: dict | None) -> str:
    """The gate's family and the rule it decided by, for the terminal and the report."""
    if not family:
        return ""
    rule = (
        "A move beyond tolerance fails only when its corrected p < α."
        if family["significance"]
        else "With require_significance off, a move beyond tolerance fails on its size alone."
    )
    return f"{describe_family(family, GATE_TESTS)} {rule}"


def _comparison_text(entry: dict, confidence: float) -> str:
    if entry.get("unmeasured"):  # a guarded movement metric with no ranking to measure from
        return f"not measured: {visible(entry['unmeasured'])}"
    return (
        f"{fmt(entry['baseline'])} -> {fmt(entry['current'])} (delta {fmt(entry['delta'], signed=True)}, "
        f"{confidence * 100:g}% CI [{fmt(entry['ci_low'], signed=True)}, {fmt(entry['ci_high'], signed=True)}]"
        f", corrected p {fmt_p(entry.get('p_corrected'))}, {entry['cases']} cases)"
    )


def skipped_name(skipped: dict) -> str:
    """What a skipped entry of a verdict left out: a guarded metric, or the slices of the slice metric."""
    metric = visible(skipped["metric"])
    return f"slices of {metric}" if skipped.get("slices") else metric


def render_verdict(verdict: dict) -> str:
    """Plain text for the terminal: every guarded delta with its CI, failing slices,
    newly missed cases and the reasons a comparison is invalid, then the verdict.
    Every name and reason is :func:`visible`: a case id cannot start a CI log command."""
    lines: list[str] = []
    if not verdict["configs"]:
        lines.append("no configurations are gated: list them under gate.configs in params.yaml")
    for cfg in verdict["configs"]:
        name, confidence = visible(cfg["config"]), cfg.get("confidence", 0.95)
        if cfg.get("accepted"):
            lines.append(f"ACCEPTED {name}: {visible(cfg['accepted'], limit=None)}")
        for reason in cfg["reasons"]:
            lines.append(f"INVALID {name}: {visible(reason, limit=None)}")
        for note in cfg.get("notes") or []:
            lines.append(f"NOTE {name}: {visible(note, limit=None)}")
        for skipped in cfg.get("skipped") or []:
            lines.append(f"SKIP {name} {skipped_name(skipped)}: {visible(skipped['reason'], limit=None)}")
        for m in cfg["metrics"]:
            status = "FAIL" if m["failed"] else "ok  "
            lines.append(f"{status} {name} {visible(m['metric'])}: {_comparison_text(m, confidence)}")
        failing = [s for s in cfg["slices"] if s["failed"]]
        for s in failing:
            where = visible(f"{s['key']}={s['value']}")
            lines.append(f"FAIL {name} slice {where} {visible(s['metric'])}: {_comparison_text(s, confidence)}")
        if cfg["slices"]:
            lines.append(
                f"     {name}: {len(failing)} of {len(cfg['slices'])} slices dropped more than "
                f"{fmt(cfg.get('slice_max_drop'))}"
            )
        if cfg.get("latency"):
            status = "FAIL" if cfg["latency"]["failed"] else ("note" if cfg["latency"]["note"] else "ok  ")
            lines.append(f"{status} {name} {visible(latency_text(cfg['latency']), limit=None)}")
        if cfg["newly_missed"]:
            k = cfg.get("newly_missed_k")
            lines.append(
                f"     {name}: {len(cfg['newly_missed'])} newly missed at hit@{k} "
                f"(hit in baseline, missed now): {', '.join(map(visible, cfg['newly_missed']))}"
            )
    if verdict["configs"]:
        lines.append(f"     {family_text(verdict['configs'][0].get('family'))}")
    lines.append(f"gate: {'PASSED' if verdict['passed'] else 'FAILED'}")
    return "\n".join(lines) + "\n"
