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
    how many there are. One pass over every column, so a batch's many metrics cost a
    few array operations, not a few per metric.

    Each value is ``M * 2**(e - 53)`` with ``M`` an integer of 53 bits (``np.frexp``);
    the ``M`` of one column and exponent are summed exactly (two halves of 26 and 27
    bits, whose sums stay below ``2**53`` in a float bincount), and the few exponents
    are joined as Python integers. No rows: every total 0.
    """
    totals, counts = [0] * values.shape[1], np.zeros(values.shape[1], np.int64)
    for first in range(0, len(values), _MAX_BATCH):
        _add_exact(values[first : first + _MAX_BATCH], totals, counts)
    return totals, counts


def _add_exact(values: np.ndarray, totals: list[int], counts: np.ndarray) -> None:
    """Add the columns of ``values`` (at most ``_MAX_BATCH`` rows) to ``totals`` and ``counts``."""
    row, col = np.nonzero(~np.isnan(values))
    counts += np.bincount(col, minlength=len(totals))
    fraction, exponent = np.frexp(values[row, col])
    mantissa = (fraction * 2.0**_MANTISSA).astype(np.int64)
    lowest = int(exponent.min(initial=0))
    span = int(exponent.max(initial=0)) - lowest + 1  # the exponents present, a few dozen
    key = col * span + (exponent - lowest)
    high = np.bincount(key, weights=mantissa >> _HALF, minlength=len(totals) * span)
    low = np.bincount(key, weights=mantissa & ((1 << _HALF) - 1), minlength=len(totals) * span)
    for index in np.flatnonzero((high != 0) | (low != 0)).tolist():
        column, power = divmod(index, span)
        total = (int(high[index]) << _HALF) + int(low[index])
        totals[column] += total << (power + lowest - _MANTISSA + _BASE)


@dataclass
class ExactSum:
    """A sum of doubles kept exactly, and how many were added: :meth:`mean` is
    ``math.fsum(all values) / count``, None when nothing was added."""

    total: int = 0
    count: int = 0

    def add(self, values: np.ndarray) -> None:
        self.total += exact_total(values)
        self.count += len(values)

    def add_exact(self, total: int, count: int) -> None:
        """Add a sum found exactly elsewhere (:func:`exact_totals`) over ``count`` values."""
        self.total += total
        self.count += count

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


@dataclass
class Tally:
    """Macro means and their denominators over the answerable cases of the batches
    added (:meth:`add`), abstention cases counted apart; :meth:`result` is the
    aggregate of :func:`ragvet.measures.summary.summarise` and the slice tables.

    Memory: one exact sum per metric, and each distinct value of the skewed budget
    metrics (:data:`SPREAD`) with its count.
    """

    ks: Sequence[int]
    budgets: Sequence[int] = ()
    judged: bool = False  # the table holds the judgements metrics (every batch has the same columns)
    sums: dict[str, ExactSum] = field(default_factory=dict)
    spreads: dict[str, Counter] = field(default_factory=dict)
    totals: Counter = field(default_factory=Counter)

    def names(self) -> list[str]:
        return metric_names(sorted_ks(self.ks), self.budgets, self.judged)

    def add(self, frame: pl.DataFrame) -> Tally:
        """Count one batch of per-case rows (rounded, as the table holds them)."""
        self.judged = self.judged or has_judged(frame, self.ks)
        kept = frame.filter(answerable())
        names = self.names()
        totals, counts = exact_totals(_values(kept, [column("metrics", name) for name in names]))
        for name, total, count in zip(names, totals, counts.tolist()):
            self.sums.setdefault(name, ExactSum()).add_exact(total, count)
            if name in SPREAD:
                present = _present(kept, column("metrics", name))
                values, times = np.unique(present, return_counts=True)
                self.spreads.setdefault(name, Counter()).update(dict(zip(values.tolist(), times.tolist())))
        for k in sorted_ks(self.ks):
            self.totals[f"claims_available@{k}"] += _total(kept, f"claims_available@{k}")
        self.totals["claims"] += _total(kept, "claims")
        self.totals["duplicates_removed"] += _total(frame, "duplicates_removed")
        self.totals["cases"] += kept.height
        self.totals["rows"] += frame.height
        claims = column("counts", "claims")
        self.totals["cases_with_claims"] += kept.filter(pl.col(claims) > 0).height if claims in frame.columns else 0
        return self

    def result(self) -> dict[str, Any]:
        """``{"metrics", "counted", "denominators"}``: a metric's mean is over the cases
        where it is not None (``counted`` gives how many), None when there are none."""
        means: dict[str, float | None] = {}
        counted: dict[str, int] = {}
        for name in self.names():
            sum_ = self.sums.get(name, ExactSum())
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


def _present(frame: pl.DataFrame, name: str) -> np.ndarray:
    """The non-null values of a column (integers stay integers); none if the table lacks it."""
    if name not in frame.columns:
        return np.zeros(0)
    return frame[name].drop_nulls().to_numpy()


def _total(frame: pl.DataFrame, count: str) -> int:
    """``Σ counts[count]`` over the rows, a missing count being 0."""
    name = column("counts", count)
    return int(frame[name].drop_nulls().sum()) if name in frame.columns else 0
