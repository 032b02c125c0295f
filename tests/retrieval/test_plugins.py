"""The user's own system as a configuration: python plugins and run files."""

import sys
import textwrap

import pytest
from builders import text_chunk

from ragvet.errors import InputError
from ragvet.retrieval.kinds import retrieve
from ragvet.schema import Case

CHUNKS = [text_chunk("a#0", year="2025"), text_chunk("a#1", year="2025"), text_chunk("b#0", year="2026")]
CASES = [Case("q1", "first?"), Case("q2", "second?", filter={"year": "2026"}), Case("q3", "third?")]


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """Write a plugin module into a temporary folder on sys.path."""

    def write(body: str) -> str:
        name = f"ragvet_test_plugin_{abs(hash(body))}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(body))
        monkeypatch.syspath_prepend(str(tmp_path))
        sys.modules.pop(name, None)
        return name

    return write


def test_python_plugin_gets_cases_and_chunk_table_and_is_filtered(plugin):
    module = plugin(
        """
        def search(cases, chunks, boost=0):
            assert list(chunks.columns)[:3] == ["chunk_id", "doc_id", "ordinal"]
            ids = list(chunks["chunk_id"])
            return {case["id"]: [(chunk_id, float(i + boost)) for i, chunk_id in enumerate(ids)] for case in cases
                    if case["id"] != "q3"}
        """
    )
    spec = {"kind": "python", "target": f"{module}:search", "options": {"boost": 1}}
    rows = retrieve(CASES, CHUNKS, spec, depth=2)
    assert [(r["case_id"], r["rank"], r["chunk_id"], r["score"]) for r in rows] == [
        ("q1", 1, "b#0", 3.0),
        ("q1", 2, "a#1", 2.0),
        ("q2", 1, "b#0", 3.0),  # a#0 and a#1 fail the case's filter
    ]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("def search(cases, chunks):\n    return [1, 2]\n", "returned list, not a mapping"),
        ("def search(cases, chunks):\n    return {'q1': [('zz#9', 1.0)]}\n", "unknown chunk id 'zz#9'"),
        ("def search(cases, chunks):\n    return {'q1': [('a#0', 'high')]}\n", "is not (chunk_id, score)"),
        ("def search(cases, chunks):\n    return {'q1': [('a#0', 1), ('a#0', 2)]}\n", "returned twice"),
        ("def search(cases, chunks):\n    return {'nope': []}\n", "unknown case id 'nope'"),
        ("import not_a_real_module\n", "cannot import"),
        ("def other(cases, chunks):\n    return {}\n", "has no function 'search'"),
    ],
)
def test_python_plugin_errors(plugin, body, fragment):
    module = plugin(body)
    with pytest.raises(InputError) as err:
        retrieve(CASES, CHUNKS, {"kind": "python", "target": f"{module}:search"}, depth=5)
    assert any(fragment in p.what for p in err.value.problems), err.value.render()


def test_trec_run_file_with_missing_case_and_filter(tmp_path):
    path = tmp_path / "prod.trec"
    path.write_text("q1 Q0 a#0 1 9.5 prod\nq1 Q0 b#0 2 3.0 prod\nq2 Q0 a#1 1 8.0 prod\nq2 Q0 b#0 2 1.0 prod\n")
    rows = retrieve(CASES, CHUNKS, {"kind": "run_file", "path": str(path)}, depth=5)
    assert [(r["case_id"], r["chunk_id"], r["score"]) for r in rows] == [
        ("q1", "a#0", 9.5),
        ("q1", "b#0", 3.0),
        ("q2", "b#0", 1.0),  # a#1 fails q2's filter; q3 is missing: an empty retrieval
    ]


def test_jsonl_rank_only_run_file(tmp_path):
    path = tmp_path / "prod.jsonl"
    path.write_text(
        '{"case_id": "q1", "chunk_id": "a#1", "rank": 2}\n{"case_id": "q1", "chunk_id": "b#0", "rank": 1}\n'
    )
    rows = retrieve(CASES, CHUNKS, {"kind": "run_file", "path": str(path)}, depth=5)
    assert [(r["chunk_id"], r["score"]) for r in rows] == [("b#0", 1.0), ("a#1", 0.5)]


def test_doc_level_run_needs_one_chunk_per_doc(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text('{"case_id": "q1", "doc_id": "b", "score": 2}\n{"case_id": "q1", "doc_id": "a", "score": 1}\n')
    whole = [text_chunk("a#0", year="2025"), text_chunk("b#0", year="2026")]
    rows = retrieve(CASES, whole, {"kind": "run_file", "path": str(path)}, depth=5)
    assert [r["chunk_id"] for r in rows] == ["b#0", "a#0"]
    with pytest.raises(InputError) as err:
        retrieve(CASES, CHUNKS, {"kind": "run_file", "path": str(path)}, depth=5)
    assert "strategy: document" in err.value.problems[0].fix


def test_run_file_errors_name_file_and_line(tmp_path):
    path = tmp_path / "bad.trec"
    path.write_text(
        "q1 Q0 a#0 1 9.5 prod\nq1 Q0 a#0 2\nq9 Q0 a#0 1 1.0 prod\nq1 Q0 zz#1 3 1.0 prod\nq1 Q0 a#0 4 1.0 x\n"
    )
    with pytest.raises(InputError) as err:
        retrieve(CASES, CHUNKS, {"kind": "run_file", "path": str(path)}, depth=5)
    assert [(p.where.rsplit("/", 1)[1], p.what[:30]) for p in err.value.problems] == [
        ("bad.trec:2", "a TREC run line has 6 columns "),
    ]
    path.write_text("q1 Q0 a#0 1 9.5 prod\nq9 Q0 a#0 1 1.0 prod\nq1 Q0 zz#1 3 1.0 prod\nq1 Q0 a#0 4 1.0 x\n")
    with pytest.raises(InputError) as err:
        retrieve(CASES, CHUNKS, {"kind": "run_file", "path": str(path)}, depth=5)
    assert [(p.where.rsplit("/", 1)[1], p.what) for p in err.value.problems] == [
        ("bad.trec:2 (case q9)", "unknown case id"),
        ("bad.trec:3 (case q1)", "unknown chunk id 'zz#1'"),
        ("bad.trec:4 (case q1)", "'a#0' appears twice for this case"),
    ]


def test_a_run_file_mixing_scores_and_ranks_is_refused(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        '{"case_id": "q1", "chunk_id": "a#0", "score": 0.4}\n{"case_id": "q1", "chunk_id": "a#1", "rank": 2}\n'
    )
    with pytest.raises(InputError) as err:
        retrieve(CASES, CHUNKS, {"kind": "run_file", "path": str(path)}, depth=5)
    assert "some lines give a score and others only a rank" in err.value.problems[0].what


def test_run_file_must_sit_where_dvc_tracks_it(tmp_path, monkeypatch):
    from ragvet.retrieval.specs.registry import retriever_problems

    monkeypatch.chdir(tmp_path)
    (tmp_path / "data" / "external").mkdir(parents=True)
    (tmp_path / "data" / "external" / "prod.trec").write_text("")
    (tmp_path / "elsewhere.trec").write_text("")
    assert retriever_problems("p", {"kind": "run_file", "path": "data/external/prod.trec"}, "w") == []
    (problem,) = retriever_problems("p", {"kind": "run_file", "path": "elsewhere.trec"}, "w")
    assert "outside data/external/" in problem.what
