"""Atomic file output, with no dependency on the rest of the package.

It sits below :mod:`stages.errors` so that the CLI boundary can write the full
problem list the same way every other output is written: a temporary file in
the same folder, then an ``os.replace``, so a crash never leaves half a file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

UMASK = os.umask(0)  # read once: os.umask can only be read by setting it
os.umask(UMASK)


@contextmanager
def atomic_output(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` for a writer to fill: renamed over ``path``
    when the block ends, deleted when it fails, so readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~UMASK)  # mkstemp makes 0600; give the file the usual mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: str | Path, text: str) -> None:
    """Write text atomically: a temporary file beside the target, then a rename."""
    with atomic_output(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as handle:
        handle.write(text)
