"""The ``{any: [ref, ...]}`` evidence form: one unit satisfied by any of its alternatives."""

from __future__ import annotations

import pytest
from builders import evaluate_run, resolve_reference, span_chunk

from ragvet.errors import InputError
from ragvet.evidence import EvidenceResolver, chunks_by_doc, project_unit, relevant_chunks
from ragvet.inputs.cases import collect_cases, load_cases
from ragvet.measures.reference import evidence_recall_at_k, unit_available
from ragvet.schema import Case, Claim, Doc, EvidenceUnit, case_fingerprint

TEXT = "0123456789abcdefghijABCDEFGHIJ"  # 30 characters
DOCS = {"a": Doc("a", TEXT), "b": Doc("b", "another doc")}


# a: [0,10) [10,20) [20,30); b: [0,11)
TEXTS = {doc_id: doc.text for doc_id, doc in DOCS.items()}
CHUNKS = [
    span_chunk(d, o, s, e, DOCS[d].text[s:e])
    for d, o, s, e in [("a", 0, 0, 10), ("a", 1, 10, 20), ("a", 2, 20, 30), ("b", 0, 0, 11)]
]
BY_DOC = chunks_by_doc(CHUNKS)
EITHER = EvidenceUnit.any_of([EvidenceUnit("a", 2, 8), EvidenceUnit("a", 12, 25)])
PLAIN = EvidenceUnit("a", 22, 28)


def test_resolve_any_dedupes_sorts_and_collapses_a_single_alternative():
    ref = {
        "any": [
            {"doc": "a", "start": 12, "end": 25},
            {"doc": "a", "quote": "234567"},
            {"doc": "a", "start": 2, "end": 8},
        ]
    }
    unit = resolve_reference(ref, DOCS)
    assert unit == EITHER  # the quote "234567" is [2, 8): the same span twice counts once
    assert unit.alternatives == (EvidenceUnit("a", 2, 8), EvidenceUnit("a", 12, 25))
    assert unit.label() == "a[2:8] | a[12:25]"
    assert unit.doc_ids == ("a",) and not unit.doc_level
    # One distinct alternative is a plain unit; nested choices flatten.
    assert resolve_reference({"any": [{"doc": "b"}, {"doc": "b"}]}, DOCS) == EvidenceUnit("b")
    nested = {
        "any": [{"any": [{"doc": "b"}, {"doc": "a", "start": 2, "end": 8}]}, {"doc": "a", "start": 12, "end": 25}]
    }
    assert resolve_reference(nested, DOCS).alternatives == (
        EvidenceUnit("a", 2, 8),
        EvidenceUnit("a", 12, 25),
        EvidenceUnit("b"),
    )


def test_any_rows_round_trip_and_fingerprint_ignores_the_order_of_alternatives():
    row = EITHER.to_row()
    assert row == {"any": [{"doc": "a", "start": 2, "end": 8}, {"doc": "a", "start": 12, "end": 25}]}
    assert EvidenceUnit.from_row(row) == EITHER
    assert EvidenceUnit.from_row({"any": list(reversed(row["any"]))}) == EITHER
    case = Case("c", "q?", True, (EITHER, PLAIN), (Claim("x", (EITHER,)),))
    assert Case.from_row(case.to_row()) == case
    # A choice is not the same label as its first alternative alone.
    alone = Case("c", "q?", True, (EvidenceUnit("a", 2, 8), PLAIN), (Claim("x", (EITHER,)),))
    texts = {"a": "0123456789abcdefghijklmnopqrstuvwxyz", "b": "b"}
    assert case_fingerprint(case, texts) != case_fingerprint(alone, texts)
    assert case_fingerprint(case, texts) == case_fingerprint(Case("c", "q?", True, (PLAIN, EITHER), case.claims), texts)


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ({"any": []}, "evidence 1: `any` must be a non-empty list of references, got an empty list"),
        ({"any": {"doc": "a"}}, "evidence 1: `any` must be a non-empty list of references, got a mapping"),
        ({"any": [{"doc": "a"}], "doc": "a"}, "evidence 1: an {any: [...]} reference cannot also have doc"),
        ({"any": [{"doc": "a"}, {"doc": "zzz"}]}, "evidence 1 alternative 2: unknown doc 'zzz'"),
        ({"any": [{"doc": "a", "start": 5, "end": 99}]}, "evidence 1 alternative 1: offsets [5:99] are out of range"),
    ],
)
def test_any_problems_name_the_alternative(ref, expected):
    unit, problems = EvidenceResolver(DOCS).resolve(ref, "cases.yaml:3 (case c)", "evidence 1")
    assert unit is None
    assert any(p.what.startswith(expected) for p in problems), [p.what for p in problems]
    assert all(p.where == "cases.yaml:3 (case c)" for p in problems)


def test_projection_and_relevant_chunks_take_every_alternative():
    projected = project_unit(EITHER, BY_DOC["a"])
    assert projected.label == "a[2:8] | a[12:25]" and projected.pieces == {}
    assert [alt.pieces for alt in projected.alternatives] == [{"a#0": (2, 8)}, {"a#1": (12, 20), "a#2": (20, 25)}]
    assert projected.chunk_ids == {"a#0", "a#1", "a#2"}
    # Every annotator's span is relevant: [2,8) -> a#0; [12,25) -> a#1, a#2.
    assert relevant_chunks([EITHER], BY_DOC) == {"a#0", "a#1", "a#2"}
    assert relevant_chunks([PLAIN], BY_DOC) == {"a#2"}


def test_evidence_recall_with_alternatives_hand_computed():
    units = [project_unit(EITHER, BY_DOC["a"]), project_unit(PLAIN, BY_DOC["a"])]
    # top-1 = a#1: EITHER's [2,8) needs a#0 (absent); its [12,25) is covered 8 of 13 characters
    # (a#1 gives [12,20)); PLAIN [22,28) needs a#2. Nothing is available: 0/2.
    assert evidence_recall_at_k(["a#1", "a#2"], units, 1) == 0.0
    # top-2 = a#1, a#2: [12,25) is covered 13/13, PLAIN too: 2/2.
    assert evidence_recall_at_k(["a#1", "a#2"], units, 2) == 1.0
    # With span_coverage 0.5, 8/13 = 0.615 is enough for EITHER at k=1: 1/2.
    assert evidence_recall_at_k(["a#1", "a#2"], units, 1, span_coverage=0.5) == 0.5
    # a#0 alone satisfies EITHER through its first alternative: 1/2.
    assert evidence_recall_at_k(["a#0", "b#0"], units, 2) == 0.5
    # Alternatives are judged one by one, never pooled: a#0 + a#1 cover [2,8) fully, so EITHER
    # is available, while [12,25) alone is still 8/13.
    assert unit_available(units[0], {"a#0", "a#1"})
    assert not unit_available(units[0].alternatives[1], {"a#0", "a#1"})


def test_evaluate_run_projects_alternatives_in_several_docs(tmp_path):
    cases_file = tmp_path / "cases.jsonl"
    cases_file.write_text(
        '{"id": "c1", "question": "q?", "evidence": [{"any": [{"doc": "a", "start": 2, "end": 8}, {"doc": "b"}]},'
        ' {"doc": "a", "start": 22, "end": 28}], "claims": [{"text": "x", "evidence": [{"any": [{"doc": "b"},'
        ' {"doc": "a", "start": 22, "end": 28}]}]}]}\n'
    )
    cases, problems = collect_cases(cases_file, DOCS)
    assert problems == []
    assert cases[0].evidence[0] == EvidenceUnit.any_of([EvidenceUnit("b"), EvidenceUnit("a", 2, 8)])
    run = {"c1": [{"chunk_id": "b#0", "score": 2.0}, {"chunk_id": "a#2", "score": 1.0}]}
    (row,) = evaluate_run(cases, CHUNKS, run, {"c1": "eval"}, [1, 2], 1.0, TEXTS)
    metrics = row["metrics"]
    # relevant chunks: a#0 (via [2,8)), b#0 (via {b}), a#2 (via [22,28)).
    assert row["counts"]["relevant"] == 3
    assert metrics["recall@1"] == pytest.approx(1 / 3) and metrics["recall@2"] == pytest.approx(2 / 3)
    # k=1: b#0 satisfies the choice, not [22,28): 1/2. k=2: both: 2/2.
    assert metrics["evidence_recall@1"] == 0.5 and metrics["evidence_recall@2"] == 1.0
    assert metrics["claim_availability@1"] == 1.0
    assert row["missed_evidence"] == []
    (miss,) = evaluate_run(cases, CHUNKS, {"c1": [{"chunk_id": "a#1", "score": 1.0}]}, {"c1": "eval"}, [1], 1.0, TEXTS)
    assert miss["missed_evidence"] == ["a[2:8] | b", "a[22:28]"]


def test_any_is_validated_like_any_reference(tmp_path):
    cases_file = tmp_path / "cases.yaml"
    cases_file.write_text("- id: c1\n  question: q?\n  evidence:\n    - any: [{doc: a, quote: nowhere}]\n")
    with pytest.raises(InputError) as err:
        load_cases(cases_file, DOCS)
    (problem,) = err.value.problems
    assert problem.where == f"{cases_file}:4 (case c1)"
    assert problem.what.startswith("evidence 1 alternative 1: quote 'nowhere' not found in doc 'a'")
