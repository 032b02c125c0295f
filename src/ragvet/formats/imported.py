"""What every importer builds: corpus rows, case rows and where each came from.

Each importer (:mod:`ragvet.formats.beir`, :mod:`ragvet.formats.trec`,
:mod:`ragvet.formats.squad`) reads the user's files and returns an :class:`Imported`:
corpus rows ``{doc_id, text, title, metadata}``, case rows in the cases input format
``{id, question, evidence, answerable?}``, where each row came from (``file:line``,
so that a later problem names the user's file, not ragvet's), and the items it
skipped, counted by reason. Nothing here writes a file: :mod:`ragvet.interop`
runs the rows through the pipeline's own validator and writes them.

Every importer collects *every* problem before it raises :class:`InputError`,
each at ``file:line``: a line with the wrong number of columns, a judgement of an
unknown query or doc, an empty corpus, a duplicate id, a SQuAD answer whose offset
does not match its text. What is a property of the data rather than a mistake (a
doc with no text, a query nobody judged) is skipped and counted instead.

A document's text is kept exactly, so that offsets point into it; its title goes
to the doc's ``title`` and is not prepended. BM25 therefore indexes the text only.
This module holds the rows, the readers of text and JSONL every format shares, and
the cases made from document-level judgements (BEIR's and TREC's qrels).
"""

from __future__ import annotations

import json
import json.decoder
import json.scanner
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragvet.errors import Problem
from ragvet.text.nesting import loads
from ragvet.text.values import is_scalar, kind_of

Row = dict[str, Any]

WHITESPACE = re.compile(r"\s+")


@dataclass
class Imported:
    """What an importer made of the user's files; rows are sorted by id."""

    docs: list[Row]
    cases: list[Row]
    doc_sources: dict[str, str]
    case_sources: dict[str, str]
    skipped: Counter = field(default_factory=Counter)

    @property
    def counts(self) -> dict[str, int]:
        """documents, cases, evidence units, judged docs, abstention cases and skipped items."""
        return {
            "documents": len(self.docs),
            "cases": len(self.cases),
            "evidence_units": sum(len(case.get("evidence", ())) for case in self.cases),
            "judged_docs": sum(len(case.get("judged") or ()) for case in self.cases),
            "abstention_cases": sum(1 for case in self.cases if case.get("answerable", True) is False),
            "skipped": sum(self.skipped.values()),
        }


def read_text_file(path: Path, problems: list[Problem], what: str) -> str | None:
    """A UTF-8 file's text (a byte-order mark dropped), or ``None`` and a problem."""
    if not path.is_file():
        problems.append(Problem(str(path), f"{what} not found", "check the path"))
        return None
    try:
        return path.read_bytes().decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as err:
        problems.append(Problem(str(path), f"not UTF-8 text ({err.reason} at byte {err.start})", "save it as UTF-8"))
        return None


def numbered_lines(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` for every non-blank line, without its line ending."""
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.rstrip("\r")
        if line.strip():
            yield number, line


def jsonl_objects(path: Path, problems: list[Problem], what: str, example: str) -> list[tuple[str, Row]]:
    """``(file:line, object)`` for each line of a JSONL file; every bad line is a problem."""
    text = read_text_file(path, problems, what)
    if text is None:
        return []
    rows = []
    for number, line in numbered_lines(text):
        where = f"{path}:{number}"
        value = json_object_line(line, where, "a line", example, problems)
        if value is not None:
            rows.append((where, value))
    return rows


def json_object_line(line: str, where: str, what: str, example: str, problems: list[Problem]) -> Row | None:
    """The JSON object one line holds; None, with the problem at ``where``, when the
    line is not JSON or not an object (``what`` names such a line in the message)."""
    try:
        value = loads(line)
    except json.JSONDecodeError as err:
        problems.append(Problem(where, f"malformed JSON: {err.msg} (column {err.colno})", f"write {example}"))
        return None
    if not isinstance(value, dict):
        problems.append(Problem(where, f"{what} must be a JSON object, got {kind_of(value)}", f"write {example}"))
        return None
    return value


def unique(seen: dict[str, str], key: str, where: str, what: str, problems: list[Problem]) -> bool:
    """Record ``key`` at ``where``; a second one is a problem naming both places."""
    if key in seen:
        problems.append(
            Problem(where, f"duplicate {what} {key!r}: already defined at {seen[key]}", f"give each {what} its own id")
        )
        return False
    seen[key] = where
    return True


def no_docs_problem(path: Path, lines: int) -> Problem:
    why = "it has no documents" if not lines else f"none of its {lines} documents has any text"
    return Problem(str(path), f"the corpus is empty: {why}", "point to the file or folder holding the documents")


def sorted_imported(
    docs: list[Row], cases: list[Row], doc_sources: dict, case_sources: dict, skipped: Counter
) -> Imported:
    """The result, rows sorted by id and reasons that never happened left out."""
    return Imported(
        sorted(docs, key=lambda row: row["doc_id"]),
        sorted(cases, key=lambda row: row["id"]),
        doc_sources,
        case_sources,
        Counter({reason: count for reason, count in skipped.items() if count}),
    )


def scalar_metadata(raw: Any, skipped: Counter) -> dict[str, Any]:
    """The single-valued entries of a metadata mapping (filters match one value per
    key); lists and mappings are dropped and counted."""
    if not isinstance(raw, dict):
        return {}
    kept = {str(key): value for key, value in raw.items() if is_scalar(value)}
    skipped["metadata values that are not a single value (dropped)"] += len(raw) - len(kept)
    return kept


def doc_row(doc_id: str, text: str, title: str | None, metadata: dict[str, Any] | None = None) -> Row:
    return {"doc_id": doc_id, "text": text, "title": title, "metadata": metadata or {}}


@dataclass
class Judgements:
    """Graded judgements read from a qrels file: ``grades[qid][doc_id] = grade``.

    ``lost`` holds the grades of docs skipped for having no text, so that a query
    whose only relevant doc is empty is not mistaken for one with no relevant doc.
    """

    grades: dict[str, dict[str, int]] = field(default_factory=dict)
    lost: dict[str, list[int]] = field(default_factory=dict)
    lines: dict[tuple[str, str], str] = field(default_factory=dict)


def judge(
    judgements: Judgements,
    qid: str,
    doc_id: str,
    grade_text: str,
    where: str,
    known: tuple[set[str], set[str], set[str]],
    problems: list[Problem],
    skipped: Counter,
) -> None:
    """Check one qrels line against the queries and docs, and record its grade.

    ``known`` is ``(query ids, doc ids, doc ids skipped for having no text)``.
    """
    queries, docs, empty_docs = known
    try:
        grade = int(grade_text)
    except ValueError:
        problems.append(
            Problem(where, f"relevance {grade_text!r} is not an integer", "write the grade as 0, 1, 2, ...")
        )
        return
    ok = True
    if qid not in queries:
        problems.append(
            Problem(where, f"judgement for unknown query {qid!r}", "add the query, or remove the line from the qrels")
        )
        ok = False
    if doc_id not in docs and doc_id not in empty_docs:
        problems.append(
            Problem(where, f"judgement for unknown doc {doc_id!r}", "add the doc to the corpus, or remove the line")
        )
        ok = False
    if (qid, doc_id) in judgements.lines:
        problems.append(
            Problem(
                where,
                f"query {qid!r} and doc {doc_id!r} are judged twice (first at {judgements.lines[qid, doc_id]})",
                "keep one judgement per query and doc",
            )
        )
        ok = False
    if not ok:
        return
    judgements.lines[qid, doc_id] = where
    if doc_id in empty_docs:
        skipped["judgements of a document skipped for having no text"] += 1
        judgements.lost.setdefault(qid, []).append(grade)
        return
    judgements.grades.setdefault(qid, {})[doc_id] = grade


def document_cases(
    queries: dict[str, tuple[str, str]],
    judgements: Judgements,
    min_grade: int,
    abstain_unjudged: bool,
    skipped: Counter,
    elsewhere: dict[str, str] | None = None,
) -> tuple[list[Row], dict[str, str]]:
    """Cases with ``{doc}`` evidence from graded judgements.

    ``queries`` maps a query id to ``(question, file:line)``. A doc is relevant
    when its grade is at least ``min_grade`` and above 0. Every judged doc, of any
    grade (below ``min_grade``, 0, negative), goes to the case's ``judged`` set,
    for ``judged@k``; a query with no judgement here has none. A query with no relevant
    doc becomes an abstention case only with ``abstain_unjudged``; otherwise it is
    skipped and counted. ``elsewhere`` maps the queries judged only in another
    split to that split's file: they belong to it and are always skipped.
    """
    cases: list[Row] = []
    sources: dict[str, str] = {}
    threshold = max(min_grade, 1)
    judged_here = {qid for qid, _ in judgements.lines}
    for qid in sorted(queries):
        question, where = queries[qid]
        grades = judgements.grades.get(qid, {})
        relevant = sorted(doc_id for doc_id, grade in grades.items() if grade >= threshold)
        judged = {"judged": dict(sorted(grades.items()))} if grades else {}
        if relevant:
            evidence = [{"doc": doc_id} for doc_id in relevant]
            cases.append({"id": qid, "question": question, "evidence": evidence, **judged})
        elif elsewhere and qid in elsewhere and qid not in judged_here:
            skipped[f"queries judged only in another split ({elsewhere[qid]})"] += 1
            continue
        elif any(grade >= threshold for grade in judgements.lost.get(qid, ())):
            skipped["queries whose relevant docs were all skipped for having no text"] += 1
            continue
        elif abstain_unjudged:
            cases.append({"id": qid, "question": question, "answerable": False, **judged})
        else:
            skipped["queries with no relevant doc (--abstain-unjudged imports them as abstention cases)"] += 1
            continue
        sources[qid] = where
    return cases, sources


def question_text(text: Any) -> str | None:
    """A question is text with its whitespace normalised; empty is ``None``."""
    if not isinstance(text, str):
        return None
    question = WHITESPACE.sub(" ", text).strip()
    return question or None
