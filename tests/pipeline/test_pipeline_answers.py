"""Recorded answers and tuned thresholds end to end, through DVC's own CLI, on
the bundled sample (its BM25 configurations; sentences-600-bm25 has answers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from repos import copy_repo, ragvet, set_param, sh

from ragvet.storage.results import read_results, result_rows

CONFIG = "sentences-600-bm25"
ANSWERS = Path("data/answers") / f"{CONFIG}.jsonl"
EVALUATE = [
    *("evaluate", CONFIG, "--run", f"data/runs/{CONFIG}.parquet"),
    *("--chunks", "data/chunks/sentences-600.jsonl", "--cases", "data/validated/cases.jsonl"),
    *("--corpus", "data/validated/corpus.jsonl"),
    *(
        "--split",
        "data/split.json",
        "--metrics",
        f"metrics/{CONFIG}.json",
        "--per-case",
        f"metrics/cases/{CONFIG}.parquet",
    ),
    *("--slices", f"metrics/slices/{CONFIG}.json", "--sweep", f"metrics/abstention/{CONFIG}.json"),
]


def summary(repo: Path, config: str = CONFIG) -> dict:
    return json.loads((repo / "metrics" / f"{config}.json").read_text())


def case_rows(repo: Path, config: str = CONFIG) -> list[dict]:
    return result_rows(read_results(repo / "metrics" / "cases" / f"{config}.parquet"))


def summary_names(repo: Path) -> list[str]:
    """The configurations the pipeline ran, by their summaries (metrics/<config>.json)."""
    return [path.stem for path in sorted((repo / "metrics").glob("*.json")) if path.stem not in ("gate", "split")]


def test_answers_present_give_human_review_figures_apart(sample_repo):
    review = summary(sample_repo)["human_review"]
    # The sample's hand labels: 13 eval abstention cases, 2 answered with a claim, 11 handled, 6 showed sources.
    abstention = review["eval"]["abstention_cases"]
    assert (abstention["cases"], abstention["recorded"]) == (13, 13)
    assert abstention["figures"] == {
        "abstention_handled": 0.846154,
        "sources_shown": 0.461538,
        "unsupported_answer": 0.153846,
    }
    answerable = review["eval"]["answerable_cases"]
    assert answerable["recorded"] == 20 and answerable["claims"]["unreviewed"] == 5
    assert answerable["figures"]["cited_available@5"] == 0.975  # one answer cites a chunk never retrieved
    assert "not faithfulness" in review["note"]
    assert "human_review" not in summary(sample_repo, "fixed-300-bm25")  # no answers file: no figures at all
    report = (sample_repo / "metrics" / "report.md").read_text()
    assert "## Human review of recorded answers" in report
    assert f"| {CONFIG} | eval | 13 / 13 | 0.846 | 0.154 | 0.462 | 2 / 6 / 1 / 4 |" in report
    verdict = json.loads((sample_repo / "metrics" / "gate.json").read_text())
    guarded = next(m for m in verdict["configs"][0]["metrics"] if m["metric"] == "unsupported_answer")
    assert guarded["higher_is_better"] is False and guarded["cases"] == 13


def test_answers_absent_give_no_figures_and_no_zeros(sample_repo):
    """The sample records answers for sentences-600-bm25 only: its two other configurations
    have no answers file, so no human review figure at all, not a zero: none in their
    summaries, none in their per-case rows, no row of theirs in the report's table. (Without
    any answers file the report has no such section: tests/measures/test_answers.py; an
    answers file edited re-runs evaluate through DVC: the rise below.)"""
    without = sorted(set(summary_names(sample_repo)) - {CONFIG})
    assert without == ["fixed-300-bm25", "headings-1200-bm25"]
    assert sorted(path.name for path in (sample_repo / "data" / "answers").glob("*.jsonl")) == [f"{CONFIG}.jsonl"]
    for config in without:
        assert "human_review" not in summary(sample_repo, config)
        rows = case_rows(sample_repo, config)
        assert len(rows) == 181
        for row in rows:
            assert "human_review" not in row and "unsupported_answer" not in row["metrics"]
    report = (sample_repo / "metrics" / "report.md").read_text()
    section = report.split("## Human review of recorded answers")[1].split("\n## ")[0]
    assert f"| {CONFIG} | eval |" in section and not any(config in section for config in without)


def test_a_rise_in_unsupported_answers_fails_the_gate(work_repo):
    path = work_repo / ANSWERS
    lines = path.read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if '"kw-abstain-dog-policy"' in line)  # an eval abstention case
    lines[index] = json.dumps(
        {
            "case_id": "kw-abstain-dog-policy",
            "behaviour": "answered",
            "sources_shown": True,
            "cited": ["remote-work-policy-2025#0"],
            "claims": [{"text": "Dogs are welcome in the Leeds office on Fridays.", "supported": False}],
        }
    )
    path.write_text("\n".join(lines) + "\n")
    sh(work_repo, "dvc", "repro", "verdict")  # evaluate, which reads the answers, then the verdict on its figures
    done = ragvet(work_repo, "gate", "--verdict", "data/verdict.json")  # the gate stage's command
    assert done.returncode == 1
    assert f"FAIL {CONFIG} unsupported_answer: 0.154 -> 0.231 (delta +0.077" in done.stdout + done.stderr
    assert summary(work_repo)["human_review"]["eval"]["abstention_cases"]["figures"]["unsupported_answer"] == 0.230769


def test_bad_answers_name_file_and_line_and_write_nothing(work_repo):
    path = work_repo / ANSWERS
    bad = {"case_id": "no-such-case", "behaviour": "shrugged", "sources_shown": True, "cited": ["nope#1"]}
    path.write_text(path.read_text() + json.dumps(bad) + "\n")
    line = len(path.read_text().splitlines())
    outputs = [f"metrics/{CONFIG}.json", f"metrics/cases/{CONFIG}.parquet", f"metrics/abstention/{CONFIG}.json"]
    before = {name: (work_repo / name).read_bytes() for name in outputs}
    # The stage by hand (DVC itself deletes a stage's outputs before running it): it writes nothing.
    by_hand = ragvet(work_repo, *EVALUATE)
    assert by_hand.returncode == 2 and "Traceback" not in by_hand.stderr
    assert {name: (work_repo / name).read_bytes() for name in outputs} == before
    done = sh(work_repo, "dvc", "repro", check=False)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    for what in (
        "case id 'no-such-case' is not in the cases",
        "behaviour 'shrugged' is not one of",
        "cited chunk 'nope#1' is not a chunk of chunking sentences-600",
    ):
        assert f"{ANSWERS}:{line} (case no-such-case): {what}" in by_hand.stderr
    # In the pipeline, validate refuses the unknown case before any retrieval runs.
    assert f"{ANSWERS}:{line} (case no-such-case): case id 'no-such-case' is not in the cases" in done.stderr
    assert "failed to reproduce 'validate'" in done.stderr and "Running stage 'retrieve" not in done.stdout


def test_answers_for_a_configuration_that_does_not_exist(work_repo):
    (work_repo / "data" / "answers" / "sentences-600-bm52.jsonl").write_text("")
    done = sh(work_repo, "dvc", "repro", check=False)
    assert done.returncode != 0
    assert "data/answers/sentences-600-bm52.jsonl: answers for configuration 'sentences-600-bm52'" in done.stderr


@pytest.fixture(scope="module")
def tuned_then_moved(sample_repo: Path, tmp_path_factory) -> tuple[Path, dict]:
    """A copy of the sample with a threshold tuned for fixed-300-bm25, reproduced; then the
    window of fixed-300, which the sample's labels are anchored on, moved from 300 to 280
    characters and reproduced again. What each step printed, and what the first left, by name."""
    repo = copy_repo(sample_repo, tmp_path_factory.mktemp("tuned") / "repo")
    seen = {"tuned": ragvet(repo, "tune-abstain", "--config", "fixed-300-bm25", check=True).stdout}
    seen["threshold"] = yaml.safe_load((repo / "abstention.yaml").read_text())["fixed-300-bm25"]["abstain_below"]
    seen["first"] = sh(repo, "dvc", "repro").stdout
    seen["abstention"] = summary(repo, "fixed-300-bm25")["abstention"]
    seen["sweep"] = json.loads((repo / "metrics" / "abstention" / "fixed-300-bm25.json").read_text())
    seen["report"] = (repo / "metrics" / "report.md").read_text()
    seen["plots"] = sh(repo, "dvc", "plots", "show", "--json", "metrics/abstention/fixed-300-bm25.json").stdout
    set_param(repo, ["chunking", "fixed-300", "window"], 280)
    seen["moved"] = sh(repo, "dvc", "repro", check=False)
    return repo, seen


def test_tuned_threshold_is_read_by_the_pipeline_and_judged_on_eval(tuned_then_moved):
    repo, seen = tuned_then_moved
    assert "chosen on dev" in seen["tuned"] and "eval: abstains on" in seen["tuned"]
    threshold = seen["threshold"]
    assert "Running stage 'evaluate@fixed-300-bm25'" in seen["first"]
    abstention = seen["abstention"]
    assert abstention["abstain_below"] == threshold
    assert abstention["abstain_below_source"] == "abstention.yaml (tuned on dev, rule f1)"
    assert abstention["eval"]["abstain_rate"] is not None
    assert threshold in [point["threshold"] for point in seen["sweep"]]
    assert f"| fixed-300-bm25 | {threshold} | abstention.yaml" in seen["report"]
    assert "false_abstain_rate" in seen["plots"]
    # Tuned on fixed-300 with a window of 300 chars: a new window makes it stale. Validate warns and
    # the pipeline goes on; the configuration's abstention figures are marked, with the fix.
    done = seen["moved"]
    assert "Running stage 'retrieve@fixed-300-bm25'" in done.stdout and "Running stage 'report'" in done.stdout
    assert (
        "ragvet: warning: abstention.yaml:4 (fixed-300-bm25): threshold stale: the configuration spec (chunking "
        "'fixed-300' or retriever 'bm25') changed since it was tuned, so its abstention figures are marked stale\n"
        "    fix: run `ragvet tune-abstain --config fixed-300-bm25` again, then `dvc repro` (or delete the entry)"
    ) in done.stderr
    marked = summary(repo, "fixed-300-bm25")["abstention"]
    assert (
        marked["abstain_below"] == threshold and marked["stale"]["fix"] == "ragvet tune-abstain --config fixed-300-bm25"
    )
    assert f"| fixed-300-bm25 | {threshold} (stale) | abstention.yaml" in (repo / "metrics" / "report.md").read_text()


def test_a_changed_anchoring_chunking_fails_the_gate_naming_it(tuned_then_moved):
    """Through DVC's CLI: the sample's labels are anchored on fixed-300; a new window moves
    labels of both splits, so evaluate marks the sample's tuned threshold stale (its dev
    split changed) and goes on, and the gate fails naming fixed-300."""
    repo, seen = tuned_then_moved
    done = seen["moved"]
    assert "(sentences-600-bm25): threshold stale: the dev split (its cases or labels) changed" in done.stderr
    assert done.returncode != 0 and "gate: FAILED" in done.stdout
    assert "Labels are anchored on chunking 'fixed-300' ({chunk, chunking} evidence)" in done.stdout + done.stderr
    assert json.loads((repo / "data" / "split.json").read_text())["fingerprints"]["anchors"] == ["fixed-300"]
