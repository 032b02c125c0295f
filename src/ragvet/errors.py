"""User-facing errors: every problem names where it is, what is wrong and the fix.

Domain code raises :class:`InputError` with all the problems it found, so that a
user fixes a file in one pass instead of one error per run. Only the CLI boundary
(:func:`user_errors`) turns it into a message and a non-zero exit code. A raw
dataset can hold tens of thousands of problems: the terminal gets the first
:data:`SHOWN` and a count per kind, and the full list goes to :data:`PROBLEMS_FILE`.
"""

from __future__ import annotations

import functools
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ragvet.storage.atomic import WriteFailed, write_fault, write_text
from ragvet.text.escaping import visible

EXIT_USER_ERROR = 2
SHOWN = 50  # problems printed on the terminal; the rest are counted by kind
WHAT_CHARS = 500  # characters of one problem's "what" on the terminal
PROBLEMS_FILE = Path(".ragvet/problems.txt")  # the full list, under the project's git-ignored folder

F = TypeVar("F", bound=Callable)


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with the input.

    ``where`` is a file, optionally with ``:line``, and/or a case id, e.g.
    ``data/cases/cases.yaml:12 (case leave-carryover)``.
    """

    where: str
    what: str
    fix: str

    def render(self) -> str:
        """Two lines, whatever the values quoted in it hold: a case id with a line
        break or an escape sequence is shown escaped (see :func:`visible`), and a
        quoted value is cut at :data:`WHAT_CHARS`, since a one-megabyte line quoted
        whole would flood the terminal as surely as a million problems."""
        return f"{visible(self.where, None)}: {visible(self.what, WHAT_CHARS)}\n    fix: {visible(self.fix, None)}"

    @property
    def kind(self) -> str:
        """What is wrong, with the quoted values and numbers that differ between
        instances blanked out, so that 40,000 unknown doc ids count as one kind."""
        return _NUMBER.sub("N", _QUOTED.sub("'…'", self.what))


_LINE = re.compile(r"^(.*?):(\d+)(.*)$", re.DOTALL)
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_NUMBER = re.compile(r"\b\d+(?:\.\d+)?\b")


def reading_order(problem: Problem) -> tuple:
    """Sort by file, then line number as a number (line 3 before line 10)."""
    match = _LINE.match(problem.where)
    if match is None:
        return (problem.where, -1, "", problem.what, problem.fix)
    return (match[1], int(match[2]), match[3], problem.what, problem.fix)


class InputError(Exception):
    """Raised with every problem found, never just the first, in reading order.

    ``roots`` are problems that cause others (a params mistake behind the cases'
    errors): they come first, in reading order, and the knock-ons after them.
    """

    def __init__(self, problems: Iterable[Problem], roots: Iterable[Problem] = ()):
        first = sorted(set(roots), key=reading_order)
        self.problems = first + sorted(set(problems) - set(first), key=reading_order)
        super().__init__(self.render())

    def render(self) -> str:
        """Every problem, for the full list and for tests."""
        return "\n".join([f"{_counted(len(self.problems))} found:", *(p.render() for p in self.problems)])

    def render_capped(self, full_list: Path, unwritten: WriteFailed | None = None) -> str:
        """The first :data:`SHOWN` problems, then how many of each kind there are
        in all, pointing to ``full_list`` where :func:`user_errors` wrote them all,
        or saying why it could not (``unwritten``)."""
        count = len(self.problems)
        where = (
            f"all of them are in {full_list}"
            if unwritten is None
            else f"the full list could not be written ({unwritten}; {unwritten.fix})"
        )
        head = f"{_counted(count)} found; the first {SHOWN} follow, and {where}:"
        kinds = Counter(problem.kind for problem in self.problems).most_common()
        tally = [f"  {n} × {kind}" for kind, n in kinds[:SHOWN]]
        rest = [f"  ... and {len(kinds) - SHOWN} other kinds"] if len(kinds) > SHOWN else []
        shown = [p.render() for p in self.problems[:SHOWN]]
        return "\n".join([head, *shown, f"{count - SHOWN} more not shown; all {count} by kind:", *tally, *rest])


def _counted(count: int) -> str:
    return f"{count} problem{'s' if count != 1 else ''}"


def raise_if(problems: list[Problem]) -> None:
    """Raise :class:`InputError` when any problem was collected."""
    if problems:
        raise InputError(problems)


def _write_failed(err: OSError) -> WriteFailed | None:
    """A fault of :data:`~ragvet.storage.atomic.WRITE_FAULTS` met outside
    :mod:`ragvet.storage.atomic` (a folder made, a file opened for reading or writing), as
    the :class:`WriteFailed` naming its file, or None."""
    code = write_fault(err)
    return None if code is None or err.filename is None else WriteFailed(err.filename, code, written=False)


def user_errors(fn: F) -> F:
    """CLI boundary: print an :class:`InputError` without a traceback and exit 2.
    A write fault (:class:`~ragvet.storage.atomic.WriteFailed`: a full disk, a read-only
    folder, or an OSError of the same kinds from any other write) is told the same way,
    with its path, reason and fix: the outputs were committed all or none, so re-running
    after the fix is enough.
    So is running out of memory (a ``MemoryError``, under a memory or address-space
    limit): a stage that knows what grows with its input raises its own problem instead.

    More than :data:`SHOWN` problems would flood the terminal: they are written in
    full to :data:`PROBLEMS_FILE` (relative to where the command runs, the project
    root under DVC) and the terminal gets the capped rendering that names it, or that
    says why the full list could not be written.
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except InputError as err:
            print(f"ragvet: {_shown(err)}", file=sys.stderr)
            raise SystemExit(EXIT_USER_ERROR) from None
        except WriteFailed as err:
            _exit_write_failed(err)
        except OSError as err:
            failed = _write_failed(err)
            if failed is None:
                raise
            _exit_write_failed(failed)
        except MemoryError:
            message = "out of memory: run with more memory or a smaller input (no output was changed)"
            print(f"ragvet: {message}", file=sys.stderr)
            raise SystemExit(EXIT_USER_ERROR) from None

    return wrapper  # type: ignore[return-value]


def _shown(err: InputError) -> str:
    """The terminal's rendering of ``err``: whole, or capped with the full list in :data:`PROBLEMS_FILE`."""
    if len(err.problems) <= SHOWN:
        return err.render()
    try:
        write_text(PROBLEMS_FILE, err.render() + "\n")
    except WriteFailed as unwritten:
        return err.render_capped(PROBLEMS_FILE, unwritten)
    return err.render_capped(PROBLEMS_FILE)


def _exit_write_failed(err: WriteFailed) -> None:
    print(f"ragvet: {visible(str(err), None)}: {err.fix} (no output was changed)", file=sys.stderr)
    raise SystemExit(EXIT_USER_ERROR) from None
