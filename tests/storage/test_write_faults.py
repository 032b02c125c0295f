"""Writes the user's environment refuses: a read-only file system, a folder the user may not
write, a full disk that cuts a Parquet file or the full problem list short. Each is exit 2
naming the path, the reason and the fix, no traceback, and no half-written or temporary file.

Every fault is real, in a child process: a read-only bind mount in a private mount namespace
(``unshare -m``), root without CAP_DAC_OVERRIDE (``setpriv``) before a folder of mode 0555,
and a file-size limit (RLIMIT_FSIZE, failing writes with EFBIG as a full disk fails them).
"""

from __future__ import annotations

import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml
from repos import ROOT, tool_env

import ragvet
from ragvet.storage.atomic import ACCESS_FIX, FOLDER_FIX, SPACE_FIX

SRC = str(Path(ragvet.__file__).parents[1])  # this checkout's code, in every child process
LIMIT_REASON = "the file-size limit (ulimit -f) was reached"


def run(cwd: Path, *args: str, limit: int | None = None) -> subprocess.CompletedProcess:
    """Run ``args`` in ``cwd`` with this checkout's code, its files capped at ``limit`` bytes."""

    def cap() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {**tool_env(), "PYTHONPATH": SRC}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, preexec_fn=cap)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


READ_ONLY = 'mount --bind . . && mount -o remount,bind,ro . . && cd "$PWD"'  # the folder, read-only, in a namespace


def read_only_namespace() -> None:
    """Skip where this machine refuses a private mount namespace (a container without CAP_SYS_ADMIN)."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode:
        pytest.skip("no private mount namespace here (unshare -m refused): no read-only file system to make")


def bound_by_file_modes() -> tuple[str, ...]:
    """The prefix that makes a command's user bound by file modes: none for another user,
    root without CAP_DAC_OVERRIDE (``setpriv``) for root."""
    if os.geteuid() != 0:
        return ()
    if shutil.which("setpriv") is None:
        pytest.skip("root here, and no setpriv to drop CAP_DAC_OVERRIDE: file modes do not bind")
    return ("setpriv", "--bounding-set=-all", "--inh-caps=-all")


def test_every_stage_on_a_read_only_file_system_says_where_why_and_the_fix(work_repo):
    """Each stage's own command (dvc.lock's, one instance of each foreach), as DVC would run it."""
    lock = yaml.safe_load((work_repo / "dvc.lock").read_text())["stages"]
    stages = {
        name.partition("@")[0]: (name, stage["cmd"]) for name, stage in reversed(lock.items()) if stage.get("outs")
    }
    script = [READ_ONLY]
    for name, cmd in stages.values():
        script.append(f"echo '== {name}' >&2; DVC_STAGE={shlex.quote(name)} {cmd}; echo \"== exit $?\" >&2")
    read_only_namespace()
    done = run(work_repo, "unshare", "-m", "sh", "-c", "\n".join(script))
    told = {
        name: (code, said) for name, said, code in re.findall(r"== (\S+)\n(.*?)== exit (\d+)\n", done.stderr, re.DOTALL)
    }
    assert sorted(told) == sorted(name for name, _ in stages.values()), done.stderr
    for name, (code, said) in told.items():
        assert code == "2", (name, said)
        assert said.startswith("ragvet: cannot write "), (name, said)
        assert said.endswith(f": the file system is read-only: {FOLDER_FIX} (no output was changed)\n"), (name, said)
    assert "Traceback" not in done.stderr


def test_a_folder_or_file_the_user_may_not_write_or_read_says_which_why_and_the_fix(tmp_path):
    for name in ("data/corpus", "data/cases"):
        shutil.copytree(ROOT / name, tmp_path / name)
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "out").mkdir()
    os.chmod(tmp_path / "out", 0o555)
    validate = ("python", "-m", "ragvet.cli", "validate", "--corpus", "data/corpus", "--cases", "data/cases")
    no_override = bound_by_file_modes()
    done = run(tmp_path, *no_override, *validate, "--out", "out/validated")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr == (
        f"ragvet: cannot write out/validated/corpus.jsonl: permission denied: {FOLDER_FIX} (no output was changed)\n"
    )
    assert leftovers(tmp_path / "out") == []
    # An input the user may not read is told as such, not as a write.
    os.chmod(tmp_path / "out", 0o755)
    unreadable = min((tmp_path / "data/corpus").iterdir())
    os.chmod(unreadable, 0)
    done = run(tmp_path, *no_override, *validate, "--out", "out/validated")
    assert done.returncode == 2, done.stderr
    where = unreadable.relative_to(tmp_path).as_posix()
    assert done.stderr == f"ragvet: cannot access {where}: permission denied: {ACCESS_FIX} (no output was changed)\n"
    assert leftovers(tmp_path / "out") == []


WRITE_RESULTS = """
import sys
from pathlib import Path
import polars as pl
from ragvet.errors import user_errors
from ragvet.storage.results import write_results
frame = pl.read_parquet(sys.argv[1])
if sys.argv[2] == "polars":
    frame.write_parquet("out/t.parquet", compression="zstd", statistics=False, row_group_size=1 << 30)
else:
    user_errors(write_results)(Path("out/t.parquet"), frame)
"""


def test_a_parquet_footer_cut_short_by_a_full_disk_is_told_as_one_though_polars_names_no_errno(tmp_path):
    columns = {f"metric_{i:03d}_{'m' * 40}": [float(j) for j in range(50)] for i in range(300)}
    frame = pl.DataFrame({"case_id": [f"case-{j:02d}" for j in range(50)], **columns})
    frame.write_parquet(tmp_path / "whole.parquet", compression="zstd", statistics=False, row_group_size=1 << 30)
    (tmp_path / "out").mkdir()
    limit = (tmp_path / "whole.parquet").stat().st_size - 3000  # the data fits, the footer (300 columns) does not
    bare = run(tmp_path, sys.executable, "-c", WRITE_RESULTS, "whole.parquet", "polars", limit=limit)
    assert "Invalid thrift: transport error" in bare.stderr  # polars' own words: no errno to recognise
    (tmp_path / "out" / "t.parquet").unlink()
    done = run(tmp_path, sys.executable, "-c", WRITE_RESULTS, "whole.parquet", "ragvet", limit=limit)
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"ragvet: cannot write out/t.parquet: {LIMIT_REASON}: {SPACE_FIX} (no output was changed)\n"
    assert leftovers(tmp_path / "out") == []


MANY_PROBLEMS = """
from ragvet.errors import Problem, raise_if, user_errors
user_errors(raise_if)([Problem(f"data/cases/cases.yaml:{n}", f"bad value {n}", "fix the value") for n in range(60)])
"""


def test_a_full_problem_list_the_disk_cannot_hold_is_said_beside_the_capped_list(tmp_path):
    done = run(tmp_path, sys.executable, "-c", MANY_PROBLEMS, limit=1000)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == (
        "ragvet: 60 problems found; the first 50 follow, and the full list could not be written "
        f"(cannot write .ragvet/problems.txt: {LIMIT_REASON}; {SPACE_FIX}):"
    )
    assert lines[1:3] == ["data/cases/cases.yaml:0: bad value 0", "    fix: fix the value"]
    assert "10 more not shown; all 60 by kind:" in lines
    assert leftovers(tmp_path) == []
