"""The gate: paired comparison, tolerance, slices, significance, invalid comparisons, baselines."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from builders import gate_of

from ragvet.errors import InputError
from ragvet.gating import baselines
from ragvet.gating import bootstrap as resampling
from ragvet.gating import compare as gating
from ragvet.gating.baselines import accept_baseline, baseline_problems, files_at, latency_pairs, read_results_at
from ragvet.gating.bootstrap import bootstrap_ci, bootstrap_cis
from ragvet.gating.compare import (
    accept_deliberate,
    gate_all,
    gate_verdict,
    render_verdict,
    split_fingerprints,
)
from ragvet.gating.decision import decide, exact_text
from ragvet.gating.paired import PairedBuilder
from ragvet.reporting.comparisons import compare_configs
from ragvet.schema import Case, Doc, EvidenceUnit
from ragvet.splitting import freeze_split
from ragvet.storage import records, results
from ragvet.storage.files import write_json
from ragvet.storage.records import SplitOutline, split_outline

CONFIG = "sentences-600-bm25"
FP = {"eval_split": "e1", "corpus": "c1", "chunking": "k1"}


def gate(**overrides) -> dict:
    params = {
        "configs": [CONFIG],
        "metrics": ["recall@5", "mrr"],
        "max_drop": 0.02,
        "min_slice_cases": 3,
        "slice_max_drop": 0.10,
        "slice_metric": "recall@5",
        "require_significance": False,
        "bootstrap": {"resamples": 500, "seed": 7, "confidence": 0.95},
    }
    params.update(overrides)
    return params


def row(case_id: str, recall: float | None, mrr: float | None = 1.0, split: str = "eval", **tags) -> dict:
    hit = None if recall is None else float(recall > 0)
    return {
        "case_id": case_id,
        "split": split,
        "answerable": recall is not None,
        "tags": tags,
        "metrics": {"recall@5": recall, "hit@5": hit, "mrr": mrr},
    }


def summary(rows: list[dict], fp: dict = FP) -> dict:
    """A summary whose eval means match the rows (enough for the gate's checks)."""
    means = {}
    for metric in ("recall@5", "hit@5", "mrr"):
        values = [r["metrics"][metric] for r in rows if r["split"] == "eval" and r["metrics"][metric] is not None]
        means[metric] = sum(values) / len(values) if values else None
    return {"config": CONFIG, "eval": {"metrics": means}, "fingerprints": dict(fp)}


def compare_config(config, base_rows, cur_rows, base_fp, cur_fp, settings, against=None) -> dict:
    """One configuration's verdict entry, through the gate's own gate_all: its tests a family of their own."""
    baseline = ({"fingerprints": base_fp} if base_fp is not None else None, base_rows)
    return gate_all(settings, {config: baseline}, {config: cur_rows}, cur_fp, against)["configs"][0]


def compare(base_rows, cur_rows, params=None, slice_keys=(), base_fp=None, cur_fp=None):
    return compare_config(
        CONFIG,
        base_rows,
        cur_rows,
        base_fp or dict(FP),
        cur_fp or dict(FP),
        gate_of(params or gate(), slice_keys),
    )


def metric(result: dict, name: str) -> dict:
    return next(m for m in result["metrics"] if m["metric"] == name)


BASE = [row("a", 1.0), row("b", 1.0), row("c", 0.5), row("d", 0.5), row("x", None, None)]


# ------------------------------------------------------------------ pairing, bootstrap


def test_a_paired_sample_holds_eval_cases_on_both_sides_with_values_sorted():
    base = [row("b", 0.5), row("a", 1.0), row("c", 0.0), row("d", 1.0, split="dev"), row("e", None)]
    cur = [row("a", 0.0), row("c", None), row("b", 1.0), row("d", 0.0, split="dev"), row("f", 1.0)]
    sample = gating.Pairing(["recall@5"]).read(base, cur).samples[0].sample()
    assert (sample.n, sample.means()) == (2, (0.75, 0.5))
    assert sample.ids.to_list() == ["a", "b"] and sample.positions.tolist() == [0, 1]
    assert sample.deltas.tolist() == [-1.0, 0.5] and (sample.rises, sample.falls) == (1, 1)


def test_bootstrap_is_seeded_brackets_the_mean_and_narrows_with_lower_confidence():
    base = np.array([0.9, 0.2, 0.75, 0.4, 1.0, 0.35])
    cur = np.array([0.1, 0.25, 0.5, 0.45, 0.6, 0.3])  # deltas -0.8, 0.05, -0.25, 0.05, -0.4, -0.05
    low, high = bootstrap_ci(base, cur, 1000, 42, 0.9)
    assert (low, high) == bootstrap_ci(base, cur, 1000, 42, 0.9)  # the same inputs give the same verdict
    assert (low, high) != bootstrap_ci(base, cur, 1000, 43, 0.9)  # the seed is used
    narrow_low, narrow_high = bootstrap_ci(base, cur, 1000, 42, 0.5)
    assert low < narrow_low < narrow_high < high  # same resamples, inner percentiles

    observed = (cur - base).mean()  # -0.233
    assert low < observed < high
    # Every resampled mean lies within the per-case deltas' range [-0.8, 0.05].
    assert -0.8 <= low < high <= 0.05


def test_bootstrap_of_constant_delta_is_that_delta_and_empty_is_none():
    assert bootstrap_ci(np.array([0.5, 0.5]), np.array([0.25, 0.25]), 200, 1, 0.95) == (-0.25, -0.25)
    assert bootstrap_ci(np.array([]), np.array([]), 200, 1, 0.95) == (None, None)
    unchanged = np.random.default_rng(1).random(100_000)  # an untouched configuration: no draw needed
    low, high = bootstrap_ci(unchanged, unchanged.copy(), 2000, 1, 0.95)
    assert (low, high) == (0.0, 0.0) and str(low) == "0.0"  # not -0.0


@pytest.mark.parametrize("n", [1_000, 50_000])
def test_bootstrap_in_batches_equals_one_batch(monkeypatch, n):
    """Multinomial (n = 1,000: 200 x 1,000 indices in batches of 30 resamples) and
    Poisson (n = 50,000: weights drawn 7 cases at a time, summed 2,500 cases at a
    time), each against one batch."""
    rng = np.random.default_rng(0)
    base, cur = rng.random(n), rng.random(n)
    monkeypatch.setattr(resampling, "_BOOTSTRAP_CELLS", (30 if n == 1_000 else 10) * n)
    monkeypatch.setattr(resampling, "_DRAW_CELLS", 7 * 200)
    resampling._WEIGHTS.clear()
    low, high = bootstrap_ci(base, cur, 200, 3, 0.95)
    for constant in ("_BOOTSTRAP_CELLS", "_DRAW_CELLS"):
        monkeypatch.setattr(resampling, constant, 10**10)  # everything in one batch
    resampling._WEIGHTS.clear()
    assert (low, high) == bootstrap_ci(base, cur, 200, 3, 0.95)
    assert low < (cur - base).mean() < high and high - low < (0.1 if n == 1_000 else 0.02)


def test_shared_draws_give_each_metric_what_it_gets_alone(monkeypatch):
    """The gate and report draw the bootstrap indices and permutation signs once per
    paired case set and give every metric a matrix product: each column's interval
    and p-value equal bootstrap_ci / permutation_p of that column alone, bit for bit,
    whatever the other columns (zero, tiny, huge, few moved cases) and the batching."""
    from ragvet.gating.significance import permutation_p, permutation_ps

    rng = np.random.default_rng(7)
    n = 3_000
    base = rng.random((n, 5))
    cur = base + rng.normal(0, 0.2, (n, 5)).round(6)
    cur[:, 1] = base[:, 1]  # unchanged: interval [0, 0], p 1.0
    cur[:, 2] = base[:, 2] + np.where(np.arange(n) < 5, 0.5, 0.0)  # 5 moved cases: exact p
    cur[:, 3] = base[:, 3] + 1e6 * (cur[:, 0] - base[:, 0])  # another scale
    deltas = cur - base
    monkeypatch.setattr(resampling, "_BOOTSTRAP_CELLS", 400_000)  # Poisson: 3,000 cases summed 800 at a time
    shared_ci = bootstrap_cis(deltas, 500, 11, 0.95)
    shared_p = permutation_ps(deltas, 2_000, 12)
    for j in range(deltas.shape[1]):
        assert shared_ci[j] == bootstrap_ci(base[:, j], cur[:, j], 500, 11, 0.95)
        assert shared_ci[j] == bootstrap_cis(deltas[:, [j, 0]], 500, 11, 0.95)[0]  # other company
        assert shared_p[j] == permutation_p(base[:, j], cur[:, j], 2_000, 12)
    assert shared_ci[1] == (0.0, 0.0) and shared_p[1] == 1.0
    assert shared_p[2] == pytest.approx(2 / 32)  # exact over the 5 moved cases
    # Through the gate's grouping: metrics over the same cases share, others group apart.
    samples = [(["a", "b", "c", "d"], base[:4, j], cur[:4, j]) for j in range(3)] + [
        (["a", "c"], base[:2, 0], cur[:2, 0])
    ]
    params = {"bootstrap": {"resamples": 300, "seed": 3, "confidence": 0.9}, "permutation": {"resamples": 4, "seed": 5}}
    paired = [PairedBuilder().add(ids, b, c).sample() for ids, b, c in samples]
    for (_, b, c), (low, high, p) in zip(samples, gating._statistics(paired, gate_of({**gate(), **params}))):
        assert (low, high) == bootstrap_ci(b, c, 300, 3, 0.9)
        assert p == permutation_p(b, c, 4, 5)


# -------------------------------------------------------------------------- verdicts


def test_drop_beyond_max_drop_fails_and_message_names_the_numbers():
    cur = [row("a", 1.0), row("b", 0.5), row("c", 0.5), row("d", 0.5), row("x", None, None)]
    result = compare(BASE, cur)
    recall = metric(result, "recall@5")
    assert result["valid"] and not result["passed"]
    assert (recall["baseline"], recall["current"], recall["delta"], recall["cases"]) == (0.75, 0.625, -0.125, 4)
    assert recall["failed"] and recall["ci_low"] <= -0.125 <= recall["ci_high"]
    text = render_verdict(gate_verdict([result]))
    line = next(line for line in text.splitlines() if line.startswith("FAIL"))
    assert line.startswith(f"FAIL {CONFIG} recall@5: 0.750 -> 0.625 (delta -0.125, 95% CI [")
    assert text.endswith("gate: FAILED\n")


def test_improvement_elsewhere_does_not_save_a_failing_metric():
    cur = [row("a", 1.0, 1.0), row("b", 0.5, 1.0), row("c", 0.5, 1.0), row("d", 0.5, 1.0)]
    base = [row("a", 1.0, 0.1), row("b", 1.0, 0.1), row("c", 0.5, 0.1), row("d", 0.5, 0.1)]
    result = compare(base, cur)
    assert metric(result, "mrr")["delta"] == pytest.approx(0.9) and not metric(result, "mrr")["failed"]
    assert metric(result, "recall@5")["failed"] and not result["passed"]
    assert not gate_verdict([result])["passed"]


def test_drop_within_tolerance_passes_including_exactly_max_drop():
    base = [row(c, 0.5) for c in "abcdefghij"]
    cur = [row(c, 0.5) for c in "abcdefghi"] + [row("j", 0.3)]  # mean drop exactly 0.02
    result = compare(base, cur)
    assert metric(result, "recall@5")["delta"] == pytest.approx(-0.02)
    assert result["passed"]
    verdict = gate_verdict([result])
    assert verdict["passed"] and render_verdict(verdict).endswith("gate: PASSED\n")


def test_require_significance_only_fails_when_the_corrected_p_value_is_below_alpha():
    base = [row(c, 1.0) for c in "abcdefgh"]
    noisy = [row("a", 0.0)] + [row(c, 1.0) for c in "bcdefgh"]  # one case dropped: both signs reach it, p = 1
    steady = [row(c, 0.9) for c in "abcdefgh"]  # every case dropped: exact p = 2/256
    strict = gate(require_significance=True)
    noisy_entry = compare(base, noisy, strict)["metrics"][0]
    assert not noisy_entry["failed"] and noisy_entry["p_corrected"] == 1.0 and noisy_entry["ci_high"] >= 0
    assert compare(base, noisy)["metrics"][0]["failed"]
    # the family: recall@5 and mrr (which did not move, p = 1); Holm doubles the smaller p
    steady_entry = compare(base, steady, strict)["metrics"][0]
    assert steady_entry["failed"] and steady_entry["p_corrected"] == pytest.approx(2 * 2 / 256)


def test_slice_failure_respects_min_slice_cases():
    base = (
        [row(f"p{i}", 1.0, doc_type="policy") for i in range(3)]
        + [row(f"f{i}", 1.0, doc_type="faq") for i in range(2)]
        + [row(f"o{i}", 1.0, doc_type="other") for i in range(45)]
    )
    cur = [
        row("p0", 0.5, doc_type="policy"),
        row("p1", 1.0, doc_type="policy"),
        row("p2", 1.0, doc_type="policy"),
        row("f0", 0.0, doc_type="faq"),
        row("f1", 0.0, doc_type="faq"),
    ] + [row(f"o{i}", 1.0, doc_type="other") for i in range(45)]
    # Overall recall drops 0.025 -> also fails on its own; loosen it to isolate the slice rule.
    result = compare(base, cur, gate(max_drop=0.5), slice_keys=["doc_type", "missing_key"])
    slices = {(s["key"], s["value"]): s for s in result["slices"]}
    assert set(slices) == {("doc_type", "other"), ("doc_type", "policy")}  # faq has 2 < 3 cases
    policy = slices[("doc_type", "policy")]
    assert policy["cases"] == 3 and policy["delta"] == pytest.approx(-1 / 6, abs=1e-6) and policy["failed"]
    assert not slices[("doc_type", "other")]["failed"]
    assert not metric(result, "recall@5")["failed"] and not result["passed"]
    text = render_verdict(gate_verdict([result]))
    assert f"FAIL {CONFIG} slice doc_type=policy recall@5: 1.000 -> 0.833 (delta -0.167" in text
    assert "faq" not in text


def test_newly_missed_uses_hit_at_largest_guarded_k():
    base = [row("a", 1.0), row("b", 0.5), row("c", 0.0), row("d", 1.0, split="dev"), row("e", None)]
    cur = [row("a", 0.0), row("b", 0.0), row("c", 1.0), row("d", 0.0, split="dev"), row("e", None)]
    result = compare(base, cur)
    assert result["newly_missed"] == ["a", "b"] and result["newly_missed_k"] == 5
    assert "2 newly missed at hit@5 (hit in baseline, missed now): a, b" in render_verdict(gate_verdict([result]))


@pytest.mark.parametrize(
    ("base_fp", "expected"),
    [
        (
            {"eval_split": "OTHER", "corpus": "c1"},
            "labels changed: re-baseline deliberately with `ragvet baseline accept`",
        ),
        ({"eval_split": "e1"}, "corpus fingerprint missing (baseline None, current c1)"),
    ],
)
def test_fingerprint_mismatch_is_invalid_and_fails(base_fp, expected):
    result = compare(BASE, BASE, base_fp=dict(base_fp))
    assert not result["valid"] and not result["passed"] and result["metrics"] == []
    assert any(expected in reason for reason in result["reasons"])
    text = render_verdict(gate_verdict([result]))
    assert f"INVALID {CONFIG}: " in text and expected in text and text.endswith("gate: FAILED\n")


def test_fingerprints_only_are_accepted_too():
    assert compare(BASE, BASE, base_fp=dict(FP), cur_fp=dict(FP))["passed"]


def test_a_rebaselined_change_accepts_drops_and_relabelling_only_against_a_revision():
    dropped = compare(BASE, [row("a", 1.0), row("b", 0.5), row("c", 0.5), row("d", 0.5)])
    relabelled = compare(BASE, BASE, base_fp={"eval_split": "OTHER", "corpus": "c1"})
    nan_mrr = compare([row("a", 1.0, float("nan"))], [row("a", 1.0, float("nan"))])
    assert accept_deliberate(dropped, None) == dropped  # the committed baseline itself: nothing to accept
    for result in (dropped, relabelled):
        accepted = accept_deliberate(result, "origin/main")
        assert accepted["passed"] and "moves against origin/main are accepted deliberately" in accepted["accepted"]
        assert accepted["metrics"] == result["metrics"] and accepted["reasons"] == result["reasons"]
        assert "ACCEPTED" in render_verdict(gate_verdict([accepted]))
    assert not accept_deliberate(nan_mrr, "origin/main")["passed"]  # an undefined metric is never accepted


def test_missing_baseline_fails_with_a_reason():
    result = compare_config(CONFIG, None, BASE, None, dict(FP), gate_of(gate()))
    assert not result["passed"] and "ragvet baseline accept" in result["reasons"][0]
    assert "no baseline" in render_verdict(gate_verdict([result]))


def test_undefined_guarded_metric_and_no_paired_cases_fail():
    nan_mrr = [row(c, 1.0, float("nan")) for c in "ab"]
    result = compare(nan_mrr, nan_mrr, base_fp=dict(FP), cur_fp=dict(FP))
    assert not result["passed"] and any("mrr has no paired" in r for r in result["reasons"])

    none_mrr = [row(c, 1.0, None) for c in "ab"]
    result = compare(none_mrr, none_mrr, base_fp=dict(FP), cur_fp=dict(FP))
    assert not result["passed"] and any("mrr has no paired" in r for r in result["reasons"])

    result = compare([row("a", 1.0)], [row("b", 1.0)])
    assert not result["valid"] and any("no paired cases" in r for r in result["reasons"])


# ------------------------------------------------------------------ chunking changes


def erow(case_id: str, recall: float, evidence: float, claims: float | None = None) -> dict:
    """A row with chunk-level recall and the evidence metrics comparable across chunkings."""
    found = row(case_id, recall)
    found["metrics"] |= {"evidence_recall@5": evidence, "claim_availability@5": claims}
    return found


# Re-chunked: recall@5 fell on every case (smaller chunks, more relevant chunks per case),
# while the evidence it retrieves fell on one case of four.
BEFORE = [erow("a", 1.0, 1.0, 1.0), erow("b", 1.0, 1.0, 1.0), erow("c", 0.5, 1.0, 1.0), erow("d", 0.5, 0.5, 1.0)]
AFTER = [erow("a", 0.5, 1.0, 1.0), erow("b", 0.25, 1.0, 1.0), erow("c", 0.25, 0.5, 1.0), erow("d", 0.25, 0.5, 1.0)]
GUARDED = ["recall@5", "evidence_recall@5", "claim_availability@5", "mrr"]


def test_another_chunking_compares_only_the_metrics_comparable_across_chunkings_and_names_the_rest():
    params = gate(metrics=GUARDED, slice_metric="evidence_recall@5")
    result = compare(BEFORE, AFTER, params, base_fp={**FP, "chunking": "k1"}, cur_fp={**FP, "chunking": "k2"})
    reason = "not comparable across chunkings (baseline chunking k1, current k2)"
    assert result["skipped"] == [{"metric": "recall@5", "reason": reason}, {"metric": "mrr", "reason": reason}]
    assert [m["metric"] for m in result["metrics"]] == ["evidence_recall@5", "claim_availability@5"]
    evidence = metric(result, "evidence_recall@5")
    assert (evidence["baseline"], evidence["current"], evidence["delta"]) == (0.875, 0.75, -0.125)
    assert evidence["failed"] and not metric(result, "claim_availability@5")["failed"]
    assert result["valid"] and not result["passed"] and result["family"]["size"] == 2  # skipped: not tested
    text = render_verdict(gate_verdict([result]))
    assert f"SKIP {CONFIG} recall@5: {reason}\n" in text and f"SKIP {CONFIG} mrr: {reason}\n" in text
    assert f"FAIL {CONFIG} evidence_recall@5: 0.875 -> 0.750 (delta -0.125" in text
    assert f"ok   {CONFIG} claim_availability@5: 1.000 -> 1.000" in text and " recall@5: 1.000 -> " not in text

    same = compare(BEFORE, AFTER, params)  # the baseline's chunking: recall@5 compared, and it fell
    assert same["skipped"] == [] and metric(same, "recall@5")["delta"] == -0.4375


def test_a_chunking_change_with_only_chunk_level_metrics_guarded_fails_saying_to_gate_a_comparable_one():
    """A gate never passes what it did not measure: recall@5 and mrr skipped leave nothing."""
    result = compare(BASE, BASE, base_fp={**FP, "chunking": "k1"}, cur_fp={**FP, "chunking": "k2"})
    assert not result["valid"] and not result["passed"] and result["metrics"] == [] and result["slices"] == []
    assert [s["metric"] for s in result["skipped"]] == ["recall@5", "mrr", "recall@5"]
    assert result["skipped"][-1]["slices"] is True
    (reason,) = result["reasons"]
    assert "no guarded metric is comparable across chunkings, so nothing was compared" in reason
    assert "gate a metric comparable across chunkings (evidence_recall@k" in reason
    text = render_verdict(gate_verdict([result]))
    assert f"INVALID {CONFIG}: no guarded metric is comparable" in text and text.endswith("gate: FAILED\n")
    assert f"SKIP {CONFIG} slices of recall@5: not comparable across chunkings" in text
    assert not accept_deliberate(result, "origin/main")["passed"]  # nothing compared is never accepted


def test_a_baseline_without_a_chunking_fingerprint_compares_no_chunk_level_metric():
    """A baseline accepted before summaries recorded their chunking is no evidence of the same chunks."""
    params = gate(metrics=GUARDED, slice_metric="evidence_recall@5")
    result = compare(BEFORE, BEFORE, params, base_fp={"eval_split": "e1", "corpus": "c1"})
    assert [s["metric"] for s in result["skipped"]] == ["recall@5", "mrr"]
    reason = "not comparable across chunkings (baseline chunking not recorded, current k1)"
    assert result["skipped"][0]["reason"] == reason
    assert result["passed"] and len(result["slices"]) == 0  # no slice keys here; evidence metrics unchanged


def test_the_registry_says_which_guarded_figures_are_comparable_across_chunkings():
    from ragvet.measures.registry import comparable_across_chunkings

    comparable = ["evidence_recall@5", "claim_availability@5", "evidence_recall_budget@512", "unsupported_answer"]
    assert all(map(comparable_across_chunkings, comparable))
    assert not any(map(comparable_across_chunkings, ["recall@5", "hit@5", "mrr", "ndcg@5", "cited_available@5"]))


def test_verdict_sorts_configs_and_empty_gate_fails():
    ok = compare(BASE, BASE)
    other = dict(ok, config="a-first")
    verdict = gate_verdict([ok, other])
    assert [c["config"] for c in verdict["configs"]] == ["a-first", CONFIG] and verdict["passed"]
    assert not gate_verdict([])["passed"]


# ------------------------------------------------------------------------- baselines


def write_table(path: Path, rows: list[dict]) -> None:
    results.write_results(path, results.results_frame(rows))


def write_results(metrics: Path, config: str, text: str = "x") -> None:
    (metrics / "cases").mkdir(parents=True, exist_ok=True)
    (metrics / f"{config}.json").write_text(json.dumps({"config": config, "v": text}) + "\n")
    write_table(metrics / "cases" / f"{config}.parquet", [row("a", 1.0, note=text)])


def test_accept_baseline_copies_and_removes_ungated(tmp_path):
    metrics = tmp_path / "metrics"
    write_results(metrics, "keep")
    write_results(metrics, "old")
    accept_baseline(metrics, ["keep", "old"])
    (metrics / "baseline" / "notes.md").write_text("kept\n")
    written = accept_baseline(metrics, ["keep"])
    baseline = metrics / "baseline"
    assert written == [baseline / "keep.json", baseline / "cases" / "keep.parquet"]
    assert (baseline / "keep.json").read_bytes() == (metrics / "keep.json").read_bytes()
    assert (baseline / "cases" / "keep.parquet").read_bytes() == (metrics / "cases" / "keep.parquet").read_bytes()
    assert not (baseline / "old.json").exists() and not (baseline / "cases" / "old.parquet").exists()
    assert (baseline / "notes.md").exists()


def test_accept_baseline_missing_source_writes_nothing(tmp_path):
    metrics = tmp_path / "metrics"
    write_results(metrics, "keep")
    with pytest.raises(InputError) as err:
        accept_baseline(metrics, ["keep", "absent"])
    assert "absent.json" in str(err.value) and "run dvc repro first" in str(err.value)
    assert not (metrics / "baseline").exists()


def test_accept_baseline_keeps_each_runs_top_k_and_drops_ungated_ones(tmp_path):
    metrics, runs = tmp_path / "metrics", tmp_path / "runs"
    runs.mkdir()
    for config in ("keep", "old"):
        write_results(metrics, config)
        rows = [
            ("a", 3, "x#9"),
            ("a", 1, "x#0"),
            ("a", 2, "x#2"),
            ("b", 2, "x#1"),
            ("b", 1, "x#5"),
        ]  # ranks in any order
        pl.DataFrame(rows, schema=["case_id", "rank", "chunk_id"], orient="row").write_parquet(
            runs / f"{config}.parquet"
        )
    accept_baseline(metrics, ["keep", "old"], runs=(runs, 2))
    written = accept_baseline(metrics, ["keep"], runs=(runs, 2))
    ranking = metrics / "baseline" / "cases" / "rankings" / "keep.parquet"
    assert ranking in written and not ranking.with_name("old.parquet").exists()
    kept = pl.read_parquet(ranking)
    assert kept.rows() == [("a", 1, "x#0"), ("a", 2, "x#2"), ("b", 1, "x#5"), ("b", 2, "x#1")]  # rank 3 cut
    with pytest.raises(InputError) as err:
        accept_baseline(metrics, ["keep", "new"], runs=(runs, 2))
    assert "the run of gated configuration new is not in the work tree" in str(err.value)
    # Cases out of order cannot be kept a batch at a time: refused, naming the run, the kept baseline untouched.
    rows = [("b", 1, "x#5"), ("a", 1, "x#0")]
    pl.DataFrame(rows, schema=["case_id", "rank", "chunk_id"], orient="row").write_parquet(runs / "keep.parquet")
    with pytest.raises(InputError) as err:
        accept_baseline(metrics, ["keep"], runs=(runs, 2))
    assert f"{(runs / 'keep.parquet').as_posix()}: case ids not in ascending order (row 2: 'a')" in str(err.value)
    assert pl.read_parquet(ranking).rows() == kept.rows()


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_read_results_at_reads_a_revisions_results(tmp_path):
    repo = tmp_path / "repo"
    project = repo / "project"  # a DVC project in a subfolder of the git repository
    rows = [row("a", 1.0), row("b", 0.5)]
    (project / "metrics" / "cases").mkdir(parents=True)
    (project / "metrics" / f"{CONFIG}.json").write_text(json.dumps(summary(rows)))
    write_table(project / "metrics" / "cases" / f"{CONFIG}.parquet", rows)
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "results")
    (project / "metrics" / f"{CONFIG}.json").write_text("changed since")

    found = read_results_at("HEAD", [CONFIG, "new-config"], project)
    assert found["new-config"] is None and found[CONFIG][0] == summary(rows)
    assert results.result_rows(found[CONFIG][1]) == rows

    with pytest.raises(InputError) as err:
        read_results_at("no-such-rev", [CONFIG], project)
    assert "git revision 'no-such-rev' does not exist" in str(err.value) and "shallow" not in str(err.value)


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_read_results_at_names_a_shallow_clone_and_a_revision_without_results(tmp_path):
    origin = tmp_path / "origin"
    origin.mkdir()
    git(origin, "init", "-q", "-b", "main")
    (origin / "README").write_text("no results yet\n")
    git(origin, "add", ".")
    git(origin, "commit", "-q", "-m", "first")
    first = subprocess.run(["git", "rev-parse", "HEAD"], cwd=origin, capture_output=True, text=True).stdout.strip()
    (origin / "README").write_text("second\n")
    git(origin, "commit", "-q", "-am", "second")

    with pytest.raises(InputError) as err:
        read_results_at("HEAD", [CONFIG], origin)
    assert "HEAD:metrics/cases: that revision has no ragvet results" in str(err.value)

    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin}", str(shallow))
    with pytest.raises(InputError) as err:
        read_results_at(first, [CONFIG], shallow)
    message = str(err.value)
    assert f"git revision {first!r} does not exist" in message
    assert "this clone is shallow" in message and "git fetch --unshallow" in message and "fetch-depth: 0" in message


def test_newly_found_mirrors_newly_missed():
    base = [row("a", 1.0), row("b", 0.0), row("c", 0.0), row("d", 1.0, split="dev")]
    cur = [row("a", 0.0), row("b", 1.0), row("c", 0.0), row("d", 0.0, split="dev")]
    pairing = gating.Pairing([], k=5).read(base, cur)
    assert (pairing.newly_missed(), pairing.newly_found()) == (["a"], ["b"])


def test_missing_results_at_a_revision_fail_with_that_revision_named():
    result = compare_config(CONFIG, None, BASE, None, dict(FP), gate_of(gate()), against="origin/main")
    assert result["passed"] is False
    assert result["reasons"] == [
        f"no results for {CONFIG} at origin/main (metrics/{CONFIG}.json and metrics/cases/{CONFIG}.parquet): "
        "a new configuration has nothing to compare with there; gate it once it has landed on origin/main"
    ]


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_read_results_at_names_an_unreadable_table_and_a_folder_outside_git(tmp_path):
    repo = tmp_path / "repo"
    (repo / "metrics" / "cases").mkdir(parents=True)
    (repo / "metrics" / f"{CONFIG}.json").write_text(json.dumps(summary([row("a", 1.0)])))
    (repo / "metrics" / "cases" / f"{CONFIG}.parquet").write_text(json.dumps(row("a", 1.0)) + "\n{broken\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "results")
    with pytest.raises(InputError) as err:
        read_results_at("HEAD", [CONFIG], repo)
    assert f"HEAD:metrics/cases/{CONFIG}.parquet: not a readable per-case Parquet table" in str(err.value)

    outside = tmp_path / "outside"
    outside.mkdir()
    with pytest.raises(InputError, match="not inside a git repository"):
        read_results_at("main", [CONFIG], outside)


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_a_revisions_tables_are_fetched_into_a_folder_that_goes_when_the_comparison_ends(tmp_path, monkeypatch):
    repo, scratch = tmp_path / "repo", tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where fetched() makes its folder
    rows = [row("a", 1.0), row("b", 0.5)]
    (repo / "metrics" / "cases").mkdir(parents=True)
    for config in (CONFIG, "broken"):
        (repo / "metrics" / f"{config}.json").write_text(json.dumps(summary(rows)))
    write_table(repo / "metrics" / "cases" / f"{CONFIG}.parquet", rows)
    (repo / "metrics" / "cases" / "broken.parquet").write_text("not parquet\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "results")
    committed = (repo / "metrics" / "cases" / f"{CONFIG}.parquet").read_bytes()
    (repo / "metrics" / "cases" / f"{CONFIG}.parquet").unlink()  # the revision's, not the work tree's

    with baselines.fetched("HEAD") as revision:
        found = baselines.tables_at("HEAD", [CONFIG, "new-config"], repo, revision.folder, ["case_id", "metrics.mrr"])
        assert found["new-config"] is None and found[CONFIG][0] == summary(rows)
        assert found[CONFIG][1] == revision.folder / "metrics" / "cases" / f"{CONFIG}.parquet"
        assert found[CONFIG][1].read_bytes() == committed  # streamed by git, byte for byte
    assert list(scratch.iterdir()) == []

    with pytest.raises(InputError) as err:  # the second table is not one: every fetched file goes too
        with baselines.fetched("HEAD") as revision:
            baselines.tables_at("HEAD", [CONFIG, "broken"], repo, revision.folder)
    assert "HEAD:metrics/cases/broken.parquet: not a readable per-case Parquet table" in str(err.value)
    assert list(scratch.iterdir()) == []

    with pytest.raises(InputError) as err:  # found reading a fetched file later: named as the revision's
        with baselines.fetched("HEAD") as revision:
            results.read_results(baselines.fetch_file("HEAD", "metrics/cases/broken.parquet", repo, revision.folder))
    assert str(revision.folder) not in str(err.value)
    assert "HEAD:metrics/cases/broken.parquet: not a readable per-case Parquet table" in str(err.value)
    assert list(scratch.iterdir()) == []
    with baselines.fetched("HEAD") as revision:
        assert baselines.fetch_file("HEAD", "../metrics/bench.json", repo / "metrics", revision.folder) is None
        assert baselines.fetch_file("HEAD", "metrics/none.parquet", repo, revision.folder) is None
        assert list(revision.folder.rglob("*.parquet")) == []  # nothing half-written of a file git lacks


# ---------------------------------------------------------------- metric direction


def answered(case_id: str, unsupported: float | None, split: str = "eval") -> dict:
    """An abstention case with its human review figure (1.0: answered with a claim)."""
    return {
        "case_id": case_id,
        "split": split,
        "answerable": False,
        "tags": {},
        "metrics": {"recall@5": None, "hit@5": None, "mrr": None, "unsupported_answer": unsupported},
    }


def test_a_lower_is_better_figure_fails_on_a_rise_and_passes_on_a_fall():
    base = [row(c, 1.0) for c in "ab"] + [answered(f"u{i}", 0.0) for i in range(10)]
    worse = [row(c, 1.0) for c in "ab"] + [answered("u0", 1.0)] + [answered(f"u{i}", 0.0) for i in range(1, 10)]
    params = gate(metrics=["recall@5", "unsupported_answer"])
    result = compare(base, worse, params)
    guarded = metric(result, "unsupported_answer")
    assert (guarded["baseline"], guarded["current"], guarded["delta"], guarded["cases"]) == (0.0, 0.1, 0.1, 10)
    assert guarded["higher_is_better"] is False and guarded["failed"] and not result["passed"]
    assert f"FAIL {CONFIG} unsupported_answer: 0.000 -> 0.100 (delta +0.100" in render_verdict(gate_verdict([result]))
    better = compare(worse, base, params)
    assert metric(better, "unsupported_answer")["delta"] == -0.1 and better["passed"]
    # a rise of exactly max_drop passes, as a drop of exactly max_drop does
    base50 = [answered(f"u{i}", 0.0) for i in range(50)]
    rise = [answered("u0", 1.0)] + base50[1:]
    assert compare(base50 + [row("a", 1.0)], rise + [row("a", 1.0)], params)["passed"]


def test_significance_looks_at_the_bad_side_of_the_interval():
    base = [row("a", 1.0)] + [answered(f"u{i}", 0.0) for i in range(8)]
    one = [row("a", 1.0), answered("u0", 1.0)] + [answered(f"u{i}", 0.0) for i in range(1, 8)]
    every = [row("a", 1.0)] + [answered(f"u{i}", 1.0) for i in range(8)]
    strict = gate(metrics=["unsupported_answer"], require_significance=True)
    assert not metric(compare(base, one, strict), "unsupported_answer")["failed"]  # CI includes 0
    assert metric(compare(base, every, strict), "unsupported_answer")["failed"]  # CI is [1, 1]


def test_a_review_figure_without_answers_is_refused_with_the_fix():
    base = [row("a", 1.0), answered("u0", 0.0)]
    cur = [row("a", 1.0), answered("u0", None)]
    result = compare(base, cur, gate(metrics=["unsupported_answer"]))
    assert not result["valid"] and not result["passed"]
    assert f"record answers in data/answers/{CONFIG}.jsonl" in result["reasons"][0]


# ------------------------------------------------------------------ the verdict, decided once


def test_the_unrounded_verdict_file_renders_what_was_decided_and_the_rounded_one_keeps_its_bytes(tmp_path):
    """The verdict stage writes metrics/gate.json (figures rounded to 6 places, as every
    committed output) and data/verdict.json (every float's bits), and the report and the
    gate render the second: printing a figure already rounded to 6 places can move its
    last digit, so the rounded file would print another verdict than the one decided."""
    from ragvet.gating.decision import read_verdict, write_verdict
    from ragvet.storage.files import dumps, read_json

    cur = [row("a", 1.0), row("b", 0.5), row("c", 0.5), row("d", 0.5), row("x", None, None)]
    verdict = gate_verdict([compare(BASE, cur)])
    recall = metric(verdict["configs"][0], "recall@5")
    recall.update(current=0.9404997809283352, p_corrected=0.001635311621127642)  # each a 6th-place tie away
    write_verdict(verdict, tmp_path / "gate.json", tmp_path / "verdict.json")

    assert (tmp_path / "gate.json").read_text() == dumps(verdict)  # the committed file, as the gate always wrote it
    exact = read_verdict(tmp_path / "verdict.json")
    assert exact == json.loads(json.dumps(verdict)) and render_verdict(exact) == render_verdict(verdict)
    assert f"FAIL {CONFIG} recall@5: 0.750 -> 0.940 (delta -0.125" in render_verdict(exact)
    assert "corrected p 0.00164, 4 cases)" in render_verdict(exact)
    rounded = render_verdict(read_json(tmp_path / "gate.json"))
    assert "0.750 -> 0.941 " in rounded and "corrected p 0.00163," in rounded  # why the report reads the other


def test_a_file_that_is_no_verdict_is_refused_with_the_fix(tmp_path):
    from ragvet.gating.decision import read_verdict

    (tmp_path / "verdict.json").write_text('{"configs": []}\n')
    with pytest.raises(InputError) as err:
        read_verdict(tmp_path / "verdict.json")
    (problem,) = err.value.problems
    assert problem.what == "not a verdict: no `passed` and `configs`" and "dvc repro" in problem.fix


def test_the_gate_stage_exits_by_the_verdict_file_and_decides_nothing(tmp_path, monkeypatch):
    """``ragvet gate --verdict``, as dvc.yaml's last stage runs it: the verdict stage decided,
    and the gate prints that verdict and exits 0 or 1 by it; a verdict edited by hand shows."""
    from typer.testing import CliRunner

    from ragvet.cli import app
    from ragvet.gating import decision

    def no_second_verdict(*args, **kwargs):
        raise AssertionError("the gate decided the verdict again")

    monkeypatch.setattr(gating, "gate_all", no_second_verdict)
    monkeypatch.setattr(decision, "gate_all", no_second_verdict)
    monkeypatch.chdir(tmp_path)  # no DVC project: nothing records how the file was made, nothing is stale
    verdict = gate_verdict([compare(BASE, BASE)])
    Path("verdict.json").write_text(json.dumps(verdict))
    passed = CliRunner().invoke(app, ["gate", "--verdict", "verdict.json"])
    assert passed.exit_code == 0 and passed.output == render_verdict(verdict) + "\n"
    verdict["configs"][0] |= {"passed": False, "reasons": ["edited by hand"]}
    verdict["passed"] = False
    Path("verdict.json").write_text(json.dumps(verdict))
    failed = CliRunner().invoke(app, ["gate", "--verdict", "verdict.json"])
    assert failed.exit_code == 1 and f"INVALID {CONFIG}: edited by hand\n" in failed.output
    assert "gate: FAILED" in failed.output
    both = CliRunner().invoke(app, ["gate", "--verdict", "verdict.json", "--against", "main"])
    assert both.exit_code == 2 and "--verdict reads a verdict; --against and --out decide one" in both.output


# ------------------------------------------------------------------ baseline integrity

TWENTY_FIVE = [f"c{n:02d}" for n in range(25)]


def counted(rows: list[dict], fp: dict = FP) -> dict:
    """:func:`summary` with the eval split's denominators, as evaluate writes them."""
    found = summary(rows, fp)
    evals = [r for r in rows if r["split"] == "eval"]
    answerable = sum(1 for r in evals if r["answerable"])
    found["eval"]["denominators"] = {"cases": answerable, "abstention_cases": len(evals) - answerable}
    return found


def split_of(rows: list[dict], fp: dict = FP) -> dict:
    """The frozen split record those rows were evaluated on (data/split.json)."""
    cases = {r["case_id"]: {"split": r["split"], "fingerprint": f"f-{r['case_id']}"} for r in rows}
    return {"fingerprints": {**fp, "dev_split": "d1"}, "cases": cases}


def held_split(rows: list[dict]) -> SplitOutline:
    """:func:`split_of` as the gate reads it."""
    return SplitOutline.held(split_of(rows))


def project_with(
    tmp_path: Path, base_rows: list[dict], base_summary: dict, cur_rows: list[dict], cur_fp: dict = FP
) -> dict:
    """A committed baseline and current results on disk, as the verdict stage reads them."""
    (tmp_path / "metrics" / "baseline").mkdir(parents=True)
    (tmp_path / "metrics" / "baseline" / f"{CONFIG}.json").write_text(json.dumps(base_summary))
    write_table(tmp_path / "metrics" / "baseline" / "cases" / f"{CONFIG}.parquet", base_rows)
    write_table(tmp_path / "metrics" / "cases" / f"{CONFIG}.parquet", cur_rows)
    (tmp_path / "metrics" / f"{CONFIG}.json").write_text(json.dumps(counted(cur_rows, cur_fp)))
    (tmp_path / "split.json").write_text(json.dumps(split_of(cur_rows)))
    return {
        "cases_dir": tmp_path / "metrics" / "cases",
        "split": tmp_path / "split.json",
        "baseline": tmp_path / "metrics" / "baseline",
    }


def broken_change() -> tuple[list[dict], list[dict]]:
    """30 eval cases; the change breaks 25 of them."""
    base = [row(case_id, 1.0) for case_id in TWENTY_FIVE] + [row(f"k{n}", 1.0) for n in range(5)]
    current = [row(case_id, 0.0, 0.0) for case_id in TWENTY_FIVE] + [row(f"k{n}", 1.0) for n in range(5)]
    return base, current


def test_a_baseline_table_without_the_cases_a_change_broke_is_refused(tmp_path):
    """A pull request that breaks 25 cases and deletes their rows from the baseline table
    passed: the gate pairs only the cases both tables hold."""
    base, current = broken_change()
    kept = [r for r in base if r["case_id"] not in TWENTY_FIVE]
    assert compare(kept, current)["passed"]  # the pairing alone cannot see it
    where = project_with(tmp_path, kept, counted(base), current)
    with pytest.raises(InputError) as caught:
        decide(gate_of(gate()), where["cases_dir"], where["split"], where["baseline"], None, None)
    rendered = caught.value.render()
    table = where["baseline"] / "cases" / f"{CONFIG}.parquet"
    assert (
        f"{table}: the baseline table holds 5 eval-split cases, and its summary "
        f"{where['baseline'] / f'{CONFIG}.json'} counts 30" in rendered
    )
    assert "ragvet baseline accept" in rendered
    # With the summary's counts edited to match, the split the summary names still holds them.
    problems = baseline_problems(
        CONFIG, counted(kept), results.results_frame(kept), where["baseline"], held_split(base)
    )
    [problem] = problems
    assert problem.where == str(table)
    assert problem.what.startswith(
        "its summary's eval split fingerprint is the current split's, and it lacks 25 of that split's eval cases "
        "(c00, c01, c02, c03, c04, ...)"
    )
    assert "ragvet baseline accept" in problem.fix


def test_a_large_split_record_finds_the_missing_cases_without_being_held(tmp_path, monkeypatch):
    """Past LARGE_SPLIT bytes the split's entries are scanned from the file: an intact
    baseline passes on the digest of its eval ids, a table without 25 of them gets the
    problem the whole record gives, and an eval case the split has not is named too."""
    base, _ = broken_change()
    write_json(tmp_path / "split.json", split_of(base))
    monkeypatch.setattr(records, "LARGE_SPLIT", 0)
    outline = split_outline(tmp_path / "split.json")
    assert outline.scanned and outline.record == {"fingerprints": {**FP, "dev_split": "d1"}}
    monkeypatch.setattr(records, "_BLOCK", 64)  # the entries' blocks cut entries
    assert baseline_problems(CONFIG, counted(base), results.results_frame(base), Path("b"), outline) == []
    kept = [r for r in base if r["case_id"] not in TWENTY_FIVE] + [row("zz", 1.0)]
    [problem] = baseline_problems(CONFIG, counted(kept), results.results_frame(kept), Path("b"), outline)
    assert problem.what == (
        "its summary's eval split fingerprint is the current split's, and it lacks 25 of that split's eval cases "
        "(c00, c01, c02, c03, c04, ...); it holds 1 eval cases the split has not (zz)"
    )


def test_a_baseline_table_with_a_duplicated_case_is_refused():
    base, _ = broken_change()
    doubled = [*base, row("c00", 1.0)]
    frame = results.results_frame(doubled)
    problems = baseline_problems(CONFIG, counted(base), frame, Path("metrics/baseline"), held_split(base))
    whats = [p.what for p in problems]
    assert "the baseline table holds case c00 2 times: a comparison pairs each case once" in whats
    assert all(p.where == f"metrics/baseline/cases/{CONFIG}.parquet" for p in problems)


def test_an_intact_baseline_passes_the_integrity_check_and_the_gate_fails_on_the_drop(tmp_path):
    base, current = broken_change()
    assert baseline_problems(CONFIG, counted(base), results.results_frame(base), Path("b"), held_split(base)) == []
    where = project_with(tmp_path, base, counted(base), current)
    verdict = decide(gate_of(gate()), where["cases_dir"], where["split"], where["baseline"], None, None)
    assert not verdict["passed"]
    (result,) = verdict["configs"]
    assert result["valid"] and result["skipped"] == [] and metric(result, "recall@5")["failed"]


def test_decide_reads_the_current_chunking_from_the_summary_beside_the_per_case_tables(tmp_path):
    """The verdict stage's current side is the per-case table; its chunking fingerprint is
    in ``metrics/<config>.json`` beside it: another chunking there skips recall@5 and mrr."""
    base, current = broken_change()
    where = project_with(tmp_path, base, counted(base), current, {**FP, "chunking": "k2"})
    verdict = decide(gate_of(gate()), where["cases_dir"], where["split"], where["baseline"], None, None)
    (result,) = verdict["configs"]
    reason = "not comparable across chunkings (baseline chunking k1, current k2)"
    assert [(s["metric"], s["reason"]) for s in result["skipped"]] == [
        ("recall@5", reason),
        ("mrr", reason),
        ("recall@5", reason),  # the slice metric: its slices are not compared either
    ]
    assert not verdict["passed"] and result["metrics"] == [] and "nothing was compared" in result["reasons"][0]


# ------------------------------------------------------------------ committed artefacts of the wrong types


def _retyped_table(path: Path, name: str, values: list) -> None:
    frame = results.read_results(path)
    results.write_results(path, frame.with_columns(pl.Series(name, values)))


def _summary_with(fingerprints: dict | None = None, **figures) -> dict:
    """The intact baseline's summary with its ``fingerprints`` or eval ``figures`` replaced."""
    found = counted(broken_change()[0])
    found["eval"].update(figures)
    return {**found, "fingerprints": fingerprints or found["fingerprints"]}


@pytest.mark.parametrize(
    ("corrupt", "where", "what"),
    [
        (
            lambda w: _retyped_table(w["table"], "case_id", list(range(30))),
            "table",
            "column case_id holds Int64 values, a per-case table's holds String",
        ),
        (
            lambda w: _retyped_table(w["table"], "metrics.recall@5", ["1.0"] * 30),
            "table",
            "column metrics.recall@5 holds String values, a per-case table's holds numbers",
        ),
        (lambda w: w["summary"].write_text("[]"), "summary", "a summary is a JSON object, this one is a list"),
        (
            lambda w: w["summary"].write_text(json.dumps({**counted(broken_change()[0]), "fingerprints": ["e1"]})),
            "summary",
            "`fingerprints` must be an object, got a list",
        ),
        (
            lambda w: w["summary"].write_text(json.dumps(_summary_with(fingerprints={**FP, "corpus": 7}))),
            "summary",
            "`fingerprints.corpus` must be text, got a number",
        ),
        (
            lambda w: w["summary"].write_text(json.dumps(_summary_with(metrics={"recall@5": "0.9", "mrr": 0.5}))),
            "summary",
            "`eval.metrics` holds text '0.9' for recall@5: each must be a finite number, or null when no case counted",
        ),
        (
            lambda w: w["summary"].write_text(json.dumps(_summary_with(denominators={"cases": "25"}))),
            "summary",
            "`eval.denominators` holds text '25' for cases: each must be a whole number of at least 0",
        ),
        (
            lambda w: w["summary"].write_text(json.dumps(_summary_with(denominators={"cases": 25.5}))),
            "summary",
            "`eval.denominators` holds a number 25.5 for cases: each must be a whole number of at least 0",
        ),
        (
            lambda w: w["summary"].write_text(json.dumps(_summary_with(metrics=[0.9]))),
            "summary",
            "`eval.metrics` must be an object, got a list",
        ),
        (
            lambda w: w["split"].write_text(json.dumps({**split_of(broken_change()[1]), "fingerprints": "e1"})),
            "split",
            "`fingerprints` must be an object, got text",
        ),
        (
            lambda w: w["split"].write_text(
                json.dumps({**split_of(broken_change()[1]), "fingerprints": {**FP, "dev_split": 7}})
            ),
            "split",
            "`fingerprints.dev_split` must be text, got a number",
        ),
        (
            lambda w: w["split"].write_text(json.dumps({"fingerprints": {**FP, "dev_split": "d1"}})),
            "split",
            "`cases` is missing: the split of each case",
        ),
        (
            lambda w: w["split"].write_text(
                json.dumps({**split_of(broken_change()[1]), "cases": {"q1": {"split": "test"}, "q2": "eval"}})
            ),
            "split",
            "cases q1, q2 have no split 'dev' or 'eval'",
        ),
    ],
)
def test_a_committed_artefact_of_the_wrong_types_is_refused_at_its_file(tmp_path, corrupt, where, what):
    """Each parsed, then crashed the gate (a traceback) or compared nonsense."""
    base, current = broken_change()
    paths = project_with(tmp_path, base, counted(base), current)
    files = {
        "table": paths["baseline"] / "cases" / f"{CONFIG}.parquet",
        "summary": paths["baseline"] / f"{CONFIG}.json",
        "split": paths["split"],
    }
    corrupt(files)
    with pytest.raises(InputError) as caught:
        decide(gate_of(gate()), paths["cases_dir"], paths["split"], paths["baseline"], None, None)
    [problem] = caught.value.problems
    assert (problem.where, problem.what) == (str(files[where]), what)
    assert problem.fix


LATENCY = {"p95_ms": 10.0, "p50_ms": 5.0, "machine": {"cpu": "x"}, "per_query": "timed"}


@pytest.mark.parametrize(
    ("record", "what"),
    [
        ([LATENCY], "a latency record is a JSON object, this one is a list"),
        ({**LATENCY, "p95_ms": "10"}, "`p95_ms` must be a finite number of milliseconds or null, got text '10'"),
        ({**LATENCY, "p95_ms": math.nan}, "`p95_ms` must be a finite number of milliseconds or null, got a number nan"),
        ({**LATENCY, "machine": ["x"]}, "`machine` must be an object, got a list"),
    ],
)
def test_a_baseline_latency_record_of_the_wrong_types_is_refused(tmp_path, record, what):
    """A list or a text p95 crashed the check; a NaN p95 passed it as "+nan%"."""
    accepted, measured = tmp_path / "metrics" / "baseline" / "latency", tmp_path / "latency"
    accepted.mkdir(parents=True)
    measured.mkdir()
    (accepted / f"{CONFIG}.json").write_text(json.dumps(record))
    (measured / f"{CONFIG}.json").write_text(json.dumps(LATENCY))
    with pytest.raises(InputError) as caught:
        latency_pairs(0.1, [CONFIG], tmp_path / "metrics" / "baseline", measured, None)
    [problem] = caught.value.problems
    assert (problem.where, problem.what) == (str(accepted / f"{CONFIG}.json"), what)
    assert "ragvet baseline accept" in problem.fix


POLICY = "Parental leave is 16 weeks. Leave is 25 days a year."


def _edited_fp(text: str, label: str) -> dict:
    """The fingerprints the split stage records for one eval case labelled ``label`` in ``text``."""
    at = text.index(label)
    case = Case("a", "How long is leave?", True, (EvidenceUnit("d", at, at + len(label)),))
    record = freeze_split([case], [Doc("d", text)], "salt", 1.0)
    return {**record["fingerprints"], "chunking": "k1"}


def test_the_gate_compares_across_a_corpus_edit_that_only_moved_labels():
    before = _edited_fp(POLICY, "Leave is 25 days")
    moved = _edited_fp("New from May. " + POLICY, "Leave is 25 days")
    assert moved["corpus"] != before["corpus"] and moved["eval_split"] == before["eval_split"]
    result = compare(BASE, BASE, base_fp=before, cur_fp=moved)
    assert result["valid"] and result["passed"] and [m["cases"] for m in result["metrics"]] == [4, 4]
    [note] = result["notes"]
    assert note.startswith(f"corpus changed (baseline {before['corpus']}, current {moved['corpus']})")
    assert f"NOTE {CONFIG}: corpus changed" in render_verdict(gate_verdict([result]))
    dropped = compare(BASE, [row("a", 0.0), *BASE[1:]], base_fp=before, cur_fp=moved)
    assert dropped["valid"] and not dropped["passed"]  # the edit's effect on retrieval is gated


def test_the_gate_refuses_a_label_changed_in_meaning_until_the_baseline_is_accepted():
    before = _edited_fp(POLICY, "Leave is 25 days")
    changed = _edited_fp(POLICY.replace("25 days", "30 days"), "Leave is 30 days")
    result = compare(BASE, BASE, base_fp=before, cur_fp=changed)
    assert not result["valid"] and not result["passed"] and "notes" not in result
    assert result["reasons"][0].startswith(
        f"eval-split fingerprint differs (baseline {before['eval_split']}, current {changed['eval_split']}): "
        "labels changed: re-baseline deliberately with `ragvet baseline accept`"
    )
    assert compare(BASE, BASE, base_fp=changed, cur_fp=changed)["passed"]  # once accepted as the baseline


def test_files_at_reads_a_revisions_files_in_one_batch_from_any_folder_of_the_repo(tmp_path):
    """Committed files come back byte for byte (a newline-named one too), from the root or a
    subfolder; a path the revision lacks, or a folder, is no file."""
    (tmp_path / "data" / "corpus").mkdir(parents=True)
    files = {"data/corpus/a.md": b"first\r\n\x00bytes\n", "data/corpus/b\nc.md": b"odd name", "data/empty.md": b""}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"]):
        subprocess.run(["git", *args], cwd=tmp_path, check=True)
    (tmp_path / "data/corpus/a.md").write_bytes(b"edited since")
    wanted = [*files, "data/missing.md", "data/corpus"]
    assert files_at("HEAD", wanted, tmp_path) == {**files, "data/missing.md": None, "data/corpus": None}
    assert files_at("HEAD", ["corpus/a.md", "empty.md"], tmp_path / "data") == {
        "corpus/a.md": files["data/corpus/a.md"],
        "empty.md": b"",
    }


def test_files_at_without_git_says_so_with_the_fix(tmp_path, monkeypatch):
    """Every git call reading a revision goes through one runner: without git on the PATH,
    reading a revision's files is a clear error, not a traceback."""
    monkeypatch.setenv("PATH", str(tmp_path))  # a folder without git
    with pytest.raises(InputError) as raised:
        files_at("HEAD", ["a.md"], tmp_path)
    assert [(p.what, p.fix) for p in raised.value.problems] == [
        ("git is not installed", "install git to compare with a revision")
    ]


def test_cases_left_out_of_the_eval_split_are_named_the_rest_compared_and_the_gate_refuses(tmp_path):
    """Case c's label was orphaned by a corpus edit (`status: orphaned`): it left the eval split,
    so its fingerprint moved; the gate compares a, b and d, names c, and passes only once the
    results are accepted as the baseline."""
    current = [row("a", 1.0), row("b", 1.0), row("d", 0.0), row("x", None, None)]
    where = project_with(tmp_path, BASE, counted(BASE), current)
    record = {**split_of(current, {**FP, "eval_split": "e2"}), "left_out": {"eval": {"c": "orphaned"}, "dev": {}}}
    where["split"].write_text(json.dumps(record))
    verdict = decide(gate_of(gate()), where["cases_dir"], where["split"], where["baseline"], None, None)
    [result] = verdict["configs"]
    assert not verdict["passed"] and not result["valid"] and result["fingerprints_differ"]
    assert [(m["metric"], m["cases"], m["baseline"], m["current"]) for m in result["metrics"]] == [
        ("recall@5", 3, 2.5 / 3, 2 / 3),
        ("mrr", 3, 1.0, 1.0),
    ]
    [reason] = result["reasons"]
    assert reason.startswith("eval-split fingerprint differs (baseline e1, current e2): labels changed: re-baseline")
    assert reason.endswith(
        ". Left out of the eval split (compared without them): c (orphaned); relabel them "
        "(`ragvet relabel --accept FILE`) or remove them, then re-baseline"
    )
    text = render_verdict(verdict)
    assert f"INVALID {CONFIG}: eval-split fingerprint differs" in text and "c (orphaned)" in text
    assert f"FAIL {CONFIG} recall@5: 0.833 -> 0.667" in text and text.endswith("gate: FAILED\n")
    accepted = compare(current, current, base_fp={**FP, "eval_split": "e2"}, cur_fp=record["fingerprints"])
    assert accepted["passed"]  # once `ragvet baseline accept` took these results
    pending = {**record, "left_out": {"eval": {"c": "pending"}, "dev": {"y": "orphaned"}}}
    where["split"].write_text(json.dumps(pending))
    [again] = decide(gate_of(gate()), where["cases_dir"], where["split"], where["baseline"], None, None)["configs"]
    assert "compared without them): c (pending review);" in again["reasons"][0]  # the dev split's y is not named


def test_the_report_compares_by_the_same_fingerprints_and_names_the_eval_cases_left_out():
    record = {
        "fingerprints": {**FP, "eval_split": "e2"},
        "left_out": {"eval": {"c": "orphaned"}, "dev": {"y": "pending"}},
    }
    assert split_fingerprints(record) == {**FP, "eval_split": "e2", "left_out": {"c": "orphaned"}}
    assert split_fingerprints({"fingerprints": FP}) == FP
    [entry] = compare_configs(
        {CONFIG: BASE}, {CONFIG: (summary(BASE), BASE)}, split_fingerprints(record), [5], gate_of(gate())
    )
    assert entry["reason"].startswith("eval-split fingerprint differs (baseline e1, current e2): labels changed")
    assert entry["reason"].endswith(
        "(compared without them): c (orphaned); relabel them (`ragvet relabel --accept FILE`) or remove them, "
        "then re-baseline"
    )


def test_the_verdict_read_a_batch_of_cases_at_a_time_is_the_verdict_of_the_whole_tables(tmp_path, monkeypatch):
    """Against the committed baseline, decide pairs the two Parquet tables a batch of cases at
    a time (here 4 rows, in row groups of 3): a batch cut between paired cases, an abstention
    case with null metrics on both sides, a dev case and an eval case only the current side
    holds give the bytes of the verdict on the same tables passed whole."""
    base = [row(f"c{n:02}", 1.0, t="ab"[n % 2]) for n in range(12)]
    base += [row("d1", 1.0, split="dev"), row("n1", None, None, t="a")]
    current = [row(f"c{n:02}", 0.0 if n < 6 else 1.0, t="ab"[n % 2]) for n in range(12)]
    current += [row("c99", 1.0, t="a"), row("d1", 0.0, split="dev"), row("n1", None, None, t="a")]
    where = project_with(tmp_path, base, counted(base), current)
    (where["split"]).write_text(json.dumps(split_of(base)))  # the baseline's cases; c99 joined after
    tables = [where["baseline"] / "cases" / f"{CONFIG}.parquet", where["cases_dir"] / f"{CONFIG}.parquet"]
    for path, rows in zip(tables, (base, current)):
        results.results_frame(sorted(rows, key=lambda r: r["case_id"])).write_parquet(path, row_group_size=3)
    monkeypatch.setattr(gating, "TABLE_BATCH_ROWS", 4)
    monkeypatch.setattr(baselines, "BATCH_ROWS", 4)
    settings = gate_of(gate(), slices=["t"])
    streamed = decide(settings, where["cases_dir"], where["split"], where["baseline"], None, None)
    frames = [results.read_results(path) for path in tables]
    whole = decide(
        settings,
        where["cases_dir"],
        where["split"],
        where["baseline"],
        None,
        None,
        current={CONFIG: frames[1]},
        baselines={CONFIG: (counted(base), frames[0])},
    )
    assert exact_text(streamed) == exact_text(whole)
    [result] = streamed["configs"]
    assert result["newly_missed"] == ["c00", "c01", "c02", "c03", "c04", "c05"]
    assert [(m["metric"], m["cases"], m["baseline"], m["current"]) for m in result["metrics"]] == [
        ("recall@5", 12, 1.0, 0.5),
        ("mrr", 12, 1.0, 1.0),
    ]
    assert [(s["value"], s["cases"], s["current"]) for s in result["slices"]] == [("a", 6, 0.5), ("b", 6, 0.5)]
