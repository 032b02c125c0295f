"""The data model shared by every stage, and the validation of inputs and params.

Validated files written by the ``validate`` stage are the only way later stages
see the user's corpus and cases, so every quote is already resolved to character
offsets and every later stage can trust ids, spans and params.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stages.errors import Problem, raise_if
from stages.files import dumps_line

Scalar = str | int | float | bool | None


@dataclass(frozen=True)
class Doc:
    """One corpus document. ``text`` is kept exactly as given: offsets point into it."""

    doc_id: str
    text: str
    title: str | None = None
    metadata: dict[str, Scalar] = field(default_factory=dict)

    def to_row(self) -> dict[str, Any]:
        return {"doc_id": self.doc_id, "text": self.text, "title": self.title, "metadata": self.metadata}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Doc:
        return cls(row["doc_id"], row["text"], row.get("title"), dict(row.get("metadata") or {}))


@dataclass(frozen=True)
class Chunk:
    """A chunk of one document under one chunking: ``text == doc.text[start:end]``."""

    chunk_id: str
    doc_id: str
    ordinal: int
    start: int
    end: int
    text: str
    metadata: dict[str, Scalar] = field(default_factory=dict)

    def to_row(self) -> dict[str, Any]:
        return {
            "chunk_id": self.chunk_id,
            "doc_id": self.doc_id,
            "ordinal": self.ordinal,
            "start": self.start,
            "end": self.end,
            "text": self.text,
            "metadata": self.metadata,
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Chunk:
        return cls(
            row["chunk_id"],
            row["doc_id"],
            row["ordinal"],
            row["start"],
            row["end"],
            row["text"],
            dict(row.get("metadata") or {}),
        )


def chunk_id_for(doc_id: str, ordinal: int) -> str:
    """Chunk ids are ``<doc_id>#<ordinal>``: stable for the same corpus and params."""
    return f"{doc_id}#{ordinal}"


@dataclass(frozen=True, order=True)
class EvidenceUnit:
    """Resolved evidence: a character span ``[start, end)`` of a doc, or the whole doc,
    or a choice between several of those.

    Every single-target input form (quote, offsets, doc, chunk+chunking) resolves to
    one span or doc, which is what lets labels survive a chunking change. The
    ``{any: [ref, ...]}`` form resolves to one unit with ``alternatives``: two or
    more distinct single targets, sorted, any one of which satisfies the unit (the
    answer spans of several annotators, say). Build it with :meth:`any_of`. Its own
    ``doc_id``, ``start`` and ``end`` repeat its first alternative's, so that units
    still sort and group by doc; read :attr:`targets` and :attr:`doc_ids` for all of it.
    """

    doc_id: str
    start: int | None = None
    end: int | None = None
    alternatives: tuple[EvidenceUnit, ...] = ()

    @classmethod
    def any_of(cls, units: Iterable[EvidenceUnit]) -> EvidenceUnit:
        """One unit satisfied by any of ``units``: nested choices are flattened,
        identical targets kept once and sorted, and a single target is returned as is."""
        targets = sorted({target for unit in units for target in unit.targets}, key=_target_key)
        if not targets:
            raise ValueError("an `any` unit needs at least one alternative")
        if len(targets) == 1:
            return targets[0]
        first = targets[0]
        return cls(first.doc_id, first.start, first.end, tuple(targets))

    @property
    def targets(self) -> tuple[EvidenceUnit, ...]:
        """The single-target units that can satisfy this one: its alternatives, or itself."""
        return self.alternatives or (self,)

    @property
    def doc_ids(self) -> tuple[str, ...]:
        """Every doc the unit points into, in target order, each once."""
        return tuple(dict.fromkeys(target.doc_id for target in self.targets))

    @property
    def doc_level(self) -> bool:
        return not self.alternatives and self.start is None

    def label(self) -> str:
        """Short human form used in per-case tables: ``doc`` or ``doc[start:end]``;
        alternatives are joined with `` | ``."""
        if self.alternatives:
            return " | ".join(target.label() for target in self.alternatives)
        return self.doc_id if self.doc_level else f"{self.doc_id}[{self.start}:{self.end}]"

    def to_row(self) -> dict[str, Any]:
        if self.alternatives:
            return {"any": [target.to_row() for target in self.alternatives]}
        if self.doc_level:
            return {"doc": self.doc_id}
        return {"doc": self.doc_id, "start": self.start, "end": self.end}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> EvidenceUnit:
        if "any" in row:
            return cls.any_of(cls.from_row(alternative) for alternative in row["any"])
        return cls(row["doc"], row.get("start"), row.get("end"))


def _target_key(unit: EvidenceUnit) -> tuple[str, int, int]:
    return (unit.doc_id, -1 if unit.start is None else unit.start, -1 if unit.end is None else unit.end)


@dataclass(frozen=True)
class Claim:
    """One claim of a candidate answer, with its human-verified supporting evidence."""

    text: str
    evidence: tuple[EvidenceUnit, ...]

    def to_row(self) -> dict[str, Any]:
        return {"text": self.text, "evidence": [unit.to_row() for unit in self.evidence]}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Claim:
        return cls(row["text"], tuple(EvidenceUnit.from_row(u) for u in row["evidence"]))


@dataclass(frozen=True)
class Case:
    """One evaluation question. ``answerable=False`` marks an abstention case."""

    case_id: str
    question: str
    answerable: bool = True
    evidence: tuple[EvidenceUnit, ...] = ()
    claims: tuple[Claim, ...] = ()
    tags: dict[str, str] = field(default_factory=dict)
    filter: dict[str, Any] = field(default_factory=dict)

    def to_row(self) -> dict[str, Any]:
        return {
            "id": self.case_id,
            "question": self.question,
            "answerable": self.answerable,
            "evidence": [unit.to_row() for unit in self.evidence],
            "claims": [claim.to_row() for claim in self.claims],
            "tags": self.tags,
            "filter": self.filter,
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Case:
        return cls(
            row["id"],
            row["question"],
            row.get("answerable", True),
            tuple(EvidenceUnit.from_row(u) for u in row.get("evidence", [])),
            tuple(Claim.from_row(c) for c in row.get("claims", [])),
            dict(row.get("tags") or {}),
            dict(row.get("filter") or {}),
        )


def matches_filter(metadata: dict[str, Scalar], flt: dict[str, Any]) -> bool:
    """A metadata filter is a conjunction of ``key: value`` (equality) or
    ``key: [v1, v2]`` (any of). A doc without the key never matches, so a filter
    cannot silently widen to docs nobody labelled with it. Values compare as
    strings, because YAML reads ``2026`` as int and JSON front matter may quote it.
    """
    for key, wanted in flt.items():
        if key not in metadata:
            return False
        options = wanted if isinstance(wanted, list) else [wanted]
        if str(metadata[key]) not in {str(option) for option in options}:
            return False
    return True


@dataclass(frozen=True)
class ProjectedUnit:
    """An evidence unit seen through one chunking.

    ``pieces`` maps each chunk that overlaps the unit to the overlap's character
    interval in doc coordinates. For a doc-level unit every chunk of the doc is a
    piece and only the keys matter. ``length`` is the span's length (0 for
    doc-level). Overlapping chunks share characters, so coverage is the *union*
    of pieces, never their sum. A unit with alternatives (``{any: [...]}``) has no
    pieces of its own: ``alternatives`` holds each alternative's projection, and
    the unit is available when any one of them is.
    """

    label: str
    doc_level: bool
    length: int
    pieces: dict[str, tuple[int, int]]
    alternatives: tuple[ProjectedUnit, ...] = ()

    @property
    def chunk_ids(self) -> set[str]:
        """Every chunk overlapping the unit, or any of its alternatives."""
        ids = set(self.pieces)
        for alternative in self.alternatives:
            ids |= alternative.chunk_ids
        return ids


# ---------------------------------------------------------------------------
# Loading and validating inputs. Every loader collects *all* problems, each
# naming ``file:line (case id)``, what is wrong and how to fix it.
# ---------------------------------------------------------------------------

CORPUS_SUFFIXES = (".jsonl", ".md", ".txt")
DOC_KEYS = ("doc_id", "text", "title", "metadata")
CASE_KEYS = ("id", "question", "answerable", "evidence", "claims", "tags", "filter")
CLAIM_KEYS = ("text", "evidence")
CASE_SUFFIXES = (".yaml", ".yml", ".jsonl")
PARAMS_SECTIONS = ("chunking", "retrievers", "configs", "ks", "depth", "split", "evidence", "slices", "gate")
SPLIT_KEYS = ("salt", "eval_fraction")
EVIDENCE_KEYS = ("span_coverage",)
GATE_KEYS = (
    "configs",
    "metrics",
    "max_drop",
    "min_slice_cases",
    "slice_max_drop",
    "slice_metric",
    "require_significance",
    "bootstrap",
)
BOOTSTRAP_KEYS = ("resamples", "seed", "confidence")
# Names become DVC foreach keys (``retrieve@<config>``) and file names (``metrics/<config>.json``).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
_FRONT_OPEN = re.compile(r"---[ \t]*\r?\n")
_FRONT_CLOSE = re.compile(r"^---[ \t]*(?:\r?\n|\Z)", re.MULTILINE)


def is_int(value: Any) -> bool:
    """YAML ``true`` is a bool, which Python counts as an int: it is not one here."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_positive_int(value: Any) -> bool:
    return is_int(value) and value > 0


def is_scalar(value: Any) -> bool:
    """One text, number or true/false value; NaN and infinities are not (JSON has none)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, (str, int, bool))


def as_id(value: Any) -> str | None:
    """An id written as a number (``id: 42``) is read as its text; other types are not ids."""
    if isinstance(value, str):
        return value if value.strip() else None
    return str(value) if is_int(value) else None


def kind_of(value: Any) -> str:
    """What a value is, in the words of a YAML or JSON user (for "got ..." messages)."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def did_you_mean(key: Any, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(str(key), list(options), n=1)
    return f"did you mean `{close[0]}`? " if close else ""


# --- YAML that remembers line numbers ---------------------------------------------


class LocatedDict(dict):
    """A YAML mapping that knows its 1-based ``line`` and each key's line."""

    line: int = 0
    key_lines: dict[Any, int]


class LocatedList(list):
    """A YAML sequence that knows its 1-based ``line`` and each item's line."""

    line: int = 0
    item_lines: list[int]


def _located_loader() -> type:
    """A SafeLoader that records lines and duplicate keys and leaves dates as text.

    PyYAML keeps the last of two equal keys without a word, and turns
    ``2026-01-05`` into a ``date``, which is not a JSON scalar: both would
    silently change what the user wrote.
    """
    import yaml

    class Loader(yaml.SafeLoader):
        def __init__(self, stream: str):
            super().__init__(stream)
            self.duplicates: list[tuple[Any, int, int]] = []

    Loader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_map(loader: Any, node: Any):
        data = LocatedDict()
        data.line = node.start_mark.line + 1
        data.key_lines = {}
        yield data
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = loader.construct_object(key_node, deep=True)
            try:
                if key in data.key_lines:
                    loader.duplicates.append((key, data.key_lines[key], key_node.start_mark.line + 1))
                else:
                    data.key_lines[key] = key_node.start_mark.line + 1
            except TypeError:  # an unhashable key: construct_mapping reports it below
                pass
        data.update(loader.construct_mapping(node))

    def construct_seq(loader: Any, node: Any):
        data = LocatedList()
        data.line = node.start_mark.line + 1
        data.item_lines = [item.start_mark.line + 1 for item in node.value]
        yield data
        data.extend(loader.construct_sequence(node))

    Loader.add_constructor("tag:yaml.org,2002:map", construct_map)
    Loader.add_constructor("tag:yaml.org,2002:seq", construct_seq)
    return Loader


_LOADER: type | None = None


def load_located_yaml(text: str, where: str, line_offset: int = 0) -> tuple[Any, list[Problem]]:
    """Parse YAML text into :class:`LocatedDict`/:class:`LocatedList` values.

    Returns ``(value, problems)``: a syntax error (``value`` is ``None``) or
    duplicate keys. ``where`` is the file name; ``line_offset`` is added to every
    line, for YAML that starts further down a file (front matter).
    """
    import yaml

    global _LOADER
    if _LOADER is None:
        _LOADER = _located_loader()
    loader = _LOADER(text)
    try:
        value = loader.get_single_data()
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f"{where}:{mark.line + 1 + line_offset}" if mark else where
        reason = getattr(err, "problem", None) or str(err)
        context = getattr(err, "context", None)
        what = f"malformed YAML: {reason}" + (f" ({context})" if context else "")
        return None, [Problem(at, what, "fix the YAML syntax on that line (a value with ': ' or '#' needs quotes)")]
    finally:
        loader.dispose()
    problems = [
        Problem(
            f"{where}:{dup + line_offset}",
            f"key `{key}` appears twice in one mapping (first on line "
            f"{first + line_offset}); YAML would silently keep only the last",
            "remove or rename one of them",
        )
        for key, first, dup in loader.duplicates
    ]
    return value, problems


def _line_of(value: Any, key: Any = None, default: int = 0) -> int:
    if isinstance(value, LocatedDict):
        if key is not None and key in value.key_lines:
            return value.key_lines[key]
        return value.line
    return default


# --- corpus -------------------------------------------------------------------------


def _metadata(raw: Any, where: str, problems: list[Problem]) -> dict[str, Scalar]:
    """Metadata must be a mapping of scalars: filters compare them as text."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        problems.append(
            Problem(
                where,
                f"metadata must be a mapping of key: value, got {kind_of(raw)}",
                "write metadata as {key: value, ...} with text, number or true/false values",
            )
        )
        return {}
    metadata: dict[str, Scalar] = {}
    for key, value in raw.items():
        if not is_scalar(value):
            problems.append(
                Problem(
                    where,
                    f"metadata `{key}` must be a single text, number or true/false value, got "
                    f"{kind_of(value)} {value!r}",
                    "flatten it (e.g. `region: emea` rather than a list or mapping); filters match one value per key",
                )
            )
            continue
        metadata[str(key)] = value
    return metadata


def _title(raw: Any, where: str, problems: list[Problem]) -> str | None:
    if raw is None or isinstance(raw, str):
        return raw
    if is_number(raw):
        return str(raw)
    problems.append(Problem(where, f"title must be text, got {kind_of(raw)} {raw!r}", "write the title as text"))
    return None


def _has_text(text: Any) -> bool:
    return isinstance(text, str) and bool(text.strip())


def _jsonl_doc(row: Any, where: str, problems: list[Problem]) -> Doc | None:
    if not isinstance(row, dict):
        problems.append(
            Problem(
                where,
                f"a corpus line must be a JSON object, got {kind_of(row)}",
                'write one {"doc_id": ..., "text": ...} object per line',
            )
        )
        return None
    before = len(problems)
    for key in row:
        if key not in DOC_KEYS:
            problems.append(
                Problem(
                    where,
                    f"unknown key `{key}` in a corpus line",
                    f"{did_you_mean(key, DOC_KEYS)}a line takes {', '.join(DOC_KEYS)}; put other fields under metadata",
                )
            )
    doc_id = as_id(row.get("doc_id"))
    if doc_id is None:
        problems.append(
            Problem(
                where,
                f"missing or empty doc_id (got {row.get('doc_id')!r})",
                "give every line a unique, non-empty doc_id",
            )
        )
    text = row.get("text")
    if not _has_text(text):
        problems.append(
            Problem(
                where,
                f"doc {doc_id or '?'}: missing or empty text (got {text!r})",
                "give the line its document text, or remove the line",
            )
        )
    title = _title(row.get("title"), where, problems)
    metadata = _metadata(row.get("metadata"), where, problems)
    if len(problems) > before:
        return None
    return Doc(doc_id, text, title, metadata)  # type: ignore[arg-type]


def split_front_matter(text: str) -> tuple[str | None, str]:
    """``(front_matter_yaml, body)``: the front matter sits between a first line
    ``---`` and the next ``---`` line, and the body is everything after that line,
    exactly. Without an opening ``---`` the front matter is ``None`` and the body
    is the whole text. Raises ``ValueError`` when the front matter is never closed.
    """
    opening = _FRONT_OPEN.match(text)
    if not opening:
        return None, text
    closing = _FRONT_CLOSE.search(text, opening.end())
    if not closing:
        raise ValueError("front matter opened by `---` on line 1 is never closed")
    return text[opening.end() : closing.start()], text[closing.end() :]


def _text_doc(path: Path, doc_id: str, problems: list[Problem]) -> Doc | None:
    where = str(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        problems.append(Problem(where, f"not UTF-8 text ({err.reason} at byte {err.start})", "save the file as UTF-8"))
        return None
    text = text.removeprefix("\ufeff")  # a byte-order mark is encoding, not text
    try:
        front, body = split_front_matter(text)
    except ValueError as err:
        problems.append(Problem(where, str(err), "close the front matter with a line `---`, or remove the first line"))
        return None
    before = len(problems)
    metadata: dict[str, Scalar] = {}
    title = None
    if front is not None:
        value, yaml_problems = load_located_yaml(front, where, line_offset=1)
        problems.extend(yaml_problems)
        if value is not None and not isinstance(value, dict):
            problems.append(
                Problem(
                    where,
                    f"front matter must be a YAML mapping of key: value, got {kind_of(value)}",
                    "write front matter as `key: value` lines between two `---` lines",
                )
            )
        elif value:
            value = dict(value)
            title = _title(value.pop("title", None), where, problems)
            metadata = _metadata(value, where, problems)
    if not _has_text(body):
        problems.append(
            Problem(
                where,
                f"doc {doc_id}: the text is empty" + (" after the front matter" if front is not None else ""),
                "write the document's text into the file, or delete the file",
            )
        )
    if len(problems) > before:
        return None
    return Doc(doc_id, body, title, metadata)


def _jsonl_docs(path: Path, problems: list[Problem]) -> list[tuple[Doc, str]]:
    try:
        text = path.read_bytes().decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as err:
        problems.append(Problem(str(path), f"not UTF-8 text ({err.reason} at byte {err.start})", "save it as UTF-8"))
        return []
    found = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            problems.append(
                Problem(
                    where,
                    f"malformed JSON: {err.msg} (column {err.colno})",
                    'make each line one JSON object such as {"doc_id": "a", "text": "..."}',
                )
            )
            continue
        doc = _jsonl_doc(row, where, problems)
        if doc is not None:
            found.append((doc, where))
    return found


def collect_corpus(corpus_dir: str | Path) -> tuple[list[Doc], list[Problem]]:
    """Like :func:`load_corpus`, but returns ``(valid_docs, problems)`` instead of raising,
    so cases can still be checked against the docs that did load."""
    corpus_dir = Path(corpus_dir)
    accepted = (
        '*.jsonl files with one {"doc_id", "text", "title"?, "metadata"?} object per line, or '
        "*.md / *.txt files (doc id = path without suffix; optional YAML front matter between `---` lines)"
    )
    if not corpus_dir.is_dir():
        return [], [Problem(str(corpus_dir), "corpus folder not found", f"create it with {accepted}")]
    problems: list[Problem] = []
    found: list[tuple[Doc, str]] = []
    paths = sorted(
        (
            path
            for path in corpus_dir.rglob("*")
            if path.is_file()
            and path.suffix.lower() in CORPUS_SUFFIXES
            and not any(part.startswith(".") for part in path.relative_to(corpus_dir).parts)
        ),
        key=lambda path: path.relative_to(corpus_dir).as_posix(),
    )
    for path in paths:
        if path.suffix.lower() == ".jsonl":
            found.extend(_jsonl_docs(path, problems))
        else:
            doc_id = path.relative_to(corpus_dir).with_suffix("").as_posix()
            doc = _text_doc(path, doc_id, problems)
            if doc is not None:
                found.append((doc, str(path)))
    first_seen: dict[str, str] = {}
    docs: list[Doc] = []
    for doc, where in found:
        if doc.doc_id in first_seen:
            problems.append(
                Problem(
                    where,
                    f"duplicate doc id {doc.doc_id!r}: also defined at {first_seen[doc.doc_id]}",
                    "make doc ids unique: rename one file or change one doc_id",
                )
            )
            continue
        first_seen[doc.doc_id] = where
        docs.append(doc)
    if not docs and not problems:
        problems.append(Problem(str(corpus_dir), "the corpus has no documents", f"add {accepted}"))
    return sorted(docs, key=lambda doc: doc.doc_id), problems


def load_corpus(corpus_dir: str | Path) -> list[Doc]:
    """Every document of the corpus folder, sorted by doc_id.

    ``*.jsonl`` lines are ``{"doc_id", "text", "title"?, "metadata"?}``. ``*.md`` and
    ``*.txt`` files (searched recursively; hidden files and folders are skipped)
    have the doc id of their path relative to the folder, without suffix, with
    ``/``. Their optional YAML front matter becomes metadata, except ``title``,
    which becomes :attr:`Doc.title`; the body after the closing ``---`` line is the
    text, exactly (a leading byte-order mark is dropped). Other files are ignored.
    Raises :class:`InputError` with every problem.
    """
    docs, problems = collect_corpus(corpus_dir)
    raise_if(problems)
    return docs


# --- cases ----------------------------------------------------------------------------


def _read_case_items(path: Path, problems: list[Problem]) -> list[tuple[int, Any]]:
    """``(line, item)`` for each case in a YAML list or a JSONL file."""
    if not path.is_file():
        problems.append(Problem(str(path), "cases file not found", "create it, or fix the path in dvc.yaml"))
        return []
    suffix = path.suffix.lower()
    if suffix not in CASE_SUFFIXES:
        problems.append(
            Problem(
                str(path),
                f"unsupported cases file type {suffix or '(none)'!r}",
                "write the cases as a YAML list (.yaml or .yml) or as JSONL (.jsonl, one case object per line)",
            )
        )
        return []
    try:
        text = path.read_bytes().decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as err:
        problems.append(Problem(str(path), f"not UTF-8 text ({err.reason} at byte {err.start})", "save it as UTF-8"))
        return []
    if suffix == ".jsonl":
        items = []
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                items.append((number, json.loads(line)))
            except json.JSONDecodeError as err:
                problems.append(
                    Problem(
                        f"{path}:{number}",
                        f"malformed JSON: {err.msg} (column {err.colno})",
                        "make each line one JSON case object",
                    )
                )
        if not items and not problems:
            problems.append(Problem(str(path), "the cases file has no cases", "add one JSON case object per line"))
        return items
    data, yaml_problems = load_located_yaml(text, str(path))
    problems.extend(yaml_problems)
    if data is None and yaml_problems:
        return []
    if data is None or (isinstance(data, list) and not data):
        problems.append(Problem(str(path), "the cases file has no cases", "add cases as a YAML list: `- id: ...`"))
        return []
    if not isinstance(data, list):
        hint = " (start each case with `- `)" if isinstance(data, dict) else ""
        problems.append(
            Problem(
                f"{path}:1",
                f"the cases file must be a YAML list of cases, got {kind_of(data)}{hint}",
                "write each case as a list item: `- id: ...`, `  question: ...`",
            )
        )
        return []
    lines = data.item_lines if isinstance(data, LocatedList) else [0] * len(data)
    return list(zip(lines, data))


class _CaseChecker:
    """Checks one case item, collecting problems under ``file:line (case id)``."""

    def __init__(self, path: Path, line: int, item: Any, number: int, problems: list[Problem]):
        self.path, self.line, self.item, self.problems = path, line, item, problems
        self.label = f"case #{number}"

    def at(self, key: Any = None, value: Any = None) -> str:
        """``file:line (case id)`` for the whole case, one of its keys, or one nested value."""
        line = _line_of(value, default=0) or _line_of(self.item, key, self.line) or self.line
        return f"{self.path}:{line} ({self.label})"

    def add(self, what: str, fix: str, key: Any = None, value: Any = None) -> None:
        self.problems.append(Problem(self.at(key, value), what, fix))


def _tags(checker: _CaseChecker, raw: Any) -> dict[str, str]:
    """Tags are a mapping of scalars, kept as text (``year: 2026`` slices as ``"2026"``)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        checker.add(
            f"tags must be a mapping of key: value, got {kind_of(raw)}",
            'write tags as {phrasing: natural, year: "2026"}',
            "tags",
        )
        return {}
    tags: dict[str, str] = {}
    for key, value in raw.items():
        if value is None or not is_scalar(value):
            checker.add(
                f"tag `{key}` must have one text, number or true/false value, got {value!r}",
                "give the tag a single value (slices group cases by it), or remove it",
                "tags",
                raw,
            )
            continue
        tags[str(key)] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return tags


def _filter(checker: _CaseChecker, raw: Any) -> dict[str, Any]:
    """A filter maps metadata keys to one scalar or a non-empty list of scalars."""
    if raw is None:
        return {}
    fix = "write the filter as {doc_type: policy} or {region: [emea, apac]}"
    if not isinstance(raw, dict):
        checker.add(f"filter must be a mapping of metadata key: value, got {kind_of(raw)}", fix, "filter")
        return {}
    flt: dict[str, Any] = {}
    for key, value in raw.items():
        values = value if isinstance(value, list) else [value]
        if not values or any(v is None or not is_scalar(v) for v in values):
            checker.add(
                f"filter `{key}` must be one value or a non-empty list of values, got {value!r}",
                fix,
                "filter",
                raw,
            )
            continue
        flt[str(key)] = list(value) if isinstance(value, list) else value
    return flt


def _references(
    checker: _CaseChecker, raw: Any, key: str, role: str, resolver: Any, container: Any
) -> list[EvidenceUnit]:
    """Resolve a list of evidence references; every problem is collected."""
    if not isinstance(raw, list):
        checker.problems.append(
            Problem(
                f"{checker.path}:{_line_of(container, key, checker.line)} ({checker.label})",
                f"{role} must be a list of references, got {kind_of(raw)}",
                'write it as a list, e.g. evidence: [{doc: leave-policy, quote: "carry up to five days"}]',
            )
        )
        return []
    units: list[EvidenceUnit] = []
    lines = raw.item_lines if isinstance(raw, LocatedList) else []
    for index, ref in enumerate(raw, start=1):
        line = _line_of(ref, default=lines[index - 1] if index <= len(lines) else 0) or _line_of(container, key)
        where = f"{checker.path}:{line or checker.line} ({checker.label})"
        unit, problems = resolver.resolve(ref, where, f"{role} {index}")
        checker.problems.extend(problems)
        if unit is not None:
            units.append(unit)
    return list(dict.fromkeys(units))  # the same span listed twice is one unit, not double weight


def _claims(checker: _CaseChecker, raw: Any, resolver: Any) -> list[Claim]:
    if not isinstance(raw, list):
        checker.add(
            f"claims must be a list, got {kind_of(raw)}",
            "write claims as a list of {text: ..., evidence: [...]}",
            "claims",
        )
        return []
    claims = []
    for index, claim in enumerate(raw, start=1):
        role = f"claim {index}"
        if not isinstance(claim, dict):
            checker.add(
                f"{role} must be a mapping with text and evidence, got {kind_of(claim)}",
                "write it as {text: ..., evidence: [{doc: ..., quote: ...}]}",
                "claims",
                claim,
            )
            continue
        before = len(checker.problems)
        for key in claim:
            if key not in CLAIM_KEYS:
                checker.add(
                    f"{role}: unknown key `{key}`",
                    f"{did_you_mean(key, CLAIM_KEYS)}a claim takes only text and evidence",
                    "claims",
                    claim,
                )
        text = claim.get("text")
        if not _has_text(text):
            checker.add(f"{role} has no text (got {text!r})", "write the claim's text under `text`", "claims", claim)
        evidence = claim.get("evidence")
        units: list[EvidenceUnit] = []
        if evidence is None or evidence == []:
            checker.add(
                f"{role} has no evidence",
                "add the human-verified evidence that supports the claim, or remove the claim",
                "claims",
                claim,
            )
        else:
            units = _references(checker, evidence, "evidence", f"{role} evidence", resolver, claim)
        if len(checker.problems) == before:
            claims.append(Claim(text, tuple(units)))
    return claims


def _check_case(
    checker: _CaseChecker, resolver: Any, docs: dict[str, Doc], filter_hits: dict[str, bool]
) -> Case | None:
    item = checker.item
    if not isinstance(item, dict):
        checker.add(
            f"a case must be a mapping, got {kind_of(item)} {item!r}",
            "write each case as `- id: ...` with `question: ...` and its evidence",
        )
        return None
    before = len(checker.problems)
    case_id = as_id(item.get("id"))
    if case_id is None:
        checker.add(
            f"missing or empty id (got {item.get('id')!r})",
            "give the case a unique, stable id, e.g. `id: leave-carryover`; never reuse an old one",
            "id",
        )
    else:
        checker.label = f"case {case_id}"
    for key in item:
        if key not in CASE_KEYS:
            checker.add(
                f"unknown key `{key}`",
                f"{did_you_mean(key, CASE_KEYS)}a case takes: {', '.join(CASE_KEYS)}",
                key,
            )
    question = item.get("question")
    if not _has_text(question):
        checker.add(f"missing or empty question (got {question!r})", "write the question as text", "question")
    answerable = item.get("answerable", True)
    if not isinstance(answerable, bool):
        checker.add(
            f"answerable must be true or false, got {answerable!r}",
            "remove it for a normal case, or write `answerable: false` for an abstention case",
            "answerable",
        )
        answerable = True
    evidence_raw, claims_raw = item.get("evidence"), item.get("claims")
    evidence: list[EvidenceUnit] = []
    claims: list[Claim] = []
    if not answerable:
        for key, raw in (("evidence", evidence_raw), ("claims", claims_raw)):
            if raw not in (None, []):
                checker.add(
                    f"the case is marked `answerable: false` but has {key}",
                    f"an abstention case has no evidence and no claims: remove `{key}`, or remove "
                    "`answerable: false` if the corpus does answer it",
                    key,
                )
    else:
        if evidence_raw in (None, []):
            checker.add(
                "an answerable case has no evidence",
                "add what complete retrieval must bring back (evidence: [{doc: ..., quote: ...}]), or mark "
                "the case `answerable: false` if the corpus cannot answer it",
                "evidence" if "evidence" in item else None,
            )
        else:
            evidence = _references(checker, evidence_raw, "evidence", "evidence", resolver, item)
        if claims_raw is not None:
            claims = _claims(checker, claims_raw, resolver)
    tags = _tags(checker, item.get("tags"))
    flt = _filter(checker, item.get("filter"))
    if flt:
        _check_filter(checker, flt, evidence, claims, docs, filter_hits)
    if len(checker.problems) > before or case_id is None:
        return None
    return Case(case_id, question, answerable, tuple(evidence), tuple(claims), tags, flt)


def _check_filter(
    checker: _CaseChecker,
    flt: dict[str, Any],
    evidence: list[EvidenceUnit],
    claims: list[Claim],
    docs: dict[str, Doc],
    filter_hits: dict[str, bool],
) -> None:
    """A filter that excludes the case's own evidence makes the case impossible to hit."""
    units = [*evidence, *(u for c in claims for u in c.evidence)]
    doc_ids = dict.fromkeys(doc_id for unit in units for doc_id in unit.doc_ids)
    for doc_id in doc_ids:
        if not matches_filter(docs[doc_id].metadata, flt):
            checker.add(
                f"evidence doc {doc_id!r} does not pass the case's filter {flt} (its metadata is "
                f"{docs[doc_id].metadata}), so no retriever that applies the filter can return it",
                "fix the filter, the doc's metadata or the evidence",
                "filter",
            )
    if not doc_ids:
        key = dumps_line(flt)
        if key not in filter_hits:
            filter_hits[key] = any(matches_filter(doc.metadata, flt) for doc in docs.values())
        if not filter_hits[key]:
            checker.add(
                f"the filter {flt} matches no document of the corpus",
                "check the metadata keys and values against the corpus (a doc without the key never matches)",
                "filter",
            )


def collect_cases(
    path: str | Path, docs: dict[str, Doc], chunkings: dict[str, dict] | None = None
) -> tuple[list[Case], list[Problem]]:
    """Like :func:`load_cases`, but returns ``(valid_cases, problems)`` instead of raising."""
    from stages.evidence import EvidenceResolver

    path = Path(path)
    problems: list[Problem] = []
    items = _read_case_items(path, problems)
    resolver = EvidenceResolver(docs, chunkings if isinstance(chunkings, dict) else {})
    cases: list[Case] = []
    first_seen: dict[str, int] = {}
    filter_hits: dict[str, bool] = {}
    for number, (line, item) in enumerate(items, start=1):
        line = line or _line_of(item)
        checker = _CaseChecker(path, line, item, number, problems)
        case = _check_case(checker, resolver, docs, filter_hits)
        case_id = as_id(item.get("id")) if isinstance(item, dict) else None
        if case_id is None:
            continue
        if case_id in first_seen:
            problems.append(
                Problem(
                    checker.at("id"),
                    f"duplicate case id {case_id!r}: also used at {path}:{first_seen[case_id]}",
                    "give each case its own id; never reuse an id, even of a deleted case",
                )
            )
            continue
        first_seen[case_id] = line
        if case is not None:
            cases.append(case)
    return sorted(cases, key=lambda case: case.case_id), problems


def load_cases(path: str | Path, docs: dict[str, Doc], chunkings: dict[str, dict] | None = None) -> list[Case]:
    """Every case of a YAML list (``.yaml``/``.yml``) or JSONL file, sorted by case_id,
    with every evidence reference resolved to an :class:`EvidenceUnit`.

    ``chunkings`` is ``params["chunking"]`` (for ``{chunk, chunking}`` references).
    Raises :class:`InputError` with every problem, each at ``file:line (case id)``.
    """
    cases, problems = collect_cases(path, docs, chunkings)
    raise_if(problems)
    return cases


# --- params ---------------------------------------------------------------------------


class _ParamsChecker:
    def __init__(self, source: str):
        self.source = source
        self.problems: list[Problem] = []

    def add(self, key: str, what: str, fix: str) -> None:
        self.problems.append(Problem(f"{self.source}: {key}", what, fix))

    def mapping(self, value: Any, key: str, example: str, non_empty: bool = True) -> dict | None:
        if not isinstance(value, dict) or (non_empty and not value):
            got = "an empty mapping" if isinstance(value, dict) else f"{kind_of(value)} {value!r}"
            self.add(key, f"`{key}` must be a non-empty mapping, got {got}", f"write it as {example}")
            return None
        return value

    def keys(self, value: dict, key: str, allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> None:
        for name in required:
            if name not in value:
                self.add(f"{key}.{name}", f"`{key}.{name}` is missing", f"add `{name}` under `{key}`")
        for name in value:
            if name not in allowed:
                self.add(
                    f"{key}.{name}",
                    f"unknown key `{name}` in `{key}`",
                    f"{did_you_mean(name, allowed)}`{key}` takes: {', '.join(allowed)}",
                )

    def name(self, key: str, name: Any, kind: str) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            self.add(
                key,
                f"{kind} name {name!r} cannot be used in stage names and file paths",
                "use letters, digits, '.', '_' and '-' only, starting with a letter or digit",
            )

    def number(self, key: str, value: Any, low: float, high: float, low_open: bool, high_open: bool, fix: str) -> None:
        ok = (
            is_number(value)
            and (low < value if low_open else low <= value)
            and (value < high if high_open else value <= high)
        )
        if not ok:
            interval = f"{'(' if low_open else '['}{low:g}, {'∞' if math.isinf(high) else f'{high:g}'}" + (
                ")" if high_open or math.isinf(high) else "]"
            )
            self.add(key, f"`{key}` must be a number in {interval}, got {value!r}", fix)

    def integer(self, key: str, value: Any, low: int, fix: str) -> bool:
        if not is_int(value) or value < low:
            self.add(key, f"`{key}` must be an integer ≥ {low}, got {value!r}", fix)
            return False
        return True


def _check_configs(check: _ParamsChecker, params: dict) -> None:
    configs = check.mapping(params.get("configs"), "configs", "{my-config: {chunking: fixed-300, retriever: bm25}}")
    if configs is None:
        return
    defined = {
        kind: sorted(map(str, params[kind])) if isinstance(params.get(kind), dict) else []
        for kind in ("chunking", "retrievers")
    }
    for name, config in configs.items():
        key = f"configs.{name}"
        check.name(key, name, "config")
        if not isinstance(config, dict):
            check.add(
                key, f"config {name!r} must be a mapping, got {config!r}", "write it as {chunking: ..., retriever: ...}"
            )
            continue
        check.keys(config, key, ("chunking", "retriever"), ("chunking", "retriever"))
        for field_name, section in (("chunking", "chunking"), ("retriever", "retrievers")):
            if field_name not in config:
                continue
            value = config[field_name]
            if not isinstance(value, str) or value not in defined[section]:
                check.add(
                    f"{key}.{field_name}",
                    f"config {name!r} names unknown {field_name} {value!r}",
                    f"use one defined under `{section}`: {', '.join(defined[section]) or '(none defined)'}",
                )


def _check_ks(check: _ParamsChecker, params: dict) -> list[int] | None:
    """Valid ks, or ``None`` when they are not (so dependent checks stay quiet)."""
    ks = params.get("ks")
    if not isinstance(ks, list) or not ks:
        check.add("ks", f"`ks` must be a non-empty list of integers > 0, got {ks!r}", "write e.g. ks: [1, 3, 5, 10]")
        return None
    ok = True
    for index, k in enumerate(ks):
        if not is_int(k) or k <= 0:
            check.add(
                f"ks[{index}]",
                f"k must be an integer > 0, got {k!r}",
                "use whole numbers of retrieved chunks ≥ 1, e.g. ks: [1, 3, 5, 10]",
            )
            ok = False
    if ok and len(set(ks)) != len(ks):
        check.add("ks", f"`ks` lists a k more than once: {ks}", "list each k once")
    return sorted(set(ks)) if ok else None


def _check_split_evidence_slices(check: _ParamsChecker, params: dict) -> None:
    split = (
        check.mapping(params["split"], "split", "{salt: my-eval-v1, eval_fraction: 0.7}") if "split" in params else None
    )
    if split is not None:
        check.keys(split, "split", SPLIT_KEYS, SPLIT_KEYS)
        if "salt" in split and not _has_text(split["salt"]):
            check.add(
                "split.salt",
                f"`split.salt` must be non-empty text, got {split['salt']!r}",
                "set a salt such as `salt: my-eval-v1` (changing it reshuffles every case)",
            )
        if "eval_fraction" in split:
            check.number(
                "split.eval_fraction",
                split["eval_fraction"],
                0,
                1,
                True,
                False,  # 1.0 puts every case in eval, which small collections want
                "set the share of cases in the eval split, e.g. eval_fraction: 0.7",
            )
    evidence = check.mapping(params["evidence"], "evidence", "{span_coverage: 1.0}") if "evidence" in params else None
    if evidence is not None:
        check.keys(evidence, "evidence", EVIDENCE_KEYS, EVIDENCE_KEYS)
        if "span_coverage" in evidence:
            check.number(
                "evidence.span_coverage",
                evidence["span_coverage"],
                0,
                1,
                False,
                False,
                "set the share of a span's characters the top-k must cover: 1.0 = all, 0 = any overlap",
            )
    if "slices" not in params:
        return
    slices = params["slices"]
    if not isinstance(slices, list) or not all(_has_text(s) for s in slices):
        check.add(
            "slices",
            f"`slices` must be a list of tag names, got {slices!r}",
            "list the case tags to slice by, e.g. slices: [phrasing, doc_type], or slices: []",
        )
    elif len(set(slices)) != len(slices):
        check.add("slices", f"`slices` lists a tag more than once: {slices}", "list each tag once")


def _check_gate(check: _ParamsChecker, params: dict, ks: list[int] | None) -> None:
    from stages.metrics import metric_problems

    gate = check.mapping(params.get("gate"), "gate", "a mapping with configs, metrics, max_drop, ...")
    if gate is None:
        return
    check.keys(gate, "gate", GATE_KEYS, GATE_KEYS)
    if "configs" in gate:
        configs = gate["configs"]
        defined = sorted(map(str, params["configs"])) if isinstance(params.get("configs"), dict) else []
        if not isinstance(configs, list) or not configs:
            check.add(
                "gate.configs",
                f"`gate.configs` must be a non-empty list of config names, got {configs!r}",
                f"list the configurations to gate, from: {', '.join(defined) or '(none defined)'}",
            )
        else:
            for name in configs:
                if name not in defined:
                    check.add(
                        "gate.configs",
                        f"gate names unknown config {name!r}",
                        f"use one defined under `configs`: {', '.join(defined) or '(none defined)'}",
                    )
    if "metrics" in gate:
        metrics = gate["metrics"]
        if not isinstance(metrics, list) or not metrics or not all(isinstance(m, str) for m in metrics):
            check.add(
                "gate.metrics",
                f"`gate.metrics` must be a non-empty list of metric names, got {metrics!r}",
                "list the guarded metrics, e.g. [recall@5, evidence_recall@5, mrr]",
            )
        else:
            check.problems.extend(metric_problems(metrics, ks, f"{check.source}: gate.metrics", gated=True))
    if "slice_metric" in gate:
        if not isinstance(gate["slice_metric"], str):
            check.add(
                "gate.slice_metric",
                f"`gate.slice_metric` must be a metric name, got {gate['slice_metric']!r}",
                "set e.g. slice_metric: evidence_recall@5",
            )
        else:
            check.problems.extend(
                metric_problems([gate["slice_metric"]], ks, f"{check.source}: gate.slice_metric", gated=True)
            )
    for key in ("max_drop", "slice_max_drop"):
        if key in gate:
            check.number(
                f"gate.{key}", gate[key], 0, math.inf, False, True, f"set the largest allowed drop, e.g. {key}: 0.02"
            )
    if "min_slice_cases" in gate:
        check.integer("gate.min_slice_cases", gate["min_slice_cases"], 0, "set e.g. min_slice_cases: 8")
    if "require_significance" in gate and not isinstance(gate["require_significance"], bool):
        check.add(
            "gate.require_significance",
            f"must be true or false, got {gate['require_significance']!r}",
            "set require_significance: false (or true to fail only when the interval excludes 0)",
        )
    if "bootstrap" in gate:
        boot = check.mapping(gate["bootstrap"], "gate.bootstrap", "{resamples: 2000, seed: 1, confidence: 0.95}")
        if boot is not None:
            check.keys(boot, "gate.bootstrap", BOOTSTRAP_KEYS, BOOTSTRAP_KEYS)
            if "resamples" in boot:
                check.integer("gate.bootstrap.resamples", boot["resamples"], 1, "set e.g. resamples: 2000")
            if "seed" in boot:
                check.integer("gate.bootstrap.seed", boot["seed"], 0, "set a fixed seed, e.g. seed: 20261129")
            if "confidence" in boot:
                check.number(
                    "gate.bootstrap.confidence",
                    boot["confidence"],
                    0,
                    1,
                    True,
                    True,
                    "set e.g. confidence: 0.95",
                )


# DVC's run cache hashes a stage with every key named like these left out, at any
# depth, params included (dvc/stage/cache.py: Meta.PARAM_SIZE, Meta.PARAM_NFILES).
# A change to such a param would let `dvc repro` restore stale outputs.
RUN_CACHE_BLIND_KEYS = ("size", "nfiles")


def run_cache_blind_keys(value: Any, path: str = "") -> list[str]:
    """Dotted paths of every key DVC's run cache would not see, sorted."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            found += [where] if key in RUN_CACHE_BLIND_KEYS else []
            found += run_cache_blind_keys(item, where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += run_cache_blind_keys(item, f"{path}[{index}]")
    return sorted(found)


def validate_params(params: dict, source: str = "params.yaml") -> list[Problem]:
    """Every problem with the params, each at ``params.yaml: <key path>``.

    Chunkings and retrievers are checked by their own modules
    (:func:`stages.chunking.chunking_problems`, :func:`stages.retrieval.retriever_problems`),
    metric names by :func:`stages.metrics.metric_problems`. ``depth`` below the
    largest k is a problem: a k beyond the depth would silently repeat the figure at
    ``depth``.
    """
    from stages.chunking import chunking_problems
    from stages.retrieval import retriever_problems

    check = _ParamsChecker(source)
    if not isinstance(params, dict):
        check.add("(top level)", "params must be a YAML mapping", f"write the sections {', '.join(PARAMS_SECTIONS)}")
        return check.problems
    for path in run_cache_blind_keys(params):
        check.add(
            path,
            f"DVC's run cache leaves keys named {' or '.join(RUN_CACHE_BLIND_KEYS)} out of a stage's hash, "
            "so changing this value could bring back stale outputs",
            "rename the key (the fixed chunking's window length is `window`)",
        )
    for key in PARAMS_SECTIONS:
        if key not in params:
            check.add(key, f"section `{key}` is missing", "add it; see the README for every section of params.yaml")
    for key in params:
        if key not in PARAMS_SECTIONS:
            check.add(
                str(key),
                f"unknown section `{key}`",
                f"{did_you_mean(key, PARAMS_SECTIONS)}params.yaml takes: {', '.join(PARAMS_SECTIONS)}",
            )
    if "chunking" in params:
        chunkings = check.mapping(params["chunking"], "chunking", "{fixed-300: {strategy: fixed, ...}}")
        for name, spec in (chunkings or {}).items():
            check.problems.extend(chunking_problems(name, spec, f"{source}: chunking.{name}"))
    if "retrievers" in params:
        retrievers = check.mapping(params["retrievers"], "retrievers", "{bm25: {kind: bm25}}")
        for name, spec in (retrievers or {}).items():
            check.name(f"retrievers.{name}", name, "retriever")
            check.problems.extend(retriever_problems(name, spec, f"{source}: retrievers.{name}", retrievers))
    if "configs" in params:
        _check_configs(check, params)
    ks = _check_ks(check, params) if "ks" in params else None
    if "depth" in params:
        depth = params["depth"]
        valid = check.integer("depth", depth, 1, "set how many chunks each run keeps per case, e.g. depth: 20")
        if valid and ks and depth < ks[-1]:
            check.add(
                "depth",
                f"depth {depth} is below the largest k {ks[-1]}: ranks past {depth} are never "
                f"retrieved, so every @{ks[-1]} figure would silently equal the one at {depth}",
                f"raise depth to at least {ks[-1]}, or drop the larger ks",
            )
    _check_split_evidence_slices(check, params)
    if "gate" in params:
        _check_gate(check, params, ks)
    return check.problems


# --- fingerprints ---------------------------------------------------------------------


def _digest(rows: Iterable[Any]) -> str:
    """sha256 over canonical JSON lines, hex, first 16 characters."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(dumps_line(row).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()[:16]


def corpus_fingerprint(docs: Iterable[Doc]) -> str:
    """A hash of every doc's id, text, title and metadata, independent of reading order."""
    return _digest(doc.to_row() for doc in sorted(docs, key=lambda doc: doc.doc_id))


def _unit_key(unit: EvidenceUnit) -> tuple:
    return tuple(_target_key(target) for target in unit.targets)


def case_fingerprint(case: Case) -> str:
    """A hash of a case's normalised content: resolved spans rather than how they were
    written, and evidence and claims in a canonical order, so re-quoting the same span
    or reordering a list does not count as a label change, while any change to the
    question, spans, claims, tags, filter or answerability does."""
    row = case.to_row()
    row["evidence"] = [unit.to_row() for unit in sorted(case.evidence, key=_unit_key)]
    row["claims"] = sorted(
        (
            {"text": claim.text, "evidence": [u.to_row() for u in sorted(claim.evidence, key=_unit_key)]}
            for claim in case.claims
        ),
        key=dumps_line,
    )
    return _digest([row])
