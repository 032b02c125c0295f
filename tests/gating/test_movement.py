"""What a change moved (ragvet.gating.movement): the summary of hand-made per-case figures,
and a run against the ranking a baseline kept, read from files as the verdict stage reads them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from ragvet.gating.baselines import baseline_ranking_path
from ragvet.gating.movement import distribution, movement_by_config, movement_summary
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


def test_a_run_against_the_baselines_ranking(tmp_path: Path):
    runs, cases, baseline = tmp_path / "runs", tmp_path / "cases", tmp_path / "baseline"
    for folder in (runs, cases, baseline_ranking_path(baseline, "x").parent):
        folder.mkdir(parents=True)

    def ranking(rows, path):
        pl.DataFrame(rows, schema=["case_id", "rank", "chunk_id"], orient="row").write_parquet(path)

    ranking([("q1", 1, "a"), ("q1", 2, "b"), ("q2", 1, "c")], baseline_ranking_path(baseline, "x"))
    ranking([("q1", 1, "b"), ("q1", 2, "a"), ("q2", 1, "d")], runs / "x.parquet")
    rows = [
        {"case_id": case, "split": "eval", "answerable": True, "tags": {"t": value}, "metrics": {"hit@1": 1.0}}
        for case, value in (("q1", "one"), ("q2", "two"))
    ]
    results.write_results(cases / "x.parquet", results.results_frame(rows))
    found = movement_by_config(["x", "y"], runs, baseline, cases, ["t"], 2, 0.5, 5)
    assert found["y"] == {
        "unavailable": f"the baseline keeps no ranking ({baseline_ranking_path(baseline, 'y').as_posix()}): "
        "accept it again with `ragvet baseline accept`"
    }
    # q1: ab vs ba at p = 0.5: X = 0, 2, so (0.5/0.5)·(0 + 2/2·0.25) + 1·0.25 = 0.5; q2: c vs d, 0.
    assert found["x"]["topk_changed"] == 0.5
    assert found["x"]["most_moved"] == [
        {"case_id": "q2", "overlap": 0.0, "rbo": 0.0},
        {"case_id": "q1", "overlap": 1.0, "rbo": 0.5},
    ]
    assert found["x"]["slices"]["t"]["one"]["rbo"]["mean"] == 0.5
