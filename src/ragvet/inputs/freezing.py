"""Freeze ``{chunk, chunking}`` evidence into ``{doc, start, end}`` spans.

A chunk-anchored label is resolved through its chunking's params on every run, so
changing those params changes the labels (and the eval-split fingerprint, which
fails the gate). Rewriting each such reference into the span it resolves to *now*
keeps every figure identical and frees the chunking.

A YAML cases file is rewritten as text, one flow mapping ``{chunk: ..., chunking:
...}`` at a time, so comments, order and every other byte stay as they were. A
reference written in block style cannot be replaced in place: it is a problem to
fix by hand, and nothing is written. JSONL lines holding a chunk reference are
re-serialised; the other lines stay byte for byte.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from ragvet.errors import Problem
from ragvet.evidence import EvidenceResolver
from ragvet.text.nesting import loads

_SCALAR = r"""(?:"[^"\n]*"|'[^'\n]*'|[^,{}\s][^,{}\n]*?)"""
FLOW_CHUNK = re.compile(
    rf"\{{\s*(?:chunk\s*:\s*(?P<a_id>{_SCALAR})\s*,\s*chunking\s*:\s*(?P<a_name>{_SCALAR})"
    rf"|chunking\s*:\s*(?P<b_name>{_SCALAR})\s*,\s*chunk\s*:\s*(?P<b_id>{_SCALAR}))\s*\}}"
)

Freezer = Callable[[dict, str], tuple[dict | None, list[Problem]]]


def span_freezer(resolver: EvidenceResolver) -> Freezer:
    """``(reference, where) -> ({doc, start, end} or None, problems)`` under the current params."""

    def freeze(ref: dict, where: str) -> tuple[dict | None, list[Problem]]:
        unit, problems = resolver.resolve(ref, where)
        if unit is None:
            return None, problems
        return {"doc": unit.doc_id, "start": unit.start, "end": unit.end}, []

    return freeze


def _unquote(scalar: str) -> str:
    """A flow scalar's value: quotes removed (YAML's escapes are not used in chunk ids)."""
    scalar = scalar.strip()
    return scalar[1:-1] if scalar[:1] in "\"'" and scalar[-1:] == scalar[:1] else scalar


def freeze_yaml(text: str, path: Path, freeze: Freezer) -> tuple[str, int, list[Problem]]:
    """``(new text, references frozen, problems)`` for a YAML cases file's text."""
    problems: list[Problem] = []
    count = 0

    def replace(match: re.Match) -> str:
        nonlocal count
        line = text.count("\n", 0, match.start()) + 1
        ref = {
            "chunk": _unquote(match["a_id"] or match["b_id"]),
            "chunking": _unquote(match["a_name"] or match["b_name"]),
        }
        span, found = freeze(ref, f"{path}:{line}")
        problems.extend(found)
        if span is None:
            return match[0]
        count += 1
        return f"{{doc: {json.dumps(span['doc'])}, start: {span['start']}, end: {span['end']}}}"

    frozen = FLOW_CHUNK.sub(replace, text)
    for number, line in enumerate(frozen.splitlines(), start=1):
        if re.match(r"^\s*(?:-\s*)?chunk(?:ing)?\s*:", line.split("#", 1)[0]):
            problems.append(
                Problem(
                    f"{path}:{number}",
                    "a {chunk, chunking} reference in block style cannot be rewritten in place",
                    "write it on one line as {chunk: <id>, chunking: <name>} and run freeze-labels again",
                )
            )
    return frozen, count, problems


def _freeze_value(value: Any, where: str, freeze: Freezer, problems: list[Problem]) -> tuple[Any, int]:
    """``value`` with every chunk reference inside it frozen, and how many were."""
    if isinstance(value, dict) and "chunk" in value and "chunking" in value:
        span, found = freeze(value, where)
        problems.extend(found)
        return (value, 0) if span is None else (span, 1)
    if isinstance(value, dict):
        pairs = {key: _freeze_value(item, where, freeze, problems) for key, item in value.items()}
        return {key: pair[0] for key, pair in pairs.items()}, sum(pair[1] for pair in pairs.values())
    if isinstance(value, list):
        pairs = [_freeze_value(item, where, freeze, problems) for item in value]
        return [pair[0] for pair in pairs], sum(pair[1] for pair in pairs)
    return value, 0


def freeze_jsonl(text: str, path: Path, freeze: Freezer) -> tuple[str, int, list[Problem]]:
    """``(new text, references frozen, problems)`` for a JSONL cases file's text."""
    problems: list[Problem] = []
    count = 0
    lines = []
    for number, line in enumerate(jsonl_lines(text), start=1):
        try:
            row = loads(line) if line.strip() else None
        except json.JSONDecodeError:
            row = None  # left as it is: validate names the broken line
        new, frozen = _freeze_value(row, f"{path}:{number}", freeze, problems)
        count += frozen
        lines.append(json.dumps(new, ensure_ascii=False) + "\n" if frozen else line)
    return "".join(lines), count, problems


def jsonl_lines(text: str) -> list[str]:
    """The lines of a JSONL text, each with its ``\\n``, split where validate splits
    them: at ``\\n`` only. ``str.splitlines`` would also break inside a JSON string
    at a raw U+2028 or U+0085, which JSON allows unescaped."""
    pieces = text.split("\n")
    return [piece + "\n" for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])


def chunk_anchors(path: Path) -> list[str]:
    """The chunkings a valid cases file's ``{chunk, chunking}`` references name, sorted:
    the chunkings whose params the labels depend on, named by the "labels changed" message."""
    text = path.read_text(encoding="utf-8").removeprefix("\ufeff")
    rows = (
        [json.loads(line) for line in jsonl_lines(text) if _may_anchor(line)]
        if path.suffix == ".jsonl"
        else yaml.safe_load(text)
    )
    return sorted(_anchors(rows))


def _may_anchor(line: str) -> bool:
    """Whether a JSONL line can hold a ``chunk`` key: spelt in JSON it is the text
    ``chunk`` or holds a ``\\u`` escape. Skipping the other lines spares parsing and
    walking every case of a large file that anchors nothing."""
    return "chunk" in line or "\\u" in line


def _anchors(value: Any) -> set[str]:
    if isinstance(value, dict) and "chunk" in value and isinstance(value.get("chunking"), str):
        return {value["chunking"]}
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return set().union(*(_anchors(item) for item in items))
