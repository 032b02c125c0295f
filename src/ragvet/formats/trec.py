"""TREC topics, qrels and documents as ragvet's corpus and cases (:mod:`ragvet.formats.imported`)."""

from __future__ import annotations

import bisect
import re
from collections import Counter
from pathlib import Path

from ragvet.errors import Problem, raise_if
from ragvet.formats.imported import (
    WHITESPACE,
    Imported,
    Judgements,
    Row,
    doc_row,
    document_cases,
    jsonl_objects,
    judge,
    no_docs_problem,
    numbered_lines,
    question_text,
    read_text_file,
    scalar_metadata,
    sorted_imported,
    unique,
)
from ragvet.text.values import as_id

# A tag holds no ``<``, and neither part gives back what it matched (possessive): an
# unclosed ``<a`` fails at the next ``<`` instead of rescanning the rest of its block,
# so 200 KB of them parse in one pass, not in minutes. Such an ``<a`` stays text.
_TAG = re.compile(r"<(/?)([A-Za-z]++)[^<>]*+>")
_PREFIXES = {"num": "number:", "title": "topic:", "desc": "description:", "narr": "narrative:"}
TOPIC_FIELDS = ("title", "desc")


def _sgml_topics(path: Path, text: str, field_name: str, problems: list[Problem]) -> list[tuple[str, str | None, str]]:
    """``(number, question or None, file:line)`` for each ``<top> ... </top>`` block."""
    starts = [0] + [match.end() for match in re.finditer("\n", text)]

    def line_at(offset: int) -> int:
        return bisect.bisect_right(starts, offset)

    topics = []
    for block in re.finditer(r"<top>(.*?)(?:</top>|(?=<top>)|\Z)", text, re.IGNORECASE | re.DOTALL):
        where = f"{path}:{line_at(block.start())}"
        body = block.group(1)
        tags = list(_TAG.finditer(body))
        fields: dict[str, str] = {}
        for index, tag in enumerate(tags):
            if tag.group(1):  # a closing tag
                continue
            name = tag.group(2).lower()
            end = tags[index + 1].start() if index + 1 < len(tags) else len(body)
            value = WHITESPACE.sub(" ", body[tag.end() : end]).strip()
            prefix = _PREFIXES.get(name)
            if prefix and value.lower().startswith(prefix):
                value = value[len(prefix) :].strip()
            fields.setdefault(name, value)
        number = fields.get("num")
        if not number:
            problems.append(Problem(where, "a <top> block has no <num>", "give every topic `<num> Number: 401`"))
            continue
        topics.append((number, fields.get(field_name) or None, where))
    if not topics and not problems:
        problems.append(Problem(str(path), "no <top> blocks found", "write topics as <top> <num> ... </top>"))
    return topics


def _tsv_topics(path: Path, text: str, problems: list[Problem]) -> list[tuple[str, str | None, str]]:
    topics = []
    for number, line in numbered_lines(text):
        where = f"{path}:{number}"
        fields = line.split("\t")
        if len(fields) != 2:
            problems.append(
                Problem(
                    where,
                    f"a topics line has 2 tab-separated columns (qid, text), this one has {len(fields)}",
                    "write `qid<TAB>question` on each line",
                )
            )
            continue
        qid, question = fields[0].strip(), question_text(fields[1])
        if not qid:
            problems.append(Problem(where, "the qid is empty", "write `qid<TAB>question` on each line"))
            continue
        topics.append((qid, question, where))
    return topics


def read_topics(
    path: str | Path, field_name: str = "title"
) -> tuple[dict[str, tuple[str, str]], set[str], Counter, list[Problem]]:
    """TREC topics, SGML-ish (``<top> <num> Number: 401 <title> ... <desc> ...
    </top>``, closing tags optional) or tab-separated ``qid<TAB>text``.

    Returns ``({qid: (question, file:line)}, every topic id, skipped, problems)``;
    the question is ``field_name`` (``title`` or ``desc``) with whitespace
    normalised. A topic without that field is skipped (its judgements are not errors).
    """
    path = Path(path)
    problems: list[Problem] = []
    skipped: Counter = Counter()
    text = read_text_file(path, problems, "topics file")
    if text is None:
        return {}, set(), skipped, problems
    if re.search(r"<top>", text, re.IGNORECASE):
        found = _sgml_topics(path, text, field_name, problems)
    else:
        found = _tsv_topics(path, text, problems)
    topics: dict[str, tuple[str, str]] = {}
    seen: dict[str, str] = {}
    for qid, question, where in found:
        if not unique(seen, qid, where, "topic", problems):
            continue
        if question is None:
            skipped[f"topics with no <{field_name}> text"] += 1
            continue
        topics[qid] = (question, where)
    return topics, set(seen), skipped, problems


def read_trec_docs(path: str | Path) -> tuple[list[Row], dict[str, str], set[str], Counter, list[Problem]]:
    """Docs as JSONL (``{doc_id | docno | _id, text, title?, metadata?}``) or a
    folder of ``.txt`` files (searched recursively; the doc id is the file's stem).

    Returns ``(rows, sources, ids of docs with no text, skipped, problems)``.
    """
    path = Path(path)
    problems: list[Problem] = []
    skipped: Counter = Counter()
    rows: list[Row] = []
    sources: dict[str, str] = {}
    empty: set[str] = set()
    seen: dict[str, str] = {}
    read = 0
    if path.is_dir():
        files = sorted(
            (p for p in path.rglob("*.txt") if p.is_file() and not p.name.startswith(".")),
            key=lambda p: p.relative_to(path).as_posix(),
        )
        for file in files:
            where = f"{file}:1"
            text = read_text_file(file, problems, "doc")
            read += 1
            if text is None or not unique(seen, file.stem, where, "doc id", problems):
                continue
            if not text.strip():
                empty.add(file.stem)
                continue
            rows.append(doc_row(file.stem, text, None))
            sources[file.stem] = where
    else:
        for where, row in jsonl_objects(path, problems, "docs file", '{"doc_id": ..., "text": ...}'):
            read += 1
            keys = [key for key in ("doc_id", "docno", "_id") if key in row]
            if len(keys) != 1:
                problems.append(
                    Problem(
                        where,
                        "a doc line needs exactly one id field: doc_id, docno or _id"
                        + (f" (it has {', '.join(keys)})" if keys else ""),
                        'write {"doc_id": ..., "text": ...}',
                    )
                )
                continue
            doc_id = as_id(row[keys[0]])
            text, title = row.get("text"), row.get("title")
            if doc_id is None:
                problems.append(Problem(where, f"empty {keys[0]} (got {row[keys[0]]!r})", "give every doc an id"))
                continue
            if not unique(seen, doc_id, where, "doc id", problems):
                continue
            if (text is not None and not isinstance(text, str)) or (title is not None and not isinstance(title, str)):
                problems.append(Problem(where, f"doc {doc_id!r}: text and title must be text", "fix the line"))
                continue
            if not text or not text.strip():
                empty.add(doc_id)
                continue
            rows.append(doc_row(doc_id, text, title or None, scalar_metadata(row.get("metadata"), skipped)))
            sources[doc_id] = where
    skipped["documents with no text"] += len(empty)
    if not rows and not problems:
        problems.append(no_docs_problem(path, read))
    return rows, sources, empty, skipped, problems


def import_trec(
    topics: str | Path,
    qrels: str | Path,
    docs: str | Path,
    field_name: str = "title",
    min_grade: int = 1,
    abstain_unjudged: bool = False,
) -> Imported:
    """TREC topics (:func:`read_topics`), qrels ``qid iter docno rel`` (whitespace
    separated, four columns) and docs (:func:`read_trec_docs`).

    Judged docs with ``rel >= min_grade`` (and above 0) become ``{doc}`` evidence;
    every judged doc, of any grade, is kept in the case's ``judged`` set. A topic
    with no relevant doc becomes an abstention case with ``abstain_unjudged``, and
    is skipped without it.
    """
    if field_name not in TOPIC_FIELDS:
        raise_if([Problem("--field", f"unknown topic field {field_name!r}", "use --field title or --field desc")])
    qrels = Path(qrels)
    skipped: Counter = Counter()
    found, topic_ids, topic_skips, problems = read_topics(topics, field_name)
    skipped.update(topic_skips)
    rows, doc_sources, empty, doc_skips, doc_problems = read_trec_docs(docs)
    problems += doc_problems
    skipped.update(doc_skips)
    judgements = Judgements()
    text = read_text_file(qrels, problems, "qrels file")
    if text is not None:
        known = (topic_ids, set(doc_sources), empty)
        for number, line in numbered_lines(text):
            where = f"{qrels}:{number}"
            fields = line.split()
            if len(fields) != 4:
                problems.append(
                    Problem(
                        where,
                        f"a TREC qrels line has 4 columns (qid iter docno rel), this one has {len(fields)}",
                        "write `qid 0 docno grade`, separated by whitespace",
                    )
                )
                continue
            qid, _, doc_id, grade = fields
            judge(judgements, qid, doc_id, grade, where, known, problems, skipped)
    raise_if(problems)
    cases, case_sources = document_cases(found, judgements, min_grade, abstain_unjudged, skipped)
    return sorted_imported(rows, cases, doc_sources, case_sources, skipped)
