"""The permutation test and the multiple-comparison correction of the gate.

Oracles: Holm's and BH's formulas written out for the corrections, scipy's
``permutation_test`` (paired, exact) for the p-values, hand enumeration on tiny
cases, and a seeded simulation of no-change gates for the family-wise error.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml
from builders import gate_of
from repos import ROOT
from scipy.stats import permutation_test

from ragvet.gating import significance
from ragvet.gating.compare import family_text, gate_all
from ragvet.gating.significance import correct, correct_entries, moved_ps, permutation_p, permutation_ps
from ragvet.inputs.params import validate_params

HAND_LISTS = [
    [0.01, 0.04, 0.03, 0.005],
    [0.3, 0.02, 0.3, 0.7, 0.02, 0.011, 0.9, 0.45, 0.3],
    [0.5, 0.5],
    [0.001, 0.2, 0.2, 0.049, 0.9, 0.013],
    [0.04],
    [1.0, 0.0, 0.5],
]


# --------------------------------------------------------------------- corrections


def test_holm_and_bh_by_hand():
    # Holm: sorted 0.005 (x4 = 0.02), 0.01 (x3 = 0.03), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04, raised to 0.06)
    assert correct([0.01, 0.04, 0.03, 0.005], "holm") == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # BH: p(i) * m / i from the top, running minimum: 0.04*4/4, 0.03*4/3, 0.01*4/2, 0.005*4/1
    assert correct([0.01, 0.04, 0.03, 0.005], "bh") == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert correct([], "holm") == []


def holm_by_formula(pvalues: list[float]) -> list[float]:
    """Holm's step-down: the i-th smallest p times (m - i + 1), a running maximum, capped at 1."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted, running = [0.0] * len(pvalues), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def bh_by_formula(pvalues: list[float]) -> list[float]:
    """Benjamini-Hochberg's step-up: the i-th smallest p times m / i, a running minimum from the top."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted, running = [0.0] * len(pvalues), 1.0
    for rank in range(len(order) - 1, -1, -1):
        i = order[rank]
        running = min(running, len(pvalues) * pvalues[i] / (rank + 1))
        adjusted[i] = running
    return adjusted


@pytest.mark.parametrize("pvalues", HAND_LISTS)
@pytest.mark.parametrize(("method", "formula"), [("holm", holm_by_formula), ("bh", bh_by_formula)])
def test_corrections_follow_their_published_formulas(pvalues, method, formula):
    """The gate's corrections against Holm's and BH's definitions written out here, ties and
    products above 1 included (ragvet calls statsmodels' multipletests for them)."""
    assert correct(pvalues, method) == pytest.approx(formula(pvalues), abs=1e-15)


def test_no_correction_keeps_the_p_values_and_an_unknown_one_is_refused():
    assert correct([0.2, 0.01], "none") == [0.2, 0.01]
    with pytest.raises(ValueError, match="unknown correction 'bonf'"):
        correct([0.1], "bonf")


def test_entries_without_a_test_stay_out_of_the_family():
    entries = [{"p_value": 0.01}, {"p_value": None}, {"p_value": 0.04}]
    assert correct_entries(entries, "holm") == 2
    assert [e["p_corrected"] for e in entries] == pytest.approx([0.02, None, 0.04])


# --------------------------------------------------------------------- permutation


@pytest.mark.parametrize(
    ("deltas", "expected"),
    [
        # 3 moved cases, 8 sign vectors; |sum| >= 4 only for (+,+,+) and (-,-,-)
        ([2.0, 1.0, 1.0], 2 / 8),
        # the zero delta flips to itself and drops out: same as above
        ([2.0, 1.0, 1.0, 0.0], 2 / 8),
        # 5 moves of ±1, sum 3: |sum| >= 3 when at most one or at least four are +: (1+5+5+1)/32
        ([1.0, 1.0, 1.0, 1.0, -1.0], 12 / 32),
        # one moved case: both signs reach |1|
        ([-1.0], 1.0),
        ([0.0, 0.0], 1.0),
    ],
)
def test_permutation_p_by_exact_enumeration(deltas, expected):
    base = np.zeros(len(deltas))
    assert permutation_p(base, base + np.array(deltas), resamples=1000, seed=1) == pytest.approx(expected)


def test_no_paired_case_has_no_p_value():
    assert permutation_p(np.array([]), np.array([]), 100, 1) is None


def test_exact_permutation_p_equals_scipys_paired_permutation_test():
    rng = np.random.default_rng(5)
    base, cur = rng.integers(0, 3, 11) / 2, rng.integers(0, 3, 11) / 2
    theirs = permutation_test(
        (cur, base),
        lambda x, y: np.mean(x - y),
        permutation_type="samples",
        n_resamples=math.inf,
        alternative="two-sided",
    ).pvalue
    assert permutation_p(base, cur, resamples=2**11, seed=0) == pytest.approx(theirs, abs=1e-12)


def test_monte_carlo_p_is_seeded_never_zero_and_close_to_the_exact_value():
    rng = np.random.default_rng(11)
    base = rng.random(40)
    cur = base + rng.normal(0.08, 0.3, 40)
    theirs = permutation_test(
        (cur, base), lambda x, y: np.mean(x - y), permutation_type="samples", n_resamples=20_000, random_state=3
    ).pvalue
    p = permutation_p(base, cur, resamples=4000, seed=9)
    assert p == permutation_p(base, cur, resamples=4000, seed=9)
    assert p != permutation_p(base, cur, resamples=4000, seed=10)
    # two Monte Carlo estimates of the same p: 4 standard errors of their difference
    assert abs(p - theirs) <= 4 * math.sqrt(theirs * (1 - theirs) * (1 / 4000 + 1 / 20_000))
    assert permutation_p(np.zeros(40), np.ones(40), resamples=999, seed=1) == pytest.approx(1 / 1000)


def _signs_by_hand(n: int, resamples: int, seed: int) -> np.ndarray:
    """The sign vectors the module doc defines, one case at a time: row r is the next
    ⌈n/64⌉ raw words of ``default_rng(seed)``'s bit generator, case i's sign + where bit
    i % 64 of word i // 64 is set."""
    words = -(-n // 64)
    raw = np.random.default_rng(seed).bit_generator.random_raw(resamples * words).reshape(resamples, words)
    return np.array([[1 if int(row[i // 64]) >> (i % 64) & 1 else -1 for i in range(n)] for row in raw])


def test_monte_carlo_p_drawn_in_small_batches_and_blocks_is_the_whole_draw(monkeypatch):
    """130 cases (3 raw words a resample), 101 of them moved: column 0 moves every one
    of those by +1, so only an all-equal sign vector over them reaches |101| (2 of 2^101):
    p = (1 + 0) / (1 + 200); column 1's p is counted by hand from the sign vectors (141
    of 200 reach its |sum|). With the cells bounded to 16 the signs come one resample at
    a time, 3 resamples a batch, and the moved cases 8 at a time (the last block 5): the
    same p-values as one draw."""
    n, resamples, seed = 130, 200, 4
    deltas = np.zeros((n, 2))
    moved = np.r_[0:60, 70:111]  # 101 cases, crossing words and bytes
    deltas[moved, 0] = 1.0
    deltas[moved, 1] = (moved % 7 - 3) / 4  # -0.75 .. 0.75 in turn: sum -2.25
    signs = _signs_by_hand(n, resamples, seed)
    sums = np.abs(signs @ deltas[:, 1])
    expected = [1 / 201, (1 + int((sums >= abs(deltas[:, 1].sum()) - 1e-9 * np.abs(deltas[:, 1]).sum()).sum())) / 201]
    whole = permutation_ps(deltas, resamples, seed)
    monkeypatch.setattr(significance, "_SIGN_CELLS", 16)
    monkeypatch.setattr(significance, "_MIN_PRODUCT_ROWS", 3)
    batched = permutation_ps(deltas, resamples, seed)
    assert whole == batched == pytest.approx(expected, abs=0) and expected[1] == 142 / 201
    assert moved_ps(n, moved, deltas[moved], resamples, seed) == whole


# ------------------------------------------------------------------ params


@pytest.fixture
def sample_params() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def test_params_refuse_an_unknown_correction_and_bad_permutation_settings(sample_params):
    sample_params["gate"]["correction"] = "holms"
    sample_params["gate"]["permutation"] = {"resamples": 0, "seed": 1, "alpha": 0.1}
    problems = validate_params(sample_params)
    text = " ".join(f"{p.where} {p.what} {p.fix}" for p in problems)
    assert "params.yaml: gate.correction unknown correction 'holms' did you mean `holm`?" in text
    assert "gate.permutation.resamples` must be an integer ≥ 1, got 0" in text
    assert "unknown key `alpha` in `gate.permutation`" in text
    assert len(problems) == 3


def test_params_accept_every_correction(sample_params):
    for method in ("holm", "bh", "none"):
        sample_params["gate"]["correction"] = method
        assert validate_params(sample_params) == []


# ------------------------------------------------------------------ simulation

FP = {"eval_split": "e1", "corpus": "c1", "chunking": "k1"}
SIM_METRICS = ["recall@5", "evidence_recall@5", "claim_availability@5", "mrr"]


def _null_rows(rng: np.random.Generator, cases: int) -> tuple[list[dict], list[dict]]:
    """Baseline and current drawn from the same distribution, case by case: no change."""
    sides = []
    for _ in range(2):
        sides.append(
            [
                {
                    "case_id": f"c{i:03d}",
                    "split": "eval",
                    "tags": {"phrasing": "short" if i % 2 else "long"},
                    "metrics": {m: float(rng.integers(0, 3)) / 2 for m in SIM_METRICS},
                }
                for i in range(cases)
            ]
        )
    return sides[0], sides[1]


def _false_alarm_rates(runs: int = 200) -> tuple[float, float, float]:
    """Over ``runs`` seeded no-change gates under Holm: the share that failed (a
    drop judged significant), the share with any test, up or down, with corrected
    p < α, and the share with any raw (uncorrected) p < α."""
    gate = {
        "configs": ["a", "b"],
        "metrics": SIM_METRICS,
        "max_drop": 0.0,
        "min_slice_cases": 10,
        "slice_max_drop": 0.0,
        "slice_metric": "evidence_recall@5",
        "require_significance": True,
        "correction": "holm",
        "permutation": {"resamples": 400, "seed": 3},
        "bootstrap": {"resamples": 50, "seed": 2, "confidence": 0.95},
    }
    rng = np.random.default_rng(20261201)
    failed = rejected = raw = 0
    for _ in range(runs):
        pairs = {config: _null_rows(rng, 40) for config in gate["configs"]}
        baselines = {config: ({"fingerprints": FP}, base) for config, (base, _) in pairs.items()}
        current = {config: cur for config, (_, cur) in pairs.items()}
        verdict = gate_all(gate_of(gate, ["phrasing"]), baselines, current, FP)
        assert verdict["configs"][0]["family"]["size"] == 12  # 2 configurations x (4 metrics + 2 slices)
        tests = [t for c in verdict["configs"] for t in [*c["metrics"], *c["slices"]]]
        failed += not verdict["passed"]
        rejected += any(t["p_corrected"] < 0.05 for t in tests)
        raw += any(t["p_value"] < 0.05 for t in tests)
    return failed / runs, rejected / runs, raw / runs


def test_family_wise_false_alarm_rate_under_no_change_is_at_most_alpha(monkeypatch):
    """200 seeded no-change gates of 12 tests each. With Holm, the share of
    families with any corrected p < α = 0.05 (in either direction) stays at or
    below α plus a one-sided 99% binomial margin (2.33 · √(0.05 · 0.95 / 200) =
    0.036), and so does the share of failed gates (drops only). Uncorrected,
    the same families have some p < α far more often."""
    margin = 0.05 + 2.33 * math.sqrt(0.05 * 0.95 / 200)
    # statsmodels' Holm runs gc.collect() on every call (0.3 s in a full test
    # process); a no-op here changes no value, only the time of 200 gates.
    monkeypatch.setattr("gc.collect", lambda *args: 0)
    holm_failed, holm_any, raw_any = _false_alarm_rates()
    print(
        f"\n200 no-change gates of 12 tests: failed gates (holm) {holm_failed:.3f}; "
        f"families with any p < 0.05: holm {holm_any:.3f} / uncorrected {raw_any:.3f}"
    )
    assert holm_any <= margin and holm_failed <= margin
    assert raw_any > 0.20


def test_the_gate_states_its_family_and_rule():
    family = {"size": 12, "correction": "holm", "alpha": 0.05, "significance": True}
    assert family_text(family) == (
        "12 tests (guarded metrics and slices of the gated configurations) form one family: paired permutation "
        "p-values corrected by Holm (family-wise error rate), α = 0.05. A move beyond tolerance fails only when "
        "its corrected p < α."
    )
    assert family_text({**family, "correction": "bh", "significance": False}).endswith(
        "corrected by Benjamini-Hochberg (false discovery rate), α = 0.05. With require_significance off, a move "
        "beyond tolerance fails on its size alone."
    )


def _drop_rows(drop: float, cases: int = 6) -> tuple[list[dict], list[dict]]:
    """Every case of one guarded metric drops by ``drop``: exact p = 2 / 2^cases."""
    base = [{"case_id": f"c{i}", "split": "eval", "tags": {}, "metrics": {"recall@5": 1.0}} for i in range(cases)]
    cur = [{**row, "metrics": {"recall@5": 1.0 - drop}} for row in base]
    return base, cur


def test_the_family_spans_every_gated_configuration():
    """Two gated configurations each drop on all 6 cases: raw p = 2/64 = 0.03125 < 0.05
    fails both; corrected together by Holm (2 x 0.03125 = 0.0625) neither fails."""
    gate = {
        "configs": ["a", "b"],
        "metrics": ["recall@5"],
        "max_drop": 0.02,
        "min_slice_cases": 3,
        "slice_max_drop": 0.1,
        "slice_metric": "recall@5",
        "require_significance": True,
        "permutation": {"resamples": 1000, "seed": 1},
        "bootstrap": {"resamples": 100, "seed": 1, "confidence": 0.95},
    }
    pairs = {config: _drop_rows(0.5) for config in gate["configs"]}
    baselines = {config: ({"fingerprints": FP}, base) for config, (base, _) in pairs.items()}
    current = {config: cur for config, (_, cur) in pairs.items()}
    raw = gate_all(gate_of({**gate, "correction": "none"}), baselines, current, FP)
    assert [c["metrics"][0]["p_corrected"] for c in raw["configs"]] == [2 / 64, 2 / 64]
    assert not raw["passed"] and all(c["metrics"][0]["failed"] for c in raw["configs"])
    holm_verdict = gate_all(gate_of(gate), baselines, current, FP)  # correction absent: Holm
    assert [c["metrics"][0]["p_corrected"] for c in holm_verdict["configs"]] == [4 / 64, 4 / 64]
    assert holm_verdict["passed"] and holm_verdict["configs"][0]["family"]["size"] == 2
    # without require_significance the same drops fail on their size alone, whatever the p-value
    assert not gate_all(gate_of({**gate, "require_significance": False}), baselines, current, FP)["passed"]
