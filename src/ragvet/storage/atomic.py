"""Atomic file output, with no dependency on the rest of the package.

It sits below :mod:`ragvet.errors` so that the CLI boundary can write the full
problem list the same way every other output is written: a temporary file in
the same folder, then an ``os.replace``, so a crash never leaves half a file.

A stage that writes several outputs wraps its writes in :func:`outputs_together`:
every temporary file is filled first and the renames wait until all of them
succeeded, so a failure in the middle (a full disk, a crash, a bad value) leaves
the previous outputs as they were, never a new corpus beside old cases. The same
block first removes the temporary files a killed run left beside those outputs,
so DVC never hashes them into ``dvc.lock`` and ``git add`` never commits them.
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

UMASK = os.umask(0)  # read once: os.umask can only be read by setting it
os.umask(UMASK)
# A full disk, a file-size limit (ulimit -f, RLIMIT_FSIZE) or a full quota: the user's to fix, not a bug.
DISK_FULL = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})
_OS_ERROR = re.compile(r"\(os error (\d+)\)")


class DiskFull(Exception):
    """Writing ``path`` failed for want of space; :func:`ragvet.errors.user_errors` says so and exits 2."""

    def __init__(self, path: Path):
        self.path = path
        super().__init__(f"disk full writing {path}")


class _Batch:
    """The renames and removals an :func:`outputs_together` block has put off."""

    def __init__(self) -> None:
        self.renames: list[tuple[Path, Path]] = []
        self.removals: list[Path] = []


_BATCH: ContextVar[_Batch | None] = ContextVar("ragvet_output_batch", default=None)


def temp_pattern(path: Path) -> str:
    """The glob of the temporary files :func:`atomic_output` makes for ``path``."""
    return f".{path.name}.*.tmp"


def remove_stale_temps(paths: Iterable[str | Path]) -> None:
    """Delete the temporary files a killed run (kill -9, power loss) left beside ``paths``."""
    for path in map(Path, paths):
        if path.parent.is_dir():
            for stale in path.parent.glob(temp_pattern(path)):
                stale.unlink(missing_ok=True)


@contextmanager
def outputs_together(*paths: str | Path | None) -> Iterator[None]:
    """Commit every output written inside the block, or none: each writer fills its
    temporary file, and the renames (and :func:`remove_output` removals) happen only
    when the whole block succeeded. ``paths`` are the outputs the caller owns, whose
    stale temporary files are removed first; ``None`` entries are skipped."""
    remove_stale_temps(path for path in paths if path is not None)
    batch = _Batch()
    token = _BATCH.set(batch)
    try:
        yield
    except BaseException:
        for tmp, _ in batch.renames:
            tmp.unlink(missing_ok=True)
        raise
    finally:
        _BATCH.reset(token)
    for tmp, path in batch.renames:  # renames within one folder: no new space, nothing left to fail on
        os.replace(tmp, path)
    for path in batch.removals:
        path.unlink(missing_ok=True)


def remove_output(path: str | Path) -> None:
    """Remove an output that is no longer produced; inside :func:`outputs_together`,
    only once every new output is in place."""
    batch = _BATCH.get()
    if batch is None:
        Path(path).unlink(missing_ok=True)
    else:
        batch.removals.append(Path(path))


@contextmanager
def atomic_output(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` for a writer to fill: renamed over ``path``
    when the block ends (or when the enclosing :func:`outputs_together` block does),
    deleted when it fails, so readers never see half a file. Running out of space
    raises :class:`DiskFull` naming ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~UMASK)  # mkstemp makes 0600; give the file the usual mode
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if _out_of_space(err):
            raise DiskFull(path) from None
        raise
    batch = _BATCH.get()
    if batch is None:
        os.replace(tmp, path)
    else:
        batch.renames.append((Path(tmp), path))


def _out_of_space(err: BaseException | None) -> bool:
    """An OSError for want of space, raised directly or chained, or reported by a Rust
    library in its message (polars: ``ComputeError: ... File too large (os error 27)``)."""
    while err is not None:
        if isinstance(err, OSError) and err.errno in DISK_FULL:
            return True
        if any(int(code) in DISK_FULL for code in _OS_ERROR.findall(str(err))):
            return True
        err = err.__cause__ or err.__context__
    return False


def write_text(path: str | Path, text: str) -> None:
    """Write text atomically: a temporary file beside the target, then a rename."""
    with atomic_output(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as handle:
        handle.write(text)


def write_lines(path: str | Path, lines: Iterable[str]) -> None:
    """Write text given line by line (each with its own line end) atomically, as
    :func:`write_text` does, without holding the whole file in memory at once."""
    with atomic_output(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as handle:
        handle.writelines(lines)


def write_bytes(path: str | Path, data: bytes) -> None:
    """Write bytes atomically, as :func:`write_text` writes text."""
    with atomic_output(path) as tmp:
        tmp.write_bytes(data)


def write_copy(path: str | Path, source: str | Path) -> None:
    """Write at ``path`` a byte-for-byte copy of ``source``, atomically as :func:`write_text`."""
    with atomic_output(path) as tmp:
        tmp.write_bytes(Path(source).read_bytes())
