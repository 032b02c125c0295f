"""Which outputs git keeps and which the DVC cache keeps (docs/storage.md).

Git keeps what a reviewer reads in a diff: summaries, fingerprints, slices, the
report, the gate verdict. Per-case tables grow with the cases (95 MB per
configuration at 100,000 cases), so above the sample's size they live in the
DVC cache and travel through the DVC remote. dvc.yaml says where each lives
(an out's ``cache`` flag); this module reads that flag and moves an existing
repository's tables from git to DVC (``ragvet migrate-storage``).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from stages.errors import InputError, Problem
from stages.storage.files import read_yaml

DVC_YAML = "dvc.yaml"
# The outputs that grow with the cases: evaluate's per-case tables and the split's membership.
GROWING_OUTS = ("metrics/cases/", "data/split.json")
BASELINE_TABLES = Path("metrics/baseline/cases")


def dvc_pointer(path: Path) -> Path:
    """The ``.dvc`` file ``dvc add`` writes for ``path``."""
    return path.with_name(path.name + ".dvc")


def _outs(stages: dict) -> Iterator[Any]:
    """Every entry of every stage's ``outs`` (a path, or ``{path: flags}``), foreach stages included."""
    for stage in stages.values():
        yield from (stage.get("do", stage) or {}).get("outs", [])


def _is_growing(path: str) -> bool:
    return path.startswith(GROWING_OUTS)


def tables_in_dvc(project: Path) -> bool:
    """Whether dvc.yaml keeps the per-case tables in the DVC cache (their ``cache``
    flag is on, DVC's default), so that the baseline's copies go there too."""
    stages = (read_yaml(Path(project) / DVC_YAML) or {}).get("stages", {})
    for out in _outs(stages):
        path, flags = next(iter(out.items())) if isinstance(out, dict) else (out, {})
        if path.startswith(GROWING_OUTS[0]):
            return bool(flags.get("cache", True))
    return False


def track_with_dvc(project: Path, path: Path) -> Path:
    """``dvc add`` a folder: its content goes to the DVC cache, git gets the
    returned ``.dvc`` pointer (and a .gitignore entry for the folder)."""
    from dvc.repo import Repo  # deferred: DVC's import costs a second

    with Repo(str(project)) as repo:
        repo.add(str(path))
    return dvc_pointer(path)


def _git(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=project, capture_output=True, text=True, check=False)


def _flip_cache_flags(project: Path) -> list[str]:
    """Turn the cache on for the growing outputs in dvc.yaml (comments kept);
    the paths whose flag changed."""
    from dvc.utils.serialize import modify_yaml  # deferred: DVC's import costs a second

    flipped = []
    with modify_yaml(Path(project) / DVC_YAML) as document:
        for out in _outs(document.get("stages", {})):
            if isinstance(out, dict):
                path, flags = next(iter(out.items()))
                if _is_growing(path) and flags is not None and flags.get("cache") is False:
                    flags["cache"] = True
                    flipped.append(path)
    return flipped


def _check_project(project: Path) -> None:
    problems = []
    if not (Path(project) / DVC_YAML).is_file():
        problems.append(Problem(str(project), "no dvc.yaml here", "run ragvet migrate-storage in the project folder"))
    if _git(project, "rev-parse", "--git-dir").returncode != 0:
        problems.append(Problem(str(project), "not inside a git repository", "run it in the project's git clone"))
    if problems:
        raise InputError(problems)


def migrate_storage(project: Path) -> list[str]:
    """Move the per-case tables, the split's membership and the baseline's
    per-case tables from git to the DVC cache; what was done, one line each.

    Nothing is recomputed and no file changes: dvc.yaml's cache flags are
    turned on, git stops tracking the files (``git rm --cached``), ``dvc commit``
    puts them in the cache with the hashes dvc.lock already records, and the
    baseline's tables are ``dvc add``-ed. Running it twice does nothing more.
    """
    from dvc.repo import Repo  # deferred: DVC's import costs a second

    project = Path(project)
    _check_project(project)
    done = [f"dvc.yaml: cache on for {path}" for path in _flip_cache_flags(project)]
    untrack = [path for path in (*GROWING_OUTS, BASELINE_TABLES.as_posix()) if (project / path).exists()]
    removed = _git(project, "rm", "-r", "--cached", "--ignore-unmatch", "--quiet", "--", *untrack).stdout.split()
    done += [f"git: stopped tracking {path}" for path in removed]
    with Repo(str(project)) as repo:
        for stage in sorted({s.addressing for s in repo.index.stages for o in s.outs if _is_growing(o.def_path)}):
            repo.commit(stage, force=True)
            done.append(f"dvc commit {stage}")
    if (project / BASELINE_TABLES).is_dir() and any((project / BASELINE_TABLES).iterdir()):
        done.append(f"dvc add {BASELINE_TABLES.as_posix()} -> {track_with_dvc(project, BASELINE_TABLES)}")
    return done
