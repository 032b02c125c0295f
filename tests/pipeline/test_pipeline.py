"""The three situations users rely on, end to end through DVC's own CLI in a
temporary git repo holding the bundled sample."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from repos import GRID, commit_all, exp_refs, ragvet, set_param, sh, untune


def metrics_bytes(repo: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted((repo / "metrics").glob("*.json"))}


GATED = "sentences-600-bm25"  # the sample's gated configuration
# Its guarded metrics comparable across chunkings, in params.yaml's order: what a chunking change compares.
COMPARED = ["evidence_recall@5", "claim_availability@5", "evidence_recall_budget@512", "unsupported_answer"]
DVC_KEPT = ("metrics/slices", "metrics/abstention")  # kept by DVC, never by git (docs/storage.md)
# A killed run's temporary files (.<name>.<random>.tmp) beside the outputs of every stage.
STRAYS = [
    "data/validated/.corpus.jsonl.k9xq_1.tmp",
    "data/validated/.cases.parquet.k9xq_2.tmp",
    "data/chunks/.sentences-600.jsonl.k9xq_3.tmp",
    f"data/runs/.{GATED}.parquet.k9xq_4.tmp",
    f"metrics/cases/.{GATED}.parquet.k9xq_5.tmp",
    f"metrics/slices/.{GATED}.json.k9xq_6.tmp",
    "metrics/plots/.at_k.csv.k9xq_7.tmp",
    "data/.split.json.k9xq_8.tmp",
]


def test_a_chunking_change_reruns_only_its_stages_and_the_old_commit_reproduces_byte_for_byte(work_repo):
    """Situations 1 and 3 in one history: a chunking change re-runs only the stages that use
    it; back at the old commit, a forced re-run of every stage gives its metrics byte for byte,
    though a killed run left stray temporary files: each stage removes
    its own, and none reaches dvc.lock."""
    first = sh(work_repo, "git", "rev-parse", "HEAD").stdout.strip()
    before, lock = metrics_bytes(work_repo), (work_repo / "dvc.lock").read_text()
    set_param(work_repo, ["chunking", "headings-1200", "max_chars"], 400)
    out = sh(work_repo, "dvc", "repro").stdout
    for stage in ("chunk@headings-1200", "retrieve@headings-1200-bm25", "evaluate@headings-1200-bm25"):
        assert f"Running stage '{stage}'" in out
    for other in ("fixed-300", "sentences-600"):
        for stage in (f"chunk@{other}", f"retrieve@{other}-bm25", f"evaluate@{other}-bm25"):
            assert f"Running stage '{stage}'" not in out
            assert f"Stage '{stage}' didn't change, skipping" in out

    # DVC's metrics are the headline files alone: the changed configuration's, its guarded metrics.
    diff = json.loads(sh(work_repo, "dvc", "metrics", "diff", "--json").stdout)
    assert list(diff) == ["metrics/headline/headings-1200-bm25.json"]
    changed = diff["metrics/headline/headings-1200-bm25.json"]
    assert changed["eval.evidence_recall@5"]["diff"] != 0
    assert set(changed) <= {f"eval.{metric}" for metric in ("recall@5", *COMPARED, "mrr", "cases", "abstention_cases")}
    commit_all(work_repo, "smaller heading chunks")
    assert metrics_bytes(work_repo)["headings-1200-bm25.json"] != before["headings-1200-bm25.json"]

    sh(work_repo, "git", "checkout", "-q", first)
    for stray in STRAYS:
        (work_repo / stray).write_text('{"half": ')
    sh(work_repo, "dvc", "repro", "-f")
    assert metrics_bytes(work_repo) == before
    assert sh(work_repo, "git", "status", "--porcelain", "metrics").stdout == ""
    assert [stray for stray in STRAYS if (work_repo / stray).exists()] == []
    assert (work_repo / "dvc.lock").read_text() == lock  # byte for byte: latency records live outside it
    report_deps = {dep["path"]: dep for dep in yaml.safe_load(lock)["stages"]["report"]["deps"]}
    assert report_deps["metrics/cases"]["nfiles"] == 3  # the sample's three BM25 configurations


def test_unchanged_tree_passes_the_gate(work_repo):
    done = sh(work_repo, "dvc", "repro", "-f", "-s", "gate")
    assert "gate: PASSED" in done.stdout
    assert json.loads((work_repo / "metrics" / "gate.json").read_text())["passed"] is True
    against = ragvet(work_repo, "gate", "--against", "HEAD", check=True)
    assert "gate: PASSED" in against.stdout


def test_a_failing_temporary_experiment_leaves_the_work_tree_as_it_was(work_repo):
    """The docs' experiment forms (`--temp`, the queue) run in a copy of the workspace: a
    failing one changes nothing here. A workspace `dvc exp run` that fails leaves params.yaml
    edited and outputs removed, so the next experiment would carry its change too."""
    params = (work_repo / "params.yaml").read_bytes()
    done = sh(work_repo, "dvc", "exp", "run", "--temp", "-S", "chunking.headings-1200.max_chars=0", check=False)
    assert done.returncode != 0
    assert "headings-1200" in done.stdout + done.stderr  # the failing stage named the bad chunking
    assert sh(work_repo, "git", "status", "--porcelain").stdout == ""
    assert (work_repo / "params.yaml").read_bytes() == params


def test_experiment_queue_with_two_workers_equals_sequential_runs(experiments):
    """The README's grid recipe: queued experiments run by two workers give the
    same committed metrics as the same experiments run one after another."""
    by_name = exp_refs(experiments)
    assert {f"{kind}-{size}" for kind in ("seq", "q") for size in GRID} <= set(by_name)
    path = "metrics/headings-1200-bm25.json"
    shown = {name: sh(experiments, "git", "show", f"{ref}:{path}").stdout for name, (_, ref) in by_name.items()}
    for size in GRID:
        assert json.loads(shown[f"q-{size}"]) == json.loads(shown[f"seq-{size}"])
        assert shown[f"q-{size}"] == shown[f"seq-{size}"]  # byte for byte
    assert shown["seq-600"] != shown["seq-2000"]  # the grid did change the chunking
    table = sh(experiments, "dvc", "exp", "show", "--csv").stdout
    assert "q-600" in table and "seq-2000" in table


def test_a_harmful_change_fails_the_gate_naming_its_drops_and_leaves_git_tracking_intact(work_repo):
    """A harmful chunking fails the gate, naming every dropped metric and newly missed case.
    That failing `dvc repro` takes back the .gitignore entries DVC wrote for new outputs (a
    new chunking's here): the project's own ignore patterns must keep them out of git, and
    the next run goes through."""
    params = yaml.safe_load((work_repo / "params.yaml").read_text())
    params["chunking"]["fixed-200"] = {"strategy": "fixed", "unit": "chars", "window": 200, "overlap": 20}
    params["configs"]["fixed-200-bm25"] = {"chunking": "fixed-200", "retriever": "bm25"}
    (work_repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    untune(work_repo)
    set_param(work_repo, ["chunking", "sentences-600", "max_chars"], 40)  # harmful: the gate fails
    done = sh(work_repo, "dvc", "repro", check=False)
    assert done.returncode != 0
    message = done.stdout + done.stderr
    verdict = json.loads((work_repo / "metrics" / "gate.json").read_text())
    assert verdict["passed"] is False
    (result,) = verdict["configs"]
    # Another chunking: recall@5 and mrr count its chunks, so only the comparable guarded metrics are compared.
    assert [m["metric"] for m in result["metrics"]] == COMPARED
    baseline_fp = json.loads((work_repo / "metrics" / "baseline" / f"{GATED}.json").read_text())["fingerprints"]
    current_fp = json.loads((work_repo / "metrics" / f"{GATED}.json").read_text())["fingerprints"]
    reason = (
        f"not comparable across chunkings (baseline chunking {baseline_fp['chunking']}, "
        f"current {current_fp['chunking']})"
    )
    assert baseline_fp["chunking"] != current_fp["chunking"]
    assert result["skipped"] == [{"metric": "recall@5", "reason": reason}, {"metric": "mrr", "reason": reason}]
    for skipped in ("recall@5", "mrr"):
        assert f"SKIP {GATED} {skipped}: {reason}\n" in message
        assert f"- `{GATED}`: `{skipped}` not compared: {reason}." in (work_repo / "metrics" / "report.md").read_text()
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
    # The verdict stage passed the failed verdict on (exit 0): the report renders it, and the gate fails after it.
    assert message.index("Running stage 'verdict'") < message.index("Running stage 'report'")
    assert message.index("Running stage 'report'") < message.index("Running stage 'gate'")
    report = (work_repo / "metrics" / "report.md").read_text()
    assert report.startswith("# Gate: FAILED - ")
    against = ragvet(work_repo, "gate", "--against", "HEAD")
    assert against.returncode == 1 and "gate: FAILED" in against.stdout

    commit_all(work_repo, "a harmful change, committed with git add -A")
    tracked = sh(
        work_repo, "git", "ls-files", "data/chunks", "data/runs", "data/validated", "data/split.json", *DVC_KEPT
    ).stdout.split()
    assert [path for path in tracked if not path.endswith("/.gitignore")] == []
    set_param(work_repo, ["chunking", "sentences-600", "max_chars"], 600)
    second = sh(work_repo, "dvc", "repro")
    assert "already tracked" not in second.stdout + second.stderr
    back = json.loads((work_repo / "metrics" / "gate.json").read_text())
    assert back["passed"] is True and back["configs"][0]["skipped"] == []  # the baseline's chunking again
    assert [m["metric"] for m in back["configs"][0]["metrics"]] == ["recall@5", *COMPARED[:3], "mrr", COMPARED[3]]
