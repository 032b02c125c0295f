"""A user project: configuration and data, made from the packaged template, holding no ragvet code.

The template (``ragvet/template/``, package data) is the pipeline every project runs:
its dvc.yaml calls the installed ``ragvet`` command for each stage, and each stage's code
dependency is the release pinned in ``requirements.txt`` (:mod:`ragvet.pinning`). The
bundled sample's outputs are not part of it (no metrics, answers, thresholds or
baseline): any of them would be read, or tracked, as if it belonged to the new data.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from ragvet.errors import Problem, raise_if
from ragvet.inputs.cases import CASE_SUFFIXES
from ragvet.pinning import HEADER, REQUIREMENTS, installed_version, pin_line
from ragvet.storage.atomic import write_bytes

TEMPLATE = files("ragvet") / "template"
# Template file -> where it goes in a project. dvc.yaml, params.yaml and the plot templates are
# the project's pipeline and knobs; the rest are starting points a user may edit.
PROJECT_FILES = {
    "dvc.yaml": "dvc.yaml",
    "params.yaml": "params.yaml",
    "abstention.yaml": "abstention.yaml",
    "gitignore": ".gitignore",
    "plugins/__init__.py": "plugins/__init__.py",
    "answers-README.md": "data/answers/README.md",
}
PLOTS = ".dvc/plots"  # DVC reads a project's custom plot templates from here
# Folders dvc.yaml depends on that must exist, empty, from the start (git keeps them by .gitkeep).
KEPT_FOLDERS = ["data/external", "metrics/baseline"]
EXTRAS = ("dense", "pgvector")
NEXT_STEPS = """\
Next steps, in {target}:
  1. Add your data (skip what you passed to ragvet init):
       ragvet import beir|trec|squad ... --out-corpus data/corpus --out-cases data/cases/cases.yaml
     or copy documents into data/corpus/ and one cases.yaml or cases.jsonl into data/cases/.
  2. dvc repro report          # every stage up to the report; no baseline exists yet
  3. ragvet baseline accept    # the first results become the baseline
  4. dvc repro                 # the gate now compares with that baseline
  5. git add -A && git commit -m "First ragvet baseline"
Then change params.yaml, `dvc repro`, and read metrics/report.md (README: "Your own data").
ragvet {version} is pinned in requirements.txt: install it with `pip install -r requirements.txt`."""


def template_text(name: str) -> str:
    """A template file's text (``dvc.yaml``, ``params.yaml``, ...)."""
    return (TEMPLATE / name).read_text(encoding="utf-8")


def plot_templates() -> dict[str, str]:
    """``{file name: text}`` of the plot templates a project keeps in ``.dvc/plots``."""
    folder: Traversable = TEMPLATE / "plots"
    return {item.name: item.read_text(encoding="utf-8") for item in sorted(folder.iterdir(), key=lambda i: i.name)}


def requirements_text(extras: list[str] | tuple[str, ...] = ()) -> str:
    """A new project's ``requirements.txt``: the header and the installed release, pinned."""
    return HEADER + pin_line(installed_version(), extras) + "\n"


def _check(target: Path, corpus: Path | None, cases: Path | None, force: bool, extras: list[str]) -> None:
    """Every reason not to start, found before anything is written."""
    problems = []
    if target.exists() and not target.is_dir():
        problems.append(Problem(str(target), "is a file, not a folder", "give a folder for the new project"))
    elif target.is_dir() and any(target.iterdir()) and not force:
        problems.append(Problem(str(target), "the folder is not empty", "choose a new folder, or pass --force"))
    if corpus is not None and not corpus.exists():
        problems.append(Problem(str(corpus), "--corpus not found", "give a folder of documents or a corpus.jsonl"))
    elif corpus is not None and corpus.is_dir() and target.resolve().is_relative_to(corpus.resolve()):
        problems.append(
            Problem(
                str(corpus),
                f"the corpus folder holds the new project ({target}): copying it in would copy the project "
                "into its own corpus",
                f"give --corpus a folder outside {target}, or make the project outside the corpus folder",
            )
        )
    if cases is not None and (not cases.is_file() or cases.suffix.lower() not in CASE_SUFFIXES):
        problems.append(Problem(str(cases), "--cases is not a .yaml, .yml or .jsonl file", "give the cases file"))
    for extra in sorted(set(extras) - set(EXTRAS)):
        problems.append(Problem(f"--extra {extra}", "is not an extra of ragvet", f"use one of: {', '.join(EXTRAS)}"))
    raise_if(problems)


def _copies(source: Path, target: Path) -> dict[Path, Path]:
    """``{destination: source file}`` of copying a file, or a folder's files (without
    Python caches), to ``target``: listed before anything is copied, so the copy is
    what the folder held when init started."""
    if not source.is_dir():
        return {target: source}
    found = {}
    for root, dirs, names in os.walk(source, followlinks=True):
        dirs[:] = sorted(name for name in dirs if name != "__pycache__")
        for name in sorted(names):
            path = Path(root) / name
            found[target / path.relative_to(source)] = path
    return found


def planned_files(target: Path, corpus: Path | None, cases: Path | None, extras: list[str]) -> dict[Path, bytes | Path]:
    """Every file init writes but the plot templates (written after ``dvc init``):
    ``{path: its bytes, or the file it copies}``."""
    planned: dict[Path, bytes | Path] = {
        target / path: template_text(name).encode() for name, path in PROJECT_FILES.items()
    }
    planned[target / REQUIREMENTS] = requirements_text(extras).encode()
    if corpus is not None:
        planned.update(_copies(corpus, target / "data/corpus" / ("" if corpus.is_dir() else corpus.name)))
    if cases is not None:
        planned[target / "data/cases" / f"cases{cases.suffix.lower()}"] = cases
    return planned


def _content(value: bytes | Path) -> bytes:
    return value if isinstance(value, bytes) else value.read_bytes()


def replaced_files(target: Path, planned: dict[Path, bytes | Path]) -> list[str]:
    """The files of ``planned`` that exist in ``target`` with other content (or as a folder),
    relative to it: ``--force`` writes into a non-empty folder, and these are a
    project's own (its params, its pipeline, its documents), never init's to replace."""
    return sorted(
        path.relative_to(target).as_posix()
        for path, value in planned.items()
        if path.is_dir() or (path.is_file() and path.read_bytes() != _content(value))
    )


class Made:
    """What init made, in order, so that a failure (a full disk at ``dvc init``) removes it
    and leaves the folder as it was: half a project would be refused as "not empty"."""

    def __init__(self) -> None:
        self.paths: list[Path] = []
        self.cleanups: list[Callable[[], object]] = []  # run first: what a removal cannot undo

    def before(self, *paths: Path) -> list[Path]:
        """The paths among ``paths`` that do not exist yet: record them once they do."""
        return [path for path in paths if not path.exists() and not path.is_symlink()]

    def record(self, paths: list[Path]) -> None:
        self.paths += [path for path in paths if path.exists()]

    def folder(self, folder: Path) -> None:
        """Make ``folder`` and its missing parents, recording the topmost one made."""
        missing = self.before(folder, *folder.parents)
        folder.mkdir(parents=True, exist_ok=True)
        self.record(missing[-1:])

    def write(self, path: Path, value: bytes | Path) -> None:
        """Write a file that does not hold ``value`` yet (atomically: a temporary file, a rename)."""
        if path.is_file() and path.read_bytes() == _content(value):
            return
        self.folder(path.parent)
        new = self.before(path)
        write_bytes(path, _content(value))
        self.record(new)

    def undo(self) -> None:
        """Remove what was made, newest first."""
        for cleanup in self.cleanups:
            cleanup()
        for path in reversed(self.paths):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


def _keep_folders(project: Path, made: Made) -> None:
    for folder in KEPT_FOLDERS:
        if not (project / folder).is_dir():
            made.folder(project / folder)
            made.write(project / folder / ".gitkeep", b"")


def keep_folders(project: Path) -> list[str]:
    """Make each folder dvc.yaml depends on that is missing; return the ones made."""
    made = [folder for folder in KEPT_FOLDERS if not (project / folder).is_dir()]
    _keep_folders(project, Made())
    return made


def _run(target: Path, *command: str) -> None:
    """Run git or DVC in the new project, stopping with its own message on failure."""
    done = subprocess.run(command, cwd=target, capture_output=True, text=True)
    if done.returncode != 0:
        what = f"`{' '.join(command)}` failed: {done.stderr.strip()}"
        fix = "fix what it says, then run ragvet init again (nothing of the new project was kept)"
        raise_if([Problem(str(target), what, fix)])


def _git_and_dvc(target: Path, made: Made) -> None:
    """``git init``, ``dvc init`` (never ``-f``: it would drop an existing cache and
    config) and DVC's analytics off, recording what they made."""
    new = made.before(target / ".git", target / ".dvc", target / ".dvcignore")
    if target / ".git" not in new and target / ".dvc" in new:  # `dvc init` stages its files in your git index
        unstage = ["git", "rm", "-r", "-q", "--cached", "--ignore-unmatch", ".dvc", ".dvcignore"]
        made.cleanups.append(lambda: subprocess.run(unstage, cwd=target, capture_output=True, check=False))
    try:
        _run(target, "git", "init", "-q")
        if not (target / ".dvc").exists():
            _run(target, sys.executable, "-m", "dvc", "init", "-q")
        _run(target, sys.executable, "-m", "dvc", "config", "core.analytics", "false")
    finally:
        made.record(new)


def create_project(
    target: Path,
    corpus: Path | None = None,
    cases: Path | None = None,
    force: bool = False,
    extras: list[str] | tuple[str, ...] = (),
) -> str:
    """Make ``target`` a git + DVC project running the installed ragvet; return the next steps.

    All or nothing: every reason to stop is found first (a corpus holding the project,
    a file of the folder that init would replace), and a failure after that (git, DVC,
    a full disk) removes what init made. ``force`` writes into a non-empty folder,
    beside its files, never over one that differs."""
    extras = list(extras)
    _check(target, corpus, cases, force, extras)
    planned = planned_files(target, corpus, cases, extras)
    plots = {target / PLOTS / name: text.encode() for name, text in plot_templates().items()}
    replaced = replaced_files(target, {**planned, **plots})
    if replaced:
        raise_if(
            [
                Problem(
                    str(target),
                    f"ragvet init would replace these files, which differ from what it writes: {', '.join(replaced)}",
                    "keep the project and bring it to this ragvet with `ragvet upgrade`, or make a new project in "
                    "another folder; init never replaces a file, even with --force",
                )
            ]
        )
    made = Made()
    try:
        made.folder(target)
        for path, value in planned.items():
            made.write(path, value)
        _keep_folders(target, made)
        _git_and_dvc(target, made)
        for path, value in plots.items():  # after `dvc init`, which refuses an existing .dvc
            made.write(path, value)
    except BaseException:
        made.undo()
        raise
    return NEXT_STEPS.format(target=target, version=installed_version())
