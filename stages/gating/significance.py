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
  Carlo with the add-one estimate, which never returns 0 and keeps the test valid;
* the correction is Holm's step-down (family-wise error rate ≤ α, the default),
  Benjamini-Hochberg (false discovery rate ≤ α), both by statsmodels'
  ``multipletests``, or none.

Everything is a pure function of its arguments: the same inputs and seed give
the same p-values on any machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy loads with the first comparison, not for `ragvet --help`
    import numpy as np

CORRECTIONS = ("holm", "bh", "none")
DEFAULT_CORRECTION = "holm"
_STATSMODELS_METHOD = {"holm": "holm", "bh": "fdr_bh"}
CORRECTION_NAMES = {
    "holm": "Holm (family-wise error rate)",
    "bh": "Benjamini-Hochberg (false discovery rate)",
    "none": "no correction",
}
# Bound the (resamples x cases) sign matrix so large eval sets do not exhaust memory.
_SIGN_CELLS = 4_000_000


def correction_of(gate: dict) -> str:
    """``gate.correction``, Holm when absent: the one place the default lives."""
    return str(gate.get("correction", DEFAULT_CORRECTION))


def permutation_of(gate: dict) -> dict:
    """``gate.permutation`` (resamples, seed); the bootstrap's when absent."""
    boot = gate["bootstrap"]
    return gate.get("permutation") or {"resamples": boot["resamples"], "seed": boot["seed"]}


def alpha_of(gate: dict) -> float:
    """The significance level: one minus the bootstrap interval's confidence, so
    that the interval and the test speak of the same error rate."""
    return round(1.0 - float(gate["bootstrap"]["confidence"]), 12)


def _signs(rows: int, n: int, rng: np.random.Generator | None, start: int) -> np.ndarray:
    """A block of sign vectors: random ones from ``rng``, else rows ``start..`` of
    the full enumeration (row r's bits are its signs)."""
    import numpy as np  # deferred: not for `ragvet --help`

    if rng is not None:
        return rng.integers(0, 2, size=(rows, n), dtype=np.int8) * 2 - 1
    codes = np.arange(start, start + rows, dtype=np.int64)[:, None]
    return ((codes >> np.arange(n, dtype=np.int64)) & 1).astype(np.int8) * 2 - 1


def permutation_p(base: np.ndarray, cur: np.ndarray, resamples: int, seed: int) -> float | None:
    """Two-sided p-value of the mean paired delta ``cur - base`` under sign flips.

    p = share of sign vectors s with |Σ sᵢdᵢ| ≥ |Σ dᵢ|. Cases with a zero delta
    flip to themselves and drop out. Exact when 2ⁿ ≤ ``resamples`` (n nonzero
    deltas; the identity is one of the 2ⁿ); otherwise (1 + hits) / (1 + resamples)
    over ``resamples`` seeded random vectors. No paired case: None. Every delta
    zero: 1.0.
    """
    import numpy as np  # deferred: not for `ragvet --help`

    deltas = np.asarray(cur, dtype=np.float64) - np.asarray(base, dtype=np.float64)
    if len(deltas) == 0:
        return None
    deltas = deltas[deltas != 0]
    n = len(deltas)
    if n == 0:
        return 1.0
    observed = abs(float(deltas.sum()))
    tolerance = 1e-9 * float(np.abs(deltas).sum())  # float noise of equal sums in another order
    exact = n < 62 and 2**n <= resamples
    total = 2**n if exact else resamples
    rng = None if exact else np.random.default_rng(seed)
    batch = max(1, min(total, _SIGN_CELLS // n))
    hits = 0
    for start in range(0, total, batch):
        signs = _signs(min(batch, total - start), n, rng, start)
        hits += int((np.abs(signs @ deltas) >= observed - tolerance).sum())
    return hits / total if exact else (1 + hits) / (1 + resamples)


def correct(pvalues: Sequence[float], method: str) -> list[float]:
    """The family's adjusted p-values, in the given order (see the module doc):
    statsmodels' ``multipletests`` (``holm``, ``fdr_bh``), the reference the
    peers use. ``none`` and an empty family return the p-values unchanged."""
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
