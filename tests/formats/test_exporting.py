"""TREC run and qrels lines, and why tied scores are exported as rank-derived scores."""

from __future__ import annotations

import pytest
import pytrec_eval
from builders import span_chunk

from ragvet.errors import InputError
from ragvet.formats.exporting import trec_qrels_lines, trec_run_lines
from ragvet.measures.reference import reciprocal_rank
from ragvet.schema import Case, Chunk, EvidenceUnit


def row(case_id: str, rank: int, chunk_id: str, score: float) -> dict:
    return {"case_id": case_id, "rank": rank, "chunk_id": chunk_id, "score": score}


def test_run_lines_keep_strictly_decreasing_scores_sorted_by_case_then_rank():
    rows = [row("q2", 1, "b#0", 3.5), row("q1", 2, "a#1", 1.25), row("q1", 1, "a#0", 2.0)]
    lines, mode = trec_run_lines(rows, "bm25-cfg")
    assert mode == "score"
    assert lines == [
        "q1 Q0 a#0 1 2.000000 bm25-cfg",
        "q1 Q0 a#1 2 1.250000 bm25-cfg",
        "q2 Q0 b#0 1 3.500000 bm25-cfg",
    ]


def test_tied_scores_become_rank_derived_scores():
    rows = [row("q1", 1, "a#0", 2.0), row("q1", 2, "a#1", 2.0), row("q1", 3, "a#2", 1.0), row("q2", 1, "b#0", 0.5)]
    lines, mode = trec_run_lines(rows, "t")
    assert mode == "rank"
    # max rank 3: scores 3 + 1 - rank
    assert lines == [
        "q1 Q0 a#0 1 3.000000 t",
        "q1 Q0 a#1 2 2.000000 t",
        "q1 Q0 a#2 3 1.000000 t",
        "q2 Q0 b#0 1 3.000000 t",
    ]
    forced, forced_mode = trec_run_lines(rows, "t", scores="score")
    assert forced_mode == "score" and forced[1] == "q1 Q0 a#1 2 2.000000 t"
    assert trec_run_lines(rows[2:], "t", scores="rank")[0] == ["q1 Q0 a#2 3 1.000000 t", "q2 Q0 b#0 1 3.000000 t"]


def test_scores_equal_at_six_places_count_as_tied():
    rows = [row("q", 1, "a", 1.0000004), row("q", 2, "b", 1.0000001)]
    assert trec_run_lines(rows, "t")[1] == "rank"


def test_trec_eval_breaks_ties_by_docno_descending_so_raw_tied_scores_would_disagree():
    # ragvet: equal rounded scores are ranked by chunk id ascending, so "a#0" is first.
    rows = [row("q", 1, "a#0", 1.0), row("q", 2, "b#0", 1.0)]
    qrels = {"q": {"a#0": 1}}
    ours = reciprocal_rank(["a#0", "b#0"], {"a#0"})
    assert ours == 1.0

    def trec_rr(lines: list[str]) -> float:
        run = pytrec_eval.parse_run(lines)
        return pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(run)["q"]["recip_rank"]

    assert trec_rr(trec_run_lines(rows, "t", scores="score")[0]) == 0.5  # trec_eval put b#0 first
    assert trec_rr(trec_run_lines(rows, "t")[0]) == ours


# a: [0,10) [10,20) [20,30); b: [0,5) [5,10)
CHUNKS = [
    span_chunk(*span) for span in [("a", 0, 0, 10), ("a", 1, 10, 20), ("a", 2, 20, 30), ("b", 0, 0, 5), ("b", 1, 5, 10)]
]
CASES = [
    Case("q2", "?", True, (EvidenceUnit("b"),)),
    Case("q1", "?", True, (EvidenceUnit("a", 8, 12), EvidenceUnit("a", 25, 26))),
    Case("q3", "?", True, (EvidenceUnit.any_of([EvidenceUnit("a", 0, 2), EvidenceUnit("b", 6, 7)]),)),
    Case("q4", "?", False),
]


def test_qrels_lines_are_the_projected_relevant_chunks():
    assert trec_qrels_lines(CASES, CHUNKS) == [
        "q1 0 a#0 1",  # [8,12) overlaps a#0 and a#1
        "q1 0 a#1 1",
        "q1 0 a#2 1",  # [25,26)
        "q2 0 b#0 1",  # {doc: b}: every chunk of b
        "q2 0 b#1 1",
        "q3 0 a#0 1",  # every alternative's chunks
        "q3 0 b#1 1",
    ]  # q4 is an abstention case: no line
    assert trec_qrels_lines(CASES, CHUNKS, {"q2", "q4"}) == ["q2 0 b#0 1", "q2 0 b#1 1"]


def test_ids_with_whitespace_cannot_be_written():
    with pytest.raises(InputError) as err:
        trec_run_lines([row("my case", 1, "doc one#0", 1.0)], "t")
    assert [(p.where, p.what) for p in err.value.problems] == [
        ("case 'my case'", "the case id is empty or holds whitespace"),
        ("chunk 'doc one#0'", "the chunk id is empty or holds whitespace"),
    ]
    spaced = [span_chunk("a", 0, 0, 10), Chunk("my doc#0", "my doc", 0, 0, 4, "xxxx")]
    with pytest.raises(InputError, match="chunk 'my doc#0'"):
        trec_qrels_lines([Case("q", "?", True, (EvidenceUnit("my doc"),))], spaced)
