"""What a change moved (ragvet.gating.movement): the summary of hand-made per-case figures,
and a run against the ranking a baseline kept, read from files as the verdict stage reads them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml
from builders import gate_of

from ragvet.gating.baselines import baseline_ranking_path
from ragvet.gating.compare import render_verdict
from ragvet.gating.movement import (
    distribution,
    guard_movement,
    movement_by_config,
    movement_entry,
    movement_summary,
    movement_table,
    per_case_moves,
    ranked_sides,
)
from ragvet.inputs.params import validate_params
from ragvet.reporting.verdict import verdict_section
from ragvet.storage import results


def test_distribution_by_hand_and_empty():
    # Linear interpolation over 0, 0.5, 1, 1: the 10th percentile is 0.3 · 0.5, the median (0.5 + 1) / 2.
    assert distribution(np.array([1.0, 0.0, 1.0, 0.5])) == pytest.approx(
        {"mean": 0.625, "p10": 0.15, "p50": 0.75, "p90": 1.0}
    )
    assert distribution(np.array([])) == {"mean": None, "p10": None, "p50": None, "p90": None}


def moves() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "case_id": ["a", "b", "c", "d"],
            "overlap@2": [1.0, 0.5, 0.0, 1.0],
            "topk_changed@2": [0, 1, 1, 0],
            "rbo@2": [1.0, 0.5, 0.0, 0.9],
        }
    )


def test_summary_over_all_cases_per_slice_and_the_most_moved():
    tags = pl.DataFrame({"case_id": ["a", "b", "c", "d"], "tags.region": ["eu", "eu", "us", None]})
    summary = movement_summary(moves(), tags, ["region", "absent"], 2, 0.9, 2)
    assert summary["cases"] == 4 and summary["topk_changed"] == 0.5
    assert summary["rbo"]["mean"] == pytest.approx(0.6)
    assert summary["slices"] == {
        "region": {
            "eu": {
                "cases": 2,
                "topk_changed": 0.5,
                "overlap": pytest.approx({"mean": 0.75, "p10": 0.55, "p50": 0.75, "p90": 0.95}),
                "rbo": pytest.approx({"mean": 0.75, "p10": 0.55, "p50": 0.75, "p90": 0.95}),
            },
            "us": {
                "cases": 1,
                "topk_changed": 1.0,
                "overlap": {"mean": 0.0, "p10": 0.0, "p50": 0.0, "p90": 0.0},
                "rbo": {"mean": 0.0, "p10": 0.0, "p50": 0.0, "p90": 0.0},
            },
        }
    }
    # Lowest RBO first; d (reordered, RBO 0.9) would come third; a did not move at all.
    assert summary["most_moved"] == [
        {"case_id": "c", "overlap": 0.0, "rbo": 0.0},
        {"case_id": "b", "overlap": 0.5, "rbo": 0.5},
    ]


def ranking(rows, path):
    pl.DataFrame(rows, schema=["case_id", "rank", "chunk_id"], orient="row").write_parquet(path)


def two_rankings(tmp_path: Path) -> tuple[Path, Path]:
    """A baseline that kept x's ranking (y's none), and x's run: q1 reordered, q2 replaced."""
    runs, baseline = tmp_path / "runs", tmp_path / "baseline"
    for folder in (runs, baseline_ranking_path(baseline, "x").parent):
        folder.mkdir(parents=True)
    ranking([("q1", 1, "a"), ("q1", 2, "b"), ("q2", 1, "c")], baseline_ranking_path(baseline, "x"))
    for config in ("x", "y"):
        ranking([("q1", 1, "b"), ("q1", 2, "a"), ("q2", 1, "d")], runs / f"{config}.parquet")
    return runs, baseline


def test_a_run_against_the_baselines_ranking(tmp_path: Path):
    runs, baseline = two_rankings(tmp_path)
    cases = tmp_path / "cases"
    cases.mkdir()
    rows = [
        {"case_id": case, "split": "eval", "answerable": True, "tags": {"t": value}, "metrics": {"hit@1": 1.0}}
        for case, value in (("q1", "one"), ("q2", "two"))
    ]
    results.write_results(cases / "x.parquet", results.results_frame(rows))
    moves = per_case_moves(["x", "y"], lambda config: ranked_sides(config, baseline, None, runs), 2, 0.9)
    found = movement_by_config(moves, cases, ["t"], 2, 0.9)
    assert found["y"] == {
        "unavailable": f"the baseline keeps no ranking ({baseline_ranking_path(baseline, 'y').as_posix()}): "
        "accept it again with `ragvet baseline accept`"
    }
    # q1: ab vs ba at p = 0.9: X = 0, 2, so (0.1/0.9)·(0 + 2/2·0.81) + 1·0.81 = 0.9; q2: c vs d, 0.
    assert found["x"]["topk_changed"] == 0.5
    assert found["x"]["most_moved"] == [
        {"case_id": "q2", "overlap": 0.0, "rbo": 0.0},
        {"case_id": "q1", "overlap": 1.0, "rbo": pytest.approx(0.9, abs=1e-15)},
    ]
    assert found["x"]["slices"]["t"]["one"]["rbo"]["mean"] == pytest.approx(0.9, abs=1e-15)
    table = movement_table(moves, 2)  # what the verdict stage writes for programs: y measured nothing
    assert table.rows() == [("x", "q1", 1.0, 0, 0.9), ("x", "q2", 0.0, 1, 0.0)]
    assert table.columns == ["config", "case_id", "overlap@2", "topk_changed@2", "rbo@2"]
    assert movement_table({}, 2).columns == table.columns


def test_a_guarded_share_fails_above_max_drop_and_exactly_it_passes():
    moves = pl.DataFrame({"case_id": ["a", "b", "c", "d"], "topk_changed@2": [0, 1, 0, 0]})
    entry = movement_entry("topk_changed@2", moves, 0.25)
    assert entry["baseline"] == 0.0 and entry["current"] == 0.25 and entry["cases"] == 4
    assert (entry["losses"], entry["ties"], entry["failed"]) == (1, 3, False)  # exactly the limit passes
    assert movement_entry("topk_changed@2", moves, 0.2)["failed"]
    unmeasured = movement_entry("topk_changed@2", "no ranking", 0.5)
    assert unmeasured["failed"] and unmeasured["current"] is None and unmeasured["unmeasured"] == "no ranking"


def test_the_gate_guards_movement_beside_the_paired_metrics(tmp_path: Path, monkeypatch):
    gate = gate_of({"configs": ["x", "y"], "metrics": ["recall@5", "topk_changed@2"], "max_drop": 0.4})
    assert gate.metrics == ("recall@5",) and gate.movement == ("topk_changed@2",)
    runs, baseline = two_rankings(tmp_path)
    paired = {"metric": "recall@5", "baseline": 0.5, "current": 0.5, "delta": 0.0, "ci_low": 0.0, "ci_high": 0.0}
    paired |= {"p_corrected": 1.0, "cases": 2, "failed": False}
    shape = {"reasons": [], "slices": [], "skipped": [], "newly_missed": [], "max_drop": 0.4, "slice_max_drop": 0.1}
    verdict = {
        "passed": True,
        "configs": [{"config": c, "passed": True, "metrics": [paired], **shape} for c in ("x", "y")],
    }
    decided = guard_movement(verdict, gate, lambda config: ranked_sides(config, baseline, None, runs), {})
    x, y = decided["configs"]
    # x: q1 only reordered (same set), q2 replaced: half the cases changed, beyond 0.4.
    assert x["metrics"][0] == paired and x["metrics"][1]["current"] == 0.5 and not x["passed"]
    assert y["metrics"][1]["unmeasured"].startswith("the baseline keeps no ranking") and not decided["passed"]
    terminal = render_verdict(decided)
    assert "FAIL x topk_changed@2: 0.000 -> 0.500 (delta +0.500" in terminal
    assert "FAIL y topk_changed@2: not measured: the baseline keeps no ranking" in terminal
    assert any(
        "`topk_changed@2` not measured: the baseline keeps no ranking" in line
        for line in verdict_section(decided, None)
    )
    assert guard_movement(verdict, gate_of({"configs": ["x"]}), lambda config: "unused", {}) is verdict
    # Under another chunking, chunk ids name other passages: skipped with the reason, as chunk-level metrics are.
    other = guard_movement(verdict, gate, lambda config: "unused", {"x": "not comparable across chunkings (...)"})
    assert other["configs"][0]["metrics"] == [paired] and other["configs"][0]["passed"]
    assert other["configs"][0]["skipped"] == [
        {"metric": "topk_changed@2", "reason": "not comparable across chunkings (...)"}
    ]


def test_only_gate_metrics_may_name_a_movement_metric(tmp_path: Path):
    params = yaml.safe_load((Path(__file__).parents[2] / "params.yaml").read_text())
    params["gate"]["metrics"] = [*params["gate"]["metrics"], "topk_changed@5"]
    params["gate"]["rbo_p"] = 0.5
    assert validate_params(params, "params.yaml") == []
    assert gate_of({"rbo_p": 0.5}).rbo_p == 0.5 and gate_of({}).rbo_p == 0.9
    params["gate"]["rbo_p"] = 1
    (problem,) = validate_params(params, "params.yaml")
    assert "gate.rbo_p" in problem.where
    params["gate"]["rbo_p"] = 0.5
    params["gate"]["slice_metric"] = "topk_changed@5"
    (problem,) = validate_params(params, "params.yaml")
    assert "gate.slice_metric" in problem.where and "against the baseline's ranking" in problem.what
