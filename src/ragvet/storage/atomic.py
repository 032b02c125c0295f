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
SPACE_FIX = "free space (or raise the limit) and re-run"
FOLDER_FIX = "run in a writable clone of the project, or make the folder writable, and re-run"
ACCESS_FIX = "give this user access to it, or run in a clone of the project this user owns, and re-run"
# Why a write fails when the fault is the user's to fix, not a bug: what it means, and the fix.
WRITE_FAULTS = {
    errno.ENOSPC: ("no space left on the device", SPACE_FIX),
    errno.EFBIG: ("the file-size limit (ulimit -f) was reached", SPACE_FIX),
    errno.EDQUOT: ("the disk quota is full", SPACE_FIX),
    errno.EROFS: ("the file system is read-only", FOLDER_FIX),
    errno.EACCES: ("permission denied", FOLDER_FIX),
    errno.EPERM: ("operation not permitted", FOLDER_FIX),
}
# Only a write can run out of space or meet a read-only file system; a refused permission
# may be a read's, so it counts for a write only when it names the file being written.
WRITES_ONLY = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS})
_OS_ERROR = re.compile(r"\(os error (\d+)\)")
PROBE_BYTES = 1 << 16  # appended to a temporary file whose writer failed without an errno


class WriteFailed(Exception):
    """Writing ``path`` failed for a reason of :data:`WRITE_FAULTS` (a full disk, a read-only
    folder); :func:`ragvet.errors.user_errors` says so with the fix and exits 2. A refused
    permission met outside a write ragvet knows for one (``written=False``) may be a read's:
    it is told as access to ``path``."""

    def __init__(self, path: str | Path, code: int, written: bool = True):
        self.path = Path(path)
        self.reason, self.fix = WRITE_FAULTS[code]
        action = "write" if written or code in WRITES_ONLY else "access"
        if action == "access":
            self.fix = ACCESS_FIX
        super().__init__(f"cannot {action} {path}: {self.reason}")


def write_fault(err: BaseException | None, target: str | Path | None = None) -> int | None:
    """The :data:`WRITE_FAULTS` errno of an OSError, raised directly or chained, or reported
    by a Rust library in its message (polars: ``... File too large (os error 27)``). Given
    the ``target`` being written, a refused permission naming another file (a read inside
    the writer) is none."""
    while err is not None:
        if isinstance(err, OSError) and err.errno in WRITE_FAULTS:
            other = target is not None and err.filename is not None and Path(err.filename) != Path(target)
            return None if other and err.errno not in WRITES_ONLY else err.errno
        codes = [int(code) for code in _OS_ERROR.findall(str(err)) if int(code) in WRITE_FAULTS]
        if codes:
            return codes[0]
        err = err.__cause__ or err.__context__
    return None


@contextmanager
def _guarded(path: Path) -> Iterator[None]:
    """Turn a write fault on ``path`` (making its folder, its temporary file, the rename) into :class:`WriteFailed`."""
    try:
        yield
    except OSError as err:
        code = write_fault(err)
        if code is None:
            raise
        raise WriteFailed(path, code) from None


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
        with _guarded(path):
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
    deleted when it fails, so readers never see half a file. A write fault (a full
    disk, a read-only folder) raises :class:`WriteFailed` naming ``path``."""
    path = Path(path)
    with _guarded(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~UMASK)  # mkstemp makes 0600; give the file the usual mode
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        code = write_fault(err, tmp)
        if code is not None:
            raise WriteFailed(path, code) from None
        raise
    batch = _BATCH.get()
    if batch is None:
        with _guarded(path):
            os.replace(tmp, path)
    else:
        batch.renames.append((Path(tmp), path))


def _probe(tmp: Path) -> int | None:
    """Why more bytes cannot go into ``tmp``, if a write fault stops them: asked of the OS
    when a writer failed with a message that names none (polars' "Invalid thrift:
    transport error" for a Parquet footer cut short)."""
    try:
        with open(tmp, "ab") as handle:
            handle.write(bytes(PROBE_BYTES))
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as err:
        return write_fault(err)
    return None


# Rows per row group of the tables that grow with the cases (the case table, runs, per-case
# tables written in batches): a reader in batches decodes one group at a time, never a whole
# column. A table of at most this many rows is one group, so its bytes are those of one.
ROW_GROUP_ROWS = 1 << 16


def write_parquet(path: str | Path, frame, **options) -> None:
    """Write a polars frame as Parquet atomically (``options`` go to ``write_parquet``): every
    table ragvet writes comes through here, so a write cut short is a :class:`WriteFailed`
    naming ``path``, whatever message polars gives, since the OS is asked about the temporary file."""
    with atomic_output(path) as tmp:
        try:
            frame.write_parquet(tmp, **options)
        except Exception as err:
            code = write_fault(err) or _probe(tmp)
            if code is None:
                raise
            raise OSError(code, os.strerror(code), str(tmp)) from None


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
