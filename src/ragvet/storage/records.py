"""JSON records ragvet writes and later reads back, checked for shape before any key
is read: such a file (hand-edited, or a bad merge) parses, then crashes whatever reads a
key of it, so it is refused at its file, naming the key, with the fix."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ragvet.errors import InputError, Problem, raise_if
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


LARGE_SPLIT = 1 << 24  # bytes (about 180,000 cases): a larger split record is read a block at a time
_BLOCK = 1 << 22
# One case's entry as the split stage writes it (sorted keys, indented): its id and split. The id is
# matched a run of plain characters at a time, escapes between them.
_ENTRY = re.compile(rb'"([^"\\\n]*(?:\\.[^"\\\n]*)*)": \{\s*"fingerprint": "[^"\n]*",\s*"split": "(dev|eval)"\s*\}')
_AFTER_CASES = b'\n  "fingerprints": '


def split_membership(path: Path) -> tuple[dict[str, Any], Callable[[Sequence[str]], dict[str, str]]]:
    """The frozen split's fingerprints, and each case's split asked a batch of case ids
    at a time (ids ascending over all calls, as the case table holds them).

    A record up to :data:`LARGE_SPLIT` bytes is read whole and checked
    (:func:`read_split_record`). A larger one (millions of cases: parsed whole it
    takes gigabytes) is scanned in blocks beside the batches, its entries in id order
    as the split stage writes them (sorted keys), so it costs one block of memory;
    a case without an entry there stops with the problem at the file.
    """
    outline = split_outline(path)
    if outline.scanned:
        fix = "run `dvc repro` (the split stage writes it), or restore it: git checkout -- " + str(path)
        return outline.record["fingerprints"], _SplitScan(path, fix)
    membership = dict(outline.entries())
    return outline.record["fingerprints"], lambda ids: membership


@dataclass(frozen=True)
class SplitOutline:
    """The frozen split with its cases left on disk: the record's other keys (its
    ``fingerprints``, and ``left_out`` when it left cases out), and its cases' ``(id,
    split)`` read on demand (:meth:`entries`, in id order), so a reader that compares
    fingerprints or counts eval cases never holds millions of entries."""

    record: dict[str, Any]
    entries: Callable[[], Iterable[tuple[str, str]]]
    scanned: bool = False  # the entries are scanned from the file, not held

    @classmethod
    def held(cls, record: Mapping[str, Any]) -> SplitOutline:
        """The outline of a record read whole (checked by :func:`read_split_record`)."""
        cases = record["cases"]
        pairs = sorted((case_id, entry["split"]) for case_id, entry in cases.items())
        return cls({key: value for key, value in record.items() if key != "cases"}, lambda: pairs)

    def eval_ids(self) -> Iterator[str]:
        """The ids of the eval split's cases, in id order."""
        return (case_id for case_id, split in self.entries() if split == EVAL)


def split_outline(path: Path) -> SplitOutline:
    """The frozen split (``data/split.json``) as :class:`SplitOutline`. A record up to
    :data:`LARGE_SPLIT` bytes is read whole and checked (:func:`read_split_record`); a
    larger one as the split stage writes it has its other keys read from the file's end
    and its entries scanned a block at a time each time they are asked for."""
    tail = _tail_record(path) if path.stat().st_size > LARGE_SPLIT else None
    if tail is None:  # small, or not as the split stage writes it: read whole and checked
        return SplitOutline.held(read_split_record(path))
    return SplitOutline(tail, lambda: _scan_entries(path), scanned=True)


def _tail_record(path: Path) -> dict[str, Any] | None:
    """The keys after the cases of a record the split stage wrote (``fingerprints``, then
    ``left_out`` when there is one), read from the file's end; None when they are not found so."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        handle.seek(max(size - _BLOCK, 0))
        tail = handle.read()
    at = tail.rfind(_AFTER_CASES)
    try:
        record = orjson.loads(b"{" + tail[at + 1 :]) if at >= 0 else None
    except orjson.JSONDecodeError:
        return None
    fingerprints = record.get("fingerprints") if isinstance(record, dict) else None
    texts = isinstance(fingerprints, dict) and all(isinstance(fingerprints.get(n), str) for n in SPLIT_FINGERPRINTS)
    return record if texts and isinstance(record.get("left_out", {}), dict) else None


def _entry_blocks(path: Path) -> Iterator[tuple[list[str], list[str]]]:
    """The case entries' ids and splits in file order, those of a block of the file at a
    time: the regex finds them in C and the ids decode together, no object per entry."""
    with open(path, "rb") as handle:
        held = b""
        while block := handle.read(_BLOCK):
            held += block
            found = _ENTRY.findall(held)
            if found:
                raw, splits = zip(*found)
                held = held[_last_entry(held, raw[-1]).end() :]
                yield _decoded(raw), b"\n".join(splits).decode().split("\n")


def _last_entry(held: bytes, raw: bytes) -> re.Match:
    """The match of the last whole entry in ``held``, whose raw id is ``raw``."""
    found = _ENTRY.match(held, held.rfind(b'"' + raw + b'": {'))
    if found is None or found[1] != raw:  # the text recurs in a later, cut entry's id
        *_, found = _ENTRY.finditer(held)
    return found


def _decoded(raw: Sequence[bytes]) -> list[str]:
    """JSON string contents as text: joined and decoded at once when none escapes a character."""
    joined = b"\n".join(raw)  # an entry's id holds no raw newline
    if b"\\" not in joined:
        return joined.decode().split("\n")
    return [orjson.loads(b'"' + text + b'"') for text in raw]


def _scan_entries(path: Path) -> Iterator[tuple[str, str]]:
    """Each case entry's ``(id, split)`` in file order, read a block at a time."""
    for ids, splits in _entry_blocks(path):
        yield from zip(ids, splits)


class _SplitScan:
    """Each asked case's split, read from the record's entries in id order, a block at a time."""

    def __init__(self, path: Path, fix: str):
        self.path, self.fix = path, fix
        self.blocks = _entry_blocks(path)
        self.ids: list[str] = []  # the entries read and not yet passed, from ``self.at`` on
        self.splits: list[str] = []
        self.at = 0

    def _cover(self, last: str) -> None:
        """Read blocks until the held entries reach ``last`` (or the file ends)."""
        while len(self.ids) == self.at or self.ids[-1] < last:
            block = next(self.blocks, None)
            if block is None:
                return
            self.ids, self.splits = self.ids[self.at :] + block[0], self.splits[self.at :] + block[1]
            self.at = 0

    def __call__(self, ids: Sequence[str]) -> dict[str, str]:
        if not ids:
            return {}
        self._cover(ids[-1])
        end = self.at + len(ids)
        if self.ids[self.at : end] == list(ids):  # every entry asked for, in a row: the usual case
            found = dict(zip(ids, self.splits[self.at : end]))
            self.at = end
            return found
        return self._walk(ids)

    def _walk(self, ids: Sequence[str]) -> dict[str, str]:
        """Each of ``ids`` matched to its entry, passing entries nobody asks for."""
        found: dict[str, str] = {}
        for case_id in ids:
            while self.at < len(self.ids) and self.ids[self.at] < case_id:
                self.at += 1
            if self.at == len(self.ids) or self.ids[self.at] != case_id:
                problem = f"case {case_id} has no split entry (or the entries are not in id order)"
                raise InputError([Problem(str(self.path), problem, self.fix)])
            found[case_id] = self.splits[self.at]
            self.at += 1
        return found
