"""Recorded answers: reading and checking them, and the human review figures,
computed by hand on a tiny fixture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragvet.errors import InputError
from ragvet.measures.answers import NOTE, add_reviews, config_answers, read_answers, review_summary, stray_answer_files
from ragvet.measures.registry import higher_is_better, metric_problems
from ragvet.reporting.absolute import review_section

KS = [1, 3]
CASES = {"a1", "a2", "a3", "u1", "u2", "u3"}
CHUNKS = {"d#0", "d#1", "d#2", "e#0"}


def write(path: Path, lines: list) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def answer(case_id: str, behaviour: str = "answered", shown: bool = True, cited=(), claims=()) -> dict:
    return {
        "case_id": case_id,
        "behaviour": behaviour,
        "sources_shown": shown,
        "cited": list(cited),
        "claims": [{"text": text, "supported": label} for text, label in claims],
    }


# Answerable a1..a3 (eval, eval, dev); abstention u1..u3 (eval, eval, dev).
FIXTURE = [
    answer("a1", cited=["d#0", "d#1"], claims=[("c1", True), ("c2", False), ("c3", None)]),
    answer("a2", "abstained", shown=False),
    answer("u1", "answered", cited=["d#2"], claims=[("made up", None)]),
    answer("u2", "limited", shown=False, claims=[("the policy does not say", True)]),
    answer("u3", "clarified"),
]
RUN = {
    "a1": [{"chunk_id": "d#1"}, {"chunk_id": "e#0"}, {"chunk_id": "d#0"}],  # d#0 at rank 3, d#1 at rank 1
    "a2": [{"chunk_id": "d#0"}],
    "u1": [{"chunk_id": "d#2"}],
}
ROWS = [
    {"case_id": "a1", "split": "eval", "answerable": True, "metrics": {"recall@1": 1.0}},
    {"case_id": "a2", "split": "eval", "answerable": True, "metrics": {"recall@1": 0.0}},
    {"case_id": "a3", "split": "dev", "answerable": True, "metrics": {"recall@1": 1.0}},
    {"case_id": "u1", "split": "eval", "answerable": False, "metrics": {"recall@1": None}},
    {"case_id": "u2", "split": "eval", "answerable": False, "metrics": {"recall@1": None}},
    {"case_id": "u3", "split": "dev", "answerable": False, "metrics": {"recall@1": None}},
]


@pytest.fixture
def reviewed(tmp_path) -> list[dict]:
    answers = read_answers(write(tmp_path / "cfg.jsonl", FIXTURE), CASES, CHUNKS, "chunking-x")
    return add_reviews(ROWS, answers, RUN, KS)


def test_per_case_figures_by_hand(reviewed):
    by_id = {row["case_id"]: row for row in reviewed}
    a1 = by_id["a1"]["metrics"]
    assert a1["false_abstention"] == 0.0
    assert a1["unsupported_claims"] == 0.5  # c2 false of c1, c2 reviewed; c3 unreviewed is left out
    assert a1["cited_available@1"] == 0.5  # d#1 at rank 1, d#0 only at rank 3
    assert a1["cited_available@3"] == 1.0
    assert a1["abstention_handled"] is None and a1["recall@1"] == 1.0
    assert by_id["a1"]["human_review"]["claims_unreviewed"] == 1
    a2 = by_id["a2"]["metrics"]
    assert a2["false_abstention"] == 1.0
    assert a2["unsupported_claims"] is None and a2["cited_available@1"] is None  # nothing to count: None, not 0
    u1 = by_id["u1"]["metrics"]
    assert (u1["abstention_handled"], u1["unsupported_answer"], u1["sources_shown"]) == (0.0, 1.0, 1.0)
    assert u1["false_abstention"] is None and u1["cited_available@1"] is None
    u2 = by_id["u2"]["metrics"]
    assert (u2["abstention_handled"], u2["unsupported_answer"], u2["sources_shown"]) == (1.0, 0.0, 0.0)
    # a3 has no recorded answer: every review figure is None, and it has no review counts
    assert by_id["a3"]["human_review"] is None
    assert all(value is None for name, value in by_id["a3"]["metrics"].items() if name != "recall@1")


def test_summary_by_hand(reviewed):
    summary = review_summary(reviewed, KS, ["eval", "dev"])
    assert summary["note"] == NOTE and "not faithfulness" in NOTE
    abst = summary["eval"]["abstention_cases"]
    assert (abst["cases"], abst["recorded"]) == (2, 2)
    assert abst["figures"] == {"abstention_handled": 0.5, "unsupported_answer": 0.5, "sources_shown": 0.5}
    assert abst["behaviours"] == {"answered": 1, "abstained": 0, "clarified": 0, "limited": 1}
    assert abst["claims"] == {"total": 2, "reviewed": 1, "unsupported": 0, "unreviewed": 1}
    ans = summary["eval"]["answerable_cases"]
    assert (ans["cases"], ans["recorded"]) == (2, 2)
    assert ans["figures"]["false_abstention"] == 0.5
    assert ans["figures"]["unsupported_claims"] == 0.5 and ans["counted"]["unsupported_claims"] == 1
    assert ans["figures"]["unsupported_claims_pooled"] == 0.5
    assert ans["figures"]["cited_available@1"] == 0.5 and ans["figures"]["cited_available_pooled@1"] == 0.5
    assert ans["claims"] == {"total": 3, "reviewed": 2, "unsupported": 1, "unreviewed": 1}
    dev = summary["dev"]
    assert dev["abstention_cases"]["figures"]["abstention_handled"] == 1.0
    assert dev["answerable_cases"]["recorded"] == 0
    assert dev["answerable_cases"]["figures"]["false_abstention"] is None


def test_without_answers_there_is_no_summary_and_no_section():
    assert review_summary(ROWS, KS, ["eval", "dev"]) is None
    assert review_section({"cfg": {"abstention": {}}}, KS, 1) == []


def test_report_section_names_figures_for_what_they_are(reviewed):
    lines = "\n".join(review_section({"cfg": {"human_review": review_summary(reviewed, KS, ["eval", "dev"])}}, KS, 3))
    assert "## Human review of recorded answers" in lines
    assert "not faithfulness scores" in lines
    assert "| cfg | eval | 2 / 2 | 0.500 | 0.500 | 0.500 | 1 / 0 / 0 / 1 |" in lines
    assert "| cfg | eval | 2 / 2 | 0.500 | 0.500 / 0.500 | 2 / 1 | 1.000 / 1.000 | 2 |" in lines


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (answer("nope"), "case id 'nope' is not in the cases"),
        ({**answer("a1"), "behaviour": "refused"}, "behaviour 'refused' is not one of answered, abstained"),
        (answer("a1", cited=["d#9"]), "cited chunk 'd#9' is not a chunk of chunking chunking-x"),
        ({**answer("a1"), "claims": [{"text": "x", "supported": "yes"}]}, "supported must be true, false or null"),
        ({**answer("a1"), "claims": [{"text": "x"}]}, "has no `supported` label"),
        ({**answer("a1"), "sources_shown": "yes"}, "sources_shown must be true or false"),
        ({**answer("a1"), "suported": True}, "unknown key 'suported'"),
    ],
)
def test_bad_line_names_file_and_line(tmp_path, line, message):
    path = write(tmp_path / "cfg.jsonl", [answer("a2"), line])
    with pytest.raises(InputError) as err:
        read_answers(path, CASES, CHUNKS, "chunking-x")
    (problem,) = err.value.problems
    assert problem.where.startswith(f"{path}:2") and message in problem.what


def test_every_problem_is_collected_and_duplicates_refused(tmp_path):
    path = write(tmp_path / "cfg.jsonl", [answer("a1"), answer("a1"), "not json", answer("zz")])
    with pytest.raises(InputError) as err:
        read_answers(path, CASES, CHUNKS, "chunking-x")
    assert [p.where.split(" ")[0] for p in err.value.problems] == [f"{path}:3"]  # a syntax error stops the reading
    path = write(tmp_path / "cfg.jsonl", [answer("a1"), answer("a1"), answer("zz", "bad")])
    with pytest.raises(InputError) as err:
        read_answers(path, CASES, CHUNKS, "chunking-x")
    whats = {(p.where.split(" ")[0], p.what.split(":")[0]) for p in err.value.problems}
    assert (f"{path}:2", "case 'a1' already has an answer at line 1") in whats
    assert {where for where, _ in whats} == {f"{path}:2", f"{path}:3"}


def test_answers_for_a_configuration_that_does_not_exist(tmp_path):
    folder = tmp_path / "answers"
    folder.mkdir()
    (folder / "README.md").write_text("docs")
    write(folder / "cfg.jsonl", [answer("a1")])
    assert stray_answer_files(folder, {"cfg"}) == []
    write(folder / "cgf.jsonl", [answer("a1")])
    (folder / "cfg.json").write_text("{}")
    problems = stray_answer_files(folder, {"cfg"})
    assert [p.where for p in problems] == [str(folder / "cfg.json"), str(folder / "cgf.jsonl")]
    assert "configuration 'cgf', which does not exist" in problems[1].what


def test_missing_file_means_no_answers(tmp_path):
    assert config_answers(tmp_path / "absent", "cfg", CASES, CHUNKS, "x") is None
    assert config_answers(tmp_path, "cfg", CASES, CHUNKS, "x") is None


def test_review_figures_are_metrics_with_a_direction():
    assert higher_is_better("unsupported_answer") is False
    assert higher_is_better("false_abstention") is False
    assert higher_is_better("abstention_handled") is True
    assert higher_is_better("cited_available@5") is True
    assert metric_problems(["unsupported_answer", "cited_available@5", "recall@5"], [5], gated=True) == []
    assert metric_problems(["cited_available"], [5])[0].what == "metric 'cited_available' needs a cutoff"
    assert "cannot be gated" in metric_problems(["context_chars@5"], [5], gated=True)[0].what
