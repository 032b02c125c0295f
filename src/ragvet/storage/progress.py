"""The one progress bar of every long loop: shown on a terminal, silent in CI or when piped."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from tqdm import tqdm


def progress_bar(items: Iterable[Any] | None = None, *, total: int | None = None, desc: str, unit: str = "it") -> Any:
    """A tqdm bar over ``items`` (or advanced by hand up to ``total``), counting ``unit``s;
    stage logs stay clean because it is disabled whenever stderr is not a terminal."""
    return tqdm(items, total=total, desc=desc, unit=unit, disable=not sys.stderr.isatty(), leave=False)
