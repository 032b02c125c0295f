"""ann_recall@k: the share of the exact top k an approximate index returns, on runs small enough to count by hand."""

from __future__ import annotations

from ragvet.measures.ann_recall import ann_recall_at, ann_recall_by_case


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
