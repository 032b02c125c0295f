"""Abstention thresholds: the dev sweep, the stated rules, the params file, and
the proof that eval labels never reach the choice."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from stages.errors import InputError
from stages.measures.abstention import (
    candidate_thresholds,
    choose_threshold,
    overcautious,
    rates,
    read_thresholds,
    score_rows,
    sweep,
    threshold_for,
    write_thresholds,
)
from stages.schema import Case
from stages.storage.tables import write_run

ROOT = Path(__file__).resolve().parents[1]


def rows(*pairs) -> list[dict]:
    return [{"answerable": answerable, "top1_score": score} for answerable, score in pairs]


# Dev: abstention cases score 1 and 3; answerable ones 2, 4, 5.
DEV = rows((False, 1.0), (False, 3.0), (True, 2.0), (True, 4.0), (True, 5.0))


def test_candidates_are_midpoints_plus_both_ends():
    assert candidate_thresholds([3.0, 1.0, None, 3.0, 2.0]) == [0.0, 1.5, 2.5, 4.0]
    assert candidate_thresholds([None]) == [0.0]


def test_rates_by_hand():
    point = rates(DEV, 3.5)  # abstains on 1, 2, 3
    assert point["abstain_rate"] == 1.0  # both abstention cases
    assert point["false_abstain_rate"] == pytest.approx(1 / 3)  # the answerable case at 2
    assert point["precision"] == pytest.approx(2 / 3)
    assert point["f1"] == pytest.approx(0.8)
    none = rates(DEV, 0.5)
    assert (none["abstain_rate"], none["false_abstain_rate"], none["precision"], none["f1"]) == (0.0, 0.0, None, None)
    assert rates(rows((True, None)), 0.0)["false_abstain_rate"] == 1.0  # nothing retrieved: abstains


def test_sweep_and_both_rules():
    assert [p["threshold"] for p in sweep(DEV)] == [0.0, 1.5, 2.5, 3.5, 4.5, 6.0]
    # F1 at 1.5: 1/2 recall, precision 1 -> 2/3; at 3.5: 0.8; at 4.5: 4/6 -> 2/3 ... best 3.5
    assert choose_threshold(DEV, "f1")["threshold"] == 3.5
    # the most abstention with no false abstention: abstain below 1.5 only
    assert choose_threshold(DEV, "false-abstention", 0.0)["threshold"] == 1.5
    assert choose_threshold(DEV, "false-abstention", 0.34)["threshold"] == 3.5
    assert choose_threshold(DEV, "false-abstention", 1.0)["threshold"] == 6.0
    with pytest.raises(ValueError, match="needs abstention cases and answerable cases"):
        choose_threshold(rows((True, 1.0)), "f1")
    with pytest.raises(ValueError, match="top-1 scores do not vary"):
        choose_threshold(rows((False, 1.0), (True, 1.0), (True, None)), "f1")  # ranks only: every top-1 is 1/1
    with pytest.raises(ValueError, match="unknown rule"):
        choose_threshold(DEV, "best")


def test_choice_depends_on_dev_only():
    cases = [Case(f"c{i}", "q", answerable=i % 2 == 0) for i in range(12)]
    split = {f"c{i}": "dev" if i < 6 else "eval" for i in range(12)}
    run = {f"c{i}": [{"score": float(i % 5)}] for i in range(12)}
    chosen = choose_threshold(score_rows(cases, run, split)["dev"], "f1")["threshold"]
    relabelled = [Case(c.case_id, "q", answerable=not c.answerable) if split[c.case_id] == "eval" else c for c in cases]
    rescored = {cid: [{"score": 99.0}] if split[cid] == "eval" else ranked for cid, ranked in run.items()}
    assert choose_threshold(score_rows(relabelled, rescored, split)["dev"], "f1")["threshold"] == chosen


def test_params_file_round_trip_and_errors(tmp_path):
    path = tmp_path / "abstention.yaml"
    assert read_thresholds(path, {"cfg": {}}) == {}
    write_thresholds(path, {"cfg": {"abstain_below": 2.5, "rule": "f1", "tuned_on": "dev"}})
    assert path.read_text().startswith("# Abstention thresholds")
    assert read_thresholds(path, {"cfg": {}}) == {"cfg": {"abstain_below": 2.5, "rule": "f1", "tuned_on": "dev"}}
    with pytest.raises(InputError, match="which does not exist"):
        read_thresholds(path, {"other": {}})
    path.write_text("cfg: {abstain_below: high}\n")
    with pytest.raises(InputError, match="numeric abstain_below"):
        read_thresholds(path, {"cfg": {}})


def test_threshold_source_and_conflict(tmp_path):
    path = tmp_path / "abstention.yaml"
    tuned = {"cfg": {"abstain_below": 2.5, "rule": "f1"}}
    assert threshold_for("cfg", tuned, "bm25", {}, path) == (2.5, "abstention.yaml (tuned on dev, rule f1)")
    assert threshold_for("cfg", {}, "bm25", {"abstain_below": 1}, path) == (1.0, "retrievers.bm25.abstain_below")
    assert threshold_for("cfg", {}, "bm25", {}, path) == (None, None)
    with pytest.raises(InputError, match="set here and in retrievers.bm25.abstain_below"):
        threshold_for("cfg", tuned, "bm25", {"abstain_below": 1}, path)


def tune(project: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "stages.cli", "tune-abstain", "--config", "cfg", *extra],
        cwd=project,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": str(Path(sys.executable).parent)},
    )


def project(tmp_path: Path, eval_answerable: bool, eval_score: float) -> Path:
    """A tiny project on disk: 4 dev and 4 eval cases with a run and a split."""
    root = tmp_path / f"p-{eval_answerable}-{eval_score}"
    (root / "data" / "runs").mkdir(parents=True)
    (root / "data" / "chunks").mkdir(parents=True)
    (root / "data" / "validated").mkdir(parents=True)
    (root / "params.yaml").write_text(
        yaml.safe_dump(
            {"configs": {"cfg": {"chunking": "ch", "retriever": "r"}}, "retrievers": {"r": {"kind": "bm25"}}}
        )
    )
    (root / "data" / "chunks" / "ch.jsonl").write_text(
        json.dumps({"chunk_id": "d#0", "doc_id": "d", "ordinal": 0, "start": 0, "end": 1, "text": "x"}) + "\n"
    )
    dev = {"d1": (False, 1.0), "d2": (False, 3.0), "d3": (True, 2.0), "d4": (True, 5.0)}
    ev = {f"e{i}": (eval_answerable if i % 2 else not eval_answerable, eval_score + i) for i in range(4)}
    cases, runs, split = [], [], {"cases": {}, "fingerprints": {}}
    for case_id, (answerable, score) in sorted({**dev, **ev}.items()):
        cases.append(Case(case_id, "q", answerable=answerable).to_row())
        runs.append({"case_id": case_id, "rank": 1, "chunk_id": "d#0", "score": score})
        split["cases"][case_id] = {"split": "dev" if case_id in dev else "eval"}
    (root / "data" / "validated" / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    write_run(root / "data" / "runs" / "cfg.parquet", runs, [c["id"] for c in cases], ["d#0"])
    (root / "data" / "split.json").write_text(json.dumps(split))
    return root


def test_tune_abstain_command_ignores_eval_labels(tmp_path):
    outputs = []
    for eval_answerable, eval_score in ((True, 0.0), (False, 10.0)):
        root = project(tmp_path, eval_answerable, eval_score)
        done = tune(root)
        assert done.returncode == 0, done.stderr
        outputs.append((root / "abstention.yaml").read_text())
        assert "abstain below 4 (rule f1, chosen on dev)" in done.stdout  # 1, 2, 3 abstain: F1 0.8
        assert "eval: abstains on" in done.stdout
    assert outputs[0] == outputs[1]
    assert yaml.safe_load(outputs[0]) == {"cfg": {"abstain_below": 4.0, "rule": "f1", "tuned_on": "dev"}}


def test_tune_abstain_refuses_bad_options_without_writing(tmp_path):
    root = project(tmp_path, True, 0.0)
    done = tune(root, "--rule", "false-abstention")
    assert done.returncode == 2 and "--target: needs a rate in [0, 1]" in done.stderr
    assert "Traceback" not in done.stderr and not (root / "abstention.yaml").exists()
    done = tune(root, "--rule", "false-abstention", "--target", "0")
    assert done.returncode == 0 and yaml.safe_load((root / "abstention.yaml").read_text())["cfg"]["target"] == 0.0


def test_overcautious_warns_above_half_of_the_answerable_dev_cases():
    """Answerable dev cases score 2, 4 and 5: below 3.5 one of them abstains, below 4.5 two."""
    assert overcautious(rates(DEV, 3.5)) is None
    assert overcautious(rates(rows((True, 1.0), (True, 3.0), (False, 0.5)), 2.0)) is None  # exactly half: no warning
    assert overcautious(rates(DEV, 4.5)) == (
        "the threshold 4.5 abstains on 2 of the 3 answerable dev cases (66.7%), more than half: the top-1 score "
        "barely tells answerable cases from the others under this configuration. Check the figures above before "
        "committing it; `--rule false-abstention --target 0.1` caps that rate instead"
    )


def test_tune_abstain_warns_about_a_threshold_that_refuses_most_answerable_cases(tmp_path):
    """Dev: abstention cases score 1 and 3, answerable ones 2 and 5. A target of 1 allows
    the highest candidate, 6, which abstains on both answerable cases; f1 picks 4, which
    abstains on one of the two: exactly half, no warning."""
    root = project(tmp_path, True, 0.0)
    done = tune(root, "--rule", "false-abstention", "--target", "1")
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("ragvet: warning: cfg: the threshold 6 abstains on 2 of the 2 answerable dev cases")
    assert yaml.safe_load((root / "abstention.yaml").read_text())["cfg"]["abstain_below"] == 6.0
    done = tune(root)
    assert done.returncode == 0 and done.stderr == ""
