"""Deterministic, atomic file output and line-numbered input.

Every output goes through :mod:`stages.storage.atomic` (a temporary file in the
same folder and an ``os.replace``), so a crash never leaves a half-written metrics file. JSON is
written with sorted keys and floats rounded to :data:`FLOAT_PLACES`, so the same
inputs give byte-identical files.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from stages.errors import InputError, Problem
from stages.storage.atomic import write_text

FLOAT_PLACES = 6


def round_floats(value: Any, places: int = FLOAT_PLACES) -> Any:
    """Round every float in a JSON-like value; NaN and infinities become None.

    JSON has no NaN, and ``-0.0`` would print differently from ``0.0``.
    """
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        rounded = round(value, places)
        return 0.0 if rounded == 0 else rounded
    if isinstance(value, dict):
        return {str(k): round_floats(v, places) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [round_floats(v, places) for v in value]
    return value


def dumps(value: Any) -> str:
    """Canonical JSON text: sorted keys, rounded floats, two-space indent."""
    return json.dumps(round_floats(value), sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def dumps_line(value: Any, rounded: bool = False) -> str:
    """Canonical single-line JSON for JSONL files. ``rounded`` says the value went
    through :func:`round_floats` already: at 100,000 per-case rows a second walk
    costs as much as the first."""
    value = value if rounded else round_floats(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def write_json(path: str | Path, value: Any) -> None:
    write_text(path, dumps(value))


def write_jsonl(path: str | Path, rows: Iterable[Any], rounded: bool = False) -> None:
    write_text(path, "".join(dumps_line(row, rounded) + "\n" for row in rows))


def read_json(path: str | Path) -> Any:
    """Read a JSON file; a syntax error becomes a Problem naming the line."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError([Problem(str(path), "file not found", "run the stage that writes it (dvc repro)")]) from None
    except json.JSONDecodeError as err:
        raise InputError(
            [Problem(f"{path}:{err.lineno}", f"malformed JSON: {err.msg}", "fix the JSON syntax on that line")]
        ) from None


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, value)`` for each non-blank line; collect all syntax errors."""
    path = Path(path)
    with path.open(encoding="utf-8") as handle:
        rows = parse_jsonl_lines(handle, str(path))
    yield from rows


def parse_jsonl_lines(lines: Iterable[str], where: str) -> list[tuple[int, Any]]:
    """``(line_number, value)`` for each non-blank line of JSONL text read from
    ``where`` (a file, or ``REV:path`` for another revision's file); every
    syntax error is collected into one :class:`InputError`."""
    problems: list[Problem] = []
    rows: list[tuple[int, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append((number, json.loads(line)))
        except json.JSONDecodeError as err:
            problems.append(
                Problem(f"{where}:{number}", f"malformed JSON: {err.msg}", "make each line one JSON object")
            )
    if problems:
        raise InputError(problems)
    return rows


def read_jsonl(path: str | Path) -> list[Any]:
    return [value for _, value in iter_jsonl(path)]


def read_yaml(path: str | Path) -> Any:
    """Read a YAML file; a syntax error becomes a Problem naming the line."""
    import yaml  # not for `ragvet --help`

    path = Path(path)
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError([Problem(str(path), "file not found", "create it, or fix the path in dvc.yaml")]) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        reason = getattr(err, "problem", None) or str(err)
        raise InputError([Problem(where, f"malformed YAML: {reason}", "fix the YAML syntax on that line")]) from None


def read_params(path: str | Path = "params.yaml") -> dict[str, Any]:
    """The DVC params file as a dict (a missing or non-mapping file is an error)."""
    params = read_yaml(path)
    if not isinstance(params, dict):
        raise InputError(
            [
                Problem(
                    str(path),
                    "params must be a YAML mapping",
                    "start from the bundled params.yaml, which shows every section with comments",
                )
            ]
        )
    return params
