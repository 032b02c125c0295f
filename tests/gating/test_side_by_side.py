"""Many configurations against one baseline configuration: `ragvet compare` and the
report's table, with hand-computed figures, and `--exp` over real `dvc exp run`s."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from builders import gate_of
from repos import GRID, ROOT, exp_refs, ragvet, sh
from statsmodels.stats.multitest import multipletests

from ragvet.gating.side_by_side import comparable_metrics, side_by_side
from ragvet.reporting.side_by_side import side_by_side_section
from ragvet.storage.results import read_results, result_rows

GATE = {
    "correction": "holm",
    "permutation": {"resamples": 5000, "seed": 1},
    "bootstrap": {"resamples": 200, "seed": 2, "confidence": 0.95},
}
EV, CTX = "evidence_recall@5", "context_chars@5"


def rows(evidence: list[float], context: list[float]) -> list[dict]:
    return [
        {"case_id": f"c{i}", "split": "eval", "metrics": {EV: e, CTX: c}}
        for i, (e, c) in enumerate(zip(evidence, context))
    ] + [{"case_id": "dev", "split": "dev", "metrics": {EV: 0.0, CTX: 9999.0}}]


BASE = rows([1, 0.5, 0, 1], [100, 200, 300, 400])
TABLE_ROWS = {
    "a-base": BASE,
    # evidence deltas 0, +0.5, +0.5, -1: 2 wins, 1 tie, 1 loss; context 50, -50, 0, 100 (lower is better)
    "b": rows([1, 1, 0.5, 0], [150, 150, 300, 500]),
    "c": BASE,
    "d": None,
}


def test_every_configuration_against_the_baseline_by_hand():
    table = side_by_side(TABLE_ROWS, "a-base", [EV, CTX], gate_of(GATE))
    by_name = {entry["name"]: entry for entry in table["entries"]}
    ev, ctx = by_name["b"]["metrics"]
    assert (ev["baseline"], ev["current"], ev["delta"], ev["cases"]) == (0.625, 0.625, 0.0, 4)
    assert (ev["wins"], ev["ties"], ev["losses"]) == (2, 1, 1)
    # nonzero deltas .5, .5, -1 sum to 0: every one of the 8 sign vectors reaches |0|
    assert ev["p_value"] == 1.0
    assert (ctx["current"], ctx["delta"], ctx["wins"], ctx["ties"], ctx["losses"]) == (275.0, 25.0, 1, 1, 2)
    # nonzero deltas 50, -50, 100: |sum| >= 100 for 6 of 8 sign vectors
    assert ctx["p_value"] == pytest.approx(6 / 8)
    unchanged = by_name["c"]["metrics"][0]
    assert (unchanged["delta"], unchanged["p_value"], unchanged["ties"]) == (0.0, 1.0, 4)
    assert by_name["d"]["reason"].startswith("no results") and by_name["d"]["metrics"] == []
    assert by_name["a-base"]["baseline"] and by_name["a-base"]["metrics"][0]["current"] == 0.625
    # the family: b and c, two metrics each; the baseline compares with nothing
    raw = [m["p_value"] for name in ("b", "c") for m in by_name[name]["metrics"]]
    assert table["family"] == {"size": 4, "correction": "holm", "alpha": 0.05, "significance": True}
    assert [m["p_corrected"] for name in ("b", "c") for m in by_name[name]["metrics"]] == pytest.approx(
        list(multipletests(raw, method="holm")[1])
    )


def test_significance_marks_follow_the_correction():
    base = rows([0.0] * 6, [100] * 6)
    better = rows([1.0] * 6, [100] * 6)  # 6 wins: exact p = 2/64 = 0.03125
    table_rows = {"base": base, "x": better, "y": better}
    alone = side_by_side({"base": base, "x": better}, "base", [EV], gate_of(GATE))
    assert alone["entries"][1]["metrics"][0]["p_corrected"] == pytest.approx(2 / 64)
    assert alone["entries"][1]["metrics"][0]["significant"]
    # two such tests under Holm: 2 x 0.03125 = 0.0625 >= 0.05, no mark; uncorrected, both marked
    holm = side_by_side(table_rows, "base", [EV], gate_of(GATE))
    assert [e["metrics"][0]["significant"] for e in holm["entries"][1:]] == [False, False]
    none = side_by_side(table_rows, "base", [EV], gate_of({**GATE, "correction": "none"}))
    assert [e["metrics"][0]["significant"] for e in none["entries"][1:]] == [True, True]
    text = "\n".join(side_by_side_section(none, 0.95))
    assert "| `x` | 1.000 | +1.000 ✱ | [+1.000, +1.000] | 0.0312 | 6/0/0 | 6 |\n" in text + "\n"
    assert "| `base` (baseline) | 0.000 | – | – | – | – | 6 |\n" in text + "\n"
    assert "2 tests (every configuration and metric against the baseline configuration) form one family" in text


def test_each_mean_says_over_how_many_cases_it_was_taken():
    """A configuration with no value on some cases (a span metric on `{any}` evidence) is
    averaged over the cases it has: the row says how many."""
    partial = rows([1.0, None, 1.0, None], [100, 200, 300, 400])
    table = side_by_side({"base": BASE, "x": partial}, "base", [EV], gate_of(GATE))
    text = "\n".join(side_by_side_section(table, 0.95)) + "\n"
    # paired over c0 and c2 only: means 1.0 and 0.5 (base c0 = 1, c2 = 0), one win, one tie
    assert "| `x` | 1.000 | +0.500 | [0.000, +1.000] | 1 | 1/1/0 | 2 |\n" in text
    assert "| `base` (baseline) | 0.625 | – | – | – | – | 4 |\n" in text
    assert "each mean is over its row's `cases`" in text


def test_relabelled_entries_are_kept_out_with_the_reason():
    fps = {"base": {"eval_split": "e1", "corpus": "c1"}, "x": {"eval_split": "e2", "corpus": "c1"}}
    table = side_by_side({"base": BASE, "x": BASE}, "base", [EV], gate_of(GATE), fps)
    entry = table["entries"][1]
    assert entry["metrics"] == [] and "eval-split fingerprint differs (baseline e1, current e2)" in entry["reason"]
    assert table["family"]["size"] == 0


def test_comparable_metrics_are_the_registrys():
    # budget metrics are cut at a budget, not at k: named with --metric, never listed at k
    assert comparable_metrics(5) == [
        "evidence_recall@5",
        "claim_availability@5",
        "context_chars@5",
        "span_precision@5",
        "span_iou@5",
    ]


def _mean(table: Path | bytes, metric: str) -> float:
    """The plain eval-split mean of one per-case table's metric."""
    values = [r["metrics"][metric] for r in result_rows(read_results(table)) if r["split"] == "eval"]
    values = [v for v in values if v is not None]
    return sum(values) / len(values)


def test_ragvet_compare_on_the_committed_sample():
    done = ragvet(ROOT, "compare", "--metric", "evidence_recall@5", check=True)
    expected = _mean(ROOT / "metrics/cases/sentences-600-dense.parquet", "evidence_recall@5")
    assert "## Every configuration against `sentences-600-bm25`" in done.stdout
    assert f"| `sentences-600-dense` | {expected:.3f} |" in done.stdout
    assert "7 tests (every configuration and metric against the baseline configuration)" in done.stdout


def test_ragvet_compare_refuses_an_unknown_baseline_and_metric():
    done = ragvet(ROOT, "compare", "--baseline", "nope")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--baseline: unknown configuration 'nope'" in done.stderr + done.stdout
    done = ragvet(ROOT, "compare", "--metric", "recal@5")
    assert done.returncode == 2 and "unknown metric 'recal@5'" in done.stderr + done.stdout


def test_ragvet_compare_exp_reads_real_dvc_experiments(experiments, tmp_path):
    """The session's grid of real `dvc exp run`s (conftest.experiments): each experiment's
    figures are the means of the per-case table its commit holds."""
    config = "headings-1200-bm25"
    head = sh(experiments, "git", "rev-parse", "HEAD").stdout.strip()
    out = tmp_path / "table.json"
    done = ragvet(experiments, "compare", "--exp", "--baseline", config, "--out", str(out), check=True)
    table = json.loads(out.read_text())
    base_name = f"{config}@{head[:7]}"
    assert table["baseline"] == base_name and f"## Every experiment against `{base_name}`" in done.stdout
    names = [f"{kind}-{size}" for kind in ("q", "seq") for size in GRID]
    assert [e["name"] for e in table["entries"]] == sorted([base_name, *names])
    path = f"metrics/cases/{config}.parquet"
    revs = {name: rev for name, (rev, _) in exp_refs(experiments).items()}
    means = {}
    for entry in table["entries"]:
        rev = head if entry["baseline"] else revs[entry["name"]]
        committed = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=experiments, capture_output=True, check=True)
        means[entry["name"]] = _mean(committed.stdout, EV)
        assert entry["metrics"][0]["current"] == pytest.approx(means[entry["name"]])
    assert {means[f"seq-{size}"] for size in GRID} != {means[base_name]}  # the experiments moved
    assert table["metrics"] == comparable_metrics(5)
    assert table["family"]["size"] == len(names) * len(comparable_metrics(5))
