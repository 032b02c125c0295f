"""The bootstrap interval's two schemes, each against an independent computation.

Oracles: numpy's own generator, ``bincount`` and ``percentile`` for the classic
bootstrap (n ≤ 1,000 paired cases); for the Poisson bootstrap (n > 1,000), the
documented recipe rebuilt in plain Python (SplitMix64 on Python integers, blake2b
keys, the Poisson(1) distribution from ``math.exp``, scipy's ``poisson.ppf`` for
the unmoved cases' sum); scipy's Poisson cdf; normal theory for the width; fresh
processes with one and two BLAS threads for the bits.
"""

from __future__ import annotations

import hashlib
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from repos import ROOT
from scipy.stats import poisson

from ragvet.gating import bootstrap as resampling
from ragvet.gating.bootstrap import MULTINOMIAL_MAX_CASES, bootstrap_ci, bootstrap_cis

MASK = (1 << 64) - 1


def percentile_interval(means: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2 * 100
    return float(np.percentile(means, tail)), float(np.percentile(means, 100 - tail))


# ----------------------------------------------------------------- classic (multinomial)


def test_up_to_1000_cases_it_is_the_classic_bootstrap_of_numpys_generator():
    """n cases drawn with replacement per resample by default_rng(seed).integers(0, n):
    the resample mean is the mean of the drawn deltas, and the interval its percentiles."""
    rng = np.random.default_rng(4)
    n = MULTINOMIAL_MAX_CASES
    base, cur = rng.random(n), rng.random(n)
    deltas = cur - base
    draws = np.random.default_rng(21).integers(0, n, size=(300, n))
    means = np.array([deltas[row].sum() / n for row in draws])
    expected = percentile_interval(means, 0.9)
    assert bootstrap_ci(base, cur, 300, 21, 0.9) == pytest.approx(expected, abs=1e-15)


# ------------------------------------------------------------------------ Poisson


def splitmix(key: int, r: int) -> int:
    """Output r (1-based) of SplitMix64 seeded with ``key`` (Steele, Lea & Flood 2014)."""
    z = (key + r * 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def key(seed: int, name: str, what: bytes) -> int:
    digest = hashlib.blake2b(f"{seed}\x00{name}".encode(), digest_size=8, person=b"ragvet-" + what).digest()
    return int.from_bytes(digest, "little")


def poisson_one(u: float) -> int:
    """The smallest k with P(X <= k) > u, X ~ Poisson(1)."""
    k, term, cdf = 0, math.exp(-1), math.exp(-1)
    while cdf <= u:
        k += 1
        term /= k
        cdf += term
    return k


def poisson_means_by_hand(deltas: np.ndarray, ids: list[str], resamples: int, seed: int) -> np.ndarray:
    """Σ wᵢdᵢ / Σ wᵢ per resample: each moved case's weight from its own SplitMix64
    stream, the unmoved cases' summed weight one Poisson(n - m) draw (scipy's ppf)."""
    n = len(deltas)
    moved = [i for i in range(n) if deltas[i] != 0]
    rest_key = key(seed, str(n - len(moved)), b"rest")
    means = []
    for r in range(1, resamples + 1):
        weights = {i: poisson_one((splitmix(key(seed, ids[i], b"case"), r) >> 11) * 2.0**-53) for i in moved}
        u = (splitmix(rest_key, r) >> 11) * 2.0**-53
        rest = int(poisson.ppf(u, n - len(moved))) if n > len(moved) else 0
        total = sum(weights.values()) + rest
        means.append(sum(weights[i] * deltas[i] for i in moved) / total if total else 0.0)
    return np.array(means)


def test_above_1000_cases_it_is_the_poisson_bootstrap_of_the_documented_streams():
    rng = np.random.default_rng(8)
    n = MULTINOMIAL_MAX_CASES + 1
    ids = [f"case-{i:05d}" for i in rng.permutation(n)]
    base = rng.random(n)
    cur = base.copy()
    moved = rng.random(n) < 0.1  # a tenth of the cases moved
    cur[moved] = rng.random(moved.sum())
    expected = percentile_interval(poisson_means_by_hand(cur - base, ids, 200, 5), 0.95)
    resampling._WEIGHTS.clear()
    assert bootstrap_ci(base, cur, 200, 5, 0.95, ids) == pytest.approx(expected, rel=1e-12)


def test_a_slice_reuses_its_cases_weights_and_is_still_a_poisson_bootstrap_of_the_slice():
    """The weights are keyed by case id, so computing the whole set first (the gate's
    order: metrics, then slices) or the slice alone gives the slice the same interval,
    and that interval is the recipe applied to the slice's own cases."""
    rng = np.random.default_rng(9)
    n = 4_000
    ids = [f"q{i}" for i in range(n)]
    deltas = np.where(rng.random(n) < 0.2, rng.normal(-0.05, 0.3, n), 0.0)
    members = np.flatnonzero(rng.random(n) < 0.4)  # a slice of about 1,600 cases
    resampling._WEIGHTS.clear()
    alone = bootstrap_cis(deltas[members][:, None], 100, 3, 0.95, [ids[i] for i in members])
    resampling._WEIGHTS.clear()
    bootstrap_cis(deltas[:, None], 100, 3, 0.95, ids)  # every case's weights now in the cache
    after = bootstrap_cis(deltas[members][:, None], 100, 3, 0.95, [ids[i] for i in members])
    assert after == alone
    expected = percentile_interval(poisson_means_by_hand(deltas[members], [ids[i] for i in members], 100, 3), 0.95)
    assert alone[0] == pytest.approx(expected, rel=1e-12)


def test_poisson_and_classic_intervals_agree_with_normal_theory_at_5000_cases():
    """Both schemes estimate the same sampling distribution: at 5,000 cases their 95%
    intervals lie within Monte Carlo error of mean ± 1.96 s/√n and of each other."""
    rng = np.random.default_rng(12)
    n = 5_000
    deltas = np.where(rng.random(n) < 0.3, rng.normal(-0.02, 0.25, n), 0.0)
    mean, error = deltas.mean(), deltas.std() / math.sqrt(n)
    poisson_low, poisson_high = bootstrap_cis(deltas[:, None], 2_000, 1, 0.95)[0]
    draws = np.random.default_rng(1).integers(0, n, size=(2_000, n))
    classic_low, classic_high = percentile_interval(deltas[draws].mean(axis=1), 0.95)
    for low, high in ((poisson_low, poisson_high), (classic_low, classic_high)):
        assert low == pytest.approx(mean - 1.96 * error, abs=0.15 * error)
        assert high == pytest.approx(mean + 1.96 * error, abs=0.15 * error)
    assert poisson_high - poisson_low == pytest.approx(classic_high - classic_low, rel=0.1)


def test_a_constant_delta_over_every_case_gives_that_delta():
    """Σ wᵢd / Σ wᵢ = d whatever the weights: no unmoved case, no Poisson(n - m) draw."""
    n = 2_000
    low, high = bootstrap_ci(np.full(n, 0.5), np.full(n, 0.25), 500, 2, 0.95)
    assert (low, high) == (-0.25, -0.25)


@pytest.mark.parametrize("mean", [1, 7, 1_000, 62_892])
def test_the_poisson_distribution_function_equals_scipys(mean):
    low, cdf = resampling._poisson_cdf(mean)
    ks = np.arange(low, low + len(cdf))
    assert np.abs(cdf - poisson.cdf(ks, mean)).max() < 1e-12
    assert poisson.cdf(low - 1, mean) < 1e-30 and cdf[-1] == 1.0


def test_the_poisson_one_table_draws_what_the_search_draws():
    bits = resampling._splitmix(resampling._keys([f"c{i}" for i in range(500)], 1, b"case"), 0, 400)
    searched = np.searchsorted(resampling._poisson_cdf(1)[1], resampling._uniform(bits), side="right")
    drawn = resampling._poisson_one(bits)
    assert np.array_equal(drawn, searched)
    shares = np.bincount(drawn.ravel(), minlength=4)[:4] / drawn.size
    assert shares == pytest.approx([math.exp(-1) / math.factorial(k) for k in range(4)], abs=0.005)


PROBE = """
import numpy as np
from ragvet.gating.bootstrap import bootstrap_cis
rng = np.random.default_rng(3)
deltas = np.where(rng.random((20_000, 6)) < 0.3, rng.normal(0, 0.3, (20_000, 6)), 0.0)
deltas[:, 5] = deltas[:, 0] * 1e5
ids = [f"c{i}" for i in range(20_000)]
print(repr(bootstrap_cis(deltas, 300, 7, 0.95, ids)))
print(repr(bootstrap_cis(deltas[:800], 300, 7, 0.95, ids[:800])))
"""


def test_the_same_bits_with_one_or_two_blas_threads():
    outputs = set()
    for threads in ("1", "2"):
        env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS=threads, OPENBLAS_NUM_THREADS=threads)
        done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
        outputs.add(done.stdout)
    assert len(outputs) == 1
