"""Which outputs git keeps and which the DVC cache keeps (docs/storage.md).

Git keeps what a reviewer reads in a diff: summaries, fingerprints, the report, the
gate verdict (the slice tables and abstention sweeps, which only programs read, are in
the DVC cache from the start). Per-case tables grow with the cases (95 MB per
configuration at 100,000 cases), so above the sample's size they live in the
DVC cache and travel through the DVC remote. dvc.yaml says where each lives
(an out's ``cache`` flag); this module reads that flag and moves an existing
repository's tables from git to DVC (``ragvet migrate-storage``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ragvet.errors import InputError, Problem
from ragvet.storage.atomic import write_text
from ragvet.storage.files import read_yaml
from ragvet.storage.results import CASES_FOLDER, SUFFIX

DVC_YAML = "dvc.yaml"
# The outputs that grow with the cases: evaluate's per-case tables and the split's membership.
GROWING_OUTS = (f"metrics/{CASES_FOLDER}/", "data/split.json")
BASELINE_TABLES = Path("metrics/baseline") / CASES_FOLDER
OUT_ENTRY = re.compile(r"^\s*- (?P<path>[^\s:#]+):\s*(#.*)?$")  # an out with flags under it
# DVC lists cached outputs in .gitignore files beside them but takes the entries back when a
# run fails (a failing gate fails `dvc repro`): the project's own patterns keep `git add -A` safe.
IGNORED = (f"/{GROWING_OUTS[0]}*{SUFFIX}", f"/{BASELINE_TABLES.as_posix()}/")
CACHE_OFF = re.compile(r"^(\s*cache:\s*)false(\s*(#.*)?)$")
# Written before the first change and removed after the last: its presence says a migration
# was cut short (a kill, a full disk, a git lock), so the next run resumes it (under .ragvet/, git-ignored).
STARTED = Path(".ragvet/migrate-storage.started")  # JSON: the baseline folder's files as the run found them


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
        repo.scm_context.quiet = True  # the caller says what to commit
        repo.add(str(path))
    return dvc_pointer(path)


def _git(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=project, capture_output=True, text=True, check=False)


def cache_flags_on(text: str) -> tuple[str, list[str]]:
    """A dvc.yaml's text with the cache on for the growing outputs; the paths whose flag changed.

    A line edit, not a YAML round trip, so that the diff a reviewer reads is the
    flags alone and every comment stays: the flag is the ``cache: false`` line
    nested (more indented) under ``- <growing path>:``.
    """
    lines = text.split("\n")
    flipped: list[str] = []
    owner, depth = None, -1
    for number, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        entry = OUT_ENTRY.match(line)
        if entry:
            owner, depth = (entry["path"], indent) if _is_growing(entry["path"]) else (None, -1)
        elif owner and line.strip() and indent <= depth:
            owner = None
        elif owner and CACHE_OFF.match(line):
            lines[number] = CACHE_OFF.sub(r"\1true\2", line)
            flipped.append(owner)
    return "\n".join(lines), flipped


def _flip_cache_flags(project: Path) -> list[str]:
    """Turn the cache on for the growing outputs in the project's dvc.yaml; the paths flipped."""
    path = Path(project) / DVC_YAML
    text, flipped = cache_flags_on(path.read_text(encoding="utf-8"))
    if flipped:
        write_text(path, text)
    return flipped


def _commit_all(project: Path) -> None:
    """``dvc commit -f`` of every stage, without DVC's own progress lines."""
    from dvc.repo import Repo  # deferred: DVC's import costs a second

    dvc_log = logging.getLogger("dvc")
    level = dvc_log.level
    dvc_log.setLevel(logging.WARNING)
    try:
        with Repo(str(project)) as repo:
            repo.commit(None, force=True)
    finally:
        dvc_log.setLevel(level)


def _check_project(project: Path) -> None:
    problems = []
    if not (Path(project) / DVC_YAML).is_file():
        problems.append(Problem(str(project), "no dvc.yaml here", "run ragvet migrate-storage in the project folder"))
    if _git(project, "rev-parse", "--git-dir").returncode != 0:
        problems.append(Problem(str(project), "not inside a git repository", "run it in the project's git clone"))
    if problems:
        raise InputError(problems)


def _ignore(project: Path) -> list[str]:
    """Add the :data:`IGNORED` patterns the project's .gitignore lacks; those added."""
    path = Path(project) / ".gitignore"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    missing = [pattern for pattern in IGNORED if pattern not in text.splitlines()]
    if missing:
        lead = "" if not text or text.endswith("\n") else "\n"
        write_text(
            path, text + lead + "# per-case tables kept by DVC (ragvet migrate-storage)\n" + "\n".join(missing) + "\n"
        )
    return missing


def _baseline_files(project: Path) -> dict[str, str]:
    """The baseline folder's files by relative path, with their SHA-256, except the ``.dvc``
    pointer and the .gitignore entry that ``dvc add`` of its tables writes there."""
    folder = project / BASELINE_TABLES.parent
    added = {dvc_pointer(BASELINE_TABLES).name, ".gitignore"}
    files = (p for p in sorted(folder.rglob("*")) if p.is_file() and p.relative_to(folder).as_posix() not in added)
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def _baseline_as_started(project: Path) -> bool:
    """Whether the baseline folder holds what it held when the cut-short run began (recorded
    in :data:`STARTED`), its new ``.dvc`` pointer aside: then its change is the run's own."""
    try:
        recorded = json.loads((project / STARTED).read_text(encoding="utf-8"))["baseline"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return dvc_pointer(project / BASELINE_TABLES).exists() and recorded == _baseline_files(project)


def _resumable(changes: list, baseline_as_started: bool) -> bool:
    """Whether a stage's ``dvc status`` changes are only those a cut-short migration leaves:
    tables it moved not yet in the cache, and the baseline folder changed by the ``.dvc``
    pointer of its tables alone (``baseline_as_started``)."""
    left = {"changed outs": lambda path, state: _is_growing(path) and state == "not in cache"}
    if baseline_as_started:
        left["changed deps"] = lambda path, state: path == BASELINE_TABLES.parent.as_posix() and state == "modified"
    return all(
        isinstance(change, dict)
        and all(
            kind in left and isinstance(paths, dict) and all(left[kind](*item) for item in paths.items())
            for kind, paths in change.items()
        )
        for change in changes
    )


def _check_up_to_date(project: Path, resuming: bool) -> None:
    """Refuse to move outputs that ``dvc status`` calls stale: committing them would hide it.
    Resuming, the tables the cut-short run had started moving are "not in cache" by its own
    doing, as is the baseline folder's change once it holds their ``.dvc`` file and is
    otherwise as the run found it; any other change is still refused."""
    from dvc.repo import Repo  # deferred: DVC's import costs a second

    with Repo(str(project)) as repo:
        status = repo.status()
    as_started = resuming and _baseline_as_started(project)
    stale = sorted(stage for stage, changes in status.items() if not (resuming and _resumable(changes, as_started)))
    if not stale:
        return
    fix = (
        "a migration cut short here left the tables half moved, which `dvc repro` refuses: restore what changed"
        " since it began (the stages' inputs, as `dvc status` lists them), then run `ragvet migrate-storage` again"
        if resuming
        else "run `dvc repro` (or `dvc pull`) first: the tables move as they are, never recomputed"
    )
    raise InputError([Problem(str(project / DVC_YAML), f"stages not up to date: {', '.join(stale)}", fix)])


RESUME_FIX = "fix what git says, then run `ragvet migrate-storage` again: it resumes where it stopped"


def untrack(project: Path, paths: list[str], fix: str) -> list[str]:
    """``git rm --cached`` the paths; those git stopped tracking. A git that fails (another
    git holding the index lock) is an error naming git's own message, with ``fix``."""
    done = _git(project, "rm", "-r", "--cached", "--ignore-unmatch", "--", *paths)
    if done.returncode != 0:
        said = done.stderr.strip().partition("\n")[0]  # git's reason; the advice after it is about git's own use
        raise InputError(
            [
                Problem(
                    str(project),
                    f"`git rm --cached` failed: {said}",
                    fix,
                )
            ]
        )
    return [line[len("rm '") : -1] for line in done.stdout.splitlines() if line.startswith("rm '")]


def migrate_storage(project: Path) -> list[str]:
    """Move the per-case tables, the split's membership and the baseline's
    per-case tables from git to the DVC cache; what was done, one line each.

    Nothing is recomputed and no table changes: dvc.yaml's cache flags are
    turned on, git stops tracking the files (``git rm --cached``), ``dvc commit``
    puts them in the cache with the hashes dvc.lock already records, and the
    baseline's tables are ``dvc add``-ed. Running it twice does nothing more.

    Each step is idempotent and :data:`STARTED` marks a run in progress, so a run cut
    short anywhere (kill -9, a full disk, a git lock) is finished by running it again,
    to the same files as one uninterrupted run.
    """
    project = Path(project)
    _check_project(project)
    started = project / STARTED
    resuming = started.exists()
    _check_up_to_date(project, resuming)
    if not resuming:  # what the baseline folder held, for a resumed run to tell its own change from another
        write_text(started, json.dumps({"baseline": _baseline_files(project)}, indent=1, sort_keys=True) + "\n")
    flipped = _flip_cache_flags(project)
    tracked = [path for path in (*GROWING_OUTS, BASELINE_TABLES.as_posix()) if (project / path).exists()]
    removed = untrack(project, tracked, RESUME_FIX)
    done = [f"dvc.yaml: cache on for {path}" for path in flipped] + [f"git: stopped tracking {p}" for p in removed]
    done += [f".gitignore: {pattern}" for pattern in _ignore(project)]
    if flipped or removed or resuming:
        _commit_all(project)  # every stage was up to date: record the moved files' new homes
        done.append("dvc commit: every stage's hashes recorded, nothing recomputed")
    baseline = project / BASELINE_TABLES
    if baseline.is_dir() and any(baseline.iterdir()) and not dvc_pointer(baseline).exists():
        done.append(f"dvc add {BASELINE_TABLES.as_posix()} -> {track_with_dvc(project, BASELINE_TABLES)}")
        _commit_all(project)  # the stages that read the baseline folder see its new .dvc file
    started.unlink()
    return done
