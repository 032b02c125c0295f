"""User-facing errors: every problem names where it is, what is wrong and the fix.

Domain code raises :class:`InputError` with all the problems it found, so that a
user fixes a file in one pass instead of one error per run. Only the CLI boundary
(:func:`user_errors`) turns it into a message and a non-zero exit code.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

EXIT_USER_ERROR = 2

F = TypeVar("F", bound=Callable)


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with the input.

    ``where`` is a file, optionally with ``:line``, and/or a case id, e.g.
    ``data/cases.yaml:12 (case leave-carryover)``.
    """

    where: str
    what: str
    fix: str

    def render(self) -> str:
        return f"{self.where}: {self.what}\n    fix: {self.fix}"


_LINE = re.compile(r"^(.*?):(\d+)(.*)$", re.DOTALL)


def reading_order(problem: Problem) -> tuple:
    """Sort by file, then line number as a number (line 3 before line 10)."""
    match = _LINE.match(problem.where)
    if match is None:
        return (problem.where, -1, "", problem.what, problem.fix)
    return (match[1], int(match[2]), match[3], problem.what, problem.fix)


class InputError(Exception):
    """Raised with every problem found, never just the first, in reading order."""

    def __init__(self, problems: Iterable[Problem]):
        self.problems = sorted(set(problems), key=reading_order)
        super().__init__(self.render())

    def render(self) -> str:
        count = len(self.problems)
        head = f"{count} problem{'s' if count != 1 else ''} found:"
        return "\n".join([head, *(p.render() for p in self.problems)])


def raise_if(problems: list[Problem]) -> None:
    """Raise :class:`InputError` when any problem was collected."""
    if problems:
        raise InputError(problems)


def user_errors(fn: F) -> F:
    """CLI boundary: print an :class:`InputError` without a traceback and exit 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except InputError as err:
            print(f"ragvet: {err.render()}", file=sys.stderr)
            raise SystemExit(EXIT_USER_ERROR) from None

    return wrapper  # type: ignore[return-value]
