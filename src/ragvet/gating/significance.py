"""Significance of paired deltas, one test at a time and as a family.

A gate that tests five metrics on six slices of several configurations raises
false alarms by chance alone: at α = 0.05, twenty independent no-change tests
fail at least once two times in three. So every test here yields a p-value, and
the p-values of one gate (or one many-configuration table) are corrected
together before any of them decides:

* the test is a paired randomization (sign-flip permutation) test of the mean
  delta: under "no change" each case's two values are exchangeable, so the sign
  of each case's delta is a fair coin. It is exact (every sign vector enumerated)
  when that is no more work than the Monte Carlo resamples, else seeded Monte
  Carlo with the add-one estimate, which never returns 0 and keeps the test valid.
  The Monte Carlo sign vectors have one sign per *paired case* (a case whose delta
  is zero gets a sign too, and contributes nothing to Σ sᵢdᵢ), so one sign matrix,
  drawn once, serves every metric compared over the same cases
  (:func:`permutation_ps`): each metric then costs one matrix product;
* the correction is Holm's step-down (family-wise error rate ≤ α, the default),
  Benjamini-Hochberg (false discovery rate ≤ α), both by statsmodels'
  ``multipletests``, or none.

Everything is a pure function of its arguments: the same inputs and seed give
the same p-values on any machine.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragvet.gating.corrections import CORRECTION_NAMES, CORRECTIONS
from ragvet.gating.paired import moved_rows

_STATSMODELS_METHOD = {"holm": "holm", "bh": "fdr_bh"}
# Bound the (resamples x cases) sign matrix so large eval sets do not exhaust memory
# (the Monte Carlo stream does not depend on it, see _heads).
_SIGN_CELLS = 4_000_000
# Resamples per matrix product at least: OpenBLAS's threads, on a
# busy machine, cost more than the product in small ones (60 x 8,306 by 8,306 x 64: 0.9 to
# 2.3 s for 2,000 resamples with 2 threads, 0.14 s with one; 240 rows and up: 0.15 to 0.25 s).
_MIN_PRODUCT_ROWS = 256
# Bound the bytes of one batch of sign rows (a row's raw words, then per case read a few
# bytes of coin and its float): past a few hundred thousand moved cases a product is large
# at any number of rows, and 256 rows of ten million cases, a million read, took 1.7 GB.
_SIGN_BYTES = 1 << 27


def _signs(rows: int, n: int, start: int) -> np.ndarray:
    """Rows ``start..`` of the full enumeration of n signs (row r's bits are its signs)."""
    codes = np.arange(start, start + rows, dtype=np.int64)[:, None]
    return ((codes >> np.arange(n, dtype=np.int64)) & 1).astype(np.int8) * 2 - 1


def _heads(raw: np.ndarray, cases: np.ndarray) -> np.ndarray:
    """The coins of ``cases`` (positions among the paired cases) as 0.0 / 1.0 (1 is a
    + sign) in each row of ``raw``: a row is one random vector of fair coins, the next
    ⌈n/64⌉ raw 64-bit words of the seeded bit generator, case i its bit i
    (little-endian), so the stream depends neither on the batching nor on which
    cases are read."""
    octets = raw.astype("<u8", copy=False).view(np.uint8)[:, cases >> 3]  # bit i is bit i % 8 of byte i // 8
    return ((octets >> (cases & 7).astype(np.uint8)) & np.uint8(1)).astype(np.float64)


def permutation_p(base: np.ndarray, cur: np.ndarray, resamples: int, seed: int) -> float | None:
    """Two-sided p-value of the mean paired delta ``cur - base`` under sign flips.

    p = share of sign vectors s with |Σ sᵢdᵢ| ≥ |Σ dᵢ|. Cases with a zero delta
    flip to themselves and drop out. Exact when 2ⁿ' ≤ ``resamples`` (n' nonzero
    deltas; the identity is one of the 2ⁿ'); otherwise (1 + hits) / (1 + resamples)
    over ``resamples`` seeded random vectors with one sign per paired case (zero
    deltas included). No paired case: None. Every delta zero: 1.0. The one-column
    case of :func:`permutation_ps`, which gives every column this same value.
    """
    deltas = np.asarray(cur, dtype=np.float64) - np.asarray(base, dtype=np.float64)
    return permutation_ps(deltas[:, None], resamples, seed)[0]


def _exact_p(deltas: np.ndarray) -> float:
    """The exact sign-flip p-value of nonzero ``deltas``: all 2ⁿ sign vectors."""
    n = len(deltas)
    observed = abs(float(deltas.sum()))
    tolerance = 1e-9 * float(np.abs(deltas).sum())  # float noise of equal sums in another order
    total = 2**n
    batch = max(1, min(total, _SIGN_CELLS // n))
    hits = 0
    for start in range(0, total, batch):
        signs = _signs(min(batch, total - start), n, start)
        hits += int((np.abs(signs @ deltas) >= observed - tolerance).sum())
    return hits / total


def permutation_ps(deltas: np.ndarray, resamples: int, seed: int) -> list[float | None]:
    """:func:`permutation_p` of every column of ``deltas`` (n paired cases x m metrics,
    the deltas ``cur - base`` of each metric over the same cases, in the same order):
    :func:`moved_ps` of its moved rows."""
    deltas = np.asarray(deltas, dtype=np.float64)
    positions, rows = moved_rows(deltas)
    return moved_ps(len(deltas), positions, rows, resamples, seed)


def moved_ps(n: int, positions: np.ndarray, rows: np.ndarray, resamples: int, seed: int) -> list[float | None]:
    """:func:`permutation_ps` of n paired cases given by the rows some column moved
    (:func:`ragvet.gating.paired.moved_rows`): their ``positions`` among the n cases,
    ascending, and their deltas ``rows`` (moved cases x m). No paired case: None.

    The Monte Carlo sign matrix S (``resamples`` x n, the raw words of
    ``numpy.random.default_rng(seed)``'s bit generator, one bit per case:
    :func:`_heads`) is drawn once for all the columns that need it, and each
    column's |S d| ≥ |Σ dᵢ| - 1e-9 Σ|dᵢ| is counted from one matrix product
    (S d = 2 H d - Σ dᵢ, H the 0/1 heads) over the cases those columns moved: a case
    no column moved adds 0 to every sum, so its bits are drawn but never read. The
    tolerance is far above the float noise of any summation order, so the count
    does not depend on the other columns. A column's p-value is therefore a pure
    function of that column, ``resamples`` and ``seed``: the same as alone.
    """
    m = rows.shape[1]
    if n == 0:
        return [None] * m
    out: list[float | None] = [None] * m
    drawn = []
    for j in range(m):
        moved = rows[:, j][rows[:, j] != 0]
        if len(moved) == 0:
            out[j] = 1.0
        elif len(moved) < 62 and 2 ** len(moved) <= resamples:
            out[j] = _exact_p(moved)
        else:
            drawn.append(j)
    if not drawn:
        return out
    columns = rows[:, drawn]
    read = columns.any(axis=1)  # the others add 0 to every Σ sᵢdᵢ
    cases = positions[read]
    moved = np.ascontiguousarray(columns[read])
    moved_sums = [moved[:, i][moved[:, i] != 0] for i in range(len(drawn))]
    observed = np.array([abs(float(d.sum())) for d in moved_sums])
    tolerance = 1e-9 * np.array([float(np.abs(d).sum()) for d in moved_sums])
    totals = moved.sum(axis=0)
    rng = np.random.default_rng(seed)
    words = -(-n // 64)
    row_bytes = 8 * words + 11 * len(cases)  # the raw words, the coins' bytes (three passes) and floats
    batch = min(resamples, max(_MIN_PRODUCT_ROWS, _SIGN_CELLS // max(len(cases), words)), _SIGN_BYTES // row_bytes)
    batch = max(batch, 1)
    hits = np.zeros(len(drawn), dtype=np.int64)
    for start in range(0, resamples, batch):
        rows_drawn = min(batch, resamples - start)
        raw = rng.bit_generator.random_raw(rows_drawn * words).reshape(rows_drawn, words)
        flipped = 2.0 * (_heads(raw, cases) @ moved) - totals  # Σ sᵢdᵢ with sᵢ = 2·headᵢ - 1
        hits += (np.abs(flipped) >= observed - tolerance).sum(axis=0)
    for i, j in enumerate(drawn):
        out[j] = (1 + int(hits[i])) / (1 + resamples)
    return out


def correct(pvalues: Sequence[float], method: str) -> list[float]:
    """The family's adjusted p-values, in the given order (see the module doc):
    statsmodels' ``multipletests`` (``holm``, ``fdr_bh``), the reference the peers
    use, rather than a correction of our own. It loads only when a family has a
    p-value to correct: with scipy and pandas it takes over a second to import.
    ``none`` and an empty family return the p-values unchanged."""
    if method not in CORRECTIONS:
        raise ValueError(f"unknown correction {method!r}: use one of {', '.join(CORRECTIONS)}")
    if method == "none" or not pvalues:
        return [float(p) for p in pvalues]
    from statsmodels.stats.multitest import multipletests  # deferred: statsmodels loads only to correct

    return [float(p) for p in multipletests(list(pvalues), method=_STATSMODELS_METHOD[method])[1]]


def correct_entries(entries: Sequence[dict], method: str) -> int:
    """Set ``p_corrected`` on every entry with a ``p_value``, all as one family;
    entries without one (no paired case) get None. Returns the family size."""
    tested = [entry for entry in entries if entry.get("p_value") is not None]
    for entry, adjusted in zip(tested, correct([entry["p_value"] for entry in tested], method)):
        entry["p_corrected"] = adjusted
    for entry in entries:
        entry.setdefault("p_corrected", None)
    return len(tested)


def describe_family(family: dict | None, tests: str) -> str:
    """One sentence stating the family a decision was made in (``tests`` says
    what was tested), for the terminal and the report alike."""
    if not family:
        return ""
    return (
        f"{family['size']} tests ({tests}) form one family: paired permutation p-values corrected by "
        f"{CORRECTION_NAMES[family['correction']]}, α = {family['alpha']:g}."
    )
