"""The paired bootstrap interval of a mean delta, and the seeded draws it is made of.

A delta's interval is the percentile interval of the resampled mean of the paired
deltas ``cur - base``: resampling *cases*, not the two sides apart, keeps the
pairing, which is what makes small real regressions visible above per-case
variance. The scheme depends on n, the number of paired cases:

* n ≤ :data:`MULTINOMIAL_MAX_CASES` (1,000): the classic bootstrap. A resample draws
  n cases with replacement (``numpy.random.default_rng(seed).integers(0, n)``, in
  batches that do not change the stream); its mean is Σ cᵢdᵢ / n, cᵢ the times case
  i was drawn. It costs resamples x n draws per case set, and every slice, having
  its own cases, draws again.
* n > 1,000: the Poisson bootstrap (Hanley & MacGibbon 2006; Chamandy et al. 2012).
  Each case gets an independent Poisson(1) weight wᵢ per resample, and the resample
  mean is Σ wᵢdᵢ / Σ wᵢ (0 for an empty resample, probability e⁻ⁿ). As n grows it
  agrees with the classic one (the resample size Σ wᵢ is n ± √n). Its weights being
  independent is what makes it cheap: only the m cases whose delta is not 0 need
  their own weight, the other n - m add the sum of their weights to the
  denominator only, and that sum is one Poisson(n - m) draw. Case i's weights are
  the outputs of SplitMix64 seeded by a digest of (seed, case id), so a case has
  the same weights in every slice, metric and configuration, and a slice's
  resample is the restriction of the whole set's: still iid Poisson(1) weights.

Either way a column's interval is a pure function of its case ids, deltas, the
seed, the resamples and the confidence: the same whatever other metrics share its
draws (:func:`bootstrap_cis`), on any CPU and thread count. Its sums go through
:func:`weighted_sums`, whose bits BLAS's summation order cannot reach; the
Poisson draws are inverse CDFs built with IEEE arithmetic only (no libm).
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from ragvet.gating.paired import moved_rows

if TYPE_CHECKING:
    import polars as pl

CaseIds: TypeAlias = "pl.Series | np.ndarray | Sequence[str]"  # indexed by an integer array, or one by one

MULTINOMIAL_MAX_CASES = 1_000
# Bound the (resamples x cases) matrices of a batch so large eval sets do not exhaust memory
# (no stream depends on it).
_BOOTSTRAP_CELLS = 4_000_000
_DRAW_CELLS = 500_000  # SplitMix64 outputs drawn at once: the temporaries stay in cache
_SPLITMIX = (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB)  # Steele, Lea & Flood 2014
_MAX_WEIGHT = 64  # a Poisson(1) draw of a 53-bit uniform is at most 17; a bound for split_columns
_UNSURE = 255


def split_columns(columns: np.ndarray, total: int, grid: np.ndarray | None = None) -> np.ndarray:
    """``columns`` (n x m) as n x 2m: each column's part on a power-of-two grid q, then
    the remainder, for :func:`weighted_sums` with integer weights whose Σᵢ|wᵢ| per row
    is at most ``total``.

    q (:func:`column_grid`, or ``grid`` when the columns are some rows of those it was
    made for) is coarse enough that every partial sum of such weights times the first
    part is a multiple of q below 2⁵³q, so exact in any order; the remainder is below
    q/2 (about 2⁻⁵² total max|d|), and its sum's own rounding far below the result's
    last bit. q depends on the column and ``total`` only, never on the other columns.
    """
    grid = column_grid(columns, total) if grid is None else grid
    high = np.rint(columns / grid) * grid
    return np.hstack([high, columns - high])


def column_grid(columns: np.ndarray, total: int) -> np.ndarray:
    """Each column's grid q of :func:`split_columns`: 2^(e - 51) for max|d| x total <= 2^e."""
    scale = np.abs(columns).max(axis=0, initial=0.0) * max(total, 1)
    _, exponent = np.frexp(scale)
    return np.ldexp(1.0, exponent - 51)  # scale <= 2**exponent = 2**51 * grid


def weighted_sums(weights: np.ndarray, split: np.ndarray) -> np.ndarray:
    """``weights @ columns`` (rows x n times n x m, ``split`` = :func:`split_columns`
    of the columns) whose every entry is the same bits whatever the other columns and
    whatever order the matrix product sums in. So a metric's figures do not depend
    on which metrics share its draws, nor on BLAS's blocking or threads."""
    sums = weights @ split
    m = split.shape[1] // 2
    return sums[:, :m] + sums[:, m:]


def bootstrap_ci(
    base: np.ndarray,
    cur: np.ndarray,
    resamples: int,
    seed: int,
    confidence: float,
    case_ids: CaseIds | None = None,
) -> tuple[float | None, float | None]:
    """Percentile interval of the mean paired delta ``cur - base`` (the module doc's
    scheme); ``case_ids`` name the cases (their positions when omitted), which the
    Poisson bootstrap seeds each case's weights by. The one-column case of
    :func:`bootstrap_cis`. No paired case: (None, None); every delta 0: (0.0, 0.0)."""
    deltas = np.asarray(cur, dtype=np.float64) - np.asarray(base, dtype=np.float64)
    return bootstrap_cis(deltas[:, None], resamples, seed, confidence, case_ids)[0]


def bootstrap_cis(
    deltas: np.ndarray,
    resamples: int,
    seed: int,
    confidence: float,
    case_ids: CaseIds | None = None,
) -> list[tuple[float | None, float | None]]:
    """:func:`bootstrap_ci` of every column of ``deltas`` (n paired cases x m metrics,
    the deltas of each metric over the same cases ``case_ids``, in the same order),
    their draws made once for all the columns: :func:`moved_cis` of its moved rows."""
    deltas = np.asarray(deltas, dtype=np.float64)
    positions, rows = moved_rows(deltas)
    ids = positions.astype(str) if case_ids is None else _picked(case_ids, positions)
    return moved_cis(len(deltas), positions, ids, rows, resamples, seed, confidence)


def moved_cis(
    n: int,
    positions: np.ndarray,
    ids: CaseIds,
    rows: np.ndarray,
    resamples: int,
    seed: int,
    confidence: float,
) -> list[tuple[float | None, float | None]]:
    """:func:`bootstrap_cis` of n paired cases given by the rows some column moved
    (:func:`ragvet.gating.paired.moved_rows`): their ``positions`` among the n cases
    (ascending), their case ``ids`` and their deltas ``rows`` (moved cases x m). No
    paired case: (None, None). With every delta 0 nothing is drawn: every resample's
    mean is 0.0, so (0.0, 0.0)."""
    m = rows.shape[1]
    if n == 0 or resamples <= 0:
        return [(None, None)] * m
    if len(positions) == 0:
        return [(0.0, 0.0)] * m
    if n <= MULTINOMIAL_MAX_CASES:
        deltas = np.zeros((n, m), dtype=np.float64)
        deltas[positions] = rows
        means = _multinomial_means(deltas, resamples, seed)
    else:
        means = _poisson_means(n, ids, np.ascontiguousarray(rows, dtype=np.float64), resamples, seed)
    tail = (1.0 - confidence) / 2.0 * 100.0
    bounds = np.percentile(means, [tail, 100.0 - tail], axis=0)
    return [(float(bounds[0, j]), float(bounds[1, j])) for j in range(m)]


def _multinomial_means(deltas: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """resamples x m means Σ cᵢdᵢ / n of the classic bootstrap: each batch's indices
    (``rng.integers(0, n, size=(rows, n))``) counted per resample (``np.bincount``)."""
    n, m = deltas.shape
    split = split_columns(deltas, n)
    rng = np.random.default_rng(seed)
    batch = max(1, min(resamples, _BOOTSTRAP_CELLS // n))
    means = np.empty((resamples, m), dtype=np.float64)
    for start in range(0, resamples, batch):
        stop = min(resamples, start + batch)
        idx = rng.integers(0, n, size=(stop - start, n))
        idx += (np.arange(stop - start, dtype=idx.dtype) * n)[:, None]
        counts = np.bincount(idx.ravel(), minlength=(stop - start) * n).reshape(stop - start, n)
        means[start:stop] = weighted_sums(counts.astype(np.float64), split) / n
    return means


def _poisson_means(n: int, ids: CaseIds, moved: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """resamples x m means Σ wᵢdᵢ / Σ wᵢ of the Poisson bootstrap (module doc) of n paired
    cases, of which only the ``moved`` rows (named by ``ids``) get weights
    (:func:`_case_weights`); a column's n - m unmoved cases add one Poisson(n - m) draw
    to its denominator, from SplitMix64 seeded by (seed, n - m). The moved cases are
    weighed a batch at a time into the sums, so memory holds resamples x one batch of
    weights at any number of cases."""
    m = moved.shape[1]
    counted = (moved != 0).astype(np.float64)  # which cases each column's numerator weighs
    grid = column_grid(moved, _MAX_WEIGHT * n)
    sums = np.zeros((resamples, 2 * m), dtype=np.float64)
    sizes = _unmoved_sums(n - counted.sum(axis=0).astype(np.int64), seed, resamples)
    step = max(1, _BOOTSTRAP_CELLS // resamples)
    for start in range(0, len(moved), step):
        part = slice(start, start + step)
        drawn = _case_weights(list(ids[part]), seed, resamples).astype(np.float64)
        sums += drawn @ split_columns(moved[part], 0, grid)  # the high parts: exact in any order
        sizes += drawn @ counted[part]  # small integers: exact in any order
    means = sums[:, :m] + sums[:, m:]
    return np.divide(means, sizes, out=np.zeros_like(means), where=sizes > 0)


def _picked(case_ids: CaseIds, rows: np.ndarray) -> CaseIds:
    """The ids at ``rows``: a list is indexed one by one, a polars Series or an array at once."""
    if isinstance(case_ids, (list, tuple)):
        return [case_ids[i] for i in rows]
    return case_ids[rows]


def _unmoved_sums(unmoved: np.ndarray, seed: int, resamples: int) -> np.ndarray:
    """resamples x m: each column's summed weight of its ``unmoved`` cases, a Poisson(n - m)
    draw per resample, output r of SplitMix64 seeded by (seed, n - m) through that
    distribution function; 0 when every case moved."""
    out = np.zeros((resamples, len(unmoved)), dtype=np.float64)
    for size in sorted(set(unmoved.tolist()) - {0}):
        low, cdf = _poisson_cdf(size)
        uniform = _uniform(_splitmix(_keys([str(size)], seed, b"rest"), 0, resamples))[:, 0]
        out[:, unmoved == size] = (low + np.searchsorted(cdf, uniform, side="right")).astype(np.float64)[:, None]
    return out


# Poisson(1) weights drawn in this process, by (seed, resamples) and case id: a case has
# the same weights in every slice, metric and configuration, so the gate's draws serve
# the report's comparisons too. Bounded by _WEIGHT_CACHE bytes.
_WEIGHTS: dict[tuple[int, int], dict[str, np.ndarray]] = {}
_WEIGHT_CACHE = 400_000_000


def _case_weights(case_ids: Sequence[str], seed: int, resamples: int) -> np.ndarray:
    """resamples x cases Poisson(1) weights (uint8): case i's weight in resample r is
    output r + 1 of SplitMix64 seeded by :func:`_keys` (seed, case id), through the
    Poisson(1) distribution function (:func:`_poisson_one`)."""
    known = _WEIGHTS.setdefault((int(seed), int(resamples)), {})
    fresh = [name for name in dict.fromkeys(case_ids) if name not in known]
    if (len(known) + len(fresh)) * resamples > _WEIGHT_CACHE:
        known.clear()
        fresh = list(dict.fromkeys(case_ids))
    if fresh:
        keys = _keys(fresh, seed, b"case")
        drawn = np.empty((len(fresh), resamples), dtype=np.uint8)
        step = max(1, _DRAW_CELLS // resamples)
        for start in range(0, len(fresh), step):
            drawn[start : start + step] = _poisson_one(_splitmix(keys[start : start + step], 0, resamples)).T
        known.update(zip(fresh, drawn))
    if not case_ids:
        return np.empty((resamples, 0), dtype=np.uint8)
    return np.stack([known[name] for name in case_ids], axis=1)


def _keys(names: Sequence[str], seed: int, what: bytes) -> np.ndarray:
    """A 64-bit SplitMix64 seed per name: blake2b of (seed, name), ``what`` keeping
    the case weights' streams apart from the unmoved sums'."""
    prefix = f"{int(seed)}\x00".encode()
    digests = b"".join(
        hashlib.blake2b(prefix + name.encode(), digest_size=8, person=b"ragvet-" + what).digest() for name in names
    )
    return np.frombuffer(digests, dtype="<u8").astype(np.uint64)


def _splitmix(keys: np.ndarray, start: int, rows: int) -> np.ndarray:
    """Outputs ``start + 1 .. start + rows`` of SplitMix64 seeded by each key (rows x
    keys, uint64): output r is mix(key + r·γ), so any resample of any case is drawn
    directly, without the ones before it."""
    gamma, first, second = (np.uint64(c) for c in _SPLITMIX)
    z = keys[None, :] + np.arange(start + 1, start + rows + 1, dtype=np.uint64)[:, None] * gamma
    z ^= z >> np.uint64(30)
    z *= first
    z ^= z >> np.uint64(27)
    z *= second
    z ^= z >> np.uint64(31)
    return z


def _poisson_one(bits: np.ndarray) -> np.ndarray:
    """Poisson(1) draws (uint8) from 64-bit outputs: ``searchsorted(cdf, u, "right")``
    of u = :func:`_uniform` (bits), through a table of the top 16 bits, exact for all
    but the few 2⁻¹⁶ intervals a step of the cdf falls in, which search."""
    table = _one_table()
    drawn = table[(bits >> np.uint64(48)).astype(np.intp)]
    unsure = drawn == _UNSURE
    drawn[unsure] = np.searchsorted(_poisson_cdf(1)[1], _uniform(bits[unsure]), side="right")
    return drawn


@functools.cache
def _one_table() -> np.ndarray:
    """The Poisson(1) draw of every u in [t/2¹⁶, (t+1)/2¹⁶), or _UNSURE where the cdf
    steps inside that interval."""
    cdf = _poisson_cdf(1)[1]
    starts = np.arange(1 << 16, dtype=np.float64) * 2.0**-16
    first = np.searchsorted(cdf, starts, side="right")
    last = np.searchsorted(cdf, starts + 2.0**-16, side="left")  # the draw of u just below the next start
    return np.where(first == last, first, _UNSURE).astype(np.uint8)


def _uniform(bits: np.ndarray) -> np.ndarray:
    """The top 53 bits as a float in [0, 1): exact conversions, the same on any CPU."""
    return (bits >> np.uint64(11)).astype(np.float64) * 2.0**-53


def _poisson_cdf(mean: int) -> tuple[int, np.ndarray]:
    """``(low, cdf)``: the Poisson(``mean``) distribution function at low, low + 1, ...,
    ending in 1.0, over mean ± (12√mean + 40), beyond which each tail is below 10⁻³⁰.

    Built from the pmf's ratios to the mode (p(k+1)/p(k) = mean/(k+1)) by sequential
    products and sums, so IEEE arithmetic only, no exp or lgamma whose last bit varies
    with the CPU's libm: each probability to about 1e-12 relative. A uniform u in
    [0, 1) then draws ``low + searchsorted(cdf, u, side="right")``.
    """
    reach = 12 * math.isqrt(mean) + 52
    low, high = max(0, mean - reach), mean + reach
    above = np.cumprod(mean / np.arange(mean + 1, high + 1, dtype=np.float64))
    below = np.cumprod(np.arange(mean, low, -1, dtype=np.float64) / mean)[::-1]
    cdf = np.cumsum(np.concatenate([below, [1.0], above]))
    return low, cdf / cdf[-1]
