"""The ragvet release a project runs: one exact pin in its ``requirements.txt``.

A user project holds no ragvet code. Each stage in its dvc.yaml depends on
``requirements.txt`` instead, whose line ``ragvet==V`` (``ragvet[dense]==V`` with an
extra) stands for the stage's code: changing the pin re-runs every stage, and a stage
run by an installed ragvet other than ``V`` stops, since its outputs would be recorded
as ``V``'s. A folder without the file, or whose file names no ragvet (ragvet's own
repository, whose stages depend on the source itself), pins nothing.
"""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

from ragvet.errors import Problem, raise_if, user_errors

REQUIREMENTS = Path("requirements.txt")
NAME = "ragvet"
HEADER = """\
# The ragvet release this project runs: every stage's code dependency (dvc.yaml).
# Change it with `ragvet upgrade`, which re-pins to the installed ragvet and re-runs.
"""


def installed_version() -> str:
    """The version of the ragvet distribution this process runs."""
    try:
        return version(NAME)
    except PackageNotFoundError:  # imported from a source tree that was never installed
        return "0+unknown"


def _ragvet_line(text: str) -> tuple[int, Requirement] | None:
    """``(line number, requirement)`` of the file's ragvet requirement, if any."""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.split("#", 1)[0].strip()
        if not stripped or stripped.startswith("-"):
            continue
        try:
            requirement = Requirement(stripped)
        except InvalidRequirement:
            continue  # a URL or a local path: pip's business, not a ragvet pin
        if requirement.name.lower() == NAME:
            return number, requirement
    return None


def pinned_requirement(path: Path = REQUIREMENTS) -> tuple[int, Requirement] | None:
    """``(line number, requirement)`` of ``path``'s ragvet line; None without the file or the line."""
    return _ragvet_line(path.read_text(encoding="utf-8")) if path.is_file() else None


def exact_version(requirement: Requirement) -> str | None:
    """The one version ``requirement`` pins (``==`` or ``===``); None for a range or no version."""
    exact = [spec.version for spec in requirement.specifier if spec.operator in ("==", "===")]
    return exact[0] if exact else None


def pin_problems(path: Path = REQUIREMENTS, installed: str | None = None) -> list[Problem]:
    """Why a stage must not run under this install: an inexact pin, or another version."""
    found = pinned_requirement(path)
    if found is None:
        return []
    number, requirement = found
    where = f"{path}:{number}"
    installed = installed or installed_version()
    pinned = exact_version(requirement)
    if pinned is None:
        return [
            Problem(
                where,
                f"ragvet is required as {str(requirement)!r}, not pinned to one version: "
                "the stages could not tell which release made their outputs",
                f"pin it exactly, e.g. `ragvet upgrade` writes {NAME}=={installed}",
            )
        ]
    if Version(pinned) != Version(installed):
        return [
            Problem(
                where,
                f"the project pins ragvet {pinned}, but ragvet {installed} is installed",
                "run `pip install -r requirements.txt` to run the pinned release, "
                f"or `ragvet upgrade` to pin {installed} and re-run the pipeline",
            )
        ]
    return []


@user_errors
def refuse_another_release(path: Path = REQUIREMENTS) -> None:
    """Stop with exit 2 and the fix when :func:`pin_problems` finds any: called before a
    stage reads anything, so nothing is written under the wrong release."""
    raise_if(pin_problems(path))


def pin_line(installed: str, extras: list[str] | tuple[str, ...] = ()) -> str:
    """``ragvet==V``, or ``ragvet[a,b]==V``."""
    named = f"[{','.join(sorted(extras))}]" if extras else ""
    return f"{NAME}{named}=={installed}"


def repinned(text: str, line: str) -> str:
    """``text`` with its ragvet requirement replaced by ``line`` (added under the header if none)."""
    found = _ragvet_line(text)
    if found is None:
        return (text if text else HEADER) + ("" if not text or text.endswith("\n") else "\n") + line + "\n"
    lines = text.splitlines(keepends=True)
    number = found[0] - 1
    comment = re.search(r"\s+#.*$", lines[number].rstrip("\n"))
    lines[number] = line + (comment.group(0) if comment else "") + "\n"
    return "".join(lines)
