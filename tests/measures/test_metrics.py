"""Tests of the metric definitions: hand-computed cases, then agreement with trec_eval and ranx.

trec_eval is reached through pytrec_eval (parameterised cutoffs such as ``P.3``
work there). ranx is called through its per-query numba kernels (``ranx.metrics``),
fed exactly what its ``evaluate`` would build: ``[doc id, score]`` rows in rank
order and qrels sorted by relevance. Its public ``evaluate`` compiles a further
~30 s of numba code on a clean machine, which the kernels avoid.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
import pytrec_eval
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ranx.metrics.hit_rate import _hit_rate
from ranx.metrics.ndcg import _ndcg
from ranx.metrics.precision import _precision
from ranx.metrics.recall import _recall
from ranx.metrics.reciprocal_rank import _reciprocal_rank

from ragvet.errors import InputError
from ragvet.measures.engine import KERNELS
from ragvet.measures.reference import (
    REFERENCE,
    case_metrics,
    claim_evidence_availability,
    context_chars_at_k,
    dedupe,
    evidence_recall_at_k,
    hit_at_k,
    judged_at_k,
    ndcg_at_k,
    precision_at_k,
    recall_at_k,
    reciprocal_rank,
    unit_available,
)
from ragvet.measures.registry import METRICS, metric_names, metric_problems
from ragvet.measures.summary import slice_table, summarise
from ragvet.schema import ProjectedUnit
from ragvet.storage.results import results_frame

LOG3 = math.log2(3)


def span(label: str, length: int, pieces: dict[str, tuple[int, int]]) -> ProjectedUnit:
    return ProjectedUnit(label=label, doc_level=False, length=length, pieces=pieces)


def doc(label: str, chunks: Sequence[str]) -> ProjectedUnit:
    return ProjectedUnit(label=label, doc_level=True, length=0, pieces={c: (0, 0) for c in chunks})


# --------------------------------------------------------------------------- hand-computed values


def test_dedupe_keeps_first_occurrence_and_counts_removed():
    assert dedupe(["a", "b", "a", "c", "b", "a"]) == (["a", "b", "c"], 3)
    assert dedupe([]) == ([], 0)
    assert dedupe(("x",)) == (["x"], 0)


# The DESIGN's worked example: two relevant chunks, one claim supported by each.
P1, P4, B2 = "leave-policy-2026#1", "leave-policy-2026#4", "benefits#2"
UNIT1 = span("leave-policy-2026[10:40]", 30, {P1: (10, 40)})
UNIT4 = span("leave-policy-2026[400:430]", 30, {P4: (400, 430)})
WORKED = {"retrieved": [P4, B2], "relevant": {P1, P4}, "claims": [[UNIT4], [UNIT1]]}


def test_worked_example_from_design():
    retrieved, relevant, claims = WORKED["retrieved"], WORKED["relevant"], WORKED["claims"]
    assert recall_at_k(retrieved, relevant, 2) == 0.5
    assert hit_at_k(retrieved, relevant, 2) == 1.0
    assert claim_evidence_availability(retrieved, claims, 2) == 0.5
    assert evidence_recall_at_k(retrieved, [UNIT1, UNIT4], 2) == 0.5
    assert reciprocal_rank(retrieved, relevant) == 1.0
    assert precision_at_k(retrieved, relevant, 2) == 0.5
    assert ndcg_at_k(retrieved, relevant, 2) == pytest.approx(1 / (1 + 1 / LOG3))


def test_empty_relevant_units_or_claims_give_none_not_zero():
    for fn in (recall_at_k, hit_at_k, precision_at_k, ndcg_at_k):
        assert fn(["a", "b"], set(), 3) is None
        assert fn([], [], 0) is None
    assert reciprocal_rank(["a"], set()) is None
    assert evidence_recall_at_k(["a"], [], 3) is None
    assert claim_evidence_availability(["a"], [], 3) is None
    assert context_chars_at_k(["a"], {"a": 7}, 3) == 7  # reported for every case


@pytest.mark.parametrize("k", [0, -1, -10])
def test_k_not_positive_gives_zero(k):
    relevant = {"a"}
    for fn in (recall_at_k, hit_at_k, precision_at_k, ndcg_at_k):
        assert fn(["a"], relevant, k) == 0.0
    unit = span("d[0:5]", 5, {"a": (0, 5)})
    assert evidence_recall_at_k(["a"], [unit], k) == 0.0
    assert claim_evidence_availability(["a"], [[unit]], k) == 0.0
    assert context_chars_at_k(["a"], {"a": 5}, k) == 0
    assert reciprocal_rank(["a"], relevant, depth=k) == 0.0


def test_k_beyond_the_run_counts_missing_ranks_as_non_relevant():
    retrieved, relevant = ["a", "x"], {"a", "b"}
    assert recall_at_k(retrieved, relevant, 5) == 0.5
    assert hit_at_k(retrieved, relevant, 5) == 1.0
    assert precision_at_k(retrieved, relevant, 5) == pytest.approx(0.2)  # divides by k, not by 2
    assert ndcg_at_k(retrieved, relevant, 5) == pytest.approx(1 / (1 + 1 / LOG3))
    assert recall_at_k([], relevant, 3) == 0.0
    assert precision_at_k([], relevant, 3) == 0.0
    assert ndcg_at_k([], relevant, 3) == 0.0
    assert reciprocal_rank([], relevant) == 0.0


def test_duplicates_are_removed_before_ranking():
    # Without dedupe "a" would be at rank 4 and outside the top 2.
    assert hit_at_k(["x", "x", "x", "a"], {"a"}, 2) == 1.0
    assert reciprocal_rank(["x", "x", "a"], {"a"}) == 0.5
    assert precision_at_k(["x", "x", "a"], {"a"}, 2) == 0.5
    # A repeated relevant chunk counts once.
    assert recall_at_k(["a", "a"], {"a", "b"}, 2) == 0.5
    assert precision_at_k(["a", "a"], {"a", "b"}, 2) == 0.5
    assert ndcg_at_k(["a", "a"], {"a", "b"}, 2) == pytest.approx(1 / (1 + 1 / LOG3))
    assert context_chars_at_k(["a", "a", "b"], {"a": 10, "b": 3}, 2) == 13


def test_reciprocal_rank_within_depth():
    retrieved = ["x", "y", "a", "b"]
    assert reciprocal_rank(retrieved, {"a", "b"}) == pytest.approx(1 / 3)
    assert reciprocal_rank(retrieved, {"a", "b"}, depth=3) == pytest.approx(1 / 3)
    assert reciprocal_rank(retrieved, {"a", "b"}, depth=2) == 0.0
    assert reciprocal_rank(retrieved, {"z"}) == 0.0


def test_ndcg_hand_computed():
    # relevant at ranks 2 and 4 of 4; three relevant in all, so the ideal fills ranks 1..3.
    dcg = 1 / LOG3 + 1 / math.log2(5)
    idcg = 1 + 1 / LOG3 + 1 / 2
    assert ndcg_at_k(["x", "a", "y", "b"], {"a", "b", "c"}, 4) == pytest.approx(dcg / idcg)
    assert ndcg_at_k(["a", "b"], {"a", "b"}, 2) == pytest.approx(1.0)
    assert ndcg_at_k(["x", "a"], {"a"}, 1) == 0.0


def test_precision_and_recall_hand_computed():
    retrieved, relevant = ["a", "x", "b", "y", "c"], {"a", "b", "c", "d"}
    assert precision_at_k(retrieved, relevant, 1) == 1.0
    assert precision_at_k(retrieved, relevant, 3) == pytest.approx(2 / 3)
    assert recall_at_k(retrieved, relevant, 3) == 0.5
    assert recall_at_k(retrieved, relevant, 5) == 0.75
    assert hit_at_k(retrieved, {"c"}, 4) == 0.0
    assert hit_at_k(retrieved, {"c"}, 5) == 1.0


# A 100-character span covered by overlapping chunks.
OVERLAP = span("d[0:100]", 100, {"c1": (0, 60), "c2": (40, 100), "c3": (50, 70)})


def test_span_coverage_is_the_union_of_overlapping_chunks():
    assert unit_available(OVERLAP, {"c1", "c2"})  # union 100 (the sum would be 120)
    assert not unit_available(OVERLAP, {"c1", "c3"})  # union 70, sum 80
    assert unit_available(OVERLAP, {"c1", "c3"}, span_coverage=0.7)  # exactly 70 / 100
    assert not unit_available(OVERLAP, {"c1", "c3"}, span_coverage=0.75)  # the sum 80 would pass
    assert not unit_available(OVERLAP, {"c2", "c3"}, span_coverage=0.61)  # union [40, 100) = 60
    assert unit_available(OVERLAP, {"c2", "c3"}, span_coverage=0.6)
    assert not unit_available(OVERLAP, {"other"}, span_coverage=0.0)
    assert unit_available(OVERLAP, {"c3"}, span_coverage=0.0)  # 0 means any overlap
    assert not unit_available(OVERLAP, set())


def test_span_coverage_with_a_gap_between_chunks():
    unit = span("d[0:10]", 10, {"a": (0, 3), "b": (7, 10), "c": (3, 7)})
    assert not unit_available(unit, {"a", "b"})
    assert unit_available(unit, {"a", "b"}, span_coverage=0.6)
    assert not unit_available(unit, {"a", "b"}, span_coverage=0.61)
    assert unit_available(unit, ["a", "b", "c"])


def test_zero_length_span_and_doc_level_units():
    empty = span("d[5:5]", 0, {"c1": (5, 5)})
    assert unit_available(empty, {"c1"})
    assert not unit_available(empty, {"c2"})
    whole = doc("handbook", ["handbook#0", "handbook#1", "handbook#2"])
    assert unit_available(whole, {"handbook#2"})
    assert not unit_available(whole, {"other#0"})
    assert evidence_recall_at_k(["x", "handbook#1"], [whole], 1) == 0.0
    assert evidence_recall_at_k(["x", "handbook#1"], [whole], 2) == 1.0


def test_span_coverage_out_of_range_is_an_error():
    with pytest.raises(ValueError, match="span_coverage"):
        unit_available(OVERLAP, {"c1"}, span_coverage=1.5)
    with pytest.raises(ValueError, match="span_coverage"):
        evidence_recall_at_k(["c1"], [OVERLAP], 1, span_coverage=-0.1)


def test_evidence_recall_and_claim_availability():
    a = span("d[0:10]", 10, {"c1": (0, 10)})
    b = span("d[20:30]", 10, {"c2": (20, 25), "c3": (25, 30)})
    whole = doc("e", ["e#0"])
    retrieved = ["c1", "c2", "e#0", "c3"]
    assert evidence_recall_at_k(retrieved, [a, b, whole], 1) == pytest.approx(1 / 3)
    assert evidence_recall_at_k(retrieved, [a, b, whole], 3) == pytest.approx(2 / 3)  # b half covered
    assert evidence_recall_at_k(retrieved, [a, b, whole], 3, span_coverage=0.5) == 1.0
    assert evidence_recall_at_k(retrieved, [a, b, whole], 4) == 1.0
    # A claim needs any one of its units; a claim without units is never available.
    claims = [[b, a], [b], [whole], []]
    assert claim_evidence_availability(retrieved, claims, 1) == 0.25
    assert claim_evidence_availability(retrieved, claims, 3) == 0.5
    assert claim_evidence_availability(retrieved, claims, 4) == 0.75


def test_context_chars():
    lengths = {"a": 10, "b": 20, "c": 5}
    assert context_chars_at_k(["a", "b", "a", "c"], lengths, 2) == 30
    assert context_chars_at_k(["a", "b", "a", "c"], lengths, 3) == 35
    assert context_chars_at_k(["a", "b", "a", "c"], lengths, 10) == 35
    assert context_chars_at_k([], lengths, 3) == 0
    with pytest.raises(KeyError, match="zzz"):
        context_chars_at_k(["zzz"], lengths, 1)


# --------------------------------------------------------------------------- judged@k

# A three-case toy of imported qrels (grades 0 and -1 are judgements too) and a run of one
# chunk per document, shorter than k: q1 retrieved 3 docs, q2 nothing, and "native" has no
# judged set. Hand-computed judged@k, with ir_measures' denominator min(k, retrieved):
TOY_JUDGED = {"q1": {"D0": 0, "D1": 1, "D2": -1}, "q2": {"D3": 2}, "native": None}
TOY_RUN = {"q1": ["D0", "D5", "D1"], "q2": [], "native": ["D0"]}
TOY_EXPECTED = {
    1: {"q1": 1.0, "q2": 0.0, "native": None},  # D0 judged
    2: {"q1": 0.5, "q2": 0.0, "native": None},  # D0 judged, D5 not
    5: {"q1": 2 / 3, "q2": 0.0, "native": None},  # k beyond the 3 retrieved: 2 judged of 3, not of 5
}


@pytest.mark.parametrize("k", sorted(TOY_EXPECTED))
def test_judged_at_k_hand_computed_on_a_three_case_toy(k):
    found = {case: judged_at_k(TOY_RUN[case], TOY_JUDGED[case], k) for case in TOY_RUN}
    assert found == pytest.approx(TOY_EXPECTED[k])


def test_judged_at_k_equals_ir_measures_judged():
    import ir_measures
    from ir_measures import Judged

    qrels = [ir_measures.Qrel(q, d, g) for q, judged in TOY_JUDGED.items() for d, g in (judged or {}).items()]
    run = [ir_measures.ScoredDoc(q, d, 10.0 - rank) for q, docs in TOY_RUN.items() for rank, d in enumerate(docs)]
    for k, expected in TOY_EXPECTED.items():
        theirs = {m.query_id: m.value for m in ir_measures.judged.iter_calc([Judged @ k], qrels, run)}
        # ir_measures scores the qrels' queries only (none for "native"), and q2, judged but
        # missing from the run, gets the measure's default 0.
        assert theirs == pytest.approx({q: v for q, v in expected.items() if v is not None})


def test_judged_at_k_counts_each_chunk_and_its_empty_cases():
    # Two chunks of judged doc A in the top 3 count twice: the share is of results sent, not of docs.
    assert judged_at_k(["A", "A", "B"], {"A"}, 3) == pytest.approx(2 / 3)
    assert judged_at_k(["A", "B"], {"A"}, 0) == 0.0
    assert judged_at_k([], {"A"}, 5) == 0.0
    assert judged_at_k(["A"], None, 5) is None
    # Without a judged set in the run, case_metrics leaves judged@k out; with one elsewhere in it, None.
    assert "judged@1" not in case_metrics(["c"], {"c"}, [], [], {"c": 1}, [1], 1.0)["metrics"]
    assert case_metrics(["c"], {"c"}, [], [], {"c": 1}, [1], 1.0, judgements=True)["metrics"]["judged@1"] is None


# --------------------------------------------------------------------------- registry


def test_every_registered_metric_has_a_reference_definition_and_an_engine_kernel():
    assert (
        list(METRICS)
        == list(REFERENCE)
        == list(KERNELS)
        == [
            "recall",
            "hit",
            "mrr",
            "precision",
            "ndcg",
            "evidence_recall",
            "claim_availability",
            "context_chars",
            "evidence_recall_budget",
            "tokens_to_evidence",
            "span_precision",
            "span_iou",
            "judged",
        ]
    )


@pytest.mark.parametrize(
    "name, message",
    [
        ("faithfulness@5", "unknown metric"),
        ("recall", "needs a cutoff"),
        ("mrr@3", "takes no cutoff"),
        ("recall@0", "bad cutoff"),
        ("recall@-1", "bad cutoff"),
        ("recall@x", "bad cutoff"),
        ("recall@", "bad cutoff"),
        ("recall@5", "not computed"),
    ],
)
def test_metric_name_problems_say_what_is_wrong_where_and_what_is_supported(name, message):
    problems = metric_problems([name], ks=[1, 3], where="params.yaml (gate.metrics)")
    assert len(problems) == 1
    text = InputError(problems).render()
    assert message in text
    assert "params.yaml (gate.metrics)" in text
    if message == "unknown metric":
        for supported in ("recall@<k>", "evidence_recall@<k>", "claim_availability@<k>", "mrr"):
            assert supported in text


def test_metric_problems_collects_every_problem():
    problems = metric_problems(["recall@5", "bogus", "mrr@1", "hit@2"], ks=[5])
    assert len(problems) == 3


def test_metric_names_are_deterministic():
    names = metric_names([5, 1, 5])
    assert names == metric_names([1, 5])
    assert names[:3] == ["recall@1", "recall@5", "hit@1"]
    assert names.count("mrr") == 1
    assert len(names) == 9 * 2 + 1  # nine metrics cut at k, mrr; budget metrics only with budgets
    with_budgets = metric_names([1, 5], [512, 64])
    added = [name for name in with_budgets if name not in names]  # in registry order, budget ascending
    assert added == ["evidence_recall_budget@64", "evidence_recall_budget@512", "tokens_to_evidence"]
    judged = [name for name in metric_names([1, 5], judged=True) if name not in names]  # only with judged sets
    assert judged == ["judged@1", "judged@5"]
    assert metric_problems(names, ks=[1, 5]) == []
    with pytest.raises(ValueError):
        metric_names([])
    with pytest.raises(ValueError):
        metric_names([0, 3])


# --------------------------------------------------------------------------- case_metrics


def test_case_metrics_worked_example():
    result = case_metrics(
        WORKED["retrieved"] + [P4],
        WORKED["relevant"],
        [UNIT1, UNIT4],
        WORKED["claims"],
        {P1: 100, P4: 80, B2: 50},
        ks=[2, 1],
        span_coverage=1.0,
    )
    metrics = result["metrics"]
    assert set(metrics) == set(metric_names([1, 2]))
    assert metrics["recall@2"] == 0.5
    assert metrics["hit@2"] == 1.0
    assert metrics["claim_availability@2"] == 0.5
    assert metrics["evidence_recall@1"] == 0.5
    assert metrics["mrr"] == 1.0
    assert metrics["precision@1"] == 1.0
    assert metrics["context_chars@1"] == 80
    assert metrics["context_chars@2"] == 130
    assert result["counts"] == {
        "relevant": 2,
        "evidence": 2,
        "claims": 2,
        "claims_available@1": 1,
        "claims_available@2": 1,
        "duplicates_removed": 1,
        "retrieved": 2,
    }
    assert result["missed_evidence"] == [UNIT1.label]
    assert result["first_relevant_rank"] == 1


def test_case_metrics_abstention_case():
    result = case_metrics(["a", "b"], set(), [], [], {"a": 4, "b": 6}, ks=[1, 3], span_coverage=1.0)
    for name, value in result["metrics"].items():
        if name.startswith("context_chars@"):
            assert value == {"context_chars@1": 4, "context_chars@3": 10}[name]
        else:
            assert value is None, name
    assert result["counts"]["claims_available@3"] == 0
    assert result["missed_evidence"] == []
    assert result["first_relevant_rank"] is None


def test_case_metrics_without_claims_and_missed_at_max_k():
    unit = span("d[0:4]", 4, {"d#1": (0, 4)})
    result = case_metrics(["x", "y", "d#1"], {"d#1"}, [unit], [], {"x": 1, "y": 1, "d#1": 4}, [2], 1.0)
    assert result["metrics"]["claim_availability@2"] is None
    assert result["metrics"]["evidence_recall@2"] == 0.0
    assert result["missed_evidence"] == ["d[0:4]"] and result["missed_evidence_at"] == 2
    assert result["first_relevant_rank"] == 3
    assert result["metrics"]["mrr"] == pytest.approx(1 / 3)


# --------------------------------------------------------------------------- summarise / slices


def row(case_id, split, *, answerable=True, top1=None, tags=None, claims=0, available=0, dups=0, **values):
    """A per-case row for ks=[1]; metrics not given are None (context_chars@1 defaults to 0)."""
    metrics = {name: None for name in metric_names([1])}
    metrics["context_chars@1"] = 0
    metrics.update({name.replace("_at_", "@"): value for name, value in values.items()})
    return {
        "case_id": case_id,
        "split": split,
        "answerable": answerable,
        "tags": tags or {},
        "metrics": metrics,
        "counts": {"claims": claims, "claims_available@1": available, "duplicates_removed": dups},
        "top1_score": top1,
        "missed_evidence": [],
        "first_relevant_rank": None,
    }


ROWS = [
    row(
        "a",
        "eval",
        top1=0.9,
        tags={"phrasing": "natural"},
        claims=4,
        available=1,
        dups=2,
        recall_at_1=1.0,
        mrr=1.0,
        claim_availability_at_1=0.25,
        context_chars_at_1=100,
    ),
    row(
        "b",
        "eval",
        top1=0.4,
        tags={"phrasing": "terse"},
        claims=1,
        available=1,
        recall_at_1=0.5,
        mrr=0.5,
        claim_availability_at_1=1.0,
        context_chars_at_1=200,
    ),
    row("c", "eval", top1=0.6, tags={"phrasing": "natural"}, recall_at_1=0.0, mrr=0.25, context_chars_at_1=300),
    row("d", "eval", answerable=False, top1=0.3, tags={"phrasing": "natural"}, dups=1, context_chars_at_1=999),
    row("e", "eval", answerable=False, top1=None),
    row("g", "eval", answerable=False, top1=0.7),
    row("f", "dev", top1=0.2, claims=2, available=2, recall_at_1=0.0, mrr=0.0, claim_availability_at_1=1.0),
]


def test_summarise_hand_computed():
    summary = summarise(results_frame(ROWS), [1], abstain_below=0.5)
    ev = summary["eval"]
    assert ev["metrics"]["recall@1"] == 0.5
    assert ev["metrics"]["mrr"] == pytest.approx(1.75 / 3)
    assert ev["metrics"]["hit@1"] is None  # no case has a value
    assert ev["metrics"]["context_chars@1"] == 200  # abstention cases are not averaged in
    # Macro over the two cases with claims vs pooled over their five claims.
    assert ev["metrics"]["claim_availability@1"] == 0.625
    assert ev["metrics"]["claim_availability_pooled@1"] == 0.4
    assert ev["counted"]["claim_availability@1"] == 2
    assert ev["counted"]["recall@1"] == 3
    assert ev["denominators"] == {
        "cases": 3,
        "abstention_cases": 3,
        "cases_with_claims": 2,
        "cases_without_claims": 1,
        "claims": 5,
        "duplicates_removed": 3,
    }
    dev = summary["dev"]
    assert dev["metrics"]["claim_availability@1"] == 1.0
    assert dev["metrics"]["claim_availability_pooled@1"] == 1.0
    assert dev["denominators"]["cases"] == 1 and dev["denominators"]["abstention_cases"] == 0

    abstention = summary["abstention"]["eval"]
    assert abstention["cases"] == 3
    assert abstention["top1_score"] == {"min": 0.3, "median": 0.5, "max": 0.7, "mean": pytest.approx(0.5)}
    assert abstention["abstain_rate"] == pytest.approx(2 / 3)  # 0.3 and no retrieval at all
    assert abstention["false_abstain_rate"] == pytest.approx(1 / 3)  # b at 0.4
    assert summary["abstention"]["dev"] == {
        "cases": 0,
        "top1_score": None,
        "abstain_rate": None,
        "false_abstain_rate": 1.0,
    }


def test_summarise_without_threshold_or_cases():
    summary = summarise(results_frame(ROWS), [1], abstain_below=None)
    assert summary["abstention"]["eval"]["abstain_rate"] is None
    assert summary["abstention"]["eval"]["false_abstain_rate"] is None
    empty = summarise(results_frame([]), [1, 3], abstain_below=0.5)
    assert empty["eval"]["metrics"]["recall@3"] is None
    assert empty["eval"]["metrics"]["claim_availability_pooled@3"] is None
    assert empty["eval"]["denominators"]["cases"] == 0
    assert empty["abstention"]["dev"]["false_abstain_rate"] is None
    with pytest.raises(ValueError, match="split"):
        summarise(results_frame([dict(ROWS[0], split="test")]), [1], None)


def test_slice_table_uses_answerable_cases_with_the_tag():
    table = slice_table(results_frame(ROWS), ["phrasing", "doc_type"], [1])
    natural = table["eval"]["phrasing"]["natural"]
    assert natural["cases"] == 2  # a and c; the abstention case d is left out
    assert natural["metrics"]["recall@1"] == 0.5
    assert natural["metrics"]["context_chars@1"] == 200
    assert table["eval"]["phrasing"]["terse"]["cases"] == 1
    assert table["eval"]["doc_type"] == {}
    assert table["dev"]["phrasing"] == {}
    # A slice holding every answerable case equals the split summary.
    everyone = [dict(r, tags={"all": "yes"}) for r in ROWS]
    assert (
        slice_table(results_frame(everyone), ["all"], [1])["eval"]["all"]["yes"]["metrics"]
        == summarise(results_frame(ROWS), [1], None)["eval"]["metrics"]
    )


# --------------------------------------------------------------------------- properties vs trec_eval and ranx

IDS = [f"d{i}" for i in range(12)]
runs = st.lists(st.sampled_from(IDS), max_size=14)  # duplicates, short and empty runs
relevant_sets = st.sets(st.sampled_from(IDS), min_size=1, max_size=6)
cutoffs = st.lists(st.integers(min_value=1, max_value=16), min_size=1, max_size=4, unique=True)


def trec_eval(ranked: list[str], relevant: set[str], judged: set[str], ks: list[int]) -> dict[str, float]:
    qrels = {"q": {**{d: 0 for d in judged}, **{d: 1 for d in relevant}}}
    # Strictly decreasing scores: trec_eval sorts by score and breaks ties by doc id.
    run = {"q": {d: float(len(ranked) - i) for i, d in enumerate(ranked)}}
    cut = ",".join(map(str, ks))
    measures = {f"P.{cut}", f"recall.{cut}", f"success.{cut}", f"ndcg_cut.{cut}", "recip_rank"}
    result = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    return result.get("q", {})  # a query with no retrieved doc is absent: every measure is 0


def ranx_kernels(ranked: list[str], relevant: set[str], judged: set[str], k: int) -> dict[str, float]:
    index = {d: float(i) for i, d in enumerate(IDS)}
    qrels = np.array([[index[d], 1.0] for d in sorted(relevant)] + [[index[d], 0.0] for d in sorted(judged)])
    run = np.array([[index[d], float(len(ranked) - i)] for i, d in enumerate(ranked)]).reshape(-1, 2)
    return {
        "recall": _recall(qrels, run, k, 1),
        "hit": _hit_rate(qrels, run, k, 1),
        "precision": _precision(qrels, run, k, 1),
        "ndcg": _ndcg(qrels, run, k, 1, True),
        "mrr": _reciprocal_rank(qrels, run, 0, 1),
    }


@pytest.fixture(scope="module")
def ranx_compiled() -> None:
    """Compile the ranx kernels (numba) once, before hypothesis times the property test's examples."""
    ranx_kernels(["d0", "d1"], {"d1"}, set(), 1)


PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(runs, relevant_sets, st.sets(st.sampled_from(IDS), max_size=4), cutoffs)
def test_chunk_metrics_agree_with_trec_eval_and_ranx(ranx_compiled, retrieved, relevant, judged, ks):
    judged = judged - relevant  # judged non-relevant: must change nothing
    ranked, removed = dedupe(retrieved)
    assert removed == len(retrieved) - len(set(retrieved))
    reference = trec_eval(ranked, relevant, judged, ks)
    ours_mrr = reciprocal_rank(retrieved, relevant)
    assert ours_mrr == pytest.approx(reference.get("recip_rank", 0.0))
    for k in ks:
        ours = {
            "recall": recall_at_k(retrieved, relevant, k),
            "hit": hit_at_k(retrieved, relevant, k),
            "precision": precision_at_k(retrieved, relevant, k),
            "ndcg": ndcg_at_k(retrieved, relevant, k),
        }
        trec = {
            name: reference.get(f"{measure}_{k}", 0.0)
            for name, measure in (("recall", "recall"), ("hit", "success"), ("precision", "P"), ("ndcg", "ndcg_cut"))
        }
        assert ours == pytest.approx(trec), (k, ranked)
        assert {**ours, "mrr": ours_mrr} == pytest.approx(ranx_kernels(ranked, relevant, judged, k)), (k, ranked)


@PROPERTY
@given(runs, relevant_sets, st.integers(min_value=1, max_value=16))
def test_chunk_metric_invariants(retrieved, relevant, k):
    values = [
        recall_at_k(retrieved, relevant, k),
        hit_at_k(retrieved, relevant, k),
        precision_at_k(retrieved, relevant, k),
        ndcg_at_k(retrieved, relevant, k),
    ]
    assert all(0.0 <= v <= 1.0 + 1e-12 for v in values)
    recall, hit, precision, _ = values
    assert (hit == 1.0) == (recall > 0) == (precision > 0)
    assert recall_at_k(retrieved, relevant, k + 1) >= recall
    rank = case_metrics(retrieved, relevant, [], [], {d: 1 for d in IDS}, [k], 1.0)["first_relevant_rank"]
    assert hit == (1.0 if rank is not None and rank <= k else 0.0)


@st.composite
def span_units(draw):
    """A span ``[0, length)`` with chunk pieces that may overlap, nest or leave gaps."""
    length = draw(st.integers(min_value=1, max_value=40))
    pieces = {}
    for i in range(draw(st.integers(min_value=1, max_value=5))):
        start = draw(st.integers(min_value=0, max_value=length - 1))
        end = draw(st.integers(min_value=start + 1, max_value=length))
        pieces[f"c{i}"] = (start, end)
    return span(f"d[0:{length}]", length, pieces)


@PROPERTY
@given(
    span_units(),
    st.sets(st.sampled_from([f"c{i}" for i in range(6)])),
    st.sampled_from([0.0, 0.25, 0.5, 0.7, 0.9, 1.0]),
)
def test_span_availability_matches_character_count(unit, top, coverage):
    characters = set()
    for chunk_id, (start, end) in unit.pieces.items():
        if chunk_id in top:
            characters.update(range(start, end))
    expected = bool(characters) and len(characters) >= coverage * unit.length - 1e-9
    assert unit_available(unit, top, coverage) == expected


@PROPERTY
@given(runs, st.lists(span_units(), min_size=1, max_size=4), st.integers(min_value=1, max_value=8))
def test_evidence_figures_grow_with_k(retrieved, units, k):
    retrieved = [f"c{int(d[1:]) % 6}" for d in retrieved]
    claims = [units[: i + 1] for i in range(len(units))]
    for fn, arg in ((evidence_recall_at_k, units), (claim_evidence_availability, claims)):
        assert fn(retrieved, arg, k) <= fn(retrieved, arg, k + 1)
        assert fn(retrieved, arg, k, span_coverage=1.0) <= fn(retrieved, arg, k, span_coverage=0.5)
    # A claim is available when any of its units is: claim i holds units[0..i].
    top = dedupe(retrieved)[0][:k]
    available = [unit_available(unit, top) for unit in units]
    expected = sum(any(available[: i + 1]) for i in range(len(units))) / len(units)
    assert claim_evidence_availability(retrieved, claims, k) == pytest.approx(expected)
    assert evidence_recall_at_k(retrieved, units, k) == pytest.approx(sum(available) / len(units))


@PROPERTY
@given(runs, st.sets(st.sampled_from(IDS), max_size=5), st.lists(span_units(), max_size=3), cutoffs)
def test_case_metrics_names_every_metric_and_leaves_abstention_cases_without_a_value(retrieved, relevant, units, ks):
    retrieved = [f"c{int(d[1:]) % 6}" if int(d[1:]) % 2 else d for d in retrieved]
    lengths = {**{d: 3 for d in IDS}, **{f"c{i}": 7 for i in range(6)}}
    claims = [[unit] for unit in units[:2]]
    result = case_metrics(retrieved, relevant, units, claims, lengths, ks, 1.0)
    assert list(result["metrics"]) == metric_names(ks)
    if not relevant and not units:
        without = {name for name, value in result["metrics"].items() if value is None}
        assert without == {name for name in metric_names(ks) if not METRICS[name.partition("@")[0]].abstention}
    top = dedupe(retrieved)[0][: max(ks)]
    assert result["missed_evidence"] == list(dict.fromkeys(u.label for u in units if not unit_available(u, top)))
