"""The BEIR, TREC and SQuAD parsers: hand-counted rows and skips here, and every bad input
of tests/data/import/ with the file:line problems written beside it; and the folders an
import refuses to replace."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
from builders import beir_source, invoke
from repos import DATA

from ragvet import interop
from ragvet.errors import InputError
from ragvet.formats.beir import import_beir
from ragvet.formats.squad import import_squad
from ragvet.formats.trec import import_trec, read_topics

# --- BEIR --------------------------------------------------------------------------------

CORPUS = [
    {"_id": "d1", "title": "Tides", "text": "The moon pulls the oceans and makes tides rise twice a day."},
    {"_id": "d2", "title": "Sun", "text": "The sun is a star at the centre of the solar system."},
    {"_id": "d3", "title": "Moon", "text": "The moon  orbits the earth\nonce every 27 days."},
    {"_id": "d4", "title": "Mars", "text": "Mars is the red planet with two small moons."},
    {"_id": "d5", "title": "Empty", "text": ""},
    {"_id": 6, "title": "Earth", "text": "The earth orbits the sun.", "metadata": {"kind": "planet", "tags": ["a"]}},
]
QUERIES = [
    {"_id": "q1", "text": "What makes the tides rise?"},
    {"_id": "q2", "text": "How long does the moon\ttake to orbit the earth?"},
    {"_id": "q3", "text": "Which planet is red?"},
    {"_id": "q4", "text": "Who painted the Mona Lisa?"},  # judged, nothing relevant
    {"_id": "q5", "text": "What is a star?"},  # judged in train only
    {"_id": "q6", "text": "Is the sun hot?"},  # judged nowhere
]
TEST_QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td3\t1\nq2\td3\t1\nq2\t6\t0\nq3\td4\t1\nq4\td2\t0\n"


def jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def beir(tmp_path: Path, corpus=CORPUS, queries=QUERIES, test=TEST_QRELS) -> Path:
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(corpus if isinstance(corpus, str) else jsonl(corpus))
    (folder / "queries.jsonl").write_text(jsonl(queries))
    (folder / "qrels" / "test.tsv").write_text(test)
    (folder / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq5\td2\t1\n")
    return folder


def test_beir_rows_counts_and_skips_hand_counted(tmp_path):
    folder = beir(tmp_path)
    imported = import_beir(folder, abstain_unjudged=True)
    assert [doc["doc_id"] for doc in imported.docs] == ["6", "d1", "d2", "d3", "d4"]
    # Text exactly as given (offsets point into it), title kept apart, non-scalar metadata dropped.
    assert imported.docs[3] == {
        "doc_id": "d3",
        "text": "The moon  orbits the earth\nonce every 27 days.",
        "title": "Moon",
        "metadata": {},
    }
    assert imported.docs[0]["metadata"] == {"kind": "planet"}
    # Every judged doc stays in the judged set, grade 0 included; q6, judged nowhere, has none.
    assert imported.cases == [
        {
            "id": "q1",
            "question": "What makes the tides rise?",
            "evidence": [{"doc": "d1"}, {"doc": "d3"}],
            "judged": {"d1": 2, "d3": 1},
        },
        {
            "id": "q2",
            "question": "How long does the moon take to orbit the earth?",
            "evidence": [{"doc": "d3"}],
            "judged": {"6": 0, "d3": 1},
        },
        {"id": "q3", "question": "Which planet is red?", "evidence": [{"doc": "d4"}], "judged": {"d4": 1}},
        {"id": "q4", "question": "Who painted the Mona Lisa?", "answerable": False, "judged": {"d2": 0}},
        {"id": "q6", "question": "Is the sun hot?", "answerable": False},
    ]
    assert imported.counts == {
        "documents": 5,
        "cases": 5,
        "evidence_units": 4,
        "judged_docs": 6,
        "abstention_cases": 2,
        "skipped": 3,
    }
    assert dict(imported.skipped) == {
        "documents with no text": 1,
        "metadata values that are not a single value (dropped)": 1,
        "queries judged only in another split (qrels/train.tsv)": 1,
    }
    assert imported.doc_sources["d3"] == f"{folder / 'corpus.jsonl'}:3"
    assert imported.case_sources["q6"] == f"{folder / 'queries.jsonl'}:6"


def test_beir_without_the_flag_skips_queries_with_no_relevant_doc(tmp_path):
    imported = import_beir(beir(tmp_path))
    assert [case["id"] for case in imported.cases] == ["q1", "q2", "q3"]
    assert imported.counts["abstention_cases"] == 0
    assert imported.skipped["queries with no relevant doc (--abstain-unjudged imports them as abstention cases)"] == 2


def test_beir_min_grade_and_grades_at_or_below_zero(tmp_path):
    folder = beir(tmp_path)
    strict = import_beir(folder, min_grade=2)
    # d3's grade 1 is below 2: not evidence, but still judged.
    assert strict.cases == [
        {
            "id": "q1",
            "question": "What makes the tides rise?",
            "evidence": [{"doc": "d1"}],
            "judged": {"d1": 2, "d3": 1},
        },
    ]
    # --min-grade 0 cannot make a grade-0 judgement relevant.
    lenient = import_beir(folder, min_grade=0)
    assert [case.get("evidence") for case in lenient.cases] == [
        [{"doc": "d1"}, {"doc": "d3"}],
        [{"doc": "d3"}],
        [{"doc": "d4"}],
    ]


def test_beir_query_whose_only_relevant_doc_is_empty_is_not_an_abstention(tmp_path):
    imported = import_beir(beir(tmp_path, test=TEST_QRELS + "q6\td5\t1\n"), abstain_unjudged=True)
    assert "q6" not in [case["id"] for case in imported.cases]
    assert imported.skipped["queries whose relevant docs were all skipped for having no text"] == 1
    assert imported.skipped["judgements of a document skipped for having no text"] == 1


# --- TREC --------------------------------------------------------------------------------

TOPICS = """<top>
<num> Number: 401
<title> tides and the moon

<desc> Description:
What makes the tides
rise twice a day?

<narr> Narrative:
Relevant documents explain tides.
</top>

<top>
<num> Number: 402 </num>
<title> Topic: red planet </title>
<desc> Which planet is red? </desc>
</top>
<top>
<num> Number: 403
<title> mona lisa
<desc> Description:
Who painted it?
</top>
"""


def trec_files(tmp_path: Path, qrels: str = "401 0 d1 2\n401 0 d3 0\n402 0 d4 1\n") -> tuple[Path, Path, Path]:
    topics, qrels_path, docs = tmp_path / "topics.txt", tmp_path / "qrels.txt", tmp_path / "docs"
    topics.write_text(TOPICS)
    qrels_path.write_text(qrels)
    docs.mkdir()
    (docs / "d1.txt").write_text("The moon pulls the oceans.\n")
    (docs / "d3.txt").write_text("The moon orbits the earth.")
    (docs / "sub").mkdir()
    (docs / "sub" / "d4.txt").write_text("Mars is red.")
    (docs / "d9.txt").write_text("  \n")
    return topics, qrels_path, docs


def test_sgml_topics_title_and_desc(tmp_path):
    topics, _, _ = trec_files(tmp_path)
    by_title, ids, skipped, found = read_topics(topics, "title")
    assert found == [] and not skipped and ids == {"401", "402", "403"}
    assert by_title == {
        "401": ("tides and the moon", f"{topics}:1"),
        "402": ("red planet", f"{topics}:13"),
        "403": ("mona lisa", f"{topics}:18"),
    }
    by_desc, _, _, _ = read_topics(topics, "desc")
    assert [question for question, _ in by_desc.values()] == [
        "What makes the tides rise twice a day?",
        "Which planet is red?",
        "Who painted it?",
    ]


def test_trec_import_with_a_folder_of_text_files(tmp_path):
    imported = import_trec(*trec_files(tmp_path), abstain_unjudged=True)
    assert imported.docs == [
        {"doc_id": "d1", "text": "The moon pulls the oceans.\n", "title": None, "metadata": {}},
        {"doc_id": "d3", "text": "The moon orbits the earth.", "title": None, "metadata": {}},
        {"doc_id": "d4", "text": "Mars is red.", "title": None, "metadata": {}},
    ]
    assert imported.cases == [
        {"id": "401", "question": "tides and the moon", "evidence": [{"doc": "d1"}], "judged": {"d1": 2, "d3": 0}},
        {"id": "402", "question": "red planet", "evidence": [{"doc": "d4"}], "judged": {"d4": 1}},
        {"id": "403", "question": "mona lisa", "answerable": False},
    ]
    assert dict(imported.skipped) == {"documents with no text": 1}
    assert imported.counts == {
        "documents": 3,
        "cases": 3,
        "evidence_units": 2,
        "judged_docs": 3,
        "abstention_cases": 1,
        "skipped": 1,
    }


def test_trec_tsv_topics_and_jsonl_docs(tmp_path):
    topics = tmp_path / "topics.tsv"
    topics.write_text("1\tcheap flights\n2\tred  planet\n")
    qrels = tmp_path / "qrels"
    qrels.write_text("1 0 A 1\n1 0 B 3\n2 Q0 C 1\n")
    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        jsonl(
            [
                {"docno": "A", "text": "Cheap flights to Rome.", "title": "Flights"},
                {"docno": "B", "text": "Fares fell."},
                {"docno": "C", "text": "Mars is red.", "metadata": {"kind": "planet", "list": [1]}},
            ]
        )
    )
    imported = import_trec(topics, qrels, docs, min_grade=2)
    assert imported.cases == [
        {"id": "1", "question": "cheap flights", "evidence": [{"doc": "B"}], "judged": {"A": 1, "B": 3}}
    ]
    assert imported.docs[0]["title"] == "Flights" and imported.docs[2]["metadata"] == {"kind": "planet"}
    assert imported.skipped == {
        "metadata values that are not a single value (dropped)": 1,
        "queries with no relevant doc (--abstain-unjudged imports them as abstention cases)": 1,
    }


# --- SQuAD -------------------------------------------------------------------------------

CONTEXT = "The Eiffel Tower is in Paris. It was built in 1889."  # "in Paris" 20, "Paris" 23, "1889" 46


def squad(tmp_path: Path, answer_start: int = 46, second_title: str = "Louvre") -> Path:
    data = {
        "version": "v2.0",
        "data": [
            {
                "title": "Eiffel Tower",
                "paragraphs": [
                    {
                        "context": CONTEXT,
                        "qas": [
                            {
                                "id": "q1",
                                "question": "Where is the  Eiffel Tower?",
                                "answers": [
                                    {"text": "Paris", "answer_start": 23},
                                    {"text": "Paris", "answer_start": 23},
                                    {"text": "in Paris", "answer_start": 20},
                                ],
                                "is_impossible": False,
                            },
                            {
                                "id": "q2",
                                "question": "When was it built?",
                                "answers": [{"text": "1889", "answer_start": answer_start}],
                            },
                            {"id": "q3", "question": "Who designed the Louvre?", "answers": [], "is_impossible": True},
                        ],
                    },
                    {"context": "  ", "qas": [{"id": "q4", "question": "?", "answers": []}]},
                ],
            },
            {
                "title": second_title,
                "paragraphs": [
                    {"context": "Intro.", "qas": []},
                    {
                        "context": "The Louvre is a museum.",
                        "qas": [
                            {
                                "id": "q5",
                                "question": "What is the Louvre?",
                                "answers": [{"text": "a museum", "answer_start": 14}],
                            }
                        ],
                    },
                ],
            },
        ],
    }
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(data, indent=1))
    return path


def test_squad_paragraphs_answers_alternatives_and_impossible_questions(tmp_path):
    imported = import_squad(squad(tmp_path))
    assert imported.docs == [
        {"doc_id": "Eiffel_Tower/0", "text": CONTEXT, "title": "Eiffel Tower", "metadata": {}},
        {"doc_id": "Louvre/0", "text": "Intro.", "title": "Louvre", "metadata": {}},
        {"doc_id": "Louvre/1", "text": "The Louvre is a museum.", "title": "Louvre", "metadata": {}},
    ]
    assert imported.cases == [
        {
            "id": "q1",
            "question": "Where is the Eiffel Tower?",
            "evidence": [
                {
                    "any": [
                        {"doc": "Eiffel_Tower/0", "start": 20, "end": 28},
                        {"doc": "Eiffel_Tower/0", "start": 23, "end": 28},
                    ]
                }
            ],
        },
        {"id": "q2", "question": "When was it built?", "evidence": [{"doc": "Eiffel_Tower/0", "start": 46, "end": 50}]},
        {"id": "q3", "question": "Who designed the Louvre?", "answerable": False},
        {"id": "q5", "question": "What is the Louvre?", "evidence": [{"doc": "Louvre/1", "start": 14, "end": 22}]},
    ]
    assert CONTEXT[20:28] == "in Paris" and CONTEXT[46:50] == "1889"
    assert imported.counts == {
        "documents": 3,
        "cases": 4,
        "evidence_units": 3,
        "judged_docs": 0,  # SQuAD has no qrels: its cases have no judged set
        "abstention_cases": 1,
        "skipped": 2,
    }
    assert dict(imported.skipped) == {"paragraphs with no context": 1, "questions on a paragraph with no context": 1}


def test_importers_are_deterministic(tmp_path):
    assert import_squad(squad(tmp_path)) == import_squad(squad(tmp_path))
    assert import_beir(beir(tmp_path), abstain_unjudged=True) == import_beir(tmp_path / "beir", abstain_unjudged=True)


# --- bad inputs: tests/data/import/<format>/<case>/ ----------------------------------------

CASES = DATA / "import"
IMPORTERS = {
    "beir": lambda case, options: import_beir(case / "beir", **options),
    "trec": lambda case, options: import_trec(next(case.glob("topics.*")), case / "qrels.txt", case / "docs"),
    "squad": lambda case, options: import_squad(case / "squad.json"),
}


@pytest.mark.parametrize("case", sorted(CASES.glob("*/*/")), ids=lambda case: f"{case.parent.name}/{case.name}")
def test_an_importer_names_every_problem_of_a_bad_input_at_its_file_and_line(case):
    options = json.loads((case / "options.json").read_text()) if (case / "options.json").exists() else {}
    with pytest.raises(InputError) as err:
        IMPORTERS[case.parent.name](case, options)
    found = [f"{problem.where}: {problem.what}".replace(f"{case}/", "") for problem in err.value.problems]
    assert found == (case / "problems.txt").read_text().splitlines()


# --- where an import writes: --force replaces a corpus, never a project ------------------


def tree(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder`` with its bytes (None for a folder)."""
    return {p.relative_to(folder).as_posix(): None if p.is_dir() else p.read_bytes() for p in folder.rglob("*")}


def fake_project(folder: Path) -> Path:
    """A project's files: git, params, pipeline, a corpus and metrics."""
    for name, text in {
        ".git/HEAD": "ref: refs/heads/main\n",
        "params.yaml": "depth: 10\n",
        "dvc.yaml": "stages: {}\n",
        "data/corpus/handbook.md": "# Handbook\n",
        "metrics/sentences-600-bm25.json": "{}\n",
    }.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


@pytest.mark.parametrize("given", [".", "absolute"])
def test_import_force_refuses_a_folder_holding_more_than_corpus_files_and_changes_nothing(given, tmp_path, monkeypatch):
    """--force replaced the whole folder: given the project itself, .git, params.yaml,
    data and metrics went with it. A folder that holds anything but documents is refused."""
    source = beir_source(tmp_path)
    project = fake_project(tmp_path / "project")
    before = tree(project)
    monkeypatch.chdir(project)
    out_corpus = "." if given == "." else str(project)
    result = invoke("import", *source, "--out-corpus", out_corpus, "--out-cases", "../cases.yaml", "--force", code=None)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert f"{out_corpus}: --force would replace the whole folder" in result.stderr
    assert (
        "holds what is not a document: .git/, dvc.yaml, metrics/sentences-600-bm25.json, params.yaml" in result.stderr
    )
    assert "give --out-corpus a folder of documents only" in result.stderr
    assert tree(project) == before and not (tmp_path / "cases.yaml").exists()


def test_import_force_into_the_folder_it_runs_in_is_refused_before_the_cases_are_written(tmp_path, monkeypatch):
    """`--out-corpus .` in a folder of documents: the swap renamed the current folder away
    (a traceback) after the cases file was written."""
    source = beir_source(tmp_path)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "leave.md").write_text("You may carry up to five unused days.\n")
    monkeypatch.chdir(docs)
    result = invoke("import", *source, "--out-corpus", ".", "--out-cases", "../cases.yaml", "--force", code=None)
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert ".: the corpus folder holds the folder ragvet runs in" in result.stderr
    assert tree(docs) == {"leave.md": b"You may carry up to five unused days.\n"}
    assert not (tmp_path / "cases.yaml").exists()


def test_an_import_whose_corpus_cannot_be_put_in_place_leaves_the_cases_file_as_it_was(tmp_path, monkeypatch):
    """All or nothing: the cases file is replaced only once the corpus is in place."""
    corpus, cases = tmp_path / "corpus", tmp_path / "cases.yaml"
    corpus.mkdir()
    (corpus / "old.md").write_text("# Old\n")
    cases.write_text("- old cases\n")
    real_replace = os.replace

    def failing(src, dst):
        if Path(dst) == corpus and Path(src).name == "corpus":  # the new corpus, not the old one put back
            raise OSError(5, "Input/output error")
        return real_replace(src, dst)

    monkeypatch.setattr(interop.os, "replace", failing)
    imported = import_beir(Path(beir_source(tmp_path)[1]))
    with pytest.raises(InputError) as caught:
        interop.write_imported(imported, corpus, cases, force=True)
    assert f"{corpus}: cannot put the new corpus in place: Input/output error" in caught.value.render()
    assert tree(corpus) == {"old.md": b"# Old\n"} and cases.read_text() == "- old cases\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["beir", "cases.yaml", "corpus"]


def test_a_squad_or_beir_file_nested_too_deeply_is_refused_at_its_line(tmp_path):
    deep = "[" * 100_000 + "]" * 100_000
    squad = tmp_path / "squad.json"
    squad.write_text('{"version": "v2.0",\n "data": ' + deep + "}\n")
    with pytest.raises(InputError) as caught:
        import_squad(squad)
    assert [(p.where, "nested too deeply" in p.what) for p in caught.value.problems] == [(f"{squad}:2", True)]
    folder = Path(beir_source(tmp_path)[1])
    with (folder / "queries.jsonl").open("a") as queries:
        queries.write('{"_id": "q99", "text": ' + deep + "}\n")
    with pytest.raises(InputError) as caught:
        import_beir(folder)
    assert [(p.where, "nested too deeply" in p.what) for p in caught.value.problems] == [
        (f"{folder / 'queries.jsonl'}:11", True)
    ]


@pytest.mark.parametrize("count", [10, 200_000])
def test_sgml_topics_full_of_unclosed_tags_parse_in_one_pass(tmp_path, count):
    """Each ``<a`` with no ``>`` rescanned the rest of its ``<top>`` block: 200 KB of
    them took 15 s, 400 KB a minute. They are text, as in a small file, and the next topic is read."""
    path = tmp_path / "topics.sgml"
    names = "<" + "x" * count  # one tag name that never closes, as long again
    path.write_text(
        f"<top>\n<num> Number: 401\n<title> tides {'<a' * count}\n</top>\n"
        f"<top>\n<num> Number: 402\n<title> moon {names}\n<desc> Description: why\n</top>\n"
    )
    topics, ids, skipped, problems = read_topics(path)
    assert (ids, problems, skipped) == ({"401", "402"}, [], Counter())
    assert topics == {
        "401": ("tides " + "<a" * count, f"{path}:1"),
        "402": ("moon " + names, f"{path}:5"),
    }
