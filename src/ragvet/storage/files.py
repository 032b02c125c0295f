"""Deterministic, atomic file output and line-numbered input.

Every output goes through :mod:`ragvet.storage.atomic` (a temporary file in the
same folder and an ``os.replace``), so a crash never leaves a half-written metrics file. JSON is
written with sorted keys and floats rounded to :data:`FLOAT_PLACES`, so the same
inputs give byte-identical files.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from ragvet.errors import InputError, Problem, raise_if
from ragvet.storage.atomic import write_lines, write_text
from ragvet.text.located_yaml import load_located_yaml
from ragvet.text.nesting import loads

FLOAT_PLACES = 6
_PLAIN = frozenset({str, int, bool, type(None)})  # kept as they are, checked without a call


def round_floats(value: Any, places: int = FLOAT_PLACES) -> Any:
    """Round every float in a JSON-like value; NaN and infinities become None.

    JSON has no NaN, and ``-0.0`` would print differently from ``0.0``. A text, integer,
    boolean or None inside a mapping or list is kept without a call: most of a line is.
    """
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        rounded = round(value, places)
        return 0.0 if rounded == 0 else rounded
    if isinstance(value, dict):
        return {
            key if type(key) is str else str(key): item if type(item) in _PLAIN else round_floats(item, places)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [item if type(item) in _PLAIN else round_floats(item, places) for item in value]
    return value


def dumps(value: Any) -> str:
    """Canonical JSON text: sorted keys, rounded floats, two-space indent."""
    return json.dumps(round_floats(value), sort_keys=True, indent=2, ensure_ascii=False) + "\n"


_LINE = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))
# orjson raises for what json would write another way: a subclass of str, int, dict or
# list, a dataclass or a date (json calls them by their base type, or refuses them).
_ORJSON_LINE = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)
# How orjson writes a float below 1e-4, which json writes as 1e-06: 0.00005, or 2e-6.
_ORJSON_SMALL_FLOAT = re.compile(rb"0\.0000|\de-\d")


def dumps_line(value: Any) -> str:
    """Canonical single-line JSON for JSONL files: sorted keys, rounded floats.

    The text is ``json.dumps``' (sort_keys, ensure_ascii=False, no spaces). orjson writes
    the same text about ten times faster, except a float below 1e-4 (``1e-6`` for
    ``1e-06``), an integer beyond 64 bits, text that is not UTF-8 and types json would
    take by their base type: orjson refuses those, and a line whose text could hold
    such a float is written by json too."""
    rounded = round_floats(value)
    try:
        fast = orjson.dumps(rounded, option=_ORJSON_LINE)
    except orjson.JSONEncodeError:
        fast = None  # json writes it, or raises its own error outside this handler
    if fast is None or _ORJSON_SMALL_FLOAT.search(fast) is not None:
        return _LINE.encode(rounded)
    return fast.decode()


def write_json(path: str | Path, value: Any) -> None:
    write_text(path, dumps(value))


def write_jsonl(path: str | Path, rows: Iterable[Any]) -> None:
    """One canonical line per row, streamed: a row is made and dropped as its line is written."""
    write_lines(path, (dumps_line(row) + "\n" for row in rows))


def read_json(path: str | Path) -> Any:
    """Read a JSON file; a syntax error becomes a Problem naming the line."""
    path = Path(path)
    try:
        return loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError([Problem(str(path), "file not found", "run the stage that writes it (dvc repro)")]) from None
    except json.JSONDecodeError as err:
        raise InputError(
            [Problem(f"{path}:{err.lineno}", f"malformed JSON: {err.msg}", "fix the JSON syntax on that line")]
        ) from None


def decode_utf8(data: bytes, where: str) -> tuple[str | None, Problem | None]:
    """``(text, None)``, or ``(None, problem)`` naming the line of the first byte that
    is not UTF-8: a byte offset alone is no help in an editor. A leading byte-order
    mark is encoding, not text, and is dropped."""
    try:
        return data.decode("utf-8").removeprefix("\ufeff"), None
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - data.rfind(b"\n", 0, err.start)
        what = f"not UTF-8 text: {err.reason} (byte {data[err.start]:#04x} at column {column})"
        return None, Problem(f"{where}:{line}", what, "save the file as UTF-8 (an editor's 'save with encoding')")


def text_lines(path: str | Path, problems: list[Problem]) -> list[tuple[int, str]]:
    """``(line_number, text)`` of every non-blank line of a line-based file; a line
    that is not UTF-8 is a problem at its own line and the other lines still count,
    so one bad byte never hides a whole file's other mistakes."""
    path = Path(path)
    lines: list[tuple[int, str]] = []
    for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        text, problem = decode_utf8(raw, str(path))
        if problem is not None:
            problems.append(Problem(f"{path}:{number}", problem.what, problem.fix))
        elif text.strip():
            lines.append((number, text))
    return lines


def link_out_of_project(path: Path, folder: Path) -> Problem | None:
    """A problem when a symlink at or below ``folder`` takes ``path`` outside the
    project (the working directory, as under DVC). DVC hashes the link, not what it
    points to, so a change at the target would change results unseen."""
    target = path.resolve()
    if target == folder.resolve() / path.relative_to(folder) or target.is_relative_to(Path.cwd().resolve()):
        return None
    return Problem(
        str(path),
        f"a symlink to {target}, outside the project: DVC tracks the link, not its target, "
        "so a change there would go unseen",
        "copy the file into the project (or `dvc import` it) instead of linking to it",
    )


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, value)`` for each non-blank line; collect all syntax
    and encoding errors, each at its line."""
    path = Path(path)
    problems: list[Problem] = []
    rows: list[tuple[int, Any]] = []
    for number, line in text_lines(path, problems):
        try:
            rows.append((number, loads(line)))
        except json.JSONDecodeError as err:
            problems.append(Problem(f"{path}:{number}", f"malformed JSON: {err.msg}", "make each line one JSON object"))
    if problems:
        raise InputError(problems)
    yield from rows


def each_jsonl(path: str | Path) -> Iterator[Any]:
    """The value of each non-blank line of a JSONL file ragvet wrote (the validated cases),
    read a line at a time, so a file of millions of cases is never held; the first line
    that is not UTF-8 or not JSON stops the read, named by its line."""
    path = Path(path)
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            value = _line_value(raw, path, number)
            if value is not _BLANK:
                yield value


def each_jsonl_of(path: str | Path, key: str, values: Collection[str], block: int = 1 << 22) -> Iterator[dict]:
    """The objects of a JSONL file ragvet wrote (the validated cases) whose ``key`` is one
    of ``values``, in file order, each line once: the cases a report shows, among millions.

    Only their lines are decoded. The file is read ``block`` bytes at a time and searched
    for ``"key": "value"`` pairs; a pair written as :func:`dumps_line` or ``json.dumps``
    write it is compared as bytes, any other (escapes, other spacing) decoded first. A
    line a pair is on is decoded and kept when its own ``key`` is wanted (a nested pair
    alone does not make it). A decoded line that is not UTF-8 or not JSON stops the read,
    named by its line; lines not decoded are not checked."""
    wanted = set(values)
    name = json.dumps(key).encode()
    pair = re.compile(re.escape(name) + rb'[ \t\r\n]*:[ \t\r\n]*"[^"\\]*(?:\\.[^"\\]*)*"')
    exact = {name + sep + json.dumps(v, ensure_ascii=False).encode() for v in wanted for sep in (b":", b": ")}
    plain = (name + b':"', name + b': "')
    path, lines = Path(path), 0
    for text in _line_blocks(path, block) if wanted else ():
        cursor, last, counted = 0, -1, 0
        for found in pair.findall(text):
            if found not in exact and (
                (found.startswith(plain) and b"\\" not in found) or _pair_value(found, name) not in wanted
            ):
                continue
            at = text.find(found, cursor)  # this pair: every earlier one of the same text was found before
            cursor, start = at + len(found), text.rfind(b"\n", 0, at) + 1
            if start == last:
                continue
            lines, counted = lines + text.count(b"\n", counted, start), start
            end = text.find(b"\n", at)
            value = _line_value(text[start : len(text) if end < 0 else end], path, lines + 1)
            last = start
            if isinstance(value, dict) and value.get(key) in wanted:
                yield value
        lines += text.count(b"\n", counted)


def _line_blocks(path: Path, size: int) -> Iterator[bytes]:
    """The file ``size`` bytes at a time, each block cut after its last newline and the rest
    carried into the next: whole lines only (the last without its newline, if it has none)."""
    rest = b""
    with open(path, "rb") as handle:
        while more := handle.read(size):
            text = rest + more
            cut = text.rfind(b"\n") + 1
            yield text[:cut]
            rest = text[cut:]
    if rest:
        yield rest


def _pair_value(found: bytes, name: bytes) -> str | None:
    """The value of a ``"key": "value"`` pair :func:`each_jsonl_of` found; None when its escapes are not JSON."""
    try:
        return json.loads(found[len(name) :].lstrip(b" \t\r\n:"))
    except json.JSONDecodeError:
        return None


_BLANK = object()  # what :func:`_line_value` gives a blank line


def _line_value(raw: bytes, path: Path, number: int) -> Any:
    """The JSON value of line ``number`` of a file ragvet wrote (:data:`_BLANK` when blank);
    its problem at its line."""
    text, problem = decode_utf8(raw, str(path))
    if problem is not None:
        raise InputError([Problem(f"{path}:{number}", problem.what, problem.fix)])
    if not text.strip():
        return _BLANK
    try:
        return loads(text)
    except json.JSONDecodeError as err:
        fix = "rewrite it with the stage that writes it (dvc repro)"
        raise InputError([Problem(f"{path}:{number}", f"malformed JSON: {err.msg}", fix)]) from None


def read_jsonl(path: str | Path) -> list[Any]:
    return [value for _, value in iter_jsonl(path)]


def read_yaml(path: str | Path) -> Any:
    """Read a user's YAML file with :func:`load_located_yaml`: lines remembered,
    anchors and aliases refused, ids kept as written. Any problem is raised."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError([Problem(str(path), "file not found", "create it, or fix the path in dvc.yaml")]) from None
    text, problem = decode_utf8(data, str(path))
    if problem is not None:
        raise InputError([problem])
    value, problems = load_located_yaml(text, str(path))
    raise_if([Problem(*found) for found in problems])
    return value


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
