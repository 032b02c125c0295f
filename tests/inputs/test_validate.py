"""The validate stage at the CLI boundary: a user mistake is a clear message and
exit code 2, with no traceback and nothing written."""

import json
import subprocess
import sys
from pathlib import Path

import yaml
from repos import ROOT


def run_validate(
    tmp_path: Path,
    cases_text: str,
    params: dict | None = None,
    empty_corpus: bool = False,
    cases_file: str = "cases.yaml",
    cases_arg: str = "cases.yaml",
    thresholds: str = "",
):
    """Run the validate stage on one leave doc and ``cases_text`` written to ``cases_file``."""
    corpus = tmp_path / "corpus"
    corpus.mkdir(exist_ok=True)
    if not empty_corpus:
        (corpus / "leave.md").write_text("---\nyear: '2026'\n---\nYou may carry up to five unused days.\n")
    (tmp_path / cases_file).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / cases_file).write_text(cases_text)
    shipped = yaml.safe_load((ROOT / "params.yaml").read_text())
    shipped["slices"] = []  # the sample's slice tags; these cases carry none
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params or shipped))
    if thresholds:
        (tmp_path / "abstention.yaml").write_text(thresholds)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "ragvet.cli",
            "validate",
            "--corpus",
            str(corpus),
            "--cases",
            str(tmp_path / cases_arg),
            "--answers",
            str(tmp_path / "answers"),
            "--thresholds",
            str(tmp_path / "abstention.yaml"),
            "--out",
            str(tmp_path / "out"),
            "--params",
            str(tmp_path / "params.yaml"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


def test_valid_inputs_are_written_resolved(tmp_path):
    done = run_validate(tmp_path, "- id: c1\n  question: carry?\n  evidence: [{doc: leave, quote: five unused days}]\n")
    assert done.returncode == 0, done.stderr
    assert "validated 1 docs, 1 cases (0 abstention)" in done.stdout
    row = (tmp_path / "out" / "cases.jsonl").read_text()
    assert '"evidence":[{"doc":"leave","end":36,"start":20}]' in row


def test_a_cases_folder_may_hold_yaml_or_jsonl_without_editing_dvc_yaml(tmp_path):
    """dvc.yaml names the folder data/cases, so its one file may be either format."""
    case = '{"id": "c1", "question": "carry?", "evidence": [{"doc": "leave", "quote": "five unused days"}]}\n'
    done = run_validate(tmp_path, case, cases_file="cases/cases.jsonl", cases_arg="cases")
    assert done.returncode == 0, done.stderr
    assert "validated 1 docs, 1 cases (0 abstention)" in done.stdout
    assert '"evidence":[{"doc":"leave","end":36,"start":20}]' in (tmp_path / "out" / "cases.jsonl").read_text()


def test_a_cases_folder_with_two_files_or_none_is_a_problem_naming_them(tmp_path):
    (tmp_path / "cases").mkdir()
    empty = run_validate(tmp_path, "", cases_file="notes.txt", cases_arg="cases")
    assert empty.returncode == 2
    assert f"{tmp_path / 'cases'}: no cases file in the folder" in empty.stderr
    assert f"--out-cases {tmp_path / 'cases'}/cases.yaml" in empty.stderr
    (tmp_path / "cases" / "cases.yaml").write_text("- id: c1\n  question: carry?\n")
    two = run_validate(tmp_path, "{}\n", cases_file="cases/cases.jsonl", cases_arg="cases")
    assert two.returncode == 2
    assert "more than one cases file: cases.jsonl, cases.yaml" in two.stderr
    assert "Traceback" not in empty.stderr + two.stderr
    assert not (tmp_path / "out").exists()


def test_every_mistake_is_reported_with_exit_2_no_traceback_and_nothing_written(tmp_path):
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["ks"] = [0, 2.5]
    params["configs"]["bad"] = {"chunking": "nope", "retriever": "bm25"}
    cases = (
        "- id: c1\n  question: carry?\n  evidence: [{doc: leaves, quote: five}]\n"
        "- id: c1\n  question: again?\n  evidence: [{doc: leave, quote: ten unused days}]\n"
        "- id: c3\n  question: Mars?\n  answerable: false\n  evidence: [{doc: leave}]\n"
    )
    done = run_validate(tmp_path, cases, params)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    for fragment in (
        "unknown doc 'leaves'",
        "duplicate case id 'c1'",
        "not found",
        "answerable: false",
        "(ks[0]): k must be an integer > 0, got 0",
        "configs.bad",
        "cases.yaml:3",
        "cases.yaml:4",
        "cases.yaml:10",
    ):
        assert fragment in done.stderr, fragment
    assert not (tmp_path / "out").exists()


def test_malformed_yaml_keeps_previous_outputs(tmp_path):
    good = "- id: c1\n  question: carry?\n  evidence: [{doc: leave, quote: five unused days}]\n"
    assert run_validate(tmp_path, good).returncode == 0
    before = (tmp_path / "out" / "cases.jsonl").read_bytes()
    done = run_validate(tmp_path, "- id: c1\n  question: [unclosed\n")
    assert done.returncode == 2 and "malformed YAML" in done.stderr and "Traceback" not in done.stderr
    assert (tmp_path / "out" / "cases.jsonl").read_bytes() == before


def test_empty_corpus_fails_clearly(tmp_path):
    done = run_validate(tmp_path, "- id: c1\n  question: q\n  answerable: false\n", empty_corpus=True)
    assert done.returncode == 2
    assert "the corpus has no documents" in done.stderr
    assert not (tmp_path / "out").exists()


def test_answers_for_a_configuration_that_does_not_exist_stop_validate(tmp_path):
    (tmp_path / "answers").mkdir()
    (tmp_path / "answers" / "sentences-600-bm52.jsonl").write_text("{}\n")
    done = run_validate(tmp_path, "- id: c1\n  question: carry?\n  evidence: [{doc: leave, quote: five unused days}]\n")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "sentences-600-bm52.jsonl" in done.stderr
    assert "answers for configuration 'sentences-600-bm52', which does not exist" in done.stderr
    assert not (tmp_path / "out").exists()


GOOD_CASES = (
    "- id: c1\n  question: carry?\n  evidence: [{doc: leave, quote: five unused days}]\n  tags: {phrasing: natural}\n"
    "- id: c2\n  question: Mars?\n  answerable: false\n  tags: {year: '2026'}\n"
)
ANSWER = '{"case_id": "%s", "behaviour": "answered", "sources_shown": true}\n'


def test_answers_naming_cases_not_in_the_cases_stop_validate_before_retrieval(tmp_path):
    (tmp_path / "answers").mkdir()
    (tmp_path / "answers" / "sentences-600-bm25.jsonl").write_text(ANSWER % "c1" + ANSWER % "kw-abstain-leave")
    done = run_validate(tmp_path, GOOD_CASES)
    assert done.returncode == 2, done.stdout
    path = tmp_path / "answers" / "sentences-600-bm25.jsonl"
    assert done.stderr.splitlines() == [
        "ragvet: 1 problem found:",
        f"{path}:2 (case kw-abstain-leave): case id 'kw-abstain-leave' is not in the cases",
        "    fix: use an id from the cases file, or drop the line",
    ]
    assert not (tmp_path / "out").exists()


def test_an_answers_file_left_over_from_other_cases_is_one_problem(tmp_path):
    (tmp_path / "answers").mkdir()
    stale = "".join(ANSWER % case_id for case_id in ("kw-1", "kw-2", "kw-3"))
    (tmp_path / "answers" / "fixed-300-bm25.jsonl").write_text(stale)
    done = run_validate(tmp_path, GOOD_CASES)
    assert done.returncode == 2
    assert done.stderr.splitlines()[:2] == [
        "ragvet: 1 problem found:",
        f"{tmp_path / 'answers' / 'fixed-300-bm25.jsonl'}: none of its 3 answers names a case in the cases "
        "(line 1: case 'kw-1'): they were recorded for other cases, such as the bundled sample's",
    ]


def test_a_slice_no_answerable_case_carries_stops_validate(tmp_path):
    """c1 (answerable) carries phrasing; only the abstention case c2 carries year,
    and slices count answerable cases only; nobody carries doc_type."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["slices"] = ["phrasing", "year", "doc_type"]
    done = run_validate(tmp_path, GOOD_CASES, params)
    assert done.returncode == 2
    where = f"{tmp_path / 'params.yaml'}: slices"
    assert done.stderr.splitlines() == [
        "ragvet: 2 problems found:",
        f"{where}: slice 'doc_type' is carried by no answerable case (of 2)",
        "    fix: tag the cases with it (tags: {doc_type: ...}), or remove 'doc_type' from `slices`",
        f"{where}: slice 'year' is carried by no answerable case (of 2)",
        "    fix: tag the cases with it (tags: {year: ...}), or remove 'year' from `slices`",
    ]
    params["slices"] = ["phrasing"]
    assert run_validate(tmp_path, GOOD_CASES, params).returncode == 0


def test_a_threshold_of_the_old_format_fails_validate_and_one_for_a_changed_spec_warns(tmp_path):
    """Before any retrieval: a bare number (the first format) cannot be applied at all, so
    validate fails on it; an entry tuned on another spec of fixed-300 (its recorded
    fingerprint is not the current one) costs only that configuration's abstention
    figures, so validate writes its outputs and warns."""
    stale = "fixed-300-bm25: {abstain_below: 1.0, config_fingerprint: ffffffffffffffff, dev_split_fingerprint: x}\n"
    cases = "- id: c1\n  question: carry?\n  evidence: [{doc: leave, quote: five unused days}]\n"
    done = run_validate(tmp_path, cases, thresholds="sentences-600-bm25: 2.5\n" + stale)
    assert done.returncode == 2 and "Traceback" not in done.stderr and not (tmp_path / "out").exists()
    assert f"{tmp_path / 'abstention.yaml'}:1 (sentences-600-bm25): needs a mapping with a numeric abstain_below" in (
        done.stderr
    )
    assert "fix: run `ragvet tune-abstain --config sentences-600-bm25` again, or delete the entry" in done.stderr
    assert "ragvet: 1 problem found:" in done.stderr and "fixed-300-bm25" not in done.stderr
    done = run_validate(tmp_path, cases, thresholds=stale)
    assert done.returncode == 0 and (tmp_path / "out" / "cases.jsonl").is_file()
    assert done.stderr == (
        f"ragvet: warning: {tmp_path / 'abstention.yaml'}:1 (fixed-300-bm25): threshold stale: the configuration "
        "spec (chunking 'fixed-300' or retriever 'bm25') changed since it was tuned, so its abstention figures are "
        "marked stale\n    fix: run `ragvet tune-abstain --config fixed-300-bm25` again, then `dvc repro` (or delete "
        "the entry)\n"
    )


FLAGGED = """\
- id: c1
  question: carry?
  evidence: [{doc: leave, quote: five unused days}]
- id: c2
  question: how many weeks?
  status: orphaned
  evidence: [{doc: leave, quote: sixteen weeks}]
- id: c3
  question: and now?
  status: pending
  evidence: [{doc: gone, start: 0, end: 4}]
"""


def split_of(tmp_path: Path) -> dict:
    """The split stage's record over validate's outputs in ``tmp_path/out``, every case in eval."""
    out = tmp_path / "out"
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    params["split"]["eval_fraction"] = 1.0
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    args = ["--cases", out / "cases.jsonl", "--corpus", out / "corpus.jsonl", "--out", tmp_path / "split.json"]
    args += ["--left-out", out / "left_out.json", "--params", tmp_path / "params.yaml"]
    command = [sys.executable, "-m", "ragvet.cli", "split", *map(str, args)]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads((tmp_path / "split.json").read_text())


def test_cases_relabel_marked_are_left_out_with_a_warning_and_leave_the_eval_split(tmp_path):
    """c2's quote and c3's doc are gone: marked by relabel, they are no problem, and scored nowhere."""
    done = run_validate(tmp_path, FLAGGED)
    assert done.returncode == 0, done.stderr
    assert "validated 1 docs, 1 cases (0 abstention), 2 left out (status)" in done.stdout
    assert f"{tmp_path / 'cases.yaml'}:6 (case c2): left out of the splits, scored nowhere: `status: orphaned`" in (
        done.stderr
    )
    assert "cases.yaml:10 (case c3): left out of the splits, scored nowhere: `status: pending`" in done.stderr
    assert json.loads((tmp_path / "out" / "left_out.json").read_text()) == {"c2": "orphaned", "c3": "pending"}
    assert [json.loads(line)["id"] for line in (tmp_path / "out" / "cases.jsonl").read_text().splitlines()] == ["c1"]
    record = split_of(tmp_path)
    assert record["counts"] == {"eval": 1, "dev": 0}
    assert record["left_out"] == {"eval": {"c2": "orphaned", "c3": "pending"}, "dev": {}}
    unmarked = FLAGGED.replace("  status: orphaned\n", "").replace("sixteen weeks", "five unused days")
    assert run_validate(tmp_path, unmarked.replace("  status: pending\n", "").replace("gone", "leave")).returncode == 0
    whole = split_of(tmp_path)
    assert whole["counts"] == {"eval": 3, "dev": 0} and "left_out" not in whole
    assert whole["fingerprints"]["eval_split"] != record["fingerprints"]["eval_split"]  # the cases left the set


def test_a_status_relabel_does_not_write_and_a_flagged_bad_id_are_problems(tmp_path):
    cases = FLAGGED.replace("status: pending", "status: later").replace("id: c2", 'id: "c 2"')
    cases += "- id: c4\n  question: q?\n  status: [orphaned]\n  evidence: [{doc: leave}]\n"
    done = run_validate(tmp_path, cases)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "cases.yaml:10 (case c3): status must be orphaned or pending (written by ragvet relabel), got 'later'" in (
        done.stderr
    )
    assert "cases.yaml:4 (case #2): case id 'c 2' contains" in done.stderr  # an id ragvet cannot write is refused
    assert "cases.yaml:14 (case c4): status must be orphaned or pending (written by ragvet relabel)" in done.stderr
    assert "got ['orphaned']\n    fix: remove `status` once the case is relabelled" in done.stderr
    assert not (tmp_path / "out").exists()
