"""The freshness check on a real two-stage DVC project: what it says when ``dvc.lock`` is
cut short, as a ``dvc repro`` killed while DVC rewrites it in place leaves it."""

from __future__ import annotations

from pathlib import Path

import pytest
from repos import sh

from ragvet.errors import InputError
from ragvet.gating.freshness import refuse_stale

PIPELINE = """stages:
  a:
    cmd: echo hi > a.txt
    outs: [a.txt]
  b:
    cmd: cat a.txt > b.txt
    deps: [a.txt]
    outs: [b.txt]
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A committed project whose two stages ran: its dvc.lock is 390 bytes."""
    root = tmp_path_factory.mktemp("freshness")
    sh(root, "git", "init", "-q")
    sh(root, "dvc", "init", "-q")
    (root / "dvc.yaml").write_text(PIPELINE)
    sh(root, "dvc", "repro", "-q")
    sh(root, "git", "add", "-A")
    sh(root, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "ran")
    return root


# Cut inside the stages key (a YAML syntax error), inside stage b's deps (a schema error),
# and to nothing at all (DVC's "required key not provided").
@pytest.mark.parametrize("kept", [20, 200, 0])
def test_a_cut_dvc_lock_is_named_with_the_way_back(project, kept, monkeypatch):
    monkeypatch.chdir(project)  # as the gate runs: in the project, naming stages as DVC does
    lock = project / "dvc.lock"
    whole = lock.read_bytes()
    try:
        lock.write_bytes(whole[:kept])
        assert sh(project, "dvc", "repro", check=False).returncode != 0  # DVC itself refuses every run
        with pytest.raises(InputError) as raised:
            refuse_stale(["b.txt"], "the gate")
        [problem] = raised.value.problems
        assert problem.where == "dvc.lock"
        assert problem.what.startswith("DVC cannot read it (")
        assert "cut short" in problem.what
        assert problem.fix.startswith("restore the committed one with `git checkout dvc.lock`, then run `dvc repro`")
    finally:
        lock.write_bytes(whole)
    sh(project, "git", "checkout", "dvc.lock")  # the fix it names works: the pipeline is current again
    refuse_stale(["b.txt"], "the gate")


def test_a_lock_cut_at_a_stage_boundary_only_re_runs_that_stage(project, monkeypatch):
    """Cut between stages, dvc.lock is valid YAML naming stage a only: DVC re-runs b, and the
    check calls b out of date rather than the lock damaged."""
    monkeypatch.chdir(project)
    lock = project / "dvc.lock"
    whole = lock.read_text()
    try:
        lock.write_text(whole[: whole.index("  b:\n")])
        with pytest.raises(InputError) as raised:
            refuse_stale(["b.txt"], "the gate")
        assert [problem.where for problem in raised.value.problems] == ["dvc.lock", "dvc.lock: b"]
    finally:
        lock.write_text(whole)
