"""Hostile input: every reader answers with exit 2, a message that names
the file and line (or the key path and line) and the fix, no traceback, and nothing
written. Each test is one defect the hostile run found; each failed before its fix.

The command-line tests run ``ragvet validate`` in a small project made in
a temporary folder, with that folder as the working directory, as under DVC.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from repos import ROOT

from ragvet.errors import SHOWN, InputError
from ragvet.formats.runfiles import read_external_run
from ragvet.inputs.params import MAX_DEPTH, MAX_RESAMPLES, validate_params
from ragvet.measures.answers import read_answers
from ragvet.retrieval.kinds import retrieve
from ragvet.retrieval.specs.registry import retriever_problems
from ragvet.schema import Case, Chunk
from ragvet.storage.files import read_params
from ragvet.text.escaping import visible
from ragvet.text.values import _surrogate_walk, lone_surrogate

LEAVE = "---\nyear: '2026'\n---\nYou may carry up to five unused days.\n"
GOOD_CASE = "- id: c1\n  question: carry?\n  evidence: [{doc: leave, quote: five unused days}]\n"


def shipped_params() -> dict:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["slices"] = []  # the sample's slice tags; these cases carry none
    return params


def project(
    tmp_path: Path, cases: str = GOOD_CASE, corpus: dict[str, str | bytes] | None = None, params: str | None = None
) -> Path:
    """A project folder: ``data/corpus`` (default: one leave doc), ``data/cases/``
    holding ``cases`` (YAML, or JSONL when it starts with ``{``) and ``params.yaml``."""
    (tmp_path / "data" / "corpus").mkdir(parents=True)
    (tmp_path / "data" / "cases").mkdir()
    for name, text in (corpus if corpus is not None else {"leave.md": LEAVE}).items():
        path = tmp_path / "data" / "corpus" / name
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    suffix = "jsonl" if cases.startswith("{") else "yaml"
    (tmp_path / "data" / "cases" / f"cases.{suffix}").write_text(cases, encoding="utf-8")
    (tmp_path / "params.yaml").write_text(params if params is not None else yaml.safe_dump(shipped_params()))
    return tmp_path


def validate(folder: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """``ragvet validate`` in ``folder``; a hostile input must end, so a timeout fails the test."""
    args = ["--corpus", "data/corpus", "--cases", "data/cases", "--out", "data/validated"]
    return subprocess.run(
        [sys.executable, "-m", "ragvet.cli", "validate", *args, "--answers", "data/answers", "--params", "params.yaml"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )


def refused(done: subprocess.CompletedProcess, folder: Path) -> str:
    """Exit 2, no traceback, nothing written; the message, for the test to read."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr[-3000:])
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert not (folder / "data" / "validated").exists()
    return done.stderr


# --- 3: lone surrogates ------------------------------------------------------------


@pytest.mark.parametrize(
    ("cases", "corpus", "where"),
    [
        (
            '- id: c1\n  question: "carry\\ud800?"\n  evidence: [{doc: leave}]\n',
            None,
            "data/cases/cases.yaml:1 (case #1)",
        ),
        (
            '{"id": "c1", "question": "q", "evidence": [{"doc": "leave", "quote": "five\\udfff"}]}\n',
            None,
            "data/cases/cases.jsonl:1 (case #1)",
        ),
        (
            GOOD_CASE,
            {"leave.md": LEAVE, "more.jsonl": '{"doc_id": "ok", "text": "t"}\n{"doc_id": "x\\ud800", "text": "t"}\n'},
            "data/corpus/more.jsonl:2",
        ),
        (
            GOOD_CASE,
            {"leave.md": LEAVE, "more.jsonl": '{"doc_id": "ok", "text": "half \\ud83d of an emoji"}\n'},
            "data/corpus/more.jsonl:1",
        ),
        (GOOD_CASE, {"leave.md": LEAVE, "other.md": '---\ntitle: "T\\udc00"\n---\nbody\n'}, "data/corpus/other.md"),
    ],
)
def test_a_lone_surrogate_is_refused_at_its_line_before_anything_is_written(tmp_path, cases, corpus, where):
    folder = project(tmp_path, cases, corpus)
    message = refused(validate(folder), folder)
    assert f"{where}: text " in message and "half of a UTF-16 surrogate pair" in message, message
    assert "fix: replace the escape with the character itself" in message


# --- 4 and 14: invalid UTF-8 names its line ---------------------------------------


def test_invalid_utf8_in_a_run_file_names_its_line_and_column(tmp_path):
    trec = tmp_path / "prod.trec"
    trec.write_bytes(b"q1 Q0 a#0 1 9.5 prod\nq1 Q0 b#0 2 3.0 prod\nq2 Q0 caf\xe9#0 1 8.0 prod\n")
    with pytest.raises(InputError) as err:
        read_external_run(trec)
    [problem] = err.value.problems
    assert problem.where == f"{trec}:3"
    assert problem.what == "not UTF-8 text: invalid continuation byte (byte 0xe9 at column 10)"
    assert problem.fix.startswith("save the file as UTF-8")


def test_invalid_utf8_in_an_answers_file_names_its_line(tmp_path):
    path = tmp_path / "answers.jsonl"
    path.write_bytes(b'{"case_id": "q1", "claims": []}\n\n{"case_id": "q\xff2", "claims": []}\n')
    with pytest.raises(InputError) as err:
        read_answers(path, {"q1", "q2"}, {"a#0"}, "fixed")
    assert [p.where for p in err.value.problems] == [f"{path}:3"]
    assert "invalid start byte (byte 0xff at column 15)" in err.value.problems[0].what


def test_a_jsonl_corpus_with_one_bad_byte_loses_only_that_line(tmp_path):
    lines = [
        b'{"doc_id": "a", "text": "alpha"}',
        b'{"doc_id": "b", "text": "b\xc3"}',
        b'{"doc_id": "c", "text": "gamma"}',
    ]
    cases = "- id: c1\n  question: q?\n  evidence: [{doc: a}, {doc: c}]\n"
    folder = project(tmp_path, cases, {"docs.jsonl": b"\n".join(lines) + b"\n"})
    message = refused(validate(folder), folder)
    # docs a and c still load, so the case that cites them is sound: one problem in all
    assert message.splitlines()[:2] == [
        "ragvet: 1 problem found:",
        "data/corpus/docs.jsonl:2: not UTF-8 text: invalid continuation byte (byte 0xc3 at column 27)",
    ], message


def test_invalid_utf8_in_a_yaml_cases_file_names_its_line(tmp_path):
    folder = project(tmp_path)
    (folder / "data" / "cases" / "cases.yaml").write_bytes(GOOD_CASE.encode() + b"- id: c2\n  question: \xfe?\n")
    message = refused(validate(folder), folder)
    assert "data/cases/cases.yaml:5: not UTF-8 text: invalid start byte (byte 0xfe at column 13)" in message


# --- 5: run-file values -----------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "what"),
    [
        ("q1 Q0 a#0 0 9.5 prod", "rank must be a whole number ≥ 1, got a number 0"),
        ("q1 Q0 a#0 -2 9.5 prod", "rank must be a whole number ≥ 1, got a number -2"),
        ("q1 Q0 a#0 1.5 9.5 prod", "rank must be a whole number ≥ 1, got a number 1.5"),
        ("q1 Q0 a#0 1 nan prod", "score must be a finite number, got a number nan"),
        ("q1 Q0 a#0 1 -inf prod", "score must be a finite number, got a number -inf"),
        ("q1 Q0 a#0 1 1e400 prod", "score must be a finite number, got a number inf"),
        ("q1 Q0 a#0 1 high prod", "score must be a finite number, got text 'high'"),
    ],
)
def test_a_trec_line_with_a_bad_rank_or_score_is_refused_at_its_line(tmp_path, line, what):
    path = tmp_path / "prod.trec"
    path.write_text(f"q1 Q0 b#0 1 3.0 prod\n{line}\n")
    with pytest.raises(InputError) as err:
        read_external_run(path)
    assert [(p.where, p.what) for p in err.value.problems] == [(f"{path}:2", what)]


@pytest.mark.parametrize(
    ("row", "what"),
    [
        ('"rank": 0', "rank must be a whole number ≥ 1, got a number 0"),
        ('"rank": -1', "rank must be a whole number ≥ 1, got a number -1"),
        ('"rank": true', "rank must be a whole number ≥ 1, got true/false True"),
        ('"score": NaN', "score must be a finite number, got a number nan"),
        ('"score": Infinity', "score must be a finite number, got a number inf"),
        ('"score": 1e400', "score must be a finite number, got a number inf"),
        ('"score": false', "score must be a finite number, got true/false False"),
    ],
)
def test_a_jsonl_run_line_with_a_bad_rank_or_score_is_refused_at_its_line(tmp_path, row, what):
    path = tmp_path / "prod.jsonl"
    path.write_text(
        '{"case_id": "q1", "chunk_id": "b#0", "score": 2.0}\n' + f'{{"case_id": "q1", "chunk_id": "a#0", {row}}}\n'
    )
    if "rank" in row:  # one level of ordering per file: make the first line rank-only too
        path.write_text(
            '{"case_id": "q1", "chunk_id": "b#0", "rank": 2}\n' + f'{{"case_id": "q1", "chunk_id": "a#0", {row}}}\n'
        )
    with pytest.raises(InputError) as err:
        read_external_run(path)
    assert [(p.where, p.what) for p in err.value.problems] == [(f"{path}:2", what)]


CHUNKS = [Chunk("a#0", "a", 0, 0, 4, "text", {}), Chunk("b#0", "b", 0, 0, 4, "text", {})]
CASES = [Case("q1", "first?"), Case("q2", "second?")]


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """A plugin module in a temporary folder on sys.path; returns its target."""

    def write(body: str) -> str:
        name = f"ragvet_hostile_plugin_{abs(hash(body))}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(body))
        monkeypatch.syspath_prepend(str(tmp_path))
        sys.modules.pop(name, None)
        return f"{name}:search"

    return write


@pytest.mark.parametrize("score", ["float('nan')", "float('inf')", "True"])
def test_a_plugin_score_that_is_not_a_finite_number_is_refused(plugin, score):
    target = plugin(f"def search(cases, chunks):\n    return {{'q1': [('a#0', 1.0), ('b#0', {score})]}}\n")
    with pytest.raises(InputError) as err:
        retrieve(CASES, CHUNKS, {"kind": "python", "target": target}, depth=5)
    [problem] = err.value.problems
    assert problem.where == f"plugin {target} (case q1)"
    assert problem.what == f"chunk 'b#0' has score {eval(score)!r}, not a finite number"


# --- 6: unhashable kinds, and any other shape in any params value -------------------


@pytest.mark.parametrize("kind", [["bm25"], {"a": 1}])
def test_an_unhashable_kind_is_a_params_problem(kind):
    [problem] = retriever_problems("r", {"kind": kind}, "params.yaml: retrievers.r")
    assert problem.what == f"unknown retriever kind {kind!r}"


def leaves(value, path=()):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaves(item, (*path, index))
    yield path


@pytest.mark.parametrize("replacement", [["x"], {"a": 1}, None, True, float("nan")])
def test_any_params_value_of_the_wrong_shape_is_a_problem_not_a_crash(replacement):
    """Every value and section of the shipped params, in turn, replaced by a list, a
    mapping, null, true and NaN: validation reports problems and never raises."""
    shipped = shipped_params()
    tried = 0
    for path in leaves(shipped):
        if not path:
            continue
        params = json.loads(json.dumps(shipped))
        parent = params
        for step in path[:-1]:
            parent = parent[step]
        if parent[path[-1]] == replacement:
            continue
        parent[path[-1]] = replacement
        validate_params(params)  # some replacements are valid (stopwords: [x]); none may raise
        tried += 1
    assert tried > 60


# --- 7: alias bombs ------------------------------------------------------------------

LAUGHS = "".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]\n" for i in range(1, 10))
BOMB = "l0: &l0 [lol]\n" + LAUGHS


def test_a_billion_laughs_params_file_is_refused_fast(tmp_path):
    folder = project(tmp_path, params=BOMB)
    message = refused(validate(folder, timeout=60), folder)
    assert message.count("\n") < 20 and len(message) < 2000, message
    assert "params.yaml:1: malformed YAML: anchor or alias `l0` is not accepted" in message
    assert (
        "fix: write the value out in full: ragvet's input files take no anchors (&name) or aliases (*name)" in message
    )


def test_a_billion_laughs_cases_file_is_refused_fast(tmp_path):
    cases = textwrap.indent(BOMB, "  ").replace("  l0:", "- l0:", 1)
    folder = project(tmp_path, cases + "  id: *l9\n")
    message = refused(validate(folder, timeout=60), folder)
    assert len(message) < 2000, message
    assert "data/cases/cases.yaml:1: malformed YAML: anchor or alias `l0` is not accepted" in message


def test_an_alias_in_front_matter_is_refused():
    from ragvet.text.located_yaml import load_located_yaml

    value, problems = load_located_yaml("base: &b {a: 1}\nother: *b\n", "doc.md", line_offset=1)
    assert value is None
    assert [(p.where, p.what) for p in problems] == [
        ("doc.md:2", "malformed YAML: anchor or alias `b` is not accepted")
    ]


# --- 13: floods and root causes -------------------------------------------------------


def test_ten_thousand_bad_lines_print_a_bounded_message(tmp_path):
    cases = "".join(f'{{"id": "c{i}", "question": "q", "evidence": [{{"doc": "nope{i}"}}]}}\n' for i in range(10_000))
    cases += json.dumps("x" * 100_000) + "\n"  # one line quoting a 100,000-character value
    folder = project(tmp_path, cases)
    message = refused(validate(folder), folder)
    assert len(message.splitlines()) <= 2 * SHOWN + 60, len(message.splitlines())
    assert len(message) < 60_000, len(message)
    full = (folder / ".ragvet" / "problems.txt").read_text()
    assert full.startswith("10001 problems found:")
    assert "xxx… (99,537 more characters)" in full and "x" * 600 not in full


def test_an_empty_corpus_is_one_root_problem_not_one_per_case(tmp_path):
    cases = "".join(f"- id: c{i}\n  question: q?\n  evidence: [{{doc: d{i}}}]\n" for i in range(30))
    folder = project(tmp_path, cases, corpus={})
    message = refused(validate(folder), folder)
    assert message.splitlines()[0] == "ragvet: 1 problem found:", message
    assert "data/corpus: the corpus has no documents" in message


def test_a_bad_chunking_comes_before_the_case_errors_it_causes(tmp_path):
    params = shipped_params()
    name = next(iter(params["chunking"]))
    params["chunking"][name]["overlap"] = -5
    cases = "".join(
        f"- id: c{i}\n  question: q?\n  evidence: [{{chunk: 'leave#0', chunking: {name}}}]\n" for i in range(5)
    )
    folder = project(tmp_path, cases, params=yaml.safe_dump(params))
    message = refused(validate(folder), folder)
    first = message.splitlines()[1]
    assert first.startswith("params.yaml:") and f"(chunking.{name}" in first, message
    assert message.index("params.yaml:") < message.index("data/cases/cases.yaml")


# --- 14: params problems name their line ---------------------------------------------


def test_params_problems_name_their_line(tmp_path):
    text = (ROOT / "params.yaml").read_text().replace("slices: [phrasing, doc_type, year]", "slices: []")
    text = re.sub(r"(?m)^depth: 20", "depth: 0", text)
    text = re.sub(r"(?m)^(\s+)resamples: 2000", r"\1resamples: many", text)
    lines = text.splitlines()
    depth_line = 1 + next(i for i, line in enumerate(lines) if line.startswith("depth:"))
    resamples_line = 1 + next(i for i, line in enumerate(lines) if "resamples: many" in line)
    folder = project(tmp_path, params=text)
    message = refused(validate(folder), folder)
    assert f"params.yaml:{depth_line} (depth): `depth` must be an integer ≥ 1, got 0" in message, message
    assert f"params.yaml:{resamples_line} (gate.bootstrap.resamples): `gate.bootstrap.resamples` must be" in message


def test_a_thresholds_problem_names_its_line(tmp_path):
    from ragvet.measures.abstention import threshold_problems

    path = tmp_path / "abstention.yaml"
    path.write_text("# tuned\nghost:\n  abstain_below: 1.0\n")
    [problem] = threshold_problems(path, {"configs": {"real": {}}})
    assert problem.where == f"{path}:2 (ghost)"


# --- 15: YAML 1.1 number forms --------------------------------------------------------


def test_yaml_11_number_forms_keep_the_id_as_written(tmp_path):
    ids = ["010", "0x1F", "1:30", "0b11", "0o17"]
    cases = "".join(f"- id: {i}\n  question: carry?\n  evidence: [{{doc: leave}}]\n" for i in ids)
    folder = project(tmp_path, cases)
    done = validate(folder)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (folder / "data" / "validated" / "cases.jsonl").read_text().splitlines()]
    assert sorted(row["id"] for row in rows) == sorted(ids)


def test_yaml_integers_with_underscores_or_a_plus_keep_the_id_as_written(tmp_path):
    """``1_000`` and ``+5`` are YAML integers: the ids became ``1000`` and ``5``, so
    ``1_000`` and ``1000`` were one id. An integer id keeps the text as written."""
    ids = ["1_000", "1000", "+5", "-7", "12"]
    cases = "".join(f"- id: {i}\n  question: carry?\n  evidence: [{{doc: leave}}]\n" for i in ids)
    folder = project(tmp_path, cases)
    done = validate(folder)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (folder / "data" / "validated" / "cases.jsonl").read_text().splitlines()]
    assert sorted(row["id"] for row in rows) == sorted(ids)


@pytest.mark.parametrize(
    ("written", "got"), [("yes", "true/false True"), ("1.5", "a number 1.5"), ("[a]", "a list ['a']")]
)
def test_an_id_that_yaml_reads_as_another_type_says_quote_it(tmp_path, written, got):
    folder = project(tmp_path, f"- id: {written}\n  question: q?\n  evidence: [{{doc: leave}}]\n")
    message = refused(validate(folder), folder)
    assert f"data/cases/cases.yaml:1 (case #1): the id must be text or a whole number, got {got}" in message
    assert 'fix: quote it (id: "010" keeps the text as written)' in message


# --- 16: ids that would fail later ---------------------------------------------------------


@pytest.mark.parametrize(
    ("case_id", "flaw"),
    [
        ("a b", "SPACE (U+0020) at position 2"),
        ("a\\tb", "a control character (U+0009) at position 2"),
        ("ab\\n", "a control character (U+000A) at position 3"),
        ("a\\u0085", "a control character (U+0085) at position 2"),
    ],
)
def test_a_case_id_with_whitespace_or_control_characters_is_refused(tmp_path, case_id, flaw):
    folder = project(tmp_path, f'- id: "{case_id}"\n  question: q?\n  evidence: [{{doc: leave}}]\n')
    message = refused(validate(folder), folder)
    shown = visible(repr(case_id.encode().decode("unicode_escape")))  # the terminal's one-line form
    assert f"data/cases/cases.yaml:1 (case #1): case id {shown} contains {flaw}" in message
    assert "fix: ids become whitespace-separated columns of TREC runs and qrels" in message


def test_a_doc_id_with_a_newline_or_a_file_name_with_a_space_is_refused(tmp_path):
    corpus = {"leave.md": LEAVE, "my doc.md": "text\n", "more.jsonl": '{"doc_id": "x\\ny", "text": "t"}\n'}
    folder = project(tmp_path, corpus=corpus)
    message = refused(validate(folder), folder)
    assert (
        "data/corpus/more.jsonl:1: doc_id 'x\\\\ny' contains a control character (U+000A)" in message
    )  # repr, then shown
    assert "data/corpus/my doc.md: doc id 'my doc' (the file's path) contains SPACE (U+0020)" in message


def test_nfc_and_nfd_spellings_of_one_doc_or_case_id_are_reported_as_duplicates(tmp_path):
    composed, decomposed = "caf\u00e9", "cafe\u0301"
    corpus = {
        "docs.jsonl": json.dumps({"doc_id": composed, "text": "t"})
        + "\n"
        + json.dumps({"doc_id": decomposed, "text": "t"})
        + "\n"
    }
    cases = "".join(
        f"{json.dumps({'id': i, 'question': 'q', 'evidence': [{'doc': composed}]})}\n" for i in (composed, decomposed)
    )
    folder = project(tmp_path, cases, corpus)
    message = refused(validate(folder), folder)
    assert (
        f"data/corpus/docs.jsonl:2: duplicate doc id {decomposed!r}: also defined at data/corpus/docs.jsonl:1 "
        f"as {composed!r}, the same text in another Unicode spelling (NFC vs NFD)" in message
    )
    assert (
        f"data/cases/cases.jsonl:2 (case {decomposed}): duplicate case id {decomposed!r}: "
        f"also used at data/cases/cases.jsonl:1 as {composed!r}" in message
    )


def test_a_quote_in_another_unicode_spelling_gets_a_normalisation_hint(tmp_path):
    folder = project(
        tmp_path,
        '- id: c1\n  question: q?\n  evidence: [{doc: cafe, quote: "caf\\u00e9 opens"}]\n',
        {"cafe.md": "The cafe\u0301 opens at nine.\n"},
    )
    message = refused(validate(folder), folder)
    assert "not found in doc 'cafe'; it occurs with the same characters spelled differently in Unicode" in message
    assert "normalise the doc or the quote to NFC" in message


# --- 17: symlinks out of the project ------------------------------------------------------


def test_a_corpus_symlink_to_outside_the_project_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("leaked text\n")
    folder = project(tmp_path / "repo")
    (folder / "data" / "corpus" / "secret.md").symlink_to(outside / "secret.md")
    (folder / "data" / "corpus" / "inside.md").symlink_to(folder / "params.yaml")  # inside: allowed
    message = refused(validate(folder), folder)
    assert f"data/corpus/secret.md: a symlink to {outside / 'secret.md'}, outside the project" in message
    assert "inside.md" not in message


def test_a_cases_file_symlink_to_outside_the_project_is_refused(tmp_path):
    (tmp_path / "elsewhere.yaml").write_text(GOOD_CASE)
    folder = project(tmp_path / "repo")
    (folder / "data" / "cases" / "cases.yaml").unlink()
    (folder / "data" / "cases" / "cases.yaml").symlink_to(tmp_path / "elsewhere.yaml")
    message = refused(validate(folder), folder)
    assert "data/cases/cases.yaml: a symlink to" in message and "outside the project" in message


def test_an_answers_file_or_plugin_symlinked_outside_the_project_is_refused(tmp_path, monkeypatch):
    from ragvet.measures.answers import stray_answer_files

    (tmp_path / "outside.py").write_text("def search(cases, chunks):\n    return {}\n")
    repo = tmp_path / "repo"
    (repo / "plugins").mkdir(parents=True)
    (repo / "plugins" / "evil.py").symlink_to(tmp_path / "outside.py")
    (repo / "data" / "answers").mkdir(parents=True)
    (repo / "data" / "answers" / "cfg.jsonl").symlink_to(tmp_path / "outside.py")
    monkeypatch.chdir(repo)
    [plugin] = retriever_problems("mine", {"kind": "python", "target": "plugins.evil:search"}, "params.yaml: r")
    assert (plugin.where, plugin.what.split(",")[0]) == ("plugins/evil.py", f"a symlink to {tmp_path / 'outside.py'}")
    [answers] = stray_answer_files(Path("data/answers"), ["cfg"])
    assert answers.where == "data/answers/cfg.jsonl" and "outside the project" in answers.what


# --- 18: kind python -------------------------------------------------------------------------


def test_an_exception_in_a_plugin_names_its_file_line_type_and_message(plugin, tmp_path):
    target = plugin("def search(cases, chunks):\n    scores = {}\n    return 1 / len(scores)\n")
    with pytest.raises(InputError) as err:
        retrieve(CASES, CHUNKS, {"kind": "python", "target": target}, depth=5)
    [problem] = err.value.problems
    module = target.partition(":")[0]
    assert problem.where == f"{tmp_path / module}.py:3 (plugin {target})"
    assert problem.what == "the plugin raised ZeroDivisionError: division by zero"


@pytest.mark.parametrize("target", ["os:system", "subprocess:run", "ragvet.cli:main", "pluginsx.mine:search"])
def test_a_python_target_outside_the_plugins_package_fails_validation(target):
    [problem] = retriever_problems("mine", {"kind": "python", "target": target}, "params.yaml: retrievers.mine")
    assert f"target {target!r} is outside the project's `plugins` package" in problem.what
    assert problem.fix.startswith("put the function in a module under plugins/")


def test_a_python_target_inside_the_plugins_package_passes():
    assert retriever_problems("mine", {"kind": "python", "target": "plugins.mine:search"}, "p") == []


# --- 20: caps on costly knobs --------------------------------------------------------------------


def test_resamples_and_depth_are_capped(tmp_path):
    params = shipped_params()
    params["gate"]["bootstrap"]["resamples"] = 100_000_000
    params["depth"] = 10**9
    params["gate"]["permutation"] = {"resamples": MAX_RESAMPLES + 1, "seed": 1}
    found = {(p.where, p.what) for p in validate_params(params)}
    assert (
        "params.yaml: gate.permutation.resamples",
        f"`gate.permutation.resamples` is 100,001, above ragvet's cap of {MAX_RESAMPLES:,}",
    ) in found
    assert (
        "params.yaml: gate.bootstrap.resamples",
        f"`gate.bootstrap.resamples` is 100,000,000, above ragvet's cap of {MAX_RESAMPLES:,}",
    ) in found
    assert ("params.yaml: depth", f"`depth` is 1,000,000,000, above ragvet's cap of {MAX_DEPTH:,}") in found
    params["gate"]["bootstrap"]["resamples"], params["depth"] = MAX_RESAMPLES, MAX_DEPTH
    params["gate"]["permutation"]["resamples"] = MAX_RESAMPLES
    assert not [p for p in validate_params(params) if "cap" in p.what]


def test_read_params_keeps_lines_and_refuses_aliases(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("a: &x 1\nb: *x\n")
    with pytest.raises(InputError) as err:
        read_params(path)
    assert err.value.problems[0].where == f"{path}:1"
    assert "anchor or alias `x` is not accepted" in err.value.problems[0].what


def test_what_the_located_loader_reads_safe_dump_writes_back(tmp_path):
    """tune-abstain rewrites abstention.yaml and init writes params.yaml from values read
    with their lines: the dict and list subclasses must dump as plain YAML."""
    path = tmp_path / "params.yaml"
    path.write_text("b: {x: [1, 2]}\na: 010\n")
    value = read_params(path)
    assert yaml.safe_dump(value, sort_keys=False) == "b:\n  x:\n  - 1\n  - 2\na: '010'\n"


_TEXTS = st.text(alphabet=st.sampled_from(["a", "é", "\U0001f600", "\ud800", "\udfff", "\ud83d"]), max_size=3)
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | _TEXTS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner)
        | st.dictionaries(_TEXTS | st.integers() | st.booleans(), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_VALUES)
def test_property_the_surrogate_fast_path_agrees_with_the_walk(value):
    """One orjson.dumps proving strict UTF-8 gives the walk's answer: the same first text, or none."""
    assert lone_surrogate(value) == _surrogate_walk(value)


# --- 11: nesting too deep for Python's parsers ---------------------------------------

DEEP_JSON = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("cases", "corpus", "where"),
    [
        (
            '{"id": "c1", "question": "q", "evidence": [{"doc": "leave"}]}\n{"id": "c2", "x": ' + DEEP_JSON + "}\n",
            None,
            "data/cases/cases.jsonl:2",
        ),
        (
            GOOD_CASE,
            {"leave.md": LEAVE, "more.jsonl": '{"doc_id": "ok", "text": "t"}\n' + DEEP_JSON},
            "data/corpus/more.jsonl:2",
        ),
        (GOOD_CASE + "- id: c2\n  tags: " + "[" * 5_000 + "]" * 5_000 + "\n", None, "data/cases/cases.yaml:5"),
    ],
)
def test_input_nested_too_deeply_is_refused_at_its_line(tmp_path, cases, corpus, where):
    folder = project(tmp_path, cases, corpus)
    message = refused(validate(folder), folder)
    assert f"{where}: " in message and "nested too deeply" in message, message
    assert len(message) < 2000, message
