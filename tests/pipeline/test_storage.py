"""Per-case tables kept by DVC rather than git (docs/storage.md): `ragvet migrate-storage`
moves an existing repository's tables, and `gate/report --against REV` still read REV's
tables when only the DVC remote holds them, or say which object is missing where."""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from repos import commit_all, copy_repo, ragvet, set_param, sh

from ragvet.gating.baselines import compared_columns, current_table, latency_pairs, read_results_at
from ragvet.gating.compare import gate_metrics
from ragvet.gating.decision import decide, write_verdict
from ragvet.inputs.params import stage_params
from ragvet.settings import Gate
from ragvet.storage import placement
from ragvet.storage.results import read_results, result_rows

GATED = "sentences-600-bm25"
TABLE = f"metrics/cases/{GATED}.parquet"


def tracked(repo: Path, rev: str) -> set[str]:
    return set(sh(repo, "git", "ls-tree", "-r", "--name-only", rev).stdout.split())


def locked_md5(repo: Path, rev: str, stage: str, path: str) -> str:
    lock = yaml.safe_load(sh(repo, "git", "show", f"{rev}:dvc.lock").stdout)
    return next(out["md5"] for out in lock["stages"][stage]["outs"] if out["path"] == path)


def in_cache(repo: Path, md5: str) -> bool:
    return (repo / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]).is_file()


@pytest.fixture(scope="module")
def history(sample_repo: Path, tmp_path_factory) -> tuple[Path, dict[str, str], dict]:
    """Commits ``git`` (baseline accepted, tables in git), ``migrated`` (the same results
    after `ragvet migrate-storage`, pushed to a local-folder remote) and ``harmful``
    (a 300-character sentence packing, reproduced up to the report, pushed)."""
    root = tmp_path_factory.mktemp("storage")
    repo = copy_repo(sample_repo, root / "repo")
    ragvet(repo, "baseline", "accept", check=True)
    sh(repo, "dvc", "repro")
    # the sample's committed baseline is its current results already: the accept may change nothing
    revs = {"git": commit_all(repo, "baseline accepted, tables in git", allow_empty=True)}
    seen = {"git_table": (repo / TABLE).read_bytes(), "dvc_yaml": (repo / "dvc.yaml").read_text()}
    seen["migrate"] = ragvet(repo, "migrate-storage", check=True).stdout
    seen["again"] = ragvet(repo, "migrate-storage", check=True).stdout
    seen["status"] = sh(repo, "dvc", "status").stdout
    seen["dirty"] = sh(repo, "git", "status", "--porcelain", "--untracked-files=all").stdout
    revs["migrated"] = commit_all(repo, "tables in DVC")
    sh(repo, "dvc", "remote", "add", "-d", "shared", str(root / "remote"))
    sh(repo, "dvc", "push")
    sh(repo, "git", "commit", "-q", "-am", "the team's remote")
    set_param(repo, ["chunking", "sentences-600", "max_chars"], 300)
    sh(repo, "dvc", "repro", "report")
    revs["harmful"] = commit_all(repo, "harmful chunking")
    sh(repo, "dvc", "push")
    return repo, revs, seen


@pytest.fixture
def cold(history, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A private copy of the history whose DVC cache is empty: what REV had lives only on the remote."""
    repo, revs, _ = history
    dest = copy_repo(repo, tmp_path / "repo")
    shutil.rmtree(dest / ".dvc" / "cache")
    return dest, revs


def test_migrate_storage_moves_the_growing_tables_from_git_to_dvc_without_recomputing(history):
    repo, revs, seen = history
    before, after = tracked(repo, revs["git"]), tracked(repo, revs["migrated"])
    assert {TABLE, f"metrics/baseline/cases/{GATED}.parquet"} <= before
    assert not [
        p for p in after if p.startswith(("metrics/cases/", "metrics/baseline/cases/")) and p.endswith(".parquet")
    ]
    assert "data/split.json" not in before | after  # the split's membership lives in DVC from the start
    assert {"metrics/split.json", "metrics/baseline/cases.dvc", f"metrics/{GATED}.json"} <= after
    lines = seen["migrate"].splitlines()
    assert lines[0] == "dvc.yaml: cache on for metrics/cases/${key}.parquet"
    assert f"git: stopped tracking {TABLE}" in lines
    assert "dvc commit: every stage's hashes recorded, nothing recomputed" in lines
    assert lines[-1] == "dvc add metrics/baseline/cases -> metrics/baseline/cases.dvc"
    untracked = {line for line in seen["dirty"].splitlines() if line.startswith("??")}
    assert untracked == {"?? metrics/baseline/cases.dvc"}  # no .gitignore of DVC's: the project's own covers them
    assert seen["again"].strip() == "nothing to move: the tables already live in DVC"
    assert "Data and pipelines are up to date." in seen["status"]  # nothing to recompute
    # The project's own .gitignore keeps them out of `git add -A`, even after a failed run.
    assert ".gitignore: /metrics/cases/*.parquet" in lines and ".gitignore: /metrics/baseline/cases/" in lines
    assert sh(repo, "git", "check-ignore", "-v", TABLE).stdout.startswith(".gitignore:")
    # dvc.yaml keeps its comments; only the flag changed.
    new_yaml = sh(repo, "git", "show", f"{revs['migrated']}:dvc.yaml").stdout
    changed = [(a, b) for a, b in zip(seen["dvc_yaml"].splitlines(), new_yaml.splitlines()) if a != b]
    assert len(seen["dvc_yaml"].splitlines()) == len(new_yaml.splitlines())
    assert [b.strip() for _, b in changed] == ["cache: true"]
    # The table DVC now holds is the one git held, byte for byte, and dvc.lock's hash did not move.
    md5 = locked_md5(repo, revs["migrated"], f"evaluate@{GATED}", TABLE)
    assert md5 == locked_md5(repo, revs["git"], f"evaluate@{GATED}", TABLE)
    assert (repo / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]).read_bytes() == seen["git_table"]


def whole_table_verdict(repo: Path, rev: str, out: Path) -> None:
    """The gate's verdict against ``rev`` decided from both per-case tables read whole as
    frames (the comparison of frames, one batch), written as `gate --out` writes it."""
    with contextlib.chdir(repo):
        settings = stage_params(Path("params.yaml"), ["gate", "slices", "ks"])
        gate = Gate.from_params(settings)
        configs, metrics, baseline = list(gate.configs), gate_metrics(gate), Path("metrics/baseline")
        current = {config: current_table(Path("metrics/cases"), config, metrics) for config in configs}
        found = read_results_at(rev, configs, Path("."), compared_columns(metrics))
        bases = {config: found[config] or (None, None) for config in configs}
        latency = latency_pairs(gate.max_p95_rise, configs, baseline, Path(".ragvet/latency"), rev)
        split, summaries, depth = Path("data/split.json"), Path("metrics"), max(settings["ks"])
        verdict = decide(
            gate, Path("metrics/cases"), split, baseline, rev, latency, current, bases, summaries, depth=depth
        )
    write_verdict(verdict, out)


def test_gate_and_report_against_a_revision_whose_tables_are_only_on_the_dvc_remote(cold, tmp_path, monkeypatch):
    repo, revs = cold
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the revision's tables are fetched to
    md5 = locked_md5(repo, revs["migrated"], f"evaluate@{GATED}", TABLE)
    assert not in_cache(repo, md5)
    via_git = ragvet(repo, "gate", "--against", revs["git"], "--out", str(tmp_path / "git.json"))
    assert not in_cache(repo, md5)  # the git-kept revision needed no DVC object
    via_dvc = ragvet(repo, "gate", "--against", revs["migrated"], "--out", str(tmp_path / "dvc.json"))
    assert via_dvc.returncode == 1 and "gate: FAILED" in via_dvc.stdout and "Traceback" not in via_dvc.stderr
    # The same results, whether git or DVC kept them, give the same verdict.
    assert via_git.stdout.replace(revs["git"], "REV") == via_dvc.stdout.replace(revs["migrated"], "REV")
    verdict = json.loads((tmp_path / "dvc.json").read_text())
    assert json.loads((tmp_path / "git.json").read_text().replace(revs["git"], "REV")) == json.loads(
        json.dumps(verdict).replace(revs["migrated"], "REV")
    )
    # Newly missed cases are those hit@5 at the revision and missed now, computed by hand.
    committed = subprocess.run(["git", "show", f"{revs['git']}:{TABLE}"], cwd=repo, capture_output=True, check=True)
    before = {r["case_id"]: r for r in result_rows(read_results(committed.stdout))}
    after = {r["case_id"]: r for r in result_rows(read_results(repo / TABLE))}
    hit = {
        cid: (before[cid]["metrics"]["hit@5"], row["metrics"]["hit@5"]) for cid, row in after.items() if cid in before
    }
    expected = sorted(cid for cid, pair in hit.items() if after[cid]["split"] == "eval" and pair == (1, 0))
    (gated,) = [entry for entry in verdict["configs"] if entry["config"] == GATED]
    assert expected and gated["newly_missed"] == expected
    # Each revision's table, fetched to a file and paired a batch at a time, gives the bytes of whole frames.
    for rev, name in ((revs["git"], "git"), (revs["migrated"], "dvc")):
        whole_table_verdict(repo, rev, tmp_path / f"{name}-whole.json")
        assert (tmp_path / f"{name}-whole.json").read_bytes() == (tmp_path / f"{name}.json").read_bytes()
    assert list(scratch.iterdir()) == []  # every fetched table removed once compared

    shutil.rmtree(repo / ".dvc" / "cache", ignore_errors=True)  # fetching streamed: the cache may be empty still
    report = ragvet(repo, "report", "--against", revs["migrated"])
    assert report.returncode == 0 and "Traceback" not in report.stderr
    assert all(f"`{case_id}`" in report.stdout for case_id in expected)


def test_a_remote_without_the_object_or_no_remote_at_all_is_a_clear_error(cold, tmp_path, monkeypatch):
    repo, revs = cold
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the revision's tables are fetched to
    md5 = locked_md5(repo, revs["migrated"], f"evaluate@{GATED}", TABLE)
    (tmp_path / "empty").mkdir()
    sh(repo, "dvc", "remote", "add", "-d", "empty", str(tmp_path / "empty"))
    out = tmp_path / "verdict.json"
    done = ragvet(repo, "gate", "--against", revs["migrated"], "--out", str(out))
    assert done.returncode == 2 and "Traceback" not in done.stderr and not out.exists()
    message = done.stdout + done.stderr
    assert (
        f"{revs['migrated']}:{TABLE}: DVC object {md5} is neither in this DVC cache nor on the remote 'empty'"
        in message
    )
    assert f"run `dvc push` where {revs['migrated']} was produced" in message
    assert list(scratch.iterdir()) == []  # nothing fetched is left behind

    sh(repo, "dvc", "remote", "remove", "empty")
    sh(repo, "dvc", "remote", "remove", "shared")
    done = ragvet(repo, "report", "--against", revs["migrated"])
    message = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in done.stderr
    first = locked_md5(repo, revs["migrated"], "evaluate@fixed-300-bm25", "metrics/cases/fixed-300-bm25.parquet")
    assert (
        f"{revs['migrated']}:metrics/cases/fixed-300-bm25.parquet: DVC tracks it (object {first}), "
        "this DVC cache lacks it, and no default DVC remote is configured"
    ) in message
    assert "`dvc remote add -d NAME URL`" in message
    assert list(scratch.iterdir()) == []


def test_baseline_accept_keeps_the_baselines_tables_in_dvc_once_migrated(cold):
    repo, _ = cold
    shutil.rmtree(repo / "metrics/baseline/cases")  # a clone that has not pulled yet
    done = ragvet(repo, "gate")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert (
        f"metrics/baseline/cases/{GATED}.parquet: the baseline's per-case table is tracked by DVC "
        "(metrics/baseline/cases.dvc) but not in the work tree\n    fix: run `dvc pull metrics/baseline/cases.dvc`"
    ) in done.stdout + done.stderr
    sh(repo, "dvc", "pull")
    done = ragvet(repo, "baseline", "accept", check=True)
    assert "wrote metrics/baseline/cases.dvc" in done.stdout
    changed = sh(repo, "git", "status", "--porcelain", "--untracked-files=all").stdout.split("\n")
    assert sorted(line for line in changed if line) == [
        " M metrics/baseline/cases.dvc",
        f" M metrics/baseline/{GATED}.json",
    ]
    pointer = yaml.safe_load((repo / "metrics/baseline/cases.dvc").read_text())
    assert in_cache(repo, pointer["outs"][0]["md5"].removesuffix(".dir") + ".dir")
    assert (repo / f"metrics/baseline/cases/{GATED}.parquet").read_bytes() == (repo / TABLE).read_bytes()
    assert ragvet(repo, "gate").returncode == 0  # the accepted change passes against its own baseline


# A migration killed in the child process at the point named: after the step runs for track_with_dvc,
# before it otherwise. The kill is a real SIGKILL of a real run; only where it strikes is chosen.
KILLED_AT = """
import os, signal, sys
from pathlib import Path
from ragvet.gating.baselines import compared_columns, current_table, latency_pairs, read_results_at
from ragvet.gating.compare import gate_metrics
from ragvet.gating.decision import decide, write_verdict
from ragvet.inputs.params import stage_params
from ragvet.settings import Gate
from ragvet.storage import placement
step = getattr(placement, sys.argv[1])
def killed(*args, **kwargs):
    if sys.argv[1] == "track_with_dvc":
        step(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
setattr(placement, sys.argv[1], killed)
placement.migrate_storage(Path("."))
"""


def test_a_migration_cut_short_anywhere_is_finished_by_running_it_again(history, tmp_path):
    source, revs, seen = history
    repo = copy_repo(source, tmp_path / "repo")
    sh(repo, "git", "checkout", "-q", "-f", revs["git"])  # the tables in git again, as before the migration
    sh(repo, "dvc", "checkout", "-q", "-f")
    assert "Data and pipelines are up to date." in sh(repo, "dvc", "status").stdout
    # Another git holds the index lock (an editor's commit): the dvc.yaml flags are flipped, git fails.
    (repo / ".git" / "index.lock").touch()
    done = ragvet(repo, "migrate-storage")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "`git rm --cached` failed: fatal: Unable to create" in done.stderr
    assert "run `ragvet migrate-storage` again: it resumes where it stopped" in done.stderr
    (repo / ".git" / "index.lock").unlink()
    src = str(Path(placement.__file__).parents[2])
    for step in ("_commit_all", "track_with_dvc"):  # killed before the dvc commit, then after the dvc add
        killed = sh(repo, sys.executable, "-c", KILLED_AT, step, check=False, PYTHONPATH=src)
        assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert sh(repo, "git", "status", "--porcelain").stdout  # half done: tables out of git, not yet in DVC
    # A baseline edited meanwhile is a stale stage still, not a change the resumed run may commit.
    summary = repo / f"metrics/baseline/{GATED}.json"
    accepted = summary.read_bytes()
    summary.write_bytes(accepted.replace(b"{", b"{ ", 1))
    done = ragvet(repo, "migrate-storage")
    assert done.returncode == 2, done.stderr
    assert "dvc.yaml: stages not up to date: report, verdict" in done.stderr
    assert "a migration cut short here left the tables half moved, which `dvc repro` refuses" in done.stderr
    summary.write_bytes(accepted)
    done = ragvet(repo, "migrate-storage")
    assert done.returncode == 0, done.stderr
    assert not (repo / placement.STARTED).exists()
    assert "Data and pipelines are up to date." in sh(repo, "dvc", "status").stdout
    # The same files for the commit as the uninterrupted migration's, which `history` committed.
    assert sh(repo, "git", "status", "--porcelain", "--untracked-files=all").stdout == seen["dirty"]
    sh(repo, "git", "add", "-A")
    tree = sh(repo, "git", "rev-parse", f"{revs['migrated']}^{{tree}}").stdout
    assert sh(repo, "git", "write-tree").stdout == tree
