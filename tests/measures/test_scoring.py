"""The vectorised engine (src/ragvet/measures/engine.py) against the per-case reference definitions.

``evaluation.case_row`` scores one case with the readable reference functions of
``ragvet.measures.reference``; ``evaluation.evaluate_table`` (read as rows,
``builders.evaluate_run``) scores all cases with the engine.
Generated data covers what the engine handles by arithmetic instead of sets:
repeated chunks in a run, short and missing runs, k beyond the depth, abstention
cases, claims without available units, spans partly covered by overlapping
chunks, whole-doc and alternative units, and chunkings whose chunks nest (the
engine's slow projection path).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from builders import evaluate_run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragvet.errors import InputError
from ragvet.evidence import CountedTexts, chunks_by_doc, nonspace_before, project_unit, space_positions
from ragvet.measures.engine import project, rank_matrix
from ragvet.measures.evaluation import case_row
from ragvet.schema import Case, Chunk, Claim, EvidenceUnit
from ragvet.storage.columns import ChunkTable, EvidenceTable, RunTable
from ragvet.storage.files import write_jsonl
from ragvet.storage.tables import (
    read_case_table,
    read_chunk_table,
    read_run,
    read_run_table,
    write_case_table,
    write_cases,
    write_chunks,
)

DOC_LENGTH = 60
# Letters and whitespace: span coverage counts the non-whitespace characters only.
TEXT = st.text(st.sampled_from("ab \n\t\u00a0"), min_size=DOC_LENGTH, max_size=DOC_LENGTH)


@st.composite
def chunkings(draw) -> tuple[list[Chunk], dict[str, str]]:
    """1-3 docs of letters and whitespace, each cut in fixed windows (with overlap) or
    in arbitrary, possibly nested pieces; the chunks and the docs' texts."""
    chunks: list[Chunk] = []
    texts: dict[str, str] = {}
    for doc in range(draw(st.integers(1, 3))):
        doc_id = f"doc{doc}"
        texts[doc_id] = text = draw(TEXT)
        if draw(st.booleans()):
            size = draw(st.integers(5, 25))
            step = draw(st.integers(max(1, size // 3), size))
            bounds = [(start, min(start + size, DOC_LENGTH)) for start in range(0, DOC_LENGTH, step)]
        else:
            piece = st.tuples(st.integers(0, DOC_LENGTH - 1), st.integers(1, 30))
            pairs = draw(st.lists(piece, min_size=1, max_size=6))
            bounds = [(start, min(start + width, DOC_LENGTH)) for start, width in pairs]
        for ordinal, (start, end) in enumerate(bounds):
            chunks.append(Chunk(f"{doc_id}#{ordinal}", doc_id, ordinal, start, end, text[start:end]))
    if draw(st.booleans()):  # a budget in tokens: each chunk's own token starts, ascending
        chunks = [
            Chunk(c.chunk_id, c.doc_id, c.ordinal, c.start, c.end, c.text, {}, tuple(sorted(set(offsets))))
            for c in chunks
            for offsets in [draw(st.lists(st.integers(0, max(c.end - c.start - 1, 0)), max_size=8))]
        ]
    return chunks, texts


def targets(docs: list[str]):
    span = st.builds(
        lambda doc, start, width: EvidenceUnit(doc, start, min(start + width, DOC_LENGTH)),
        st.sampled_from(docs + ["unknown-doc"]),
        st.integers(0, DOC_LENGTH - 1),
        st.integers(0, 25),  # 0: a zero-length span
    )
    return st.one_of(span, st.builds(EvidenceUnit, st.sampled_from(docs)))


def units(docs: list[str]):
    single = targets(docs)
    choice = st.lists(single, min_size=2, max_size=3).map(EvidenceUnit.any_of)
    return st.one_of(single, single, choice)


@st.composite
def evaluations(draw):
    chunks, texts = draw(chunkings())
    docs = sorted({c.doc_id for c in chunks})
    ids = [c.chunk_id for c in chunks]
    cases, run = [], {}
    judging = draw(st.booleans())  # imported qrels: some cases carry a judged set, of docs with or without chunks
    judged_sets = st.none() | st.dictionaries(st.sampled_from(docs + ["unchunked-doc"]), st.integers(-1, 3), min_size=1)
    for number in range(draw(st.integers(1, 5))):
        evidence = tuple(draw(st.lists(units(docs), max_size=3)))
        cited = st.sampled_from(evidence) if evidence else units(docs)
        claims = tuple(
            Claim(f"claim {c}", tuple(draw(st.lists(st.one_of(cited, units(docs)), max_size=2))))
            for c in range(draw(st.integers(0, 2)) if evidence else 0)
        )
        case_id = f"case{number}"
        judged = draw(judged_sets) if judging else None
        cases.append(Case(case_id, "?", bool(evidence), evidence, claims, {"t": "x"}, {}, judged))
        if draw(st.integers(0, 5)):  # sometimes no run at all
            retrieved = draw(st.lists(st.sampled_from(ids), max_size=12))  # repeats allowed
            scores = draw(st.lists(st.sampled_from([0.5, 1.0, 2.0]), min_size=len(retrieved), max_size=len(retrieved)))
            run[case_id] = [{"chunk_id": c, "score": s} for c, s in zip(retrieved, sorted(scores, reverse=True))]
    ks = draw(st.lists(st.integers(1, 15), min_size=1, max_size=4, unique=True))
    coverage = draw(st.sampled_from([0.0, 0.3, 0.5, 1.0]))
    budgets = draw(st.lists(st.integers(0, 80), max_size=3, unique=True))
    return cases, chunks, texts, run, ks, coverage, budgets


def assert_rows_equal(engine: dict, reference: dict) -> None:
    assert engine.keys() == reference.keys()
    for key in engine:
        if key != "metrics":
            assert engine[key] == reference[key], key
    assert engine["metrics"].keys() == reference["metrics"].keys()
    for name, value in engine["metrics"].items():
        expected = reference["metrics"][name]
        if expected is None:
            assert value is None, name
        else:
            assert type(value) is type(expected), name
            assert math.isclose(value, expected, rel_tol=0, abs_tol=1e-12), (name, value, expected)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(evaluations())
def test_engine_equals_the_reference_case_by_case(data):
    cases, chunks, texts, run, ks, coverage, budgets = data
    split = {case.case_id: "eval" for case in cases}
    rows = evaluate_run(cases, chunks, run, split, ks, coverage, texts, budgets=budgets)
    by_doc = chunks_by_doc(chunks)
    lengths = {c.chunk_id: c.end - c.start for c in chunks}
    judging = any(case.judged is not None for case in cases)
    assert [row["case_id"] for row in rows] == sorted(split)
    for row in rows:
        case = next(c for c in cases if c.case_id == row["case_id"])
        ranked = run.get(case.case_id, ())
        reference = case_row(case, "eval", ranked, by_doc, lengths, ks, coverage, texts, budgets, judging)
        assert all(f"judged@{k}" in row["metrics"] for k in ks) == judging
        assert_rows_equal(row, reference)


def test_engine_hand_computed_with_a_duplicate_and_a_partly_covered_span():
    chunks = [Chunk(f"d#{i}", "d", i, 10 * i, 10 * i + 15, "") for i in range(5)]  # 5 overlap with the next
    # The span [12, 31) is in d#0 (12-15), d#1 (12-25), d#2 (20-31), d#3 (30-31).
    case = Case("c", "?", True, (EvidenceUnit("d", 12, 31),), (Claim("x", (EvidenceUnit("d", 12, 31),)),))
    run = {"c": [{"chunk_id": c, "score": 1.0} for c in ("d#4", "d#1", "d#4", "d#2", "d#3")]}
    (row,) = evaluate_run([case], chunks, run, {"c": "eval"}, [1, 2, 3, 5], 1.0, {"d": "x" * 60})
    metrics = row["metrics"]
    assert row["counts"]["duplicates_removed"] == 1 and row["counts"]["retrieved"] == 4
    assert row["counts"]["relevant"] == 4 and row["first_relevant_rank"] == 2
    assert [metrics[f"recall@{k}"] for k in (1, 2, 3, 5)] == [0.0, 0.25, 0.5, 0.75]
    assert metrics["precision@5"] == pytest.approx(3 / 5)  # k beyond the 4 distinct chunks
    assert metrics["mrr"] == 0.5
    # d#1 and d#2 cover 12-31 whole only together: available from k = 3.
    assert [metrics[f"evidence_recall@{k}"] for k in (1, 2, 3)] == [0.0, 0.0, 1.0]
    assert [row["counts"][f"claims_available@{k}"] for k in (2, 3)] == [0, 1]
    assert metrics["context_chars@2"] == 30 and metrics["context_chars@5"] == 60
    assert row["missed_evidence"] == []


def test_overlapping_chunks_are_not_counted_twice():
    # A [0, 12) and B [5, 15) together cover 15 of the span's 20 characters (not 22).
    chunks = [Chunk("d#0", "d", 0, 0, 12, ""), Chunk("d#1", "d", 1, 5, 15, ""), Chunk("d#2", "d", 2, 15, 20, "")]
    case = Case("c", "?", True, (EvidenceUnit("d", 0, 20),))
    run = {"c": [{"chunk_id": c, "score": 1.0} for c in ("d#0", "d#1", "d#2")]}
    (strict,) = evaluate_run([case], chunks, run, {"c": "eval"}, [2, 3], 1.0, {"d": "x" * 20})
    (loose,) = evaluate_run([case], chunks, run, {"c": "eval"}, [2, 3], 0.75, {"d": "x" * 20})
    assert strict["metrics"]["evidence_recall@2"] == 0.0 and strict["metrics"]["evidence_recall@3"] == 1.0
    assert loose["metrics"]["evidence_recall@2"] == 1.0
    assert strict["missed_evidence"] == [] and strict["missed_evidence_at"] == 3


def test_rank_matrix_orders_by_rank_and_keeps_the_file_order_of_ties():
    run = RunTable(
        ["a", "b"],
        np.array([1, 0, 0, 0, 1]),
        np.array([7, 5, 6, 4, 8]),
        np.array([2, 2, 1, 2, 1]),
        np.array([0.1, 0.5, 0.9, 0.5, 0.8]),
    )
    ranking = rank_matrix(run, ["a", "b", "c"])
    assert ranking.matrix.tolist() == [[6, 5, 4], [8, 7, -1], [-1, -1, -1]]
    assert ranking.retrieved.tolist() == [3, 2, 0]
    assert ranking.top1_score[:2].tolist() == [0.9, 0.8] and math.isnan(ranking.top1_score[2])


def test_projection_of_nested_chunks_matches_the_reference():
    # Not monotonic: d#1 lies inside d#0, so the contiguous-range search cannot be used.
    chunks = [Chunk("d#0", "d", 0, 0, 50, ""), Chunk("d#1", "d", 1, 10, 20, ""), Chunk("d#2", "d", 2, 40, 60, "")]
    case = Case("c", "?", True, (EvidenceUnit("d", 15, 45),))
    evidence = project(EvidenceTable.from_cases([case]), ChunkTable.from_chunks(chunks), {"d": "x" * 60})
    columns = zip(evidence.piece_chunk, evidence.piece_lo, evidence.piece_hi)
    pieces = {(int(c), int(lo), int(hi)) for c, lo, hi in columns}
    assert pieces == {(0, 15, 45), (1, 15, 20), (2, 40, 45)}


def test_column_readers_equal_the_object_readers(tmp_path):
    chunks = [Chunk(f"d#{i}", "d", i, 10 * i, 10 * i + 15, "text") for i in range(3)]
    cases = [
        Case(
            "b",
            "?",
            True,
            (EvidenceUnit.any_of([EvidenceUnit("d", 0, 5), EvidenceUnit("d", 20, 22)]),),
            (Claim("x", (EvidenceUnit("d"),)),),
        ),  # fmt: skip
        Case("a", "?", False),
    ]
    write_chunks(tmp_path / "chunks.jsonl", chunks)
    write_cases(tmp_path / "cases.jsonl", cases)
    second, first = ({"case_id": "b", "chunk_id": c, "rank": r, "score": 1.0} for c, r in (("d#2", 2), ("d#0", 1)))
    write_jsonl(tmp_path / "run.jsonl", [second, first])
    table = read_chunk_table(tmp_path / "chunks.jsonl")
    assert table.chunk_ids == ["d#0", "d#1", "d#2"] and table.ends.tolist() == [15, 25, 35]
    case_table = read_case_table(tmp_path / "cases.jsonl")
    ids, evidence = case_table.case_ids, case_table.evidence
    expected = EvidenceTable.from_cases(sorted(cases, key=lambda c: c.case_id))
    assert ids == ["a", "b"] and case_table.answerable == [False, True] and case_table.tags.width == 0
    assert evidence.target_doc == expected.target_doc == ["d", "d", "d"]
    for name in ("unit_case", "unit_claim", "claim_case", "target_unit", "target_start", "target_end"):
        assert getattr(evidence, name).tolist() == getattr(expected, name).tolist(), name
    assert evidence.target_start.tolist() == [0, 20, -1]
    run = read_run_table(tmp_path / "run.jsonl", table.chunk_ids, ids)
    assert run.case_ids == ["a", "b"] and run.case.tolist() == [1, 1] and run.chunk.tolist() == [2, 0]
    assert rank_matrix(run, ids).matrix.tolist() == [[-1, -1], [0, 2]]


def test_fast_run_reader_reports_problems_like_the_validating_reader(tmp_path):
    rows = [
        {"case_id": "q1", "chunk_id": "a#0", "rank": 1, "score": 1.0},
        {"case_id": "q1", "chunk_id": "a#0", "rank": 2, "score": 0.5},
        {"case_id": "q9", "chunk_id": "zz", "rank": 1, "score": 1.0},
    ]
    path = tmp_path / "run.jsonl"
    write_jsonl(path, rows)
    with pytest.raises(InputError) as fast:
        read_run_table(path, ["a#0"], ["q1"])
    with pytest.raises(InputError) as slow:
        read_run(path, {"a#0"}, {"q1"})
    assert str(fast.value) == str(slow.value)
    assert "duplicate chunk id 'a#0'" in str(fast.value) and "unknown chunk id 'zz'" in str(fast.value)


def test_nonspace_before_counts_what_is_not_whitespace():
    assert nonspace_before("a b\n\u00a0c", [0, 1, 2, 3, 6, 4, 3]) == [0, 1, 1, 2, 3, 2, 2]


def test_counted_texts_count_as_nonspace_before_in_each_doc():
    """Three docs on one line: an offset past a doc's end counts to its end, and the
    whitespace of the docs before it never counts."""
    texts = CountedTexts({"a": "a b\n\u00a0c", "b": "  xy z", "c": ""})
    docs = texts.numbers(["b", "a", "a", "c", "b", "a", "b"])
    assert texts.before(docs, np.array([3, 6, 2, 0, 9, 1, 0])).tolist() == [1, 3, 1, 0, 3, 1, 0]


def test_whitespace_is_what_str_isspace_matches_at_every_code_point():
    every = "".join(map(chr, range(0x110000)))
    assert space_positions(every).tolist() == [point for point in range(0x110000) if chr(point).isspace()]


def test_span_coverage_counts_non_whitespace_characters():
    """Sentence chunks are trimmed: ``Cats purr.`` is [0, 10) and ``Dogs bark loudly.``
    [11, 28). The span [10, 28) starts with the space between them: 18 characters, 17
    of them in chunk #1, but 15 of 15 non-whitespace ones. The span [0, 28) has 24
    non-whitespace characters, 15 of them in chunk #1 (0.625) and all 24 in both."""
    text = "Cats purr. Dogs bark loudly."
    chunks = [Chunk("d#0", "d", 0, 0, 10, text[0:10]), Chunk("d#1", "d", 1, 11, 28, text[11:28])]
    leading_space, both = EvidenceUnit("d", 10, 28), EvidenceUnit("d", 0, 28)
    cases = [Case("c1", "?", True, (leading_space,)), Case("c2", "?", True, (both,))]
    run = {case: [{"chunk_id": "d#1", "score": 2.0}, {"chunk_id": "d#0", "score": 1.0}] for case in ("c1", "c2")}
    split = {"c1": "eval", "c2": "eval"}
    strict = evaluate_run(cases, chunks, run, split, [1, 2], 1.0, {"d": text})
    assert [row["metrics"]["evidence_recall@1"] for row in strict] == [1.0, 0.0]
    assert [row["metrics"]["evidence_recall@2"] for row in strict] == [1.0, 1.0]
    loose = evaluate_run(cases, chunks, run, split, [1], 0.625, {"d": text})
    assert [row["metrics"]["evidence_recall@1"] for row in loose] == [1.0, 1.0]
    assert evaluate_run(cases, chunks, run, split, [1], 0.63, {"d": text})[1]["metrics"]["evidence_recall@1"] == 0.0
    projected = project_unit(leading_space, chunks, {"d": text})
    assert (projected.length, projected.pieces) == (15, {"d#1": (9, 24)})  # 9 non-whitespace before offset 11


def test_judged_share_through_the_parquet_case_table_hand_computed(tmp_path):
    """judged@k by the engine, the cases read back from the validate stage's Parquet
    table: a judged doc's every chunk is judged, each chunk of the top k counts, and
    k beyond the 4 retrieved divides by 4."""
    docs = {"D0": "aaaa bbbb", "D1": "cccc", "D3": "dddd", "D5": "eeee"}
    chunks = [
        Chunk(f"{doc}#{n}", doc, n, start, end, docs[doc][start:end])
        for doc, bounds in {"D0": [(0, 4), (5, 9)], "D1": [(0, 4)], "D3": [(0, 4)], "D5": [(0, 4)]}.items()
        for n, (start, end) in enumerate(bounds)
    ]
    cases = [
        Case("native", "?", True, (EvidenceUnit("D1"),)),
        Case("q1", "?", True, (EvidenceUnit("D1"),), judged={"D0": 0, "D1": 1, "D2": -1}),
        Case("q2", "?", True, (EvidenceUnit("D3"),), judged={"D3": 2}),
    ]
    write_case_table(tmp_path / "cases.parquet", [case.to_row() for case in cases])
    table = read_case_table(tmp_path / "cases.parquet")
    assert table.judged is not None and table.judged.has.tolist() == [False, True, True]
    assert table.judged.case.tolist() == [1, 1, 1, 2] and table.judged.doc == ["D0", "D1", "D2", "D3"]
    run = {"q1": [{"chunk_id": c, "score": 1.0} for c in ("D0#0", "D5#0", "D0#1", "D1#0")], "native": []}
    split = {case.case_id: "eval" for case in cases}
    rows = {row["case_id"]: row["metrics"] for row in evaluate_run(table, chunks, run, split, [1, 2, 5], 1.0, docs)}
    assert {case: [m["judged@1"], m["judged@2"], m["judged@5"]] for case, m in rows.items()} == {
        "native": [None, None, None],
        "q1": [1.0, 0.5, 0.75],
        "q2": [0.0, 0.0, 0.0],  # judged, nothing retrieved
    }
    native_only = tmp_path / "native.parquet"
    write_case_table(native_only, [cases[0].to_row()])
    assert read_case_table(native_only).judged is None  # no judged column: the table of before
    assert "judged@1" not in evaluate_run(cases[:1], chunks, {}, split, [1], 1.0, docs)[0]["metrics"]
