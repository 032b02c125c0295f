"""ann_recall@k: the share of the exact top k an approximate index returns, on runs small enough to count by hand."""

from __future__ import annotations

import json

import polars as pl
from builders import invoke

from ragvet.measures.ann_recall import ann_recall_at, ann_recall_by_case, mean_ann_recall


def rows(case_id: str, ids: list[str]) -> list[dict]:
    return [
        {"case_id": case_id, "rank": rank, "chunk_id": c, "score": 1.0 - rank / 10} for rank, c in enumerate(ids, 1)
    ]


def test_counted_by_hand():
    exact = ["a", "b", "c", "d", "e"]
    approx = ["a", "c", "x", "y", "b"]
    assert ann_recall_at(exact, approx, 1) == 1.0  # {a} in {a}
    assert ann_recall_at(exact, approx, 3) == 2 / 3  # {a, b, c} against {a, c, x}
    assert ann_recall_at(exact, approx, 5) == 3 / 5  # b at rank 5 counts; d and e are missed
    assert ann_recall_at(exact[:2], approx, 5) == 1.0  # fewer exact rows than k: the share of those
    assert ann_recall_at([], approx, 5) is None  # nothing to miss: not measured, not 1.0


def test_per_case_with_a_case_the_index_missed_and_rank_order_not_row_order():
    exact = rows("q1", ["a", "b", "c"]) + rows("q2", ["d", "e"]) + rows("q3", ["f"])
    approx = list(reversed(rows("q1", ["b", "z", "a"]))) + rows("q2", ["e", "d"])
    assert ann_recall_by_case(exact, approx, [1, 2]) == {
        "q1": {"ann_recall@1": 0.0, "ann_recall@2": 0.5},  # a is exact's first, b approx's first
        "q2": {"ann_recall@1": 0.0, "ann_recall@2": 1.0},
        "q3": {"ann_recall@1": 0.0, "ann_recall@2": 0.0},  # the index returned nothing for q3
    }


def test_the_command_prints_the_mean_over_measured_cases_and_writes_each_case(tmp_path):
    """q1: 0/1 at k=1, 1/2 at k=2; q2: 1/1 and 2/2; q3 has no exact rows (not measured):
    means (0 + 1) / 2 = 0.5 and (0.5 + 1) / 2 = 0.75."""
    exact, approx = tmp_path / "exact.parquet", tmp_path / "approx.parquet"
    pl.DataFrame(rows("q1", ["a", "b", "c"]) + rows("q2", ["d", "e"])).write_parquet(exact)
    pl.DataFrame(rows("q1", ["b", "z"]) + rows("q2", ["d", "e"]) + rows("q3", ["f"])).write_parquet(approx)
    out = tmp_path / "per_case.json"
    done = invoke("ann-recall", "--exact", exact, "--approximate", approx, "--k", 2, "--k", 1, "--out", out)
    assert done.output.splitlines() == ["ann_recall@1: 0.500 over 2 cases", "ann_recall@2: 0.750 over 2 cases"]
    assert json.loads(out.read_text()) == {
        "q1": {"ann_recall@1": 0.0, "ann_recall@2": 0.5},
        "q2": {"ann_recall@1": 1.0, "ann_recall@2": 1.0},
    }
    assert mean_ann_recall({"q": {"ann_recall@1": None}}, 1) == (None, 0)


def test_the_command_refuses_a_file_that_is_no_run_and_writes_nothing(tmp_path):
    bad, out = tmp_path / "bad.parquet", tmp_path / "per_case.json"
    bad.write_text("not parquet")
    done = invoke("ann-recall", "--exact", bad, "--approximate", bad, "--k", 1, "--out", out, code=2)
    assert f"{bad}: not a readable Parquet exact run" in done.output and "Traceback" not in done.output
    assert not out.exists()
    assert (
        "--k: must be at least 1, got 0"
        in invoke("ann-recall", "--exact", bad, "--approximate", bad, "--k", 0, code=2).output
    )
