"""Git and DVC repositories for the end-to-end tests: a copy of the project in a temporary
git repo, driven through DVC's own CLI exactly as a user would, and the commands run in it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

import yaml
from filelock import FileLock
from typer.testing import CliRunner

from ragvet.cli import app
from ragvet.project import requirements_text, template_text

ROOT = Path(__file__).resolve().parents[1]  # the repository
DATA = ROOT / "tests" / "data"  # inputs the tests read: bad files, a project of release 0.1.0
PROJECT_FILES = [
    ".gitignore",
    "plugins",
    "params.yaml",
    "data/corpus",
    "data/cases",
    "data/external",
    "data/answers",
    "abstention.yaml",
    "metrics/baseline",
]


def tool_env() -> dict[str, str]:
    """PATH with this interpreter's folder first, so that dvc's `ragvet ...` is this environment's."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["DVC_NO_ANALYTICS"] = "1"
    env.pop("PYTHONPATH", None)
    return env


def sh(cwd: Path, *args: str, check: bool = True, **env: str) -> subprocess.CompletedProcess:
    """Run a command in ``cwd`` (with extra environment variables); on an
    unexpected failure show its output."""
    done = subprocess.run(args, cwd=cwd, env={**tool_env(), **env}, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done


def ragvet(repo: Path, *args: str, check: bool = False) -> subprocess.CompletedProcess:
    """`ragvet ...` run in ``repo`` by this process: the command line ``python -m ragvet.cli``
    parses, with the environment ``sh`` gives a command, its exit code and its output, without
    a fresh interpreter's imports (seconds a call, most of a gate's or a report's time). An
    exception the command lets escape is on stderr as a traceback, with exit code 1, as that
    process would show it. The stages themselves run in DVC's processes (``sh``)."""
    saved_env, saved_cwd, env = dict(os.environ), os.getcwd(), tool_env()
    os.environ.clear()
    os.environ.update(env)
    os.chdir(repo)
    try:
        result = CliRunner().invoke(app, [str(arg) for arg in args], prog_name="ragvet")
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    done = subprocess.CompletedProcess(["ragvet", *args], result.exit_code, result.stdout, stderr)
    if check and done.returncode != 0:
        raise AssertionError(f"ragvet {' '.join(args)} exited {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done


def edit_params(repo: Path, edit) -> None:
    """Apply ``edit`` to the params of ``repo``'s params.yaml."""
    params = yaml.safe_load((repo / "params.yaml").read_text())
    edit(params)
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def set_param(repo: Path, keys: list[str], value) -> None:
    """Set one params.yaml value, by its path of keys."""

    def edit(params: dict) -> None:
        node = params
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value

    edit_params(repo, edit)


def untune(repo: Path) -> None:
    """Drop the sample's tuned threshold (sentences-600-bm25), which goes stale (marked, with
    a warning) once a test changes sentences-600 or bm25: these tests are about the change,
    not re-tuning."""
    (repo / "abstention.yaml").write_text("{}\n")


def init_repo(path: Path) -> Path:
    sh(path, "git", "init", "-q", "-b", "main")
    sh(path, "git", "config", "user.email", "test@example.com")
    sh(path, "git", "config", "user.name", "test")
    sh(path, "dvc", "init", "-q")
    sh(path, "dvc", "config", "core.analytics", "false")
    return path


def commit_all(path: Path, message: str, allow_empty: bool = False) -> str:
    """Commit the whole work tree; ``allow_empty`` for a step that may change nothing."""
    sh(path, "git", "add", "-A")
    sh(path, "git", "commit", "-q", *(["--allow-empty"] if allow_empty else []), "-m", message)
    return sh(path, "git", "rev-parse", "HEAD").stdout.strip()


def copy_project(dest: Path) -> Path:
    """The sample as a user project holds it, in a new git+dvc repo: its params and data,
    and the template's pipeline on the pinned release (``requirements.txt``, each stage's
    code dependency), which the repository's dvc.yaml equals but for the code dependencies
    (tests/test_architecture.py). The stages run the installed (editable) ragvet."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "dvc.yaml").write_text(template_text("dvc.yaml"))
    (dest / "requirements.txt").write_text(requirements_text())
    for name in PROJECT_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        elif source.exists():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    (dest / "metrics" / "baseline").mkdir(parents=True, exist_ok=True)
    init_repo(dest)
    # dvc init refuses an existing .dvc/, so the plot templates come after it.
    shutil.copytree(ROOT / ".dvc" / "plots", dest / ".dvc" / "plots")
    return dest


def keep_configs(repo: Path, kind: str) -> None:
    """Trim the sample's params to the configurations of one retriever kind.

    The pipeline situations are about DVC's behaviour, which BM25 shows in
    seconds; dense retrieval runs end to end in its own tests on a small corpus.
    """
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["retrievers"] = {name: spec for name, spec in params["retrievers"].items() if spec["kind"] == kind}
    params["configs"] = {
        name: config for name, config in params["configs"].items() if config["retriever"] in params["retrievers"]
    }
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def copy_repo(source: Path, dest: Path) -> Path:
    """A private copy of a reproduced project: work tree, git history and DVC cache."""
    shutil.copytree(source, dest, symlinks=True)
    return dest


def build_sample(repo: Path) -> Path:
    """The sample project with its BM25 configurations, reproduced and committed."""
    copy_project(repo)
    keep_configs(repo, "bm25")
    sh(repo, "dvc", "repro")
    commit_all(repo, "sample reproduced")
    return repo


def shared_build(tmp_path_factory, name: str, build) -> Path:
    """``build(folder)`` once per test session, read-only thereafter. Under xdist the workers
    share it: the first to take the lock builds in this session's own base folder (common to
    its workers only), the others wait for it."""
    if "PYTEST_XDIST_WORKER" not in os.environ:  # no xdist: the session's own temp folder
        return build(tmp_path_factory.mktemp(name) / name)
    shared = tmp_path_factory.getbasetemp().parent
    folder, built = shared / name, shared / f"{name}.built"
    with FileLock(str(shared / f"{name}.lock")):
        if not built.is_file():
            shutil.rmtree(folder, ignore_errors=True)  # a worker that failed halfway
            build(folder)
            built.touch()
    return folder


GRID = (600, 2000)  # the experiments' headings-1200 max_chars (the sample's is 1200)
EXP_TARGET = "evaluate@headings-1200-bm25"  # the stage whose figures the experiments compare


def exp_refs(repo: Path) -> dict[str, tuple[str, str]]:
    """Each experiment's (commit, ref) by name, from git's own refs (DVC keeps them under refs/exps)."""
    lines = sh(repo, "git", "for-each-ref", "--format=%(objectname) %(refname)", "refs/exps").stdout.splitlines()
    return {ref.rsplit("/", 1)[1]: (rev, ref) for rev, ref in (line.split() for line in lines)}
