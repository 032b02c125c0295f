"""Loading and validating the corpus: a folder of ``*.jsonl`` lines and ``*.md`` / ``*.txt``
files with optional YAML front matter.

Every loader collects *all* problems, each naming ``file:line``, what is wrong and how to
fix it, so that the validate stage can report them at once.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ragvet.errors import Problem, raise_if
from ragvet.schema import Doc, Scalar
from ragvet.storage.files import decode_utf8, link_out_of_project, text_lines
from ragvet.text.located_yaml import load_located_yaml
from ragvet.text.nesting import loads
from ragvet.text.values import (
    ID_FLAW_FIX,
    SURROGATE_FIX,
    as_id,
    did_you_mean,
    has_text,
    id_flaw,
    id_problem,
    is_number,
    is_scalar,
    kind_of,
    lone_surrogate,
    nfc,
    spelling_note,
    surrogate_what,
)

CORPUS_SUFFIXES = (".jsonl", ".md", ".txt")
DOC_KEYS = ("doc_id", "text", "title", "metadata")
_FRONT_OPEN = re.compile(r"---[ \t]*\r?\n")
_FRONT_CLOSE = re.compile(r"^---[ \t]*(?:\r?\n|\Z)", re.MULTILINE)


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
    found = lone_surrogate(row)
    if found is not None:
        problems.append(Problem(where, surrogate_what(found), SURROGATE_FIX))
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
        what = id_problem(row.get("doc_id"), "doc_id")
        problems.append(Problem(where, what, "give every line a unique, non-empty doc_id as text"))
    elif id_flaw(doc_id):
        problems.append(Problem(where, f"doc_id {doc_id!r} {id_flaw(doc_id)}", ID_FLAW_FIX))
    text = row.get("text")
    if not has_text(text):
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
    if id_flaw(doc_id):
        problems.append(Problem(where, f"doc id {doc_id!r} (the file's path) {id_flaw(doc_id)}", ID_FLAW_FIX))
        return None
    text, problem = decode_utf8(path.read_bytes(), where)
    if problem is not None:
        problems.append(problem)
        return None
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
        problems.extend(Problem(*found) for found in yaml_problems)
        if lone_surrogate(value) is not None:
            problems.append(Problem(where, surrogate_what(lone_surrogate(value)), SURROGATE_FIX))
        elif value is not None and not isinstance(value, dict):
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
    if not has_text(body):
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
    found = []
    for number, line in text_lines(path, problems):
        where = f"{path}:{number}"
        try:
            row = loads(line)
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
        outside = link_out_of_project(path, corpus_dir)
        if outside is not None:
            problems.append(outside)
            continue
        if path.suffix.lower() == ".jsonl":
            found.extend(_jsonl_docs(path, problems))
        else:
            doc_id = path.relative_to(corpus_dir).with_suffix("").as_posix()
            doc = _text_doc(path, doc_id, problems)
            if doc is not None:
                found.append((doc, str(path)))
    first_seen: dict[str, tuple[str, str]] = {}
    docs: list[Doc] = []
    for doc, where in found:
        if nfc(doc.doc_id) in first_seen:
            other, other_where = first_seen[nfc(doc.doc_id)]
            problems.append(
                Problem(
                    where,
                    f"duplicate doc id {doc.doc_id!r}: also defined at {other_where}{spelling_note(doc.doc_id, other)}",
                    "make doc ids unique: rename one file or change one doc_id",
                )
            )
            continue
        first_seen[nfc(doc.doc_id)] = (doc.doc_id, where)
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
