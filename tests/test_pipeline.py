"""The three situations users rely on, end to end through DVC's own CLI in a
temporary git repo holding the bundled sample."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from conftest import commit_all, sh


def set_param(repo: Path, keys: list[str], value) -> None:
    params_path = repo / "params.yaml"
    params = yaml.safe_load(params_path.read_text())
    node = params
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value
    params_path.write_text(yaml.safe_dump(params, sort_keys=False))


def metrics_bytes(repo: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted((repo / "metrics").glob("*.json"))}


def test_chunking_change_reruns_only_the_stages_that_use_it(work_repo):
    set_param(work_repo, ["chunking", "headings-1200", "max_chars"], 400)
    out = sh(work_repo, "dvc", "repro").stdout
    for stage in ("chunk@headings-1200", "retrieve@headings-1200-bm25", "evaluate@headings-1200-bm25"):
        assert f"Running stage '{stage}'" in out
    for other in ("fixed-300", "sentences-600"):
        for stage in (f"chunk@{other}", f"retrieve@{other}-bm25", f"evaluate@{other}-bm25"):
            assert f"Running stage '{stage}'" not in out
            assert f"Stage '{stage}' didn't change, skipping" in out

    diff = json.loads(sh(work_repo, "dvc", "metrics", "diff", "--json").stdout)
    changed = diff["metrics/headings-1200-bm25.json"]
    assert changed["eval.metrics.evidence_recall@5"]["diff"] != 0
    assert changed["eval.metrics.context_chars@5"]["diff"] < 0  # smaller chunks, smaller context
    assert "metrics/sentences-600-bm25.json" not in diff
    assert "metrics/fixed-300-bm25.json" not in diff


def test_harmful_change_fails_the_gate_naming_drops_and_missed_cases(work_repo):
    set_param(work_repo, ["chunking", "sentences-600", "max_chars"], 40)
    done = sh(work_repo, "dvc", "repro", check=False)
    assert done.returncode != 0
    message = done.stdout + done.stderr
    verdict = json.loads((work_repo / "metrics" / "gate.json").read_text())
    assert verdict["passed"] is False
    (result,) = verdict["configs"]
    failed = [m for m in result["metrics"] if m["failed"]]
    assert failed, "a 40-character chunking must drop a guarded metric"
    for metric in failed:
        assert metric["delta"] < -0.02
        line = (
            f"FAIL sentences-600-bm25 {metric['metric']}: {metric['baseline']:.3f} -> {metric['current']:.3f} "
            f"(delta {metric['delta']:.3f}"
        )
        assert line in message
    assert result["newly_missed"]
    for case_id in result["newly_missed"]:
        assert case_id in message
    assert "gate: FAILED" in message
    against = sh(work_repo, "python", "-m", "stages.cli", "gate", "--against", "HEAD", check=False)
    assert against.returncode == 1 and "gate: FAILED" in against.stdout


def test_unchanged_tree_passes_the_gate(work_repo):
    done = sh(work_repo, "dvc", "repro", "-f", "-s", "gate")
    assert "gate: PASSED" in done.stdout
    assert json.loads((work_repo / "metrics" / "gate.json").read_text())["passed"] is True
    against = sh(work_repo, "python", "-m", "stages.cli", "gate", "--against", "HEAD")
    assert "gate: PASSED" in against.stdout


def test_old_commit_reproduces_its_metrics_byte_for_byte(work_repo):
    first = sh(work_repo, "git", "rev-parse", "HEAD").stdout.strip()
    before = metrics_bytes(work_repo)
    set_param(work_repo, ["chunking", "headings-1200", "max_chars"], 500)
    sh(work_repo, "dvc", "repro")
    commit_all(work_repo, "smaller heading chunks")
    assert metrics_bytes(work_repo)["headings-1200-bm25.json"] != before["headings-1200-bm25.json"]

    sh(work_repo, "git", "checkout", "-q", first)
    sh(work_repo, "dvc", "repro", "-f")
    assert metrics_bytes(work_repo) == before
    assert sh(work_repo, "git", "status", "--porcelain", "metrics").stdout == ""
