"""`ragvet import log`: hand-made logs in both layouts and both file types, the click rule
by hand, the written files read back by ragvet's own readers, and bad rows refused at
their line with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from builders import invoke, jsonl

from ragvet.chunking import chunk_corpus
from ragvet.formats import logs
from ragvet.formats.logs import MAX_PROBLEMS, LogImport, _Shape, graded, query_fields
from ragvet.formats.runfiles import read_external_run
from ragvet.inputs.cases import load_cases
from ragvet.retrieval.passages import PassageLocator
from ragvet.retrieval.plugins import external_scores
from ragvet.schema import Doc

DOCS = {
    "leave": "Staff may carry five days. Unused days lapse in March.",
    "travel": "Book trains in standard class. Flights need approval.",
    "remote": "Work from home two days a week.",
}
DOCUMENT = {"strategy": "document"}


def docs() -> dict[str, Doc]:
    return {doc_id: Doc(doc_id, text) for doc_id, text in DOCS.items()}


def run_import(tmp_path: Path, log: Path, *options: str, code: int = 0):
    """``ragvet import log`` into tmp_path's cases.jsonl, run.jsonl and unlabelled.jsonl."""
    outs = {name: tmp_path / f"{name}.jsonl" for name in ("cases", "run", "unlabelled")}
    args = [f"--out-{name}={path}" for name, path in outs.items()]
    return invoke("import", "log", log, *args, *options, code=code), outs


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def results_of(*specs: dict) -> list:
    """The checked, ordered results of one per-query row, as the import makes them."""
    conversion = LogImport(Path("unused.jsonl"))
    row = {"query_id": "q", "question": "?", "results": list(specs)}
    query = conversion._query_row("here", row, ("q", "?", {}))
    conversion._order(query, _Shape())
    assert conversion.problems == []
    return query.results


def test_the_click_rule_by_hand():
    """Ranks 1-7: clicks at 2 and 5 (rank 5 with its own grade 3), a grade 2 at 7 unclicked.
    Unclicked above the lowest click (rank 5) are judged 0, below it unjudged; a grade wins."""
    results = results_of(
        {"doc_id": "a", "rank": 1},
        {"doc_id": "b", "rank": 2, "clicked": True},
        {"doc_id": "c", "rank": 3, "clicked": False},
        {"doc_id": "d", "rank": 4, "grade": -1},
        {"doc_id": "e", "rank": 5, "clicked": True, "grade": 3},
        {"doc_id": "f", "rank": 6},
        {"doc_id": "g", "rank": 7, "grade": 2},
    )
    assert graded(results) == [0, 1, 0, -1, 3, None, 2]
    # No click at all: nothing is skipped, only grades count.
    assert graded(results_of({"doc_id": "a", "rank": 1}, {"doc_id": "b", "rank": 2, "grade": 1})) == [None, 1]
    # Ordered by rank, not by the log's order; without ranks by descending score.
    shuffled = results_of({"doc_id": "b", "rank": 2, "clicked": True}, {"doc_id": "a", "rank": 1})
    assert [r.passage["doc_id"] for r in shuffled] == ["a", "b"] and graded(shuffled) == [0, 1]
    scored = results_of({"doc_id": "a", "score": 0.5}, {"doc_id": "b", "score": 2.0, "clicked": True})
    assert [r.passage["doc_id"] for r in scored] == ["b", "a"] and graded(scored) == [1, None]


PER_QUERY = [
    {
        "query_id": "q1",
        "question": "How many  days carry over?",
        "tenant": "acme",
        "tags": {"region": "emea", "mobile": True},
        "results": [
            {"chunk_id": "travel#0", "rank": 1},
            {"chunk_id": "leave#0", "rank": 2, "clicked": True},
            {"chunk_id": "remote#0", "rank": 3},
        ],
    },
    {"query_id": "q2", "question": "Trains?", "results": [{"chunk_id": "travel#0", "rank": 1}]},
    {
        "query_id": 7,
        "question": "Home office?",
        "results": [{"chunk_id": "leave#0", "rank": 1, "grade": 0}, {"chunk_id": "remote#0", "rank": 2, "grade": 2}],
    },
]


def test_a_per_query_jsonl_log_becomes_cases_and_a_run_ragvet_reads(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text(jsonl(PER_QUERY))
    result, outs = run_import(tmp_path, log, "--chunking", "whole")
    assert "queries: 3 (6 returned passages, query rows)" in result.output
    assert "cases: 2 (2 evidence units, 4 judged docs)" in result.output
    assert "unlabelled queries: 1" in result.output and "no clicks or grades: 1" in result.output
    assert lines(outs["cases"]) == [
        {
            "id": "q1",
            "question": "How many days carry over?",
            "tags": {"tenant": "acme", "region": "emea", "mobile": "true"},
            "evidence": [{"chunk": "leave#0", "chunking": "whole"}],
            "judged": {"leave": 1, "travel": 0},
        },
        {
            "id": "7",
            "question": "Home office?",
            "evidence": [{"chunk": "remote#0", "chunking": "whole"}],
            "judged": {"leave": 0, "remote": 2},
        },
    ]
    cases = load_cases(outs["cases"], docs(), {"whole": DOCUMENT})
    assert [(c.case_id, c.judged, c.tags.get("tenant")) for c in cases] == [
        ("7", {"leave": 0, "remote": 2}, None),
        ("q1", {"leave": 1, "travel": 0}, "acme"),
    ]
    entries = read_external_run(outs["run"])
    assert [(e.case_id, e.item_id, e.level, e.rank) for e in entries] == [
        ("q1", "travel#0", "chunk", 1),
        ("q1", "leave#0", "chunk", 2),
        ("q1", "remote#0", "chunk", 3),
        ("7", "leave#0", "chunk", 1),
        ("7", "remote#0", "chunk", 2),
    ]
    # The run_file retriever's own check: every case id of the run is a case, every chunk a chunk.
    scored, _ = external_scores(
        outs["run"], None, cases, chunk_corpus(docs().values(), DOCUMENT), PassageLocator(docs())
    )
    assert scored == {
        "q1": {"travel#0": 1.0, "leave#0": 0.5, "remote#0": 1 / 3},
        "7": {"leave#0": 1.0, "remote#0": 0.5},
    }
    # The unlabelled query is a per-query log row: graded and imported again, it is a case.
    assert lines(outs["unlabelled"]) == [
        {"query_id": "q2", "question": "Trains?", "results": [{"chunk_id": "travel#0", "rank": 1}]}
    ]
    relabelled = tmp_path / "labelled.jsonl"
    row = lines(outs["unlabelled"])[0]
    row["results"][0]["grade"] = 1
    relabelled.write_text(jsonl([row]))
    again = tmp_path / "again"
    again.mkdir()
    _, outs = run_import(again, relabelled, "--chunking", "whole")
    assert [case["id"] for case in lines(outs["cases"])] == ["q2"]


def test_a_per_passage_parquet_log_of_foreign_passages(tmp_path):
    """Rows of one query next to each other; offsets become span evidence, in the query's rank order."""
    rows = [
        {"query_id": "q1", "question": "Carry over?", "tenant": "acme", "doc_id": "leave", "start": 27, "end": 54,
         "score": 1.5, "clicked": None},
        {"query_id": "q1", "question": "Carry over?", "tenant": "acme", "doc_id": "leave", "start": 0, "end": 26,
         "score": 3.0, "clicked": True},
        {"query_id": "q2", "question": "Trains?", "tenant": "beta", "doc_id": "travel", "start": 0, "end": 30,
         "score": 0.2, "clicked": False},
    ]  # fmt: skip
    log = tmp_path / "log.parquet"
    pl.DataFrame(rows).write_parquet(log, row_group_size=2)
    result, outs = run_import(tmp_path, log)
    assert "queries: 2 (3 returned passages, passage rows)" in result.output
    assert lines(outs["cases"]) == [
        {
            "id": "q1",
            "question": "Carry over?",
            "tags": {"tenant": "acme"},
            "evidence": [{"doc": "leave", "start": 0, "end": 26}],
            "judged": {"leave": 1},
        }
    ]
    assert lines(outs["run"]) == [
        {"case_id": "q1", "doc_id": "leave", "start": 0, "end": 26, "rank": 1},
        {"case_id": "q1", "doc_id": "leave", "start": 27, "end": 54, "rank": 2},
    ]
    cases = load_cases(outs["cases"], docs())
    assert [(unit.doc_id, unit.start, unit.end) for unit in cases[0].evidence] == [("leave", 0, 26)]
    assert [(e.level, e.passage, e.rank) for e in read_external_run(outs["run"])] == [
        ("passage", {"doc_id": "leave", "start": 0, "end": 26}, 1),
        ("passage", {"doc_id": "leave", "start": 27, "end": 54}, 2),
    ]
    assert lines(outs["unlabelled"])[0]["tags"] == {"tenant": "beta"}


def test_a_per_passage_jsonl_log_of_quoted_passages(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text(
        jsonl(
            [
                {
                    "query_id": "q1",
                    "question": "Flights?",
                    "doc_id": "travel",
                    "text": "Flights need approval.",
                    "rank": 1,
                    "grade": 2,
                },
                {
                    "query_id": "q1",
                    "question": "Flights?",
                    "doc_id": "leave",
                    "text": "Staff may carry five days.",
                    "rank": 2,
                    "grade": 0,
                },
            ]  # fmt: skip
        )
    )
    _, outs = run_import(tmp_path, log)
    [case] = lines(outs["cases"])
    assert case["evidence"] == [{"doc": "travel", "quote": "Flights need approval."}]
    assert case["judged"] == {"leave": 0, "travel": 2}
    assert load_cases(outs["cases"], docs())[0].evidence[0].start == 31


GOOD = {"query_id": "q1", "question": "Carry over?", "results": [{"doc_id": "leave", "rank": 1, "clicked": True}]}


def with_result(**changes) -> dict:
    result = {**GOOD["results"][0], **changes}
    return {**GOOD, "query_id": "q9", "results": [{k: v for k, v in result.items() if v is not None}]}


@pytest.mark.parametrize(
    ("bad", "where", "what"),
    [
        ({"question": "No id", "results": []}, "log.jsonl:2", "missing or empty query_id"),
        (with_result(rank="1"), "log.jsonl:2 (result 1)", "rank must be a whole number ≥ 1, got text '1'"),
        (with_result(rank=1.5), "log.jsonl:2 (result 1)", "rank must be a whole number ≥ 1, got a number 1.5"),
        (with_result(doc_id=None), "log.jsonl:2 (result 1)", "exactly one of chunk_id or doc_id, this one has neither"),
        (with_result(clickd=True), "log.jsonl:2 (result 1)", "unknown result field `clickd`"),
        (with_result(grade="high"), "log.jsonl:2 (result 1)", "grade must be a whole number"),
        ({**GOOD, "query_id": "q 9"}, "log.jsonl:2", "query_id 'q 9' contains SPACE"),
        ({**GOOD, "results": [{"doc_id": "remote", "rank": 1}]}, "log.jsonl:2", "query 'q1' again (first at"),
        (with_result(chunk_id="leave#0"), "log.jsonl:2 (result 1)", "this one has both"),
    ],
)
def test_a_malformed_log_row_is_refused_at_its_line_with_nothing_written(tmp_path, bad, where, what):
    log = tmp_path / "log.jsonl"
    log.write_text(jsonl([GOOD, bad, {**GOOD, "query_id": "q3"}]))
    result, outs = run_import(tmp_path, log, code=2)
    assert f"{log.parent / where}: " in result.output and what in result.output, result.output
    assert not any(path.exists() for path in outs.values())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.jsonl"]  # no temporary file left either


def test_each_row_of_a_query_is_checked_though_its_query_fields_are_checked_once(tmp_path, monkeypatch):
    """A per-passage row whose query fields are the row before's text is not checked
    again; one that only looks equal in Python (tenant 1, 1.0, true) is, and so is the
    rest of every row."""
    calls = []
    monkeypatch.setattr(logs, "query_fields", lambda *args: calls.append(args[0]) or query_fields(*args))
    row = {"query_id": "q1", "question": "Carry?", "tenant": 1, "rank": 1, "clicked": True}
    rows = [{**row, "doc_id": "leave"}, {**row, "doc_id": "travel", "rank": 2}, {**row, "doc_id": "remote", "rank": 3}]
    log = tmp_path / "log.jsonl"
    log.write_text(jsonl([*rows, {**rows[0], "query_id": "q2"}, {**rows[1], "query_id": "q2"}]))
    conversion = LogImport(log)
    assert len(list(conversion.lines())) == 5 + 2 and not conversion.problems
    assert calls == [f"{log}:1", f"{log}:4"]
    calls.clear()
    yes = {**rows[2], "tenant": True}
    odd = [{**rows[1], "tenant": 1.0}, yes, {**yes, "rank": 4, "doc_id": "x\ud800"}]  # the last: row 3's fields
    log.write_text(jsonl([rows[0], *odd]))
    conversion = LogImport(log)
    assert list(conversion.lines()) == []
    other = "query 'q1' has another question or tags than at its first row"
    assert [(p.where, p.what.split(" (")[0]) for p in conversion.problems] == [
        (f"{log}:2", other),
        (f"{log}:3", other),
        (f"{log}:4", "text 'x\\ud800' holds half of a UTF-16 surrogate pair"),
    ]
    assert calls == [f"{log}:{n}" for n in (1, 2, 3, 4)]


def test_a_repeated_rank_or_passage_of_a_query_is_refused_naming_the_first(tmp_path):
    log = tmp_path / "log.jsonl"
    results = [{"doc_id": "a", "rank": 1}, {"doc_id": "b", "rank": 1}, {"doc_id": "a", "rank": 3, "clicked": True}]
    log.write_text(jsonl([{"query_id": "q1", "question": "?", "results": results}]))
    conversion = LogImport(log)
    assert list(conversion.lines()) == []
    assert [(p.where, p.what) for p in conversion.problems] == [
        (f"{log}:1 (result 2)", f"query 'q1' has rank 1 twice (also at {log}:1 (result 1))"),
        (f"{log}:1 (result 3)", f"query 'q1' has a passage twice (also at {log}:1 (result 1))"),
    ]


def test_a_line_that_is_not_json_and_rows_of_one_query_apart_are_refused(tmp_path):
    log = tmp_path / "log.jsonl"
    passage = {"question": "?", "doc_id": "leave", "rank": 1}
    text = jsonl([{**passage, "query_id": "a"}, {**passage, "query_id": "b"}, {**passage, "query_id": "a"}])
    log.write_text(text + "{not json\n")
    result, outs = run_import(tmp_path, log, code=2)
    assert f"{log}:3: query 'a' again (first at {log}:1)" in result.output
    assert "sort the log by query_id" in result.output
    assert f"{log}:4: malformed JSON" in result.output
    assert not any(path.exists() for path in outs.values())


def test_a_parquet_column_of_the_wrong_type_is_refused_by_name(tmp_path):
    log = tmp_path / "log.parquet"
    pl.DataFrame({"query_id": ["q1"], "question": ["?"], "doc_id": ["leave"], "rank": ["1"]}).write_parquet(log)
    result, outs = run_import(tmp_path, log, code=2)
    assert f"{log} (column rank): column 'rank' has type String; it must hold integers" in result.output
    assert not any(path.exists() for path in outs.values())


def test_a_parquet_row_is_refused_at_its_row_number(tmp_path):
    log = tmp_path / "log.parquet"
    frame = {"query_id": ["q1", None, "q3"], "question": ["?", "?", "?"], "doc_id": ["leave"] * 3, "rank": [1, 1, 0]}
    pl.DataFrame(frame).write_parquet(log, row_group_size=1)
    result, _ = run_import(tmp_path, log, code=2)
    assert f"{log}: row 2: missing or empty query_id" in result.output
    assert f"{log}: row 3: rank must be a whole number ≥ 1, got a number 0" in result.output


def test_clicked_chunk_ids_need_their_chunking_and_existing_outputs_need_force(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text(jsonl(PER_QUERY))
    result, outs = run_import(tmp_path, log, code=2)
    assert "pass --chunking NAME" in result.output and not outs["cases"].exists()
    outs["run"].write_text("old\n")
    result, _ = run_import(tmp_path, log, "--chunking", "whole", code=2)
    assert "--out-run exists" in result.output and outs["run"].read_text() == "old\n"
    run_import(tmp_path, log, "--chunking", "whole", "--force")
    assert len(lines(outs["run"])) == 5


def test_reading_stops_at_the_problem_cap(tmp_path):
    """A log whose every row is wrong is not read to its end: the cap's problems and a last one saying so."""
    log = tmp_path / "log.jsonl"
    log.write_text(jsonl([{"question": "no id", "results": []}] * (MAX_PROBLEMS + 50)))
    conversion = LogImport(log)
    assert list(conversion.lines()) == []
    assert len(conversion.problems) == MAX_PROBLEMS + 1
    assert conversion.problems[-1].what == f"reading stopped after {MAX_PROBLEMS} problems"
    assert conversion.problems[MAX_PROBLEMS - 1].where == f"{log}:{MAX_PROBLEMS}"


def test_a_log_without_any_relevant_result_is_refused_rather_than_an_empty_cases_file(tmp_path):
    """The cases loader refuses an empty cases file: the import says why at once."""
    log = tmp_path / "log.jsonl"
    log.write_text(jsonl([{**GOOD, "results": [{"doc_id": "leave", "rank": 1}]}]))
    result, outs = run_import(tmp_path, log, code=2)
    assert "no query has a relevant result (a click, or a grade ≥ 1)" in result.output
    assert not any(path.exists() for path in outs.values())
