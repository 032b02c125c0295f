"""The markdown report and the plot rows."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from xml.etree import ElementTree

import polars as pl
import pytest
from builders import gate_of

from ragvet.gating import compare
from ragvet.gating.compare import gate_all
from ragvet.gating.side_by_side import side_by_side
from ragvet.inputs.params import stage_params
from ragvet.reporting import moves
from ragvet.reporting.cases import describe_evidence
from ragvet.reporting.charts import PALETTE, at_k_chart, budget_chart, slice_chart
from ragvet.reporting.comparisons import compare_configs
from ragvet.reporting.document import COMMENT_MARKER, VERDICT_DETAILS, Contents, render_report
from ragvet.reporting.judged import judged_references, judged_warnings
from ragvet.reporting.page import render_html
from ragvet.reporting.plots import budget_rows, csv_body, csv_frame_body, csv_text, plot_rows, slice_rows
from ragvet.reporting.summaries import summary_k
from ragvet.settings import Judged
from ragvet.stages.report import PLOT_FILES, write_plots
from ragvet.storage import results
from ragvet.storage.files import read_json

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
        "fingerprints": {"eval_split": eval_fp, "corpus": "c1", "chunking": "k1"},
    }


SUMMARIES = {
    "sentences-600-bm25": summary("sentences-600-bm25", "sentences-600", 1.0),
    "fixed-300-bm25": summary("fixed-300-bm25", "fixed-300", 0.5),
}
PASSED = {"passed": True, "configs": []}


def test_summary_k_picks_largest_k_up_to_five_else_smallest():
    assert summary_k([1, 3, 5, 10]) == 5
    assert summary_k([10, 2]) == 2
    assert summary_k([20, 10]) == 10


def test_report_tables_rows_and_numbers():
    text = render_report(Contents(SUMMARIES, [], PASSED, {}, KS))
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
    # Abstention section and the comparability note.
    assert "| sentences-600-bm25 | eval | 3 | min 1.250, median 2.500, max 7.000 | – | – |" in lines
    assert "| sentences-600-bm25 | dev | 1 | – | – | – |" in lines
    assert "cannot be compared across chunkings" in text and "denominator" in text
    assert text.endswith("\n") and not text.endswith("\n\n")


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


# ------------------------------------------------------------------ comparison with a baseline

CFG, OTHER = "sentences-600-bm25", "fixed-300-bm25"
FP = {"eval_split": "e1", "corpus": "c1", "chunking": "k1"}
GATE = {
    "configs": [CFG],
    "metrics": ["evidence_recall@5", "mrr"],
    "max_drop": 0.02,
    "min_slice_cases": 2,
    "slice_max_drop": 0.10,
    "slice_metric": "evidence_recall@5",
    "require_significance": False,
    "bootstrap": {"resamples": 200, "seed": 3, "confidence": 0.95},
}


def case(case_id: str, ev: float, hit: float, chars: int, kind: str, split: str = "eval") -> dict:
    metrics = {f"{m}@5": ev for m in ("evidence_recall", "claim_availability", "recall")}
    metrics |= {"hit@5": hit, "mrr": hit, "context_chars@5": chars}
    return {"case_id": case_id, "split": split, "answerable": True, "tags": {"kind": kind}, "metrics": metrics}


# a, b, c: kind x; d, e: kind y. a is newly missed, d newly found; f is dev (ignored).
BASE_ROWS = [
    case("a", 1.0, 1.0, 1000, "x"),
    case("b", 1.0, 1.0, 1000, "x"),
    case("c", 0.5, 1.0, 1000, "x"),
    case("d", 0.0, 0.0, 1000, "y"),
    case("e", 1.0, 1.0, 1000, "y"),
    case("f", 1.0, 1.0, 1000, "y", split="dev"),
]
CUR_ROWS = [
    case("a", 0.0, 0.0, 1500, "x"),
    case("b", 1.0, 1.0, 1500, "x"),
    case("c", 0.5, 1.0, 1500, "x"),
    case("d", 1.0, 1.0, 1500, "y"),
    case("e", 1.0, 1.0, 1500, "y"),
    case("f", 0.0, 0.0, 1500, "y", split="dev"),
]


def comparisons(base_fp=FP) -> list[dict]:
    baselines = {CFG: ({"fingerprints": dict(base_fp)}, BASE_ROWS), OTHER: (None, None)}
    return compare_configs({CFG: CUR_ROWS, OTHER: CUR_ROWS}, baselines, FP, KS, gate_of(GATE, ["kind"]))


def test_compare_configs_pairs_eval_cases_with_deltas_slices_and_case_lists():
    other, comp = comparisons()  # sorted by name
    assert other == {
        "config": OTHER,
        "gated": False,
        "k": 5,
        "reason": "no baseline: create it deliberately with `ragvet baseline accept`",
    }
    assert comp["gated"] is True and comp["reason"] is None
    by_name = {m["metric"]: m for m in comp["metrics"]}
    assert list(by_name) == [
        "evidence_recall@5", "claim_availability@5", "recall@5", "hit@5", "mrr", "context_chars@5"
    ]  # fmt: skip
    ev = by_name["evidence_recall@5"]
    # eval means: baseline (1 + 1 + .5 + 0 + 1) / 5 = .7, current (0 + 1 + .5 + 1 + 1) / 5 = .7
    assert (ev["baseline"], ev["current"], ev["delta"], ev["cases"]) == pytest.approx((0.7, 0.7, 0.0, 5))
    assert ev["guarded"] is True and by_name["hit@5"]["guarded"] is False
    ctx = by_name["context_chars@5"]
    assert (ctx["baseline"], ctx["current"], ctx["delta"]) == (1000.0, 1500.0, 500.0)
    assert (ctx["ci_low"], ctx["ci_high"]) == (500.0, 500.0)  # a constant paired delta has a zero-width CI
    # slice x: (1 + 1 + .5) / 3 -> (0 + 1 + .5) / 3, delta -1/3; slice y: .5 -> 1, +.5; largest move first
    assert [(s["value"], round(s["delta"], 6)) for s in comp["slices"]] == [("y", 0.5), ("x", -0.333333)]
    assert comp["newly_missed"] == ["a"] and comp["newly_found"] == ["d"]


def test_the_report_read_a_batch_of_cases_at_a_time_is_the_report_of_the_whole_tables(tmp_path, monkeypatch):
    """Against Parquet files (row groups of 2, read 2 rows at a time: a batch cut between
    the newly missed case a and the newly found d), the comparisons, the side-by-side table
    and the moves CSV (a frame of 2 cases at a time, the unchanged set aside) are those of the tables
    passed whole; g is an eval case only the current side holds."""
    ranks = {"a": 1, "b": 2, "c": 1, "d": None, "e": 3, "f": 1}
    base_rows = [row | {"first_relevant_rank": ranks[row["case_id"]]} for row in BASE_ROWS]
    cur_rank = {"a": None, "d": 2}
    cur_rows = [row | {"first_relevant_rank": cur_rank.get(row["case_id"], 1)} for row in CUR_ROWS]
    cur_rows.append(case("g", 1.0, 1.0, 1500, "y") | {"first_relevant_rank": 1})
    frames = [results.results_frame(rows) for rows in (base_rows, cur_rows)]
    paths = [tmp_path / "base.parquet", tmp_path / "cur.parquet"]
    for frame, path in zip(frames, paths):
        frame.write_parquet(path, row_group_size=2)
    monkeypatch.setattr(compare, "TABLE_BATCH_ROWS", 2)
    settings, base_summary = gate_of(GATE, ["kind"]), {"fingerprints": dict(FP)}

    def report(base, cur) -> tuple:
        [comp] = compare_configs({CFG: cur}, {CFG: (base_summary, base)}, FP, KS, settings)
        table = side_by_side({CFG: cur, OTHER: base}, CFG, ["evidence_recall@5"], settings)
        return comp, table

    streamed, whole = report(*paths), report(*frames)
    assert streamed == whole
    comp, table = streamed
    assert comp["newly_missed"] == ["a"] and comp["newly_found"] == ["d"]
    slices = [(s["value"], s["cases"], round(s["delta"], 6)) for s in comp["slices"]]
    assert slices == [("y", 2, 0.5), ("x", 3, -0.333333)]
    ev = comp["metrics"][0]  # (1 + 1 + .5 + 0 + 1) / 5 -> (0 + 1 + .5 + 1 + 1) / 5 over the 5 cases both hold
    assert (ev["metric"], ev["cases"], ev["baseline"], ev["current"], ev["wins"], ev["losses"]) == (
        "evidence_recall@5",
        5,
        0.7,
        0.7,
        1,
        1,
    )
    # measured by the current table: the baseline's over the 5 cases both hold, .7; itself over its 6, 4.5 / 6
    assert [(e["name"], e["metrics"][0]["current"]) for e in table["entries"]] == [(OTHER, 0.7), (CFG, 0.75)]
    metric = ["evidence_recall@5"]
    lines = "".join(moves.moves_lines([moves.move_frames(comp, paths[1], paths[0], metric)]))
    assert lines == csv_text(moves.case_moves(comp, frames[1], frames[0], metric))
    assert lines == (
        "config,case_id,status,baseline_first_rank,first_rank,baseline_evidence_recall@5,evidence_recall@5\n"
        f"{CFG},a,newly missed,1,,1.0,0.0\n{CFG},d,newly found,,2,0.0,1.0\n{CFG},b,unchanged,2,1,1.0,1.0\n"
        f"{CFG},c,unchanged,1,1,0.5,0.5\n{CFG},e,unchanged,3,1,1.0,1.0\n{CFG},g,unchanged,,1,,1.0\n"
    )


def test_compare_configs_refuses_changed_labels():
    comp = comparisons({"eval_split": "e0", "corpus": "c1"})[1]
    assert comp["reason"] == (
        "eval-split fingerprint differs (baseline e0, current e1): labels changed: re-baseline deliberately "
        "with `ragvet baseline accept`"
    )
    assert "metrics" not in comp


def test_the_report_refuses_what_the_gate_refuses_when_both_fingerprints_are_missing():
    baselines = {CFG: ({"fingerprints": {}}, BASE_ROWS)}
    comp = compare_configs({CFG: CUR_ROWS}, baselines, {}, KS, gate_of(GATE, ["kind"]))[0]
    verdict = gate_all(gate_of(GATE, ["kind"]), baselines, {CFG: CUR_ROWS}, {})
    assert comp["reason"].startswith("eval-split fingerprint differs (baseline None, current None)")
    assert "metrics" not in comp
    assert verdict["configs"][0]["reasons"] == comp["reason"].split("; ")
    assert verdict["passed"] is False


def test_the_report_names_the_guarded_metrics_another_chunking_left_uncompared():
    """The verdict the gate decided over another chunking: mrr skipped, evidence_recall@5 compared.
    The report lists mrr as not compared, with the reason, and its table marks it so."""
    settings = gate_of({**GATE, "metrics": ["evidence_recall@5", "mrr"]}, ["kind"])
    verdict = gate_all(settings, {CFG: ({"fingerprints": FP}, BASE_ROWS)}, {CFG: CUR_ROWS}, FP, chunkings={CFG: "k2"})
    (cfg,) = verdict["configs"]
    assert [m["metric"] for m in cfg["metrics"]] == ["evidence_recall@5"]
    assert not verdict["passed"] and [s["value"] for s in cfg["slices"] if s["failed"]] == ["x"]
    text = render_report(Contents(SUMMARIES, comparisons(), verdict, INFO, KS), against=None)
    lines = text.splitlines()
    reason = "not comparable across chunkings (baseline chunking k1, current k2)"
    assert f"- `{CFG}`: `mrr` not compared: {reason}." in lines
    assert f"- `{CFG}`: slice `kind=x` (3 cases) `evidence_recall@5` 0.833 → 0.500" in text  # compared, failed
    assert any(line.startswith("| `mrr` (guarded, not compared: see the verdict) | 0.800 | 0.800 |") for line in lines)
    assert any(line.startswith("| `evidence_recall@5` (guarded) | 0.700 | 0.700 |") for line in lines)


FAILED = {
    "passed": False,
    "configs": [
        {
            "config": CFG,
            "confidence": 0.95,
            "max_drop": 0.02,
            "slice_max_drop": 0.1,
            "reasons": [],
            "metrics": [
                {
                    "metric": "evidence_recall@5",
                    "baseline": 0.7,
                    "current": 0.6,
                    "delta": -0.1,
                    "ci_low": -0.2,
                    "ci_high": -0.05,
                    "p_value": 0.004,
                    "p_corrected": 0.012,
                    "cases": 5,
                    "failed": True,
                },
                {
                    "metric": "mrr",
                    "baseline": 0.8,
                    "current": 0.8,
                    "delta": 0.0,
                    "ci_low": 0.0,
                    "ci_high": 0.0,
                    "p_value": 1.0,
                    "p_corrected": 1.0,
                    "cases": 5,
                    "failed": False,
                },
            ],  # fmt: skip
            "slices": [
                {
                    "key": "kind",
                    "value": "x",
                    "metric": "evidence_recall@5",
                    "baseline": 0.833333,
                    "current": 0.5,
                    "delta": -0.333333,
                    "ci_low": -1.0,
                    "ci_high": 0.0,
                    "p_value": 0.25,
                    "p_corrected": 0.5,
                    "cases": 3,
                    "failed": True,
                },
            ],  # fmt: skip
            "newly_missed": ["a"],
            "newly_missed_k": 5,
            "passed": False,
            "valid": True,
            "family": {"size": 3, "correction": "holm", "alpha": 0.05, "significance": False},
        }
    ],
}
INFO = {
    "a": {"question": "How many <days> carry over?", "evidence": ["`leave` [0:5] “carry”"]},
    "d": {"question": "Q d?"},
}


def test_report_puts_the_verdict_first_with_every_reason_and_lists_cases():
    text = render_report(Contents(SUMMARIES, comparisons(), FAILED, INFO, KS), against="origin/main", marker=True)
    lines = text.splitlines()
    # The first line read is the verdict in plain ASCII (no emoji a font may lack), its details folded under it.
    headline = f"# Gate: FAILED - 1 guarded metric and 1 slice dropped in `{CFG}` (`evidence_recall@5` 0.700 -> 0.600)"
    assert lines[0] == COMMENT_MARKER and lines[2] == headline and lines[2].isascii()
    assert lines[4:6] == ["<details>", f"<summary>{VERDICT_DETAILS}</summary>"]
    # The gated configuration's table comes next, before the disclaimer and every other section.
    assert lines.index(f"## `{CFG}` (gated)") < min(i for i, line in enumerate(lines) if line.startswith("> Offline"))
    assert [line for line in lines if line.startswith("## ")][0] == f"## `{CFG}` (gated)"
    assert (
        f"- `{CFG}`: `evidence_recall@5` 0.700 → 0.600 (-0.100, 95% CI [-0.200, -0.050], corrected p 0.012), "
        "a drop of more than `max_drop` 0.020" in lines
    )
    assert (
        f"- `{CFG}`: slice `kind=x` (3 cases) `evidence_recall@5` 0.833 → 0.500 (-0.333, 95% CI [-1.000, 0.000], "
        "corrected p 0.5), a drop of more than `slice_max_drop` 0.100" in lines
    )
    assert (
        "Compared with `origin/main` (its committed results), paired over the same eval-split cases. 3 tests "
        "(guarded metrics and slices of the gated configurations) form one family: paired permutation p-values "
        "corrected by Holm (family-wise error rate), α = 0.05. With require_significance off, a move beyond "
        "tolerance fails on its size alone." in lines
    )
    assert any(line.startswith("> Offline scores") and "not a production guarantee" in line for line in lines)
    # The gated config's table: baseline, current, delta, CI, arrow, cases.
    assert any(line.startswith("| `evidence_recall@5` (guarded) | 0.700 | 0.700 | 0.000 | [-") for line in lines)
    assert "| `context_chars@5` | 1,000 | 1,500 | +500 | [+500, +500] | ↑ | 5 |" in lines
    slices = lines.index("<summary>Slices that moved most (evidence_recall@&#8203;5)</summary>")  # no mention
    assert lines[slices + 4 : slices + 6] == [
        "| `kind=y` | 2 | 0.500 | 1.000 | +0.500 | [0.000, +1.000] | ↑ |",
        "| `kind=x` | 3 | 0.833 | 0.500 | -0.333 | [-1.000, 0.000] | ↓ |",
    ]
    # Context budget beside recall.
    assert f"| `{CFG}` | 0.700 (0.000) | 0.700 (0.000) | 1,000 → 1,500 | +50.0% |" in lines
    # Newly missed, collapsed, with the question (escaped) and the missing evidence; newly found without.
    start = lines.index("<summary>Newly missed at hit@5: 1 case (hit in the baseline, missed now)</summary>")
    assert lines[start - 1] == "<details>"
    assert lines[start + 2 : start + 4] == [
        "- **`a`**: How many &lt;days&gt; carry over?",
        "  - missing: `leave` [0:5] “carry”",
    ]
    assert "<summary>Newly found at hit@5: 1 case (missed in the baseline, hit now)</summary>" in lines
    assert "- **`d`**: Q d?" in lines
    # The config without a baseline is collapsed with its reason.
    assert (
        f"<summary><code>{OTHER}</code>: no baseline: create it deliberately with `ragvet baseline accept`</summary>"
        in lines
    )
    assert text == render_report(
        Contents(SUMMARIES, comparisons(), FAILED, INFO, KS), against="origin/main", marker=True
    )


def test_passing_verdict_says_what_it_covered():
    verdict = {**FAILED, "passed": True}
    cfg = {**FAILED["configs"][0], "passed": True, "newly_missed": []}
    cfg["metrics"] = [{**m, "failed": False} for m in cfg["metrics"]]
    cfg["slices"] = [{**s, "failed": False} for s in cfg["slices"]]
    text = render_report(Contents(SUMMARIES, [], {**verdict, "configs": [cfg]}, {}, KS))
    assert (
        text.startswith(f"# Gate: PASSED - no guarded metric or slice moved beyond tolerance in `{CFG}`\n")
        and COMMENT_MARKER not in text
    )
    assert (
        f"- `{CFG}`: no guarded metric (`evidence_recall@5`, `mrr`) moved the wrong way by more than 0.020, "
        "and none of its 1 slices by more than 0.100." in text
    )
    assert "Compared with the committed baseline (`metrics/baseline/`)" in text


def test_describe_evidence_quotes_spans_names_docs_and_alternatives():
    texts = {"leave": "Staff   may carry\nfive days. | <b>", "faq": "x" * 300}
    assert describe_evidence({"doc": "leave", "start": 0, "end": 23}, texts) == "`leave` [0:23] “Staff may carry five”"
    assert describe_evidence({"doc": "leave", "start": 29, "end": 36}, texts) == "`leave` [29:36] “\\| &lt;b&gt;”"
    assert describe_evidence({"doc": "faq"}, texts) == "`faq` (any chunk)"
    long = describe_evidence({"doc": "faq", "start": 0, "end": 300}, texts, limit=10)
    assert long == "`faq` [0:300] “xxxxxxxxx…”"
    either = {"any": [{"doc": "faq"}, {"doc": "leave", "start": 0, "end": 5}]}
    assert describe_evidence(either, texts) == "`faq` (any chunk) or `leave` [0:5] “Staff”"


def test_budget_and_slice_rows():
    top = "chars in the top 5"
    assert budget_rows(SUMMARIES, 5) == [
        {"config": "fixed-300-bm25", "budget": 3000.0, "unit": top, "evidence_recall": pytest.approx(0.2)},
        {"config": "sentences-600-bm25", "budget": 3000.0, "unit": top, "evidence_recall": pytest.approx(0.4)},
    ]
    spent = {CFG: {"eval": {"metrics": {"evidence_recall_budget@64": 0.25, "evidence_recall_budget@128": 0.5}}}}
    assert budget_rows(spent, 5, [128, 64], "tokens") == [
        {"config": CFG, "budget": 64, "unit": "tokens", "evidence_recall": 0.25},
        {"config": CFG, "budget": 128, "unit": "tokens", "evidence_recall": 0.5},
    ]
    table = {"eval": {"kind": {"y": {"cases": 2, "metrics": {"recall@5": 0.5, "evidence_recall@5": 0.25}}}}}
    assert slice_rows({CFG: table}, 5) == [
        {"config": CFG, "slice": "kind=y", "cases": 2, "recall": 0.5, "evidence_recall": 0.25}
    ]


def test_html_is_self_contained_with_deterministic_charts():
    current = plot_rows(SUMMARIES, KS)
    svg = at_k_chart(current, plot_rows({CFG: SUMMARIES[CFG]}, KS))
    assert svg.startswith("<svg") and svg == at_k_chart(current, plot_rows({CFG: SUMMARIES[CFG]}, KS))
    assert "sentences-600-bm25" in svg and "<dc:date>" not in svg
    budget = budget_chart(budget_rows(SUMMARIES, 5), [])
    bars = slice_chart([{"config": CFG, "slice": "kind=y", "evidence_recall": 0.25}], [], [CFG])
    page = render_html(
        render_report(Contents(SUMMARIES, comparisons(), FAILED, INFO, KS)), [("a", svg), ("b", budget), ("c", bars)]
    )
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 3
    assert "<table>" in page and "<details>" in page and "<summary>" in page
    assert "<script" not in page and 'src="http' not in page and "<link" not in page


def chart_panels(svg: str) -> list[list[str]]:
    """Each panel's series colours, in drawing order, read with an XML parser from the
    ``series-<chart>-<panel>-<series>-<part>`` groups the charts mark their series with."""
    panels: dict[str, dict[str, str]] = {}
    for group in ElementTree.fromstring(svg).iter("{http://www.w3.org/2000/svg}g"):
        if group.get("id", "").startswith("series-"):
            _, _, panel, series, _ = group.get("id").split("-")
            mark = next(e for e in group.iter() if e.get("style"))
            style = dict(item.split(": ") for item in mark.get("style").split("; "))
            panels.setdefault(panel, {})[series] = (
                style["stroke"] if style.get("stroke", "none") != "none" else style["fill"]
            )
    return [list(series.values()) for series in panels.values()]


def test_charts_of_ten_configurations_draw_at_most_8_series_a_panel_in_distinct_colours():
    names = [f"config-{i:02d}" for i in range(10)]
    at_k = [{"config": n, "k": k, "recall": 0.5, "evidence_recall": 0.6} for n in names for k in (1, 5)]
    budget = [{"config": n, "budget": b, "unit": "chars", "evidence_recall": 0.6} for n in names for b in (256, 512)]
    slices = [{"config": n, "slice": "kind=y", "evidence_recall": 0.5} for n in names]
    charts = {
        "at_k": chart_panels(at_k_chart(at_k, at_k, gated=["config-09"])),
        "budget": chart_panels(budget_chart(budget, budget)),
        "slice": chart_panels(slice_chart(slices, slices, names)),
    }
    # Small multiples: a panel per configuration with recall and evidence recall, current and baseline;
    # the budget's current and baseline panels for the first 8 configurations, then for the last 2;
    # 7 configurations' bars a panel, with the baseline ticks in black.
    assert [len(p) for p in charts["at_k"]] == [4] * 10
    assert [len(p) for p in charts["budget"]] == [8, 8, 2, 2]
    assert [len(p) for p in charts["slice"]] == [8, 4]
    for panels in charts.values():
        for colours in panels:
            assert len(colours) <= 8 and len(set(colours)) == len(colours), colours
    assert charts["budget"][0] == [c.lower() for c in PALETTE]


def test_a_comment_over_the_limit_lists_fewer_cases_then_drops_the_absolute_figures():
    comps = comparisons()
    ids = [f"case-{i:03d}" for i in range(100)]
    comps[1] = {**comps[1], "newly_missed": ids}
    info = {cid: {"question": "q" * 200, "evidence": ["e" * 100]} for cid in ids}
    full = render_report(Contents(SUMMARIES, comps, FAILED, info, KS))
    assert full.count("- **`case-") == 100 and len(full) > 30_000
    assert render_report(Contents(SUMMARIES, comps, FAILED, info, KS), limit=len(full)) == full

    capped = render_report(Contents(SUMMARIES, comps, FAILED, info, KS), limit=13_500)
    assert len(capped) <= 13_500 and capped.count("- **`case-") == 20
    assert "- … and 80 more: `ragvet report --against` lists them all" in capped
    assert "Absolute figures, both splits" in capped

    small = render_report(Contents(SUMMARIES, comps, FAILED, info, KS), limit=5_000)
    assert len(small) <= 5_000 and small.count("- **`case-") == 5
    assert "Absolute figures" not in small and "Left out to fit a comment" in small
    assert small.startswith("# Gate: FAILED - ") and small.index("(gated)") < small.index("## Context budget beside")


def test_a_lower_is_better_metric_fails_on_a_rise_and_says_so():
    cfg = {**FAILED["configs"][0], "slices": [], "newly_missed": []}
    cfg["metrics"] = [
        {"metric": "unsupported_answer", "baseline": 0.1, "current": 0.3, "delta": 0.2, "ci_low": 0.1,
         "ci_high": 0.3, "p_value": 0.01, "p_corrected": 0.02, "cases": 10, "failed": True, "higher_is_better": False},
    ]  # fmt: skip
    text = render_report(Contents(SUMMARIES, [], {"passed": False, "configs": [cfg]}, {}, KS))
    assert (
        f"- `{CFG}`: `unsupported_answer` 0.100 → 0.300 (+0.200, 95% CI [+0.100, +0.300], corrected p 0.02), a rise "
        "of more than `max_drop` 0.020" in text
    )


def test_each_table_has_one_context_figure_named_with_its_denominator():
    """The budget table averages over every paired eval case, abstention included; the
    per-split retrieval tables over answerable cases. Each header says which."""
    text = render_report(Contents(SUMMARIES, comparisons(), FAILED, INFO, KS), against="origin/main")
    headers = [line for line in text.splitlines() if line.startswith("| config |") and "context_chars" in line]
    assert [header.count("context_chars") for header in headers] == [1, 1, 1]
    assert headers[0].split(" | ")[3] == "context_chars@5 (mean over all paired eval cases, abstention included)"
    for header in headers[1:]:  # eval, then dev
        assert header.split(" | ")[6] == "context_chars@5 (mean over answerable cases)"


# ------------------------------------------------------------------ the report stage reads evaluate's outputs


def report_stage(root, summaries):
    """The report stage on the committed sample results, its summaries taken from ``summaries``."""
    import subprocess
    import sys

    command = [sys.executable, "-m", "ragvet.cli", "report", "--cases-dir", "metrics/cases",
               "--summaries-dir", str(summaries), "--slices-dir", "metrics/slices", "--split", "data/split.json",
               "--baseline", "metrics/baseline", "--params", "params.yaml"]  # fmt: skip
    return subprocess.run(command, cwd=root, capture_output=True, text=True)


def test_the_report_stage_prints_the_summaries_evaluate_wrote_and_names_a_missing_one(work_repo, tmp_path):
    """Figures come from metrics/<config>.json as written, not recomputed from the per-case
    tables: a summary edited by hand shows in the report, and a missing one is named.
    On the session's reproduced sample: the split and validated inputs exist only after a run."""
    import json
    import shutil

    for path in work_repo.glob("metrics/*.json"):
        shutil.copy(path, tmp_path / path.name)
    edited = json.loads((tmp_path / "fixed-300-bm25.json").read_text())
    edited["eval"]["metrics"]["mrr"] = 0.123456
    (tmp_path / "fixed-300-bm25.json").write_text(json.dumps(edited))
    done = report_stage(work_repo, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "| fixed-300-bm25 | fixed-300 | bm25 | 0.548 | 0.762 | 0.123 | 1477.867 | 105 | 13 | 4 | 0 |" in done.stdout
    assert done.stdout == (work_repo / "metrics" / "report.md").read_text().replace(
        "| fixed-300-bm25 | fixed-300 | bm25 | 0.548 | 0.762 | 0.604 |",
        "| fixed-300-bm25 | fixed-300 | bm25 | 0.548 | 0.762 | 0.123 |",
    )

    (tmp_path / "headings-1200-bm25.json").unlink()
    done = report_stage(work_repo, tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{tmp_path / 'headings-1200-bm25.json'}: metrics JSON not found" in done.stderr
    assert "run dvc repro first" in done.stderr


def test_the_report_stage_renders_the_verdict_the_verdict_stage_wrote_and_decides_none(
    work_repo, tmp_path, monkeypatch
):
    """dvc.yaml's report reads the verdict the verdict stage decided (``--verdict
    data/verdict.json``): it renders that verdict, one edited by hand included, and never
    compares the gated configurations again. On the session's reproduced sample."""
    import json

    from typer.testing import CliRunner

    from ragvet.cli import app
    from ragvet.gating import compare, decision

    def no_second_verdict(*args, **kwargs):
        raise AssertionError("the report decided the verdict again")

    monkeypatch.setattr(compare, "gate_all", no_second_verdict)
    monkeypatch.setattr(decision, "gate_all", no_second_verdict)
    monkeypatch.chdir(work_repo)
    committed = (work_repo / "metrics" / "report.md").read_text()
    done = CliRunner().invoke(app, ["report", "--verdict", "data/verdict.json"])
    assert done.exit_code == 0, done.output
    assert done.stdout == committed  # the pipeline's own report, from its own verdict

    verdict = json.loads((work_repo / "data" / "verdict.json").read_text())
    gated = verdict["configs"][0]
    gated |= {"passed": False, "reasons": ["edited by hand"]}
    verdict["passed"] = False
    (tmp_path / "verdict.json").write_text(json.dumps(verdict))
    edited = CliRunner().invoke(app, ["report", "--verdict", str(tmp_path / "verdict.json")])
    assert edited.exit_code == 0, edited.output
    assert edited.stdout.startswith("# Gate: FAILED - `sentences-600-bm25`: no valid comparison\n")
    assert f"- `{gated['config']}`: no valid comparison: edited by hand\n" in edited.stdout
    assert "no guarded metric" not in edited.stdout and "no guarded metric" in committed
    after = "\n> Offline scores on labelled cases"
    assert edited.stdout.split(after)[1] == committed.split(after)[1]  # the rest is the committed report

    both = CliRunner().invoke(app, ["report", "--verdict", "data/verdict.json", "--against", "main"])
    assert both.exit_code == 2 and "--verdict is the committed baseline's verdict" in both.output


# --- judged share (imported qrels) ------------------------------------------------------------


def judged_summary(name: str, share10: float, counted: int = 40) -> dict:
    judged = summary(name, "whole", 1.0)
    judged["eval"]["metrics"] |= {f"judged@{k}": min(1.0, share10 + 0.05 * (10 - k)) for k in KS}
    judged["eval"]["counted"] = {f"judged@{k}": counted for k in KS}
    return judged


@pytest.mark.parametrize(
    ("share", "warned"),
    [(0.70, False), (0.699, True), (0.75, False), (0.2, True)],  # the reference's judged@10 is 0.8; max_drop 0.1
)
def test_a_judged_share_far_below_the_reference_warns_and_one_at_the_threshold_does_not(share, warned):
    summaries = {"bm25": judged_summary("bm25", 0.8), "dense": judged_summary("dense", share)}
    references = judged_references(summaries, "bm25", {}, None)
    assert references == {"bm25": [], "dense": [("the reference configuration `bm25`", summaries["bm25"])]}
    lines = judged_warnings(summaries, references, "judged@10", 0.1)
    if warned:
        assert lines == [
            f"- **Warning:** `dense`: `judged@10` {share:.3f} is {0.8 - share:.3f} below 0.800 for the reference "
            "configuration `bm25` (more than `judged.max_drop` 0.1): its recall may be an artefact of missing "
            "judgements. Unjudged results count as not relevant."
        ]
    else:
        assert lines == []
    text = render_report(Contents(summaries, [], PASSED, {}, KS, judged=lines))
    assert "## Judged share of the top k" in text
    assert f"| {share:.3f} | 40 |" in text  # judged@10, then the cases with a judged set
    assert ("its recall may be an artefact of missing judgements" in text) == warned


def test_a_judged_share_is_held_against_its_baseline_too_and_the_revision_is_escaped():
    current, base = {"bm25": judged_summary("bm25", 0.5)}, judged_summary("bm25", 0.9)
    references = judged_references(current, "bm25", {"bm25": (base, [])}, "main`x")
    assert references == {"bm25": [("its results at ``main`x``", base)]}  # a code span the backtick cannot end
    (line,) = judged_warnings(current, references, "judged@10", 0.1)
    assert "0.500 is 0.400 below 0.900 for its results at ``main`x``" in line


def test_native_cases_have_no_judged_section_and_the_defaults_follow_the_ks():
    assert "Judged share" not in render_report(Contents(SUMMARIES, [], PASSED, {}, KS))
    assert judged_warnings(SUMMARIES, judged_references(SUMMARIES, "fixed-300-bm25", {}, None), "judged@10", 0.0) == []
    assert Judged.from_params({"ks": [1, 5, 10]}) == Judged("judged@10", 0.1)
    assert Judged.from_params({"ks": [1, 5, 20], "judged": None}) == Judged("judged@5", 0.1)
    assert Judged.from_params({"ks": [20, 50], "judged": {}}) == Judged("judged@20", 0.1)
    assert Judged.from_params({"ks": [20, 50], "judged": {"metric": "judged@50", "max_drop": 0.25}}) == Judged(
        "judged@50", 0.25
    )


def test_plot_csvs_quote_cells_a_spreadsheet_would_run(tmp_path):
    """A slice key or value, a config name or a unit starting with ``= + - @``, a tab
    or a CR is a formula in a spreadsheet: each such cell starts with ``'``; numbers,
    negative ones included, stay numbers."""
    slices = {"=cfg": {"eval": {"@key": {"+v": {"cases": 3, "metrics": {"recall@1": -0.5}}}}}}
    summaries = {"-cfg": {"eval": {"metrics": {"context_chars@1": 7.0, "evidence_recall@1": 0.25}}}}
    settings = {"ks": [1]}
    write_plots(tmp_path, settings, summaries, slices)
    assert (tmp_path / "slices.csv").read_text().splitlines() == [
        "config,slice,cases,recall,evidence_recall",
        "'=cfg,'@key=+v,3,-0.5,",
    ]
    budget = list(csv.reader(io.StringIO((tmp_path / "budget.csv").read_text())))
    assert budget[1] == ["'-cfg", "7.0", "chars in the top 1", "0.25"]
    assert csv_text([{"a": "\tx", "b": "\rx", "c": "x=1", "d": "'", "e": -1}]) == "a,b,c,d,e\n'\tx,'\rx,x=1,',-1\n"


def test_a_frames_csv_lines_are_its_rows_csv_lines():
    frame = pl.DataFrame(
        {
            "config": ["=cfg", "-x", "plain"],
            "rank": [1, None, 3],
            "value": [0.12345678, -0.0000001, float("nan")],
            "other": [None, 2.5, -1.0],
            "unused": ["a", "b", "c"],
            "kind": pl.Series(["@k", "k", None], dtype=pl.Categorical),
        }
    )
    fields = ["config", "rank", "value", "missing", "other", "kind"]
    text = csv_frame_body(frame, fields)
    assert text == "'=cfg,1,0.123457,,,'@k\n'-x,,0.0,,2.5,k\nplain,3,,,-1.0,\n"  # rounded, -0.0 as 0.0, NaN empty
    assert text == csv_body(frame.to_dicts(), fields)
    assert csv_frame_body(frame.clear(), fields) == ""


def test_sample_plot_csvs_unchanged(tmp_path):
    """The sample has no value a spreadsheet would run: its committed plots are the
    bytes the report's code writes from its committed summaries and slice tables."""
    root = Path(__file__).resolve().parents[2]
    settings = stage_params(root / "params.yaml", ["configs", "ks", "budget"])
    configs = sorted(settings["configs"])
    summaries = {c: read_json(root / "metrics" / f"{c}.json") for c in configs}
    slices = {c: read_json(root / "metrics" / "slices" / f"{c}.json") for c in configs}
    write_plots(tmp_path, settings, summaries, slices)
    for name in PLOT_FILES:
        assert (tmp_path / name).read_bytes() == (root / "metrics" / "plots" / name).read_bytes()


def test_a_report_that_decides_its_verdict_reads_each_configurations_tables_once(work_repo, monkeypatch):
    """Without ``--verdict`` the report decides the verdict itself: the gate's figures and the
    report's come from one pairing per configuration (:func:`report_pairings`), so each
    compared configuration's two tables are read in one pass, and the report is the
    pipeline's own. On the session's reproduced sample."""
    import yaml
    from typer.testing import CliRunner

    from ragvet.cli import app

    passes: list[str] = []  # the configurations whose baseline table was paired with their current one
    wide_batches = compare._wide_batches

    def counted(baseline, current, metrics, tags=()):
        if "baseline" in Path(baseline).parts:  # not the side-by-side table's pairs of configurations
            passes.append(current.stem)
        return wide_batches(baseline, current, metrics, tags)

    monkeypatch.setattr(compare, "_wide_batches", counted)
    monkeypatch.chdir(work_repo)
    done = CliRunner().invoke(app, ["report"])
    assert done.exit_code == 0, done.output
    assert done.stdout == (work_repo / "metrics" / "report.md").read_text()
    gated = yaml.safe_load((work_repo / "params.yaml").read_text())["gate"]["configs"]
    assert sorted(passes) == sorted(gated)  # every gated config compared once, none twice


def test_a_pairing_covers_the_figures_of_a_narrower_one_and_reads_one_pair_of_tables():
    """What the gate may take from the report's pairing: its metrics, its slices and its k,
    from a pairing of the same two tables, read once."""
    Pairing = compare.Pairing
    wide = Pairing(["mrr", "hit@5", "recall@5"], "recall@5", ["kind"], 5)
    assert wide.covers(Pairing(["hit@5", "mrr"], None, (), None))
    assert wide.covers(Pairing(["mrr"], "recall@5", ["kind"], 5))
    assert not wide.covers(Pairing(["mrr", "recall@10"]))
    assert not wide.covers(Pairing(["mrr"], "mrr", ["kind"]))
    assert not wide.covers(Pairing(["mrr"], "recall@5", ["tenant"]))
    assert not wide.covers(Pairing(["mrr"], None, (), 10))
    base = [{"case_id": "a", "split": "eval", "metrics": {"mrr": 0.5, "hit@5": 1.0, "recall@5": 1.0}, "tags": {}}]
    cur = [{"case_id": "a", "split": "eval", "metrics": {"mrr": 1.0, "hit@5": 1.0, "recall@5": 1.0}, "tags": {}}]
    assert wide.read(base, cur).read(base, cur).cases == 1  # read again: as it was, not twice
    assert wide.sample("mrr").deltas.tolist() == [0.5]
    with pytest.raises(ValueError, match="one pair of tables"):
        wide.read(cur, base)
