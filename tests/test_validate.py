"""The validate stage at the CLI boundary: a user mistake is a clear message and
exit code 2, with no traceback and nothing written."""

import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def run_validate(tmp_path: Path, cases_text: str, params: dict | None = None, empty_corpus: bool = False):
    corpus = tmp_path / "corpus"
    corpus.mkdir(exist_ok=True)
    if not empty_corpus:
        (corpus / "leave.md").write_text("---\nyear: '2026'\n---\nYou may carry up to five unused days.\n")
    (tmp_path / "cases.yaml").write_text(cases_text)
    shipped = yaml.safe_load((ROOT / "params.yaml").read_text())
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params or shipped))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "stages.validate",
            "--corpus",
            str(corpus),
            "--cases",
            str(tmp_path / "cases.yaml"),
            "--answers",
            str(tmp_path / "answers"),
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
        "params.yaml: ks",
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
