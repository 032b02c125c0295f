"""Where a configuration's per-case results table lives, and how it is read.

One path rule and one reader, whoever asks: evaluate's output, the baseline's
copy, another revision's table brought by git or DVC (as bytes). Changing the
table's format is a change here only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stages.storage.files import parse_jsonl_lines, read_jsonl

Row = dict[str, Any]
CASES_FOLDER = "cases"  # under metrics/ and under metrics/baseline/
SUFFIX = ".jsonl"


def cases_dir(results: Path) -> Path:
    """The folder of per-case tables in a results folder (``metrics`` or ``metrics/baseline``)."""
    return Path(results) / CASES_FOLDER


def per_case_path(folder: Path, config: str) -> Path:
    """The per-case table of ``config`` in a folder of them (:func:`cases_dir`)."""
    return Path(folder) / f"{config}{SUFFIX}"


def read_per_case(source: Path | bytes, where: str = "") -> list[Row]:
    """The rows of a per-case table: a file, or its bytes as another revision
    holds them (``where`` names that revision's copy, ``REV:path``, in errors)."""
    if isinstance(source, bytes):
        return [row for _, row in parse_jsonl_lines(source.decode("utf-8").splitlines(), where)]
    return read_jsonl(source)
