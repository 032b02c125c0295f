"""A user project: configuration and data, made from the packaged template, holding no ragvet code.

The template (``ragvet/template/``, package data) is the pipeline every project runs:
its dvc.yaml calls the installed ``ragvet`` command for each stage, and each stage's code
dependency is the release pinned in ``requirements.txt`` (:mod:`ragvet.pinning`). The
bundled sample's outputs are not part of it (no metrics, answers, thresholds or
baseline): any of them would be read, or tracked, as if it belonged to the new data.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from ragvet.errors import Problem, raise_if
from ragvet.inputs.cases import CASE_SUFFIXES
from ragvet.pinning import HEADER, REQUIREMENTS, installed_version, pin_line
from ragvet.storage.atomic import write_text

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


def _copy(source: Path, target: Path) -> None:
    """Copy a file or a folder (without Python caches) to ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    else:
        shutil.copy2(source, target)


def keep_folders(project: Path) -> list[str]:
    """Make each folder dvc.yaml depends on that is missing; return the ones made."""
    made = []
    for folder in KEPT_FOLDERS:
        if not (project / folder).is_dir():
            (project / folder).mkdir(parents=True)
            (project / folder / ".gitkeep").touch()
            made.append(folder)
    return made


def _run(target: Path, *command: str) -> None:
    """Run git or DVC in the new project, stopping with its own message on failure."""
    done = subprocess.run(command, cwd=target, capture_output=True, text=True)
    if done.returncode != 0:
        what = f"`{' '.join(command)}` failed: {done.stderr.strip()}"
        raise_if([Problem(str(target), what, "fix what it says, then run ragvet init again with --force")])


def create_project(
    target: Path,
    corpus: Path | None = None,
    cases: Path | None = None,
    force: bool = False,
    extras: list[str] | tuple[str, ...] = (),
) -> str:
    """Make ``target`` a git + DVC project running the installed ragvet; return the next steps."""
    extras = list(extras)
    _check(target, corpus, cases, force, extras)
    target.mkdir(parents=True, exist_ok=True)
    for name, path in PROJECT_FILES.items():
        write_text(target / path, template_text(name))
    write_text(target / REQUIREMENTS, requirements_text(extras))
    keep_folders(target)
    if corpus is not None:
        _copy(corpus, target / "data/corpus" / ("" if corpus.is_dir() else corpus.name))
    if cases is not None:
        _copy(cases, target / "data/cases" / f"cases{cases.suffix.lower()}")
    _run(target, "git", "init", "-q")
    if not (target / ".dvc").exists():  # never `dvc init -f`: it would drop an existing cache and config
        _run(target, sys.executable, "-m", "dvc", "init", "-q")
    _run(target, sys.executable, "-m", "dvc", "config", "core.analytics", "false")
    for name, text in plot_templates().items():  # after `dvc init`, which refuses an existing .dvc
        write_text(target / PLOTS / name, text)
    return NEXT_STEPS.format(target=target, version=installed_version())
