"""JSON records ragvet writes and later reads back, checked for shape before any key
is read: such a file (hand-edited, or a bad merge) parses, then crashes whatever reads a
key of it, so it is refused at its file, naming the key, with the fix."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragvet.errors import Problem, raise_if
from ragvet.schema import DEV, EVAL
from ragvet.storage.files import read_json
from ragvet.text.values import kind_of

SPLIT_FINGERPRINTS = ("corpus", "dev_split", "eval_split")  # what the readers of data/split.json compare
SHOWN_IDS = 5  # case ids a problem lists before "..."


def listed_ids(ids: Sequence[str]) -> str:
    """The first :data:`SHOWN_IDS` of ``ids``, then "..." when there are more."""
    return ", ".join(ids[:SHOWN_IDS]) + (", ..." if len(ids) > SHOWN_IDS else "")


def object_problems(where: str, value: Any, what: str, fix: str, objects: Sequence[str] = ()) -> list[Problem]:
    """Why ``value`` is not a JSON object whose keys ``objects`` are objects (or absent)."""
    if not isinstance(value, dict):
        return [Problem(where, f"{what} is a JSON object, this one is {kind_of(value)}", fix)]
    return [
        Problem(where, f"`{key}` must be an object, got {kind_of(value[key])}", fix)
        for key in objects
        if value.get(key) is not None and not isinstance(value[key], dict)
    ]


def _split_problems(where: str, record: dict, fix: str) -> list[Problem]:
    """Each fingerprint the readers compare is text, and each case's entry names its split."""
    fingerprints, cases = record.get("fingerprints") or {}, record.get("cases") or {}
    problems = [
        Problem(where, f"`fingerprints.{name}` must be text, got {kind_of(fingerprints.get(name))}", fix)
        for name in SPLIT_FINGERPRINTS
        if not isinstance(fingerprints.get(name), str)
    ]
    wrong = [
        case_id
        for case_id, entry in cases.items()
        if not isinstance(entry, dict) or entry.get("split") not in (DEV, EVAL)
    ]
    if "cases" not in record:
        problems.append(Problem(where, "`cases` is missing: the split of each case", fix))
    if wrong:
        problems.append(Problem(where, f"cases {listed_ids(sorted(wrong))} have no split {DEV!r} or {EVAL!r}", fix))
    return problems


def read_split_record(path: Path) -> dict:
    """The frozen split (``data/split.json``): an object whose fingerprints are text and
    whose every case is in the dev or the eval split, else exit 2 at the file."""
    record = read_json(path)
    fix = "run `dvc repro` (the split stage writes it), or restore it: git checkout -- " + str(path)
    raise_if(object_problems(str(path), record, "a split record", fix, ("fingerprints", "cases")))
    raise_if(_split_problems(str(path), record, fix))
    return record
