"""``ragvet import`` and ``ragvet export`` end to end: files written through the
validator, byte-identical re-imports, bad input with nothing written, and a BEIR
dataset taken through the pipeline whose figures pytrec_eval recomputes."""

from __future__ import annotations

import ast
import contextlib
import io
import json
from collections import Counter
from pathlib import Path

import pytest
import pytrec_eval
from builders import evaluate_run, invoke

from ragvet.chunking import chunk_corpus
from ragvet.errors import InputError, Problem, user_errors
from ragvet.formats.imported import Imported
from ragvet.inputs.cases import load_cases
from ragvet.inputs.corpus import load_corpus
from ragvet.interop import write_imported
from ragvet.measures.summary import summarise
from ragvet.storage.results import results_frame

# The three lines of docs/import-export.md ("Checking ragvet with pytrec_eval"), run as written.
DOCS_LINES = """\
import pytrec_eval, statistics as st; qrels = pytrec_eval.parse_qrel(open("qrels.txt"))
res = pytrec_eval.RelevanceEvaluator(qrels, {"recall.5", "recip_rank"}).evaluate(pytrec_eval.parse_run(open("run.txt")))
print({m: st.mean(res.get(q, {}).get(m, 0) for q in qrels) for m in ("recall_5", "recip_rank")})
"""

DOCS = [
    ("d01", "Tides", "The moon pulls the oceans and makes the tides rise and fall twice a day."),
    ("d02", "Tides again", "The moon pulls the oceans and makes the tides rise and fall twice a day."),
    ("d03", "Moon", "The moon orbits the earth once every twenty seven days and shows phases."),
    ("d04", "Mars", "Mars is the red planet. Its two small moons are Phobos and Deimos."),
    ("d05", "Sun", "The sun is a star at the centre of the solar system and warms the earth."),
    ("d06", "Venus", "Venus is the hottest planet because its thick clouds trap heat."),
    ("d07", "Jupiter", "Jupiter is the largest planet and has a great red spot, a giant storm."),
    ("d08", "Comets", "Comets are icy bodies that grow bright tails near the sun."),
    ("d09", "Eclipses", "A solar eclipse happens when the moon passes between the sun and the earth."),
    ("d10", "Seasons", "The tilt of the earth causes the seasons, not its distance from the sun."),
]
QUERIES = [
    ("q01", "Why do the tides rise twice a day?"),
    ("q02", "How long does the moon take to orbit the earth?"),
    ("q03", "Which planet is red?"),
    ("q04", "What causes a solar eclipse?"),
    ("q05", "Which planet is the hottest?"),
    ("q06", "What makes the seasons?"),
    ("q07", "What are comet tails?"),
    ("q08", "Where is the largest storm?"),
    ("q09", "Who wrote Hamlet?"),  # judged nowhere: an abstention case with --abstain-unjudged
    ("q10", "xylophone quartz"),  # no term matches: BM25 retrieves nothing
]
QRELS = [
    ("q01", "d01", 2),  # d02 has the same text and is not judged: BM25 ties them
    ("q01", "d09", 0),
    ("q02", "d03", 1),
    ("q03", "d04", 2),
    ("q03", "d07", 1),
    ("q04", "d09", 1),
    ("q04", "d05", 0),
    ("q05", "d06", 1),
    ("q06", "d10", 1),
    ("q07", "d08", 1),
    ("q08", "d07", 1),
    ("q10", "d05", 1),
]

PARAMS = """\
chunking:
  whole: {strategy: document}
  fixed-40: {strategy: fixed, unit: chars, window: 40, overlap: 10}
retrievers:
  bm25: {kind: bm25, k1: 1.2, b: 0.75, lowercase: true, stopwords: en, stemmer: english}
configs:
  whole-bm25: {chunking: whole, retriever: bm25}
  fixed-bm25: {chunking: fixed-40, retriever: bm25}
depth: 10
ks: [1, 3, 5, 10]
split: {salt: interop-c, eval_fraction: 0.5}
evidence: {span_coverage: 1.0}
slices: []
gate:
  configs: [whole-bm25]
  metrics: [recall@5]
  max_drop: 0.02
  min_slice_cases: 8
  slice_max_drop: 0.1
  slice_metric: recall@5
  require_significance: false
  bootstrap: {resamples: 100, seed: 1, confidence: 0.95}
"""


def write_beir(folder: Path, docs=DOCS, queries=QUERIES, qrels=QRELS, qrels_text: str | None = None) -> Path:
    (folder / "qrels").mkdir(parents=True)
    rows = [{"_id": i, "title": t, "text": x} for i, t, x in docs]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in queries))
    lines = "".join(f"{q}\t{d}\t{g}\n" for q, d, g in qrels)
    (folder / "qrels" / "test.tsv").write_text(qrels_text or "query-id\tcorpus-id\tscore\n" + lines)
    return folder


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob(".ragvet-import-*"))


# --- import -------------------------------------------------------------------------------


def test_import_beir_reports_counts_and_is_byte_identical(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = write_beir(tmp_path / "beir")
    result = invoke("import", "beir", source, "--abstain-unjudged", "--out-cases", "data/cases.jsonl")
    assert result.stdout.splitlines() == [
        "documents: 10",
        "cases: 10 (1 abstention)",
        "evidence units: 10",
        "judged docs: 12 (every grade, for judged@k)",
        "skipped: 0",
        f"wrote {Path('data/corpus/corpus.jsonl')} and {Path('data/cases.jsonl')}",
    ]
    corpus, cases = tmp_path / "data/corpus/corpus.jsonl", tmp_path / "data/cases.jsonl"
    assert sorted(p.name for p in corpus.parent.iterdir()) == ["corpus.jsonl"]
    first = (corpus.read_bytes(), cases.read_bytes())
    assert json.loads(corpus.read_text().splitlines()[1]) == {
        "doc_id": "d02",
        "text": DOCS[1][2],
        "title": "Tides again",
        "metadata": {},
    }
    assert json.loads(cases.read_text().splitlines()[0]) == {
        "id": "q01",
        "question": "Why do the tides rise twice a day?",
        "evidence": [{"doc": "d01"}],
        "judged": {"d01": 2, "d09": 0},
    }
    invoke("import", "beir", source, "--abstain-unjudged", "--force", "--out-cases", "data/cases.jsonl")
    assert (corpus.read_bytes(), cases.read_bytes()) == first
    assert leftovers(tmp_path) == []


def test_import_refuses_a_non_empty_corpus_folder_without_force(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = write_beir(tmp_path / "beir")
    (tmp_path / "data/corpus").mkdir(parents=True)
    (tmp_path / "data/corpus/handbook.md").write_text("# Old corpus\n")
    result = invoke("import", "beir", source, "--out-cases", "data/cases.jsonl", code=None)
    assert result.exit_code == 2
    assert "data/corpus: the corpus folder is not empty" in result.stderr
    assert not (tmp_path / "data/cases.jsonl").exists()
    assert [p.name for p in (tmp_path / "data/corpus").iterdir()] == ["handbook.md"]
    invoke("import", "beir", source, "--force")
    assert [p.name for p in (tmp_path / "data/corpus").iterdir()] == ["corpus.jsonl"]


def bad_beir_columns(tmp_path: Path) -> tuple[list[str], str]:
    text = "query-id\tcorpus-id\tscore\nq01\td01\t2\nq02\td03\n"
    folder = write_beir(tmp_path / "beir", qrels_text=text)
    return ["beir", folder], f"{folder / 'qrels' / 'test.tsv'}:3: a BEIR qrels line has 3 columns"


def bad_trec_unknown(tmp_path: Path) -> tuple[list[str], str]:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "d1.txt").write_text("Some text.")
    (tmp_path / "topics.tsv").write_text("1\tsome question\n")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("1 0 d1 1\n2 0 d1 1\n1 0 d7 1\n")
    args = ["trec", "--topics", tmp_path / "topics.tsv", "--qrels", qrels, "--docs", tmp_path / "docs"]
    fix = "    fix: add the query, or remove the line from the qrels"
    return args, f"{qrels}:2: judgement for unknown query '2'\n{fix}\n{qrels}:3: judgement for unknown doc 'd7'"


def bad_empty_corpus(tmp_path: Path) -> tuple[list[str], str]:
    folder = write_beir(tmp_path / "beir", docs=[], qrels_text="query-id\tcorpus-id\tscore\n")
    return ["beir", folder], f"{folder / 'corpus.jsonl'}: the corpus is empty: it has no documents"


def bad_duplicate_id(tmp_path: Path) -> tuple[list[str], str]:
    folder = write_beir(tmp_path / "beir", docs=DOCS + [("d03", "Again", "Another text.")])
    corpus = folder / "corpus.jsonl"
    return ["beir", folder], f"{corpus}:11: duplicate doc id 'd03': already defined at {corpus}:3"


def bad_squad_offset(tmp_path: Path) -> tuple[list[str], str]:
    path = tmp_path / "squad.json"
    qa = {"id": "q1", "question": "Where?", "answers": [{"text": "Paris", "answer_start": 4}]}
    data = {"data": [{"title": "T", "paragraphs": [{"context": "In Paris.", "qas": [qa]}]}]}
    path.write_text(json.dumps(data, indent=2))
    line = path.read_text().split("\n").index('                  "text": "Paris",')  # 0-based: the brace's line
    what = "question 'q1' answer 1: the context at answer_start 4 reads 'aris.', not the answer text 'Paris'"
    return ["squad", path], f"{path}:{line}: {what}"


@pytest.mark.parametrize(
    "make", [bad_beir_columns, bad_trec_unknown, bad_empty_corpus, bad_duplicate_id, bad_squad_offset]
)
def test_bad_input_names_file_and_line_and_writes_nothing(tmp_path, monkeypatch, make):
    monkeypatch.chdir(tmp_path)
    args, expected = make(tmp_path)
    result = invoke("import", *args, "--out-corpus", "out/corpus", "--out-cases", "out/cases.jsonl", code=None)
    assert result.exit_code == 2, result.output
    assert expected in result.stderr
    assert not (tmp_path / "out").exists()
    assert leftovers(tmp_path) == []


def test_a_flood_of_problems_is_capped_on_the_terminal_and_written_in_full(tmp_path, monkeypatch):
    """Raw TREC files of 70 judgements for unknown queries and 10 for an unknown doc:
    the terminal shows the first 50 and the count of each kind, the file all 80."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "d1.txt").write_text("Some text.")
    (tmp_path / "topics.tsv").write_text("1\tsome question\n")
    unknown_queries = [f"{q} 0 d1 1\n" for q in range(100, 170)]
    (tmp_path / "qrels.txt").write_text("".join(unknown_queries) + "1 0 d9 1\n" * 10)
    args = ["trec", "--topics", "topics.tsv", "--qrels", "qrels.txt", "--docs", "docs"]
    result = invoke("import", *args, "--out-corpus", "out/corpus", "--out-cases", "out/cases.jsonl", code=None)
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert lines[0] == "ragvet: 80 problems found; the first 50 follow, and all of them are in .ragvet/problems.txt:"
    assert lines[1] == "qrels.txt:1: judgement for unknown query '100'"
    assert lines[99] == "qrels.txt:50: judgement for unknown query '149'"
    assert lines[101:] == [
        "30 more not shown; all 80 by kind:",
        "  70 × judgement for unknown query '…'",
        "  10 × judgement for unknown doc '…'",
    ]
    full = (tmp_path / ".ragvet/problems.txt").read_text().splitlines()
    assert full[0] == "80 problems found:"
    assert full[-2:] == [
        "qrels.txt:80: judgement for unknown doc 'd9'",
        "    fix: add the doc to the corpus, or remove the line",
    ]
    assert len(full) == 1 + 2 * 80
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_fifty_problems_are_all_shown_and_no_file_is_written(tmp_path):
    problems = [Problem(f"cases.yaml:{n}", f"case {n} is wrong", "fix it") for n in range(1, 51)]

    @user_errors
    def fails() -> None:
        raise InputError(problems)

    with (
        contextlib.chdir(tmp_path),
        pytest.raises(SystemExit) as exit_,
        contextlib.redirect_stderr(io.StringIO()) as err,
    ):
        fails()
    assert exit_.value.code == 2
    assert err.getvalue().splitlines()[0] == "ragvet: 50 problems found:"
    assert err.getvalue().count("    fix: fix it") == 50
    assert not (tmp_path / ".ragvet").exists()


def test_the_validator_runs_on_imported_rows_and_names_the_source_line(tmp_path):
    imported = Imported(
        docs=[{"doc_id": "d1", "text": "Some text.", "title": None, "metadata": {}}],
        cases=[
            {"id": "q1", "question": "Fine?", "evidence": [{"doc": "d1"}]},
            {"id": "q2", "question": "Where?", "evidence": [{"doc": "d1", "start": 5, "end": 99}]},
        ],
        doc_sources={"d1": "corpus.jsonl:1"},
        case_sources={"q1": "queries.jsonl:1", "q2": "queries.jsonl:7"},
        skipped=Counter(),
    )
    with pytest.raises(InputError) as err:
        write_imported(imported, tmp_path / "corpus", tmp_path / "cases.jsonl")
    ((where, what),) = [(p.where, p.what) for p in err.value.problems]
    assert where == "queries.jsonl:7 (case q2)"
    assert what.startswith("evidence 1: offsets [5:99] are out of range (doc 'd1' has 10 characters)")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_import_trec_and_squad_from_the_cli(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "topics.txt").write_text("<top>\n<num> Number: 7\n<title> moon tides\n</top>\n")
    (tmp_path / "qrels.txt").write_text("7 0 d01 1\n")
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"_id": i, "text": x, "title": t}) + "\n" for i, t, x in DOCS[:2]))
    result = invoke(
        "import",
        "trec",
        "--topics",
        "topics.txt",
        "--qrels",
        "qrels.txt",
        "--docs",
        docs,
        "--out-cases",
        "data/cases.jsonl",
    )
    assert result.stdout.splitlines()[:3] == ["documents: 2", "cases: 1 (0 abstention)", "evidence units: 1"]
    assert (tmp_path / "data/cases.jsonl").read_text() == (
        '{"evidence":[{"doc":"d01"}],"id":"7","judged":{"d01":1},"question":"moon tides"}\n'
    )

    squad = tmp_path / "squad.json"
    context = "The Eiffel Tower is in Paris."
    answers = [{"text": "Paris", "answer_start": 23}, {"text": "in Paris", "answer_start": 20}]
    qas = [
        {"id": "s1", "question": "Where is it?", "answers": answers},
        {"id": "s2", "question": "Who built the Louvre?", "answers": [], "is_impossible": True},
    ]
    squad.write_text(
        json.dumps({"data": [{"title": "Eiffel Tower", "paragraphs": [{"context": context, "qas": qas}]}]})
    )
    result = invoke("import", "squad", squad, "--out-corpus", "sq/corpus", "--out-cases", "sq/cases.yaml")
    assert result.stdout.splitlines()[:3] == ["documents: 1", "cases: 2 (1 abstention)", "evidence units: 1"]
    # The pipeline's validate stage reads the YAML cases, alternatives included.
    (tmp_path / "params.yaml").write_text(PARAMS)
    invoke("validate", "--corpus", "sq/corpus", "--cases", "sq/cases.yaml", "--out", "sq/validated")
    rows = [json.loads(line) for line in (tmp_path / "sq/validated/cases.jsonl").read_text().splitlines()]
    assert rows[0]["evidence"] == [
        {"any": [{"doc": "Eiffel_Tower/0", "start": 20, "end": 28}, {"doc": "Eiffel_Tower/0", "start": 23, "end": 28}]}
    ]
    assert rows[1]["answerable"] is False


# --- BEIR -> pipeline -> pytrec_eval --------------------------------------------------------


def run_readme_lines(folder: Path) -> dict[str, float]:
    out = io.StringIO()
    with contextlib.chdir(folder), contextlib.redirect_stdout(out):
        exec(compile(DOCS_LINES, "README", "exec"), {})
    return ast.literal_eval(out.getvalue())


def trec_eval_means(folder: Path, ks: list[int]) -> dict[str, float]:
    """Every ragvet chunk metric recomputed by pytrec_eval, averaged over the qrels' queries
    (a query with nothing retrieved is absent from pytrec_eval's output: it scores 0)."""
    with open(folder / "qrels.txt") as qrels_file, open(folder / "run.txt") as run_file:
        qrels, run = pytrec_eval.parse_qrel(qrels_file), pytrec_eval.parse_run(run_file)
    cut = ",".join(map(str, ks))
    measures = {f"recall.{cut}", f"P.{cut}", f"ndcg_cut.{cut}", f"success.{cut}", "recip_rank"}
    results = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    names = {"mrr": "recip_rank"}
    for k in ks:
        names |= {f"recall@{k}": f"recall_{k}", f"precision@{k}": f"P_{k}", f"ndcg@{k}": f"ndcg_cut_{k}"}
        names[f"hit@{k}"] = f"success_{k}"
    return {
        ours: sum(results.get(q, {}).get(theirs, 0.0) for q in qrels) / len(qrels) for ours, theirs in names.items()
    }


def test_beir_through_the_pipeline_equals_pytrec_eval(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    invoke("import", "beir", write_beir(tmp_path / "beir"), "--abstain-unjudged", "--out-cases", "data/cases.jsonl")
    (tmp_path / "params.yaml").write_text(PARAMS)
    invoke("validate", "--corpus", "data/corpus", "--cases", "data/cases.jsonl", "--out", "data/validated")
    validated = ["--cases", "data/validated/cases.jsonl"]
    invoke("split", *validated, "--corpus", "data/validated/corpus.jsonl", "--out", "data/split.json")
    split = json.loads((tmp_path / "data/split.json").read_text())
    assert split["counts"] == {"eval": 5, "dev": 5}
    modes = set()
    for config, chunking in (("whole-bm25", "whole"), ("fixed-bm25", "fixed-40")):
        chunks = f"data/chunks/{chunking}.jsonl"
        invoke("chunk", chunking, "--corpus", "data/validated/corpus.jsonl", "--out", chunks)
        invoke("retrieve", config, "--chunks", chunks, *validated, "--out", f"data/runs/{config}.parquet")
        invoke(
            "evaluate", config, "--run", f"data/runs/{config}.parquet", "--chunks", chunks, *validated,
            "--corpus", "data/validated/corpus.jsonl", "--split", "data/split.json",
            "--metrics", f"metrics/{config}.json",
            "--per-case", f"metrics/cases/{config}.parquet", "--slices", f"metrics/slices/{config}.json",
        )  # fmt: skip
        summary = json.loads((tmp_path / f"metrics/{config}.json").read_text())
        result = invoke("export", "run", "--config", config, "--format", "trec", "--out", "run.txt")
        modes.add(result.stderr.split("scores: ")[1].split()[0])
        for split_name in ("eval", "dev"):
            invoke("export", "qrels", "--chunking", chunking, "--split", split_name, "--out", "qrels.txt")
            ours = summary[split_name]["metrics"]
            theirs = trec_eval_means(tmp_path, [1, 3, 5, 10])
            assert {name: ours[name] for name in theirs} == pytest.approx(theirs, abs=1e-6), (config, split_name)
            readme = run_readme_lines(tmp_path)
            assert readme == pytest.approx({"recall_5": ours["recall@5"], "recip_rank": ours["mrr"]}, abs=1e-6)
    # d01 and d02 have the same text, so BM25 ties them and the export falls back to rank-derived scores.
    assert modes == {"rank"}
    # Under the whole-document chunking the qrels are the imported relevant docs, one chunk each.
    invoke("export", "qrels", "--chunking", "whole", "--split", "eval", "--out", "qrels.txt")
    assert (tmp_path / "qrels.txt").read_text().splitlines() == [
        "q01 0 d01#0 1",  # q09 (eval) is an abstention case: no line
        "q06 0 d10#0 1",
        "q07 0 d08#0 1",
        "q08 0 d07#0 1",
    ]
    invoke("export", "run", "--config", "whole-bm25", "--out", "run.txt")
    run = (tmp_path / "run.txt").read_text().splitlines()
    # The deepest ranking in this run has 7 chunks (BM25 drops zero scores): scores 7, 6, ...
    assert run[:2] == ["q01 Q0 d01#0 1 7.000000 whole-bm25", "q01 Q0 d02#0 2 6.000000 whole-bm25"]
    assert "q10" not in {line.split()[0] for line in run}  # retrieved nothing; both sides score it 0
    ours = json.loads((tmp_path / "metrics/whole-bm25.json").read_text())["eval"]["metrics"]
    assert trec_eval_means(tmp_path, [1])["mrr"] == ours["mrr"] == 1.0
    # With the raw tied scores trec_eval would rank d02 (docno descending) above d01: q01's RR drops to 1/2.
    invoke("export", "run", "--config", "whole-bm25", "--scores", "score", "--out", "run.txt")
    assert trec_eval_means(tmp_path, [1])["mrr"] == pytest.approx((0.5 + 1 + 1 + 1) / 4)


def test_the_docs_show_exactly_these_lines():
    page = (Path(__file__).resolve().parents[1] / "docs/import-export.md").read_text()
    assert DOCS_LINES in page


def test_import_refuses_a_cases_path_that_is_a_folder_and_keeps_the_old_corpus(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = write_beir(tmp_path / "beir")
    (tmp_path / "data/corpus").mkdir(parents=True)
    (tmp_path / "data/corpus/old.md").write_text("# Old\n")
    (tmp_path / "cases.yaml").mkdir()
    result = invoke("import", "beir", source, "--out-cases", "cases.yaml", "--force", code=None)
    assert result.exit_code == 2 and "--out-cases is a folder" in result.stderr
    assert [p.name for p in (tmp_path / "data/corpus").iterdir()] == ["old.md"]


def test_a_cranfield_like_trec_import_keeps_negative_grades_for_judged_at_k(tmp_path, monkeypatch):
    """Cranfield's qrels grade 1 (complete answer) to 4 (minimum interest) and -1 (no
    interest): every judgement stays in the judged set, only grades >= 1 are evidence,
    and judged@k of a hand-made one-chunk-per-doc run counts the grade -1 doc as judged."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "topics.tsv").write_text("1\twhat similarity laws apply to flutter\n2\tboundary layer heat\n")
    (tmp_path / "qrels.txt").write_text("1 0 184 2\n1 0 29 4\n1 0 12 -1\n2 0 51 1\n2 0 486 -1\n")
    texts = {d: f"abstract {d} about flow" for d in ("12", "29", "51", "184", "486", "7")}
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps({"doc_id": d, "text": t}) + "\n" for d, t in texts.items()))
    result = invoke(
        "import", "trec", "--topics", "topics.tsv", "--qrels", "qrels.txt", "--docs", "docs.jsonl",
        "--out-cases", "data/cases/cases.yaml",
    )  # fmt: skip
    assert result.stdout.splitlines()[:5] == [
        "documents: 6",
        "cases: 2 (0 abstention)",
        "evidence units: 3",
        "judged docs: 5 (every grade, for judged@k)",
        "skipped: 0",
    ]
    corpus = load_corpus(tmp_path / "data/corpus")
    cases = load_cases(tmp_path / "data/cases", {doc.doc_id: doc for doc in corpus})
    assert [(c.case_id, [u.doc_id for u in c.evidence], c.judged) for c in cases] == [
        ("1", ["184", "29"], {"12": -1, "184": 2, "29": 4}),
        ("2", ["51"], {"486": -1, "51": 1}),
    ]
    chunks = chunk_corpus(corpus, {"strategy": "document"})
    run = {
        "1": [{"chunk_id": f"{d}#0", "score": 5.0 - r} for r, d in enumerate(["7", "12", "184", "51"])],
        "2": [{"chunk_id": f"{d}#0", "score": 5.0 - r} for r, d in enumerate(["486", "7"])],
    }
    rows = evaluate_run(cases, chunks, run, {"1": "eval", "2": "eval"}, [1, 3, 10], 1.0, texts)
    # Case 1: 7 unjudged, 12 (grade -1) and 184 judged, 51 judged for case 2 only. Case 2: 486 (-1) judged, 7 not;
    # at k = 10 each divides by what it retrieved (4 and 2), as ir_measures does.
    assert [[row["metrics"][f"judged@{k}"] for k in (1, 3, 10)] for row in rows] == [[0.0, 2 / 3, 0.5], [1.0, 0.5, 0.5]]
    assert summarise(results_frame(rows), [1, 3, 10], None)["eval"]["metrics"]["judged@10"] == 0.5
