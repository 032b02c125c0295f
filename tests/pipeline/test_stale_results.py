"""Stale results and stale thresholds, through DVC's CLI on a copy of the sample.

One flow, since each `dvc repro` of the sample costs most of a minute: the gate and the
report refuse results the current params did not produce (exit 2, naming the stages),
and a stale abstention threshold costs only its configuration's abstention figures.
"""

from __future__ import annotations

import json
from pathlib import Path

from repos import ragvet, set_param, sh

GATED = "sentences-600-bm25"
DROPPED = ["evidence_recall@5", "claim_availability@5", "evidence_recall_budget@512"]  # of a 40-character packing
# The gate's lines for them, as the sample's BM25 run gives them with max_chars 40 (rounded to 3 places), and
# for the chunk-level metrics it cannot compare across that chunking (sentences-600's fingerprints at 600 and 40).
CHUNKINGS = "baseline chunking 224b1e7ba98b04f7, current 88dc206c223c93ed"
FAILED_LINES = [
    f"FAIL {GATED} evidence_recall@5: 0.710 -> 0.110 (delta -0.600",
    f"FAIL {GATED} claim_availability@5: 0.698 -> 0.079 (delta -0.619",
    f"FAIL {GATED} evidence_recall_budget@512: 0.695 -> 0.162 (delta -0.533",
    f"SKIP {GATED} recall@5: not comparable across chunkings ({CHUNKINGS})\n",
    f"SKIP {GATED} mrr: not comparable across chunkings ({CHUNKINGS})\n",
]
STALE = (
    "threshold stale: the configuration spec (chunking 'sentences-600' or retriever 'bm25') changed since it "
    "was tuned, so its abstention figures are marked stale"
)


def summary(repo: Path, config: str = GATED) -> dict:
    return json.loads((repo / "metrics" / f"{config}.json").read_text())


def failed_metrics(repo: Path) -> list[str]:
    verdict = json.loads((repo / "verdict.json").read_text())
    return [metric["metric"] for config in verdict["configs"] for metric in config["metrics"] if metric["failed"]]


def test_stale_results_are_refused_and_a_stale_threshold_costs_only_its_figures(work_repo):
    repo = work_repo
    fresh = ragvet(repo, "gate", "--against", "main")
    assert fresh.returncode == 0 and "gate: PASSED" in fresh.stdout, fresh.stderr

    # A params change the pipeline has not reproduced: the old tables must not pass as current.
    set_param(repo, ["chunking", "sentences-600", "max_chars"], 40)
    for command in ("gate", "report"):
        stale = ragvet(repo, command, "--against", "main")
        assert stale.returncode == 2 and "Traceback" not in stale.stderr and "PASSED" not in stale.stdout
        assert (
            "dvc.lock: 3 stages are out of date (chunk@sentences-600, settings, validate): the results " in stale.stderr
        )
        assert "dvc.lock: validate: out of date: params.yaml: chunking modified" in stale.stderr
        assert "dvc.lock: chunk@sentences-600: out of date: params.yaml: chunking.sentences-600 modified" in (
            stale.stderr
        )
        assert "fix: run `dvc repro`, then the " in stale.stderr
    # The gate stage refuses too, from inside `dvc repro` (which holds its own locks meanwhile).
    staged = sh(repo, "dvc", "repro", "-s", "-f", "gate", check=False)
    assert (
        staged.returncode == 255
        and "dvc.lock: 3 stages are out of date (chunk@sentences-600, settings, validate)" in (staged.stderr)
    )

    # As when `dvc repro` stops at validate (here on a malformed threshold): its outputs are
    # gone, the old per-case tables are still there, and the gate must not pass over them.
    thresholds = (repo / "abstention.yaml").read_text()
    (repo / "abstention.yaml").write_text(thresholds.replace("abstain_below: 2.748327", "abstain_below: high"))
    stopped = sh(repo, "dvc", "repro", check=False)
    assert stopped.returncode == 255 and "failed to reproduce 'validate'" in stopped.stderr
    gate = ragvet(repo, "gate", "--against", "main", "--out", "verdict.json")
    assert gate.returncode == 2 and "Traceback" not in gate.stderr and not (repo / "verdict.json").exists()
    assert "dvc.lock: 12 stages are out of date (chunk@fixed-300, " in gate.stderr  # all that read validate's
    validate = "params.yaml: chunking modified; abstention.yaml: sentences-600-bm25 modified; output data/validated/"
    assert f"dvc.lock: validate: out of date: {validate}" in gate.stderr
    (repo / "abstention.yaml").write_text(thresholds)

    # The stale threshold no longer stops the pipeline: every stage runs, and the gate stage
    # (its own stale check inside `dvc repro`, without DVC's lock) fails on the drop alone.
    repro = sh(repo, "dvc", "repro", check=False)
    assert f"ragvet: warning: abstention.yaml:4 ({GATED}): {STALE}" in repro.stderr
    assert "Running stage 'gate'" in repro.stdout and "gate: FAILED" in repro.stdout
    assert all(line in repro.stdout for line in FAILED_LINES)
    marked = summary(repo)["abstention"]
    assert marked["stale"] == {"reason": STALE, "fix": f"ragvet tune-abstain --config {GATED}"}
    assert marked["abstain_below"] == 2.748327  # applied as tuned, and marked
    assert "stale" not in summary(repo, "fixed-300-bm25")["abstention"]
    assert summary(repo)["eval"]["metrics"]["evidence_recall@5"] == 0.109524  # retrieval metrics computed anew
    report = (repo / "metrics" / "report.md").read_text()
    assert f"- **Stale threshold, `{GATED}`:** {STALE}; " in report
    assert f"Fix: `ragvet tune-abstain --config {GATED}`, then `dvc repro`." in report

    # Nothing is stale for the gate now (no guarded metric reads a threshold): it fails on the drop.
    gate = ragvet(repo, "gate", "--against", "main", "--out", "verdict.json")
    assert gate.returncode == 1 and "gate: FAILED" in gate.stdout and "out of date" not in gate.stderr
    assert failed_metrics(repo) == DROPPED and all(line in gate.stdout for line in FAILED_LINES)

    # Tuned again on the new chunking, the threshold is current, and the gate still fails on the drop.
    tuned = ragvet(repo, "tune-abstain", "--config", GATED)
    assert tuned.returncode == 0, tuned.stderr
    repro = sh(repo, "dvc", "repro", check=False)
    assert "threshold stale" not in repro.stderr and "gate: FAILED" in repro.stdout
    assert "stale" not in summary(repo)["abstention"] and summary(repo)["abstention"]["abstain_below"] == 3.959082
    assert "Stale threshold" not in (repo / "metrics" / "report.md").read_text()
    gate = ragvet(repo, "gate", "--against", "main", "--out", "verdict.json")
    assert gate.returncode == 1 and "out of date" not in gate.stderr
    assert failed_metrics(repo) == DROPPED and all(line in gate.stdout for line in FAILED_LINES)
