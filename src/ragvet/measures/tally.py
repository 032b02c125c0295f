"""Aggregates that add up one batch of per-case rows at a time, to the same figure
whatever the batches: the means, counts and percentiles behind every summary.

A mean is ``math.fsum`` of the per-case values over their number. ``fsum`` is the
correctly rounded value of the exact sum, so a sum kept exactly across batches
(:class:`ExactSum`) and rounded once at the end gives the same double, bit for bit,
as ``fsum`` over the whole column, at any batch size and in any order.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from ragvet.measures.registry import METRICS, metric_names, sorted_ks
from ragvet.storage.results import column

_MANTISSA = 53  # bits of a double's significand: frexp's m * 2**53 is an exact integer
_HALF = 26  # split so that each half's sum over a batch stays exact in a float64 bincount
_BASE = 1126  # 1074 (the smallest subnormal's exponent) + 53 - 1: every shift is >= 0
_MAX_BATCH = 1 << 26  # a half is < 2**27, so a batch of 2**26 sums below 2**53


def exact_total(values: np.ndarray) -> int:
    """The exact sum of finite doubles as an integer count of ``2**-_BASE`` (see
    :func:`exact_totals`). Empty: 0."""
    values = np.asarray(values, np.float64)
    return exact_totals(values.reshape(len(values), 1))[0][0]


def exact_totals(values: np.ndarray) -> tuple[list[int], np.ndarray]:
    """Per column of ``values`` (rows x columns of finite doubles, NaN where a row has
    no value): the exact sum of its values as an integer count of ``2**-_BASE``, and
    how many there are (:class:`ExactColumns` over one batch). No rows: every total 0."""
    sums = ExactColumns(values.shape[1])
    sums.add(values)
    return sums.totals(), sums.counts


@dataclass(frozen=True)
class Halves:
    """A matrix of finite doubles (NaN: no value) taken apart as :class:`ExactColumns`
    sums it, once for any number of row selections (:meth:`ExactColumns.add_rows`):
    each value is ``M * 2**(e - 53)`` with ``M`` an integer of 53 bits (``np.frexp``),
    cut into a high half (``M >> 26``) and a low one, keyed by column and exponent."""

    present: np.ndarray  # rows x columns: the value is there
    key: np.ndarray  # column * span + e - lowest (a missing value: a zero at e = 0)
    high: np.ndarray  # the halves, as float64 bincount weights
    low: np.ndarray
    lowest: int
    span: int  # exponents from lowest on

    @classmethod
    def of(cls, values: np.ndarray) -> Halves:
        present = ~np.isnan(values)
        fraction, exponent = np.frexp(np.where(present, values, 0.0))
        mantissa = (fraction * 2.0**_MANTISSA).astype(np.int64)
        lowest = int(exponent.min(initial=0))
        span = int(exponent.max(initial=0)) - lowest + 1
        key = (exponent - lowest) + (np.arange(values.shape[1]) * span)[None, :]
        high = (mantissa >> _HALF).astype(np.float64)
        return cls(present, key, high, (mantissa & ((1 << _HALF) - 1)).astype(np.float64), lowest, span)


@dataclass
class ExactColumns:
    """Exact sums of ``width`` columns of doubles, added a batch of rows at a time in a
    few array operations however many columns and exponents there are.

    Per column and exponent the mantissas' halves (:class:`Halves`) are summed: a
    batch's half sums stay below ``2**53`` in a float bincount (at most ``2**26`` rows
    at once), and below ``2**63`` in the int64 accumulators for ``2**36`` values; the
    exponents are joined into Python integers only when the totals are read.
    Memory: two int64 per column and exponent present, a few dozen exponents.
    """

    width: int
    counts: np.ndarray = field(init=False)  # values added per column
    high: np.ndarray = field(init=False)  # column x exponent: the sums of the halves
    low: np.ndarray = field(init=False)
    lowest: int = 0  # the exponent of the accumulators' first slot

    def __post_init__(self) -> None:
        self.counts = np.zeros(self.width, np.int64)
        self.high = np.zeros((self.width, 0), np.int64)
        self.low = np.zeros((self.width, 0), np.int64)

    def widen(self, width: int) -> None:
        """Room for ``width`` columns, the new ones empty."""
        more = width - self.width
        if more > 0:
            self.counts = np.concatenate([self.counts, np.zeros(more, np.int64)])
            self.high, self.low = (np.pad(part, ((0, more), (0, 0))) for part in (self.high, self.low))
            self.width = width

    def add(self, values: np.ndarray) -> None:
        """Add the rows of ``values`` (rows x ``width``, NaN where a row has no value)."""
        self.add_rows(Halves.of(values), np.arange(len(values)))

    def add_rows(self, halves: Halves, rows: np.ndarray) -> None:
        """Add the rows ``rows`` of a matrix of ``width`` columns taken apart as ``halves``."""
        self.counts += halves.present[rows].sum(axis=0)
        self._cover(halves.lowest, halves.lowest + halves.span - 1)
        at = halves.lowest - self.lowest
        bins = self.width * halves.span
        for first in range(0, len(rows), _MAX_BATCH):
            part = rows[first : first + _MAX_BATCH]
            key = halves.key[part].ravel()
            for total, half in ((self.high, halves.high), (self.low, halves.low)):
                found = np.bincount(key, weights=half[part].ravel(), minlength=bins)
                total[:, at : at + halves.span] += found.astype(np.int64).reshape(self.width, halves.span)

    def _cover(self, lowest: int, highest: int) -> None:
        """Slots for every exponent from ``lowest`` to ``highest``."""
        span = self.high.shape[1]
        if not span:
            self.lowest = lowest
        before = max(self.lowest - lowest, 0)
        after = max(highest - (self.lowest + span - 1), 0) if span else highest - lowest + 1
        if before or after:
            self.high, self.low = (np.pad(part, ((0, 0), (before, after))) for part in (self.high, self.low))
            self.lowest -= before

    def totals(self) -> list[int]:
        """Each column's exact sum, as an integer count of ``2**-_BASE``."""
        totals = [0] * self.width
        span = self.high.shape[1]
        for index in np.flatnonzero((self.high != 0) | (self.low != 0)).tolist():
            column, power = divmod(index, span)
            total = (int(self.high.flat[index]) << _HALF) + int(self.low.flat[index])
            totals[column] += total << (power + self.lowest - _MANTISSA + _BASE)
        return totals


@dataclass
class ExactSum:
    """A sum of doubles kept exactly, and how many were added: :meth:`mean` is
    ``math.fsum(all values) / count``, None when nothing was added."""

    total: int = 0
    count: int = 0

    def add(self, values: np.ndarray) -> None:
        self.total += exact_total(values)
        self.count += len(values)

    def value(self) -> float:
        """The correctly rounded sum (Python's int division rounds correctly), as ``fsum`` gives it."""
        return self.total / (1 << _BASE)

    def mean(self) -> float | None:
        return self.value() / self.count if self.count else None


# Budgets needed are skewed (a few cases need the whole list): their median and 90th
# percentile are reported beside the mean, and ``counted`` says how many cases reached one.
SPREAD = [metric.name for metric in METRICS.values() if metric.budget and not metric.share]


def counted_rank(counts: Counter, share: float) -> float | None:
    """The nearest-rank percentile (:func:`ragvet.measures.latency.nearest_rank`'s rule: the
    smallest value with at least ``share`` of the values at or below it, never an
    interpolation) of the values ``counts`` holds, each with its multiplicity; None when empty."""
    n = sum(counts.values())
    if not n:
        return None
    wanted, seen = max(math.ceil(share * n), 1), 0
    for value in sorted(counts):
        seen += counts[value]
        if seen >= wanted:
            return value
    return None


def has_judged(frame: pl.DataFrame, ks: Sequence[int]) -> bool:
    """Whether the per-case table holds the judgements metrics: some case had a
    judged set (imported qrels), so ``judged@k`` was computed."""
    judgements = [metric for metric in METRICS.values() if metric.judgements]
    return any(column("metrics", metric.key(k)) in frame.columns for metric in judgements for k in ks)


def answerable() -> pl.Expr:
    """Rows of answerable cases: a row without ``answerable`` is one, as in the case file."""
    return pl.col("answerable").fill_null(True)


@dataclass(frozen=True)
class TallyRows:
    """What the tallies read of a batch of per-case rows, taken from the frame once as
    arrays, so that the tally of every split and slice value selects its rows by
    index instead of filtering the frame again (:meth:`Tally.add_rows`)."""

    names: list[str]  # the metrics, registry order: the columns of ``values``
    values: np.ndarray  # rows x names, NaN for a null or a column the table lacks
    halves: Halves  # ``values`` taken apart for the exact sums
    spreads: dict[str, tuple[np.ndarray, np.ndarray]]  # a SPREAD metric's values (its own type) and presence
    counts: dict[str, np.ndarray]  # a count per row, 0 for a null or a count the table lacks
    answerable: np.ndarray
    judged: bool

    @classmethod
    def of(cls, frame: pl.DataFrame, ks: Sequence[int], budgets: Sequence[int], judged: bool = False) -> TallyRows:
        """The rows of ``frame`` for a tally of ``ks`` and ``budgets`` (``judged``: an
        earlier batch held the judgements metrics)."""
        judged = judged or has_judged(frame, ks)
        names = metric_names(sorted_ks(ks), budgets, judged)
        held = set(frame.columns)
        spreads = {}
        for name in (name for name in names if name in SPREAD and column("metrics", name) in held):
            values = frame[column("metrics", name)]
            spreads[name] = (values.fill_null(0).to_numpy(), values.is_not_null().to_numpy())
        wanted = [*(f"claims_available@{k}" for k in sorted_ks(ks)), "claims", "duplicates_removed"]
        counts = {name: _count(frame, name) for name in wanted}
        values = _values(frame, [column("metrics", name) for name in names])
        return cls(
            names,
            values,
            Halves.of(values),
            spreads,
            counts,
            frame.select(answerable()).to_series().to_numpy(),
            judged,
        )

    def matrix(self, names: Sequence[str]) -> np.ndarray:
        """The values of the metrics ``names``, NaN for one these rows lack."""
        if list(names) == self.names:
            return self.values
        at = {name: place for place, name in enumerate(self.names)}
        empty = np.full(len(self.values), np.nan)
        return np.column_stack([self.values[:, at[name]] if name in at else empty for name in names])


@dataclass
class Tally:
    """Macro means and their denominators over the answerable cases of the batches
    added (:meth:`add_rows`), abstention cases counted apart; :meth:`result` is the
    aggregate of :func:`ragvet.measures.summary.summarise` and the slice tables.

    Memory: one exact sum per metric, and each distinct value of the skewed budget
    metrics (:data:`SPREAD`) with its count.
    """

    ks: Sequence[int]
    budgets: Sequence[int] = ()
    judged: bool = False  # the table holds the judgements metrics (every batch has the same columns)
    columns: list[str] = field(default_factory=list)  # the metrics ``sums`` holds, in its order
    sums: ExactColumns = field(default_factory=lambda: ExactColumns(0))
    spreads: dict[str, Counter] = field(default_factory=dict)
    totals: Counter = field(default_factory=Counter)

    def names(self) -> list[str]:
        return metric_names(sorted_ks(self.ks), self.budgets, self.judged)

    def add_rows(self, rows: TallyRows, index: np.ndarray) -> Tally:
        """Count the rows ``index`` of a batch (:class:`TallyRows` of this tally's ks and budgets)."""
        self.judged = self.judged or rows.judged
        self.columns += [name for name in self.names() if name not in self.columns]
        self.sums.widen(len(self.columns))
        kept = index[rows.answerable[index]]
        if self.columns == rows.names:
            self.sums.add_rows(rows.halves, kept)
        else:  # the judgements metrics came in a later batch than the first
            self.sums.add(rows.matrix(self.columns)[kept])
        for name, (values, present) in rows.spreads.items():
            found, times = np.unique(values[kept][present[kept]], return_counts=True)
            self.spreads.setdefault(name, Counter()).update(dict(zip(found.tolist(), times.tolist())))
        for name, counts in rows.counts.items():
            self.totals[name] += int(counts[index if name == "duplicates_removed" else kept].sum())
        self.totals["cases"] += len(kept)
        self.totals["rows"] += len(index)
        self.totals["cases_with_claims"] += int((rows.counts["claims"][kept] > 0).sum())
        return self

    def result(self) -> dict[str, Any]:
        """``{"metrics", "counted", "denominators"}``: a metric's mean is over the cases
        where it is not None (``counted`` gives how many), None when there are none."""
        sums = dict(zip(self.columns, zip(self.sums.totals(), self.sums.counts.tolist(), strict=True), strict=True))
        means: dict[str, float | None] = {}
        counted: dict[str, int] = {}
        for name in self.names():
            sum_ = ExactSum(*sums.get(name, (0, 0)))
            means[name], counted[name] = sum_.mean(), sum_.count
            if name in SPREAD:
                spread = self.spreads.get(name, Counter())
                means[f"{name}_p50"], means[f"{name}_p90"] = counted_rank(spread, 0.5), counted_rank(spread, 0.9)
        claims = self.totals["claims"]
        pooled = {
            f"claim_availability_pooled@{k}": self.totals[f"claims_available@{k}"] / claims if claims else None
            for k in sorted_ks(self.ks)
        }
        cases = self.totals["cases"]
        return {
            "metrics": {**means, **pooled},
            "counted": counted,
            "denominators": {
                "cases": cases,
                "abstention_cases": self.totals["rows"] - cases,
                "cases_with_claims": self.totals["cases_with_claims"],
                "cases_without_claims": cases - self.totals["cases_with_claims"],
                "claims": claims,
                "duplicates_removed": self.totals["duplicates_removed"],
            },
        }


def _values(frame: pl.DataFrame, names: Sequence[str]) -> np.ndarray:
    """The columns ``names`` as one float matrix, NaN for a null or a column the table lacks."""
    held = set(frame.columns)
    missing = [pl.lit(None, pl.Float64).alias(name) for name in names if name not in held]
    table = frame.with_columns(missing).select(pl.col(name).cast(pl.Float64) for name in names)
    return table.to_numpy().reshape(frame.height, len(names))


def _count(frame: pl.DataFrame, count: str) -> np.ndarray:
    """``counts[count]`` of each row as int64, 0 for a null or a count the table lacks."""
    name = column("counts", count)
    if name not in frame.columns:
        return np.zeros(frame.height, np.int64)
    return frame[name].fill_null(0).cast(pl.Int64).to_numpy()
