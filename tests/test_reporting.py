"""The markdown report and the plot rows."""

from __future__ import annotations

import pytest

from stages.reporting import plot_rows, render_report, summary_k

KS = [1, 3, 5, 10]


def summary(name: str, chunking: str, scale: float, eval_fp: str = "e1") -> dict:
    metrics = {"mrr": 0.5 * scale}
    for k in KS:
        metrics |= {
            f"recall@{k}": 0.1 * k * scale / 2,
            f"hit@{k}": min(1.0, 0.2 * k * scale),
            f"evidence_recall@{k}": 0.08 * k * scale,
            f"claim_availability@{k}": 0.09 * k * scale,
            f"claim_availability_pooled@{k}": 0.07 * k * scale,
            f"context_chars@{k}": 600.0 * k,
        }
    metrics["claim_availability@1"] = None
    split = {
        "metrics": metrics,
        "denominators": {
            "cases": 40,
            "abstention_cases": 3,
            "cases_with_claims": 30,
            "cases_without_claims": 10,
            "claims": 55,
            "duplicates_removed": 2,
        },
    }
    dev = {"metrics": {f"evidence_recall@{k}": 0.5 for k in KS}, "denominators": {"cases": 12, "abstention_cases": 1}}
    return {
        "config": name,
        "chunking": chunking,
        "retriever": "bm25",
        "eval": split,
        "dev": dev,
        "abstention": {
            "eval": {
                "cases": 3,
                "top1_score": {"min": 1.25, "median": 2.5, "max": 7.0},
                "abstain_rate": None,
                "false_abstain_rate": None,
            },
            "dev": {"cases": 1, "top1_score": None, "abstain_rate": None, "false_abstain_rate": None},
        },
        "fingerprints": {"eval_split": eval_fp, "corpus": "c1"},
    }


SUMMARIES = {
    "sentences-600-bm25": summary("sentences-600-bm25", "sentences-600", 1.0),
    "fixed-300-bm25": summary("fixed-300-bm25", "fixed-300", 0.5),
}
BASELINE = {"sentences-600-bm25": summary("sentences-600-bm25", "sentences-600", 1.25)}


def test_summary_k_picks_largest_k_up_to_five_else_smallest():
    assert summary_k([1, 3, 5, 10]) == 5
    assert summary_k([10, 2]) == 2
    assert summary_k([20, 10]) == 10


def test_report_tables_rows_and_numbers():
    text = render_report(SUMMARIES, BASELINE, ["sentences-600-bm25"], KS)
    lines = text.splitlines()
    assert text.index("## eval split") < text.index("## dev split")
    # Evidence recall at every k, configs sorted, denominators beside.
    assert (
        "| config | evidence_recall@1 | evidence_recall@3 | evidence_recall@5 | evidence_recall@10 | cases "
        "| abstention cases |" in lines
    )
    assert "| fixed-300-bm25 | 0.040 | 0.120 | 0.200 | 0.400 | 40 | 3 |" in lines
    assert "| sentences-600-bm25 | 0.080 | 0.240 | 0.400 | 0.800 | 40 | 3 |" in lines
    assert lines.index("| fixed-300-bm25 | 0.040 | 0.120 | 0.200 | 0.400 | 40 | 3 |") < lines.index(
        "| sentences-600-bm25 | 0.080 | 0.240 | 0.400 | 0.800 | 40 | 3 |"
    )
    # Claim availability macro / pooled, None as a dash.
    assert (
        "| sentences-600-bm25 | – / 0.070 | 0.270 / 0.210 | 0.450 / 0.350 | 0.900 / 0.700 | 30 | 55 | 10 | 3 |" in lines
    )
    # Single-k table at k=5.
    assert "| sentences-600-bm25 | sentences-600 | bm25 | 0.250 | 1.000 | 0.500 | 3000.000 | 40 | 3 | 10 | 2 |" in lines
    # Dev split with missing metrics.
    assert "| sentences-600-bm25 | 0.500 | 0.500 | 0.500 | 0.500 | 12 | 1 |" in lines
    # vs baseline: only gated configs; baseline 0.5, current 0.4.
    assert "| sentences-600-bm25 | evidence_recall@5 | 0.500 | 0.400 | -0.100 | 40 |" in lines
    assert "| sentences-600-bm25 | context_chars@5 | 3000.000 | 3000.000 | 0.000 | 40 |" in lines
    assert "| sentences-600-bm25 | claim_availability@5 | 0.562 | 0.450 | -0.113 | 30 |" in lines
    assert "| fixed-300-bm25 | evidence_recall@5 |" not in text
    # Abstention section and the comparability note.
    assert "| sentences-600-bm25 | eval | 3 | min 1.250, median 2.500, max 7.000 | – | – |" in lines
    assert "| sentences-600-bm25 | dev | 1 | – | – | – |" in lines
    assert "cannot be compared across chunkings" in text and "denominator" in text
    assert text.endswith("\n") and not text.endswith("\n\n")


def test_report_is_deterministic_and_flags_missing_or_changed_baseline():
    first = render_report(SUMMARIES, BASELINE, ["sentences-600-bm25"], KS)
    assert first == render_report(dict(reversed(SUMMARIES.items())), BASELINE, ["sentences-600-bm25"], [10, 5, 3, 1])
    missing = render_report(SUMMARIES, {}, ["sentences-600-bm25", "fixed-300-bm25"], KS)
    assert "| fixed-300-bm25 | – | – | – | – | no baseline: run `ragvet baseline accept` |" in missing
    changed = {"sentences-600-bm25": summary("sentences-600-bm25", "sentences-600", 1.0, eval_fp="e2")}
    assert "eval split (labels) changed since the baseline" in render_report(
        SUMMARIES, changed, ["sentences-600-bm25"], KS
    )


def test_plot_rows_eval_split_sorted_by_config_and_k():
    rows = plot_rows(SUMMARIES, [5, 1])
    assert [(r["config"], r["k"]) for r in rows] == [
        ("fixed-300-bm25", 1),
        ("fixed-300-bm25", 5),
        ("sentences-600-bm25", 1),
        ("sentences-600-bm25", 5),
    ]
    assert rows[-1] == pytest.approx(
        {
            "config": "sentences-600-bm25",
            "k": 5,
            "recall": 0.25,
            "evidence_recall": 0.4,
            "claim_availability": 0.45,
            "hit": 1.0,
            "context_chars": 3000.0,
        }
    )
    assert rows[2]["claim_availability"] is None
