"""Importing BEIR, TREC and SQuAD data as ragvet's corpus and cases.

Each importer reads the user's files and returns an :class:`Imported`: corpus rows
``{doc_id, text, title, metadata}``, case rows in the cases input format
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
"""

from __future__ import annotations

import bisect
import json
import json.decoder
import json.scanner
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragvet.errors import Problem, raise_if
from ragvet.text.values import as_id, is_scalar, kind_of

Row = dict[str, Any]

_WS = re.compile(r"\s+")


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


# --- shared helpers ------------------------------------------------------------------


def _read_text(path: Path, problems: list[Problem], what: str) -> str | None:
    """A UTF-8 file's text (a byte-order mark dropped), or ``None`` and a problem."""
    if not path.is_file():
        problems.append(Problem(str(path), f"{what} not found", "check the path"))
        return None
    try:
        return path.read_bytes().decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as err:
        problems.append(Problem(str(path), f"not UTF-8 text ({err.reason} at byte {err.start})", "save it as UTF-8"))
        return None


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` for every non-blank line, without its line ending."""
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.rstrip("\r")
        if line.strip():
            yield number, line


def _jsonl_objects(path: Path, problems: list[Problem], what: str, example: str) -> list[tuple[str, Row]]:
    """``(file:line, object)`` for each line of a JSONL file; every bad line is a problem."""
    text = _read_text(path, problems, what)
    if text is None:
        return []
    rows = []
    for number, line in _lines(text):
        where = f"{path}:{number}"
        try:
            value = json.loads(line)
        except json.JSONDecodeError as err:
            problems.append(Problem(where, f"malformed JSON: {err.msg} (column {err.colno})", f"write {example}"))
            continue
        if not isinstance(value, dict):
            problems.append(Problem(where, f"a line must be a JSON object, got {kind_of(value)}", f"write {example}"))
            continue
        rows.append((where, value))
    return rows


def _unique(seen: dict[str, str], key: str, where: str, what: str, problems: list[Problem]) -> bool:
    """Record ``key`` at ``where``; a second one is a problem naming both places."""
    if key in seen:
        problems.append(
            Problem(where, f"duplicate {what} {key!r}: already defined at {seen[key]}", f"give each {what} its own id")
        )
        return False
    seen[key] = where
    return True


def _no_docs(path: Path, lines: int) -> Problem:
    why = "it has no documents" if not lines else f"none of its {lines} documents has any text"
    return Problem(str(path), f"the corpus is empty: {why}", "point to the file or folder holding the documents")


def _imported(docs: list[Row], cases: list[Row], doc_sources: dict, case_sources: dict, skipped: Counter) -> Imported:
    """The result, rows sorted by id and reasons that never happened left out."""
    return Imported(
        sorted(docs, key=lambda row: row["doc_id"]),
        sorted(cases, key=lambda row: row["id"]),
        doc_sources,
        case_sources,
        Counter({reason: count for reason, count in skipped.items() if count}),
    )


def _scalar_metadata(raw: Any, skipped: Counter) -> dict[str, Any]:
    """The single-valued entries of a metadata mapping (filters match one value per
    key); lists and mappings are dropped and counted."""
    if not isinstance(raw, dict):
        return {}
    kept = {str(key): value for key, value in raw.items() if is_scalar(value)}
    skipped["metadata values that are not a single value (dropped)"] += len(raw) - len(kept)
    return kept


def _doc_row(doc_id: str, text: str, title: str | None, metadata: dict[str, Any] | None = None) -> Row:
    return {"doc_id": doc_id, "text": text, "title": title, "metadata": metadata or {}}


@dataclass
class _Judgements:
    """Graded judgements read from a qrels file: ``grades[qid][doc_id] = grade``.

    ``lost`` holds the grades of docs skipped for having no text, so that a query
    whose only relevant doc is empty is not mistaken for one with no relevant doc.
    """

    grades: dict[str, dict[str, int]] = field(default_factory=dict)
    lost: dict[str, list[int]] = field(default_factory=dict)
    lines: dict[tuple[str, str], str] = field(default_factory=dict)


def _judge(
    judgements: _Judgements,
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


def _document_cases(
    queries: dict[str, tuple[str, str]],
    judgements: _Judgements,
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


def _question(text: Any) -> str | None:
    """A question is text with its whitespace normalised; empty is ``None``."""
    if not isinstance(text, str):
        return None
    question = _WS.sub(" ", text).strip()
    return question or None


# --- BEIR ------------------------------------------------------------------------------


def import_beir(
    folder: str | Path, split: str = "test", min_grade: int = 1, abstain_unjudged: bool = False
) -> Imported:
    """A BEIR folder: ``corpus.jsonl`` (``{_id, title, text, metadata?}``),
    ``queries.jsonl`` (``{_id, text}``) and ``qrels/<split>.tsv`` (a header, then
    ``query-id  corpus-id  score`` separated by tabs).

    Judged docs with ``score >= min_grade`` (and above 0) become ``{doc}`` evidence;
    every judged doc, of any score, is kept in the case's ``judged`` set.
    Queries judged in no split at all, or judged in this split with no relevant
    doc, become abstention cases with ``abstain_unjudged`` and are skipped without
    it; queries judged only in another split's qrels are skipped. Metadata values
    that are not a single text, number or true/false are dropped (filters compare
    one value per key), and counted.
    """
    folder = Path(folder)
    problems: list[Problem] = []
    skipped: Counter = Counter()
    if not folder.is_dir():
        raise_if([Problem(str(folder), "BEIR folder not found", "give the folder holding corpus.jsonl")])

    corpus_path = folder / "corpus.jsonl"
    rows = _jsonl_objects(corpus_path, problems, "corpus.jsonl", '{"_id": ..., "title": ..., "text": ...}')
    docs: list[Row] = []
    doc_sources: dict[str, str] = {}
    empty_docs: set[str] = set()
    seen: dict[str, str] = {}
    for where, row in rows:
        doc_id = as_id(row.get("_id"))
        if doc_id is None:
            problems.append(Problem(where, f"missing or empty _id (got {row.get('_id')!r})", "give every doc an _id"))
            continue
        if not _unique(seen, doc_id, where, "doc id", problems):
            continue
        text, title = row.get("text"), row.get("title")
        if text is not None and not isinstance(text, str):
            problems.append(Problem(where, f"doc {doc_id!r}: text must be text, got {kind_of(text)}", "fix the line"))
            continue
        if title is not None and not isinstance(title, str):
            problems.append(Problem(where, f"doc {doc_id!r}: title must be text, got {kind_of(title)}", "fix it"))
            continue
        if not text or not text.strip():
            empty_docs.add(doc_id)
            skipped["documents with no text"] += 1
            continue
        docs.append(_doc_row(doc_id, text, title or None, _scalar_metadata(row.get("metadata"), skipped)))
        doc_sources[doc_id] = where
    if not docs and not problems:
        problems.append(_no_docs(corpus_path, len(rows)))

    queries_path = folder / "queries.jsonl"
    queries: dict[str, tuple[str, str]] = {}
    all_queries: set[str] = set()
    seen = {}
    for where, row in _jsonl_objects(queries_path, problems, "queries.jsonl", '{"_id": ..., "text": ...}'):
        qid = as_id(row.get("_id"))
        if qid is None:
            problems.append(Problem(where, f"missing or empty _id (got {row.get('_id')!r})", "give every query an _id"))
            continue
        if not _unique(seen, qid, where, "query id", problems):
            continue
        all_queries.add(qid)
        question = _question(row.get("text"))
        if question is None:
            skipped["queries with no text"] += 1
            continue
        queries[qid] = (question, where)

    qrels_dir = folder / "qrels"
    qrels_path = qrels_dir / f"{split}.tsv"
    judgements = _Judgements()
    if not qrels_path.is_file():
        available = sorted(path.stem for path in qrels_dir.glob("*.tsv")) if qrels_dir.is_dir() else []
        problems.append(
            Problem(
                str(qrels_path),
                f"no qrels for split {split!r}",
                f"choose --split from: {', '.join(available)}" if available else "add qrels/<split>.tsv",
            )
        )
    else:
        text = _read_text(qrels_path, problems, "qrels file") or ""
        known = (all_queries, set(doc_sources), empty_docs)
        for index, (number, line) in enumerate(_lines(text)):
            where = f"{qrels_path}:{number}"
            fields = line.split("\t") if "\t" in line else line.split()
            if index == 0 and fields and fields[0].strip().lower() in ("query-id", "query_id", "qid"):
                continue  # the header
            if len(fields) != 3:
                problems.append(
                    Problem(
                        where,
                        f"a BEIR qrels line has 3 columns (query-id, corpus-id, score), this one has {len(fields)}",
                        "separate the three columns with tabs",
                    )
                )
                continue
            qid, doc_id, grade = (value.strip() for value in fields)
            _judge(judgements, qid, doc_id, grade, where, known, problems, skipped)
    raise_if(problems)

    elsewhere: dict[str, str] = {}
    for other in sorted(qrels_dir.glob("*.tsv")):
        if other == qrels_path:
            continue
        for _, line in _lines(other.read_text(encoding="utf-8", errors="replace")):
            elsewhere.setdefault(line.split()[0], f"qrels/{other.name}")
    cases, case_sources = _document_cases(queries, judgements, min_grade, abstain_unjudged, skipped, elsewhere)
    return _imported(docs, cases, doc_sources, case_sources, skipped)


# --- TREC ------------------------------------------------------------------------------

_TAG = re.compile(r"<(/?)([A-Za-z]+)[^>]*>")
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
            value = _WS.sub(" ", body[tag.end() : end]).strip()
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
    for number, line in _lines(text):
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
        qid, question = fields[0].strip(), _question(fields[1])
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
    text = _read_text(path, problems, "topics file")
    if text is None:
        return {}, set(), skipped, problems
    if re.search(r"<top>", text, re.IGNORECASE):
        found = _sgml_topics(path, text, field_name, problems)
    else:
        found = _tsv_topics(path, text, problems)
    topics: dict[str, tuple[str, str]] = {}
    seen: dict[str, str] = {}
    for qid, question, where in found:
        if not _unique(seen, qid, where, "topic", problems):
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
            text = _read_text(file, problems, "doc")
            read += 1
            if text is None or not _unique(seen, file.stem, where, "doc id", problems):
                continue
            if not text.strip():
                empty.add(file.stem)
                continue
            rows.append(_doc_row(file.stem, text, None))
            sources[file.stem] = where
    else:
        for where, row in _jsonl_objects(path, problems, "docs file", '{"doc_id": ..., "text": ...}'):
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
            if not _unique(seen, doc_id, where, "doc id", problems):
                continue
            if (text is not None and not isinstance(text, str)) or (title is not None and not isinstance(title, str)):
                problems.append(Problem(where, f"doc {doc_id!r}: text and title must be text", "fix the line"))
                continue
            if not text or not text.strip():
                empty.add(doc_id)
                continue
            rows.append(_doc_row(doc_id, text, title or None, _scalar_metadata(row.get("metadata"), skipped)))
            sources[doc_id] = where
    skipped["documents with no text"] += len(empty)
    if not rows and not problems:
        problems.append(_no_docs(path, read))
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
    judgements = _Judgements()
    text = _read_text(qrels, problems, "qrels file")
    if text is not None:
        known = (topic_ids, set(doc_sources), empty)
        for number, line in _lines(text):
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
            _judge(judgements, qid, doc_id, grade, where, known, problems, skipped)
    raise_if(problems)
    cases, case_sources = _document_cases(found, judgements, min_grade, abstain_unjudged, skipped)
    return _imported(rows, cases, doc_sources, case_sources, skipped)


# --- SQuAD -----------------------------------------------------------------------------


class _Located(dict):
    """A JSON object that knows the 1-based line of its opening brace."""

    line = 0


def _load_located_json(text: str) -> Any:
    """``json.loads`` with every object a :class:`_Located`. Pure Python and so
    slower: it is used only to name the lines of problems already found."""
    starts = [0] + [match.end() for match in re.finditer("\n", text)]
    decoder = json.JSONDecoder()

    def parse_object(s_and_end, *args):
        value, end = json.decoder.JSONObject(s_and_end, *args)
        located = _Located(value)
        located.line = bisect.bisect_right(starts, s_and_end[1] - 1)
        return located, end

    decoder.parse_object = parse_object
    decoder.scan_once = json.scanner.py_make_scanner(decoder)
    return decoder.decode(text)


def _squad_doc_id(title: str, index: int) -> str:
    """``<title>/<paragraph index>``, whitespace in the title made ``_`` (TREC ids
    cannot hold spaces). ``/`` rather than ``#``, which separates chunk ordinals."""
    return f"{_WS.sub('_', title.strip())}/{index}"


def _parse_squad(path: Path, data: Any, problems: list[Problem], skipped: Counter) -> tuple[list, list, dict, dict]:
    def at(value: Any, fallback: Any = None) -> str:
        """``file:line`` of a located object (or its container), else just the file."""
        line = getattr(value, "line", 0) or getattr(fallback, "line", 0)
        return f"{path}:{line}" if line else str(path)

    docs: list[Row] = []
    cases: list[Row] = []
    doc_sources: dict[str, str] = {}
    case_sources: dict[str, str] = {}
    seen_docs: dict[str, str] = {}
    seen_cases: dict[str, str] = {}
    articles = data.get("data") if isinstance(data, dict) else None
    if not isinstance(articles, list):
        problems.append(
            Problem(at(data), 'a SQuAD file is {"data": [articles]}', "give a SQuAD v1.1 or v2.0 JSON file")
        )
        return docs, cases, doc_sources, case_sources
    for article in articles:
        title = article.get("title") if isinstance(article, dict) else None
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(title, str) or not title.strip() or not isinstance(paragraphs, list):
            problems.append(
                Problem(at(article, data), "an article needs a title and a list of paragraphs", "fix the article")
            )
            continue
        for index, paragraph in enumerate(paragraphs):
            context = paragraph.get("context") if isinstance(paragraph, dict) else None
            qas = paragraph.get("qas", []) if isinstance(paragraph, dict) else None
            where = at(paragraph, article)
            if not isinstance(context, str) or not isinstance(qas, list):
                problems.append(Problem(where, "a paragraph needs a context text and a qas list", "fix the paragraph"))
                continue
            doc_id = _squad_doc_id(title, index)
            if not _unique(seen_docs, doc_id, where, "doc id (article title and paragraph index)", problems):
                continue
            if not context.strip():
                skipped["paragraphs with no context"] += 1
                skipped["questions on a paragraph with no context"] += len(qas)
                continue
            docs.append(_doc_row(doc_id, context, title))
            doc_sources[doc_id] = where
            for qa in qas:
                case = _squad_case(qa, doc_id, context, at, paragraph, problems, skipped, seen_cases)
                if case is not None:
                    cases.append(case)
                    case_sources[case["id"]] = seen_cases[case["id"]]
    return docs, cases, doc_sources, case_sources


def _squad_case(
    qa: Any,
    doc_id: str,
    context: str,
    at: Callable[[Any, Any], str],
    paragraph: Any,
    problems: list[Problem],
    skipped: Counter,
    seen: dict[str, str],
) -> Row | None:
    where = at(qa, paragraph)
    if not isinstance(qa, dict):
        problems.append(Problem(where, f"a question must be an object, got {kind_of(qa)}", "fix the qas list"))
        return None
    qid = as_id(qa.get("id"))
    if qid is None:
        problems.append(Problem(where, f"a question has no id (got {qa.get('id')!r})", "give every question an id"))
        return None
    if not _unique(seen, qid, where, "question id", problems):
        return None
    question = _question(qa.get("question"))
    if question is None:
        skipped["questions with no text"] += 1
        return None
    if qa.get("is_impossible") is True:
        return {"id": qid, "question": question, "answerable": False}
    answers = qa.get("answers")
    if not isinstance(answers, list) or not answers:
        skipped["answerable questions without answers"] += 1
        return None
    spans = set()
    before = len(problems)
    for number, answer in enumerate(answers, start=1):
        here = at(answer, qa)
        role = f"question {qid!r} answer {number}"
        text = answer.get("text") if isinstance(answer, dict) else None
        start = answer.get("answer_start") if isinstance(answer, dict) else None
        if not isinstance(text, str) or not text or not isinstance(start, int) or isinstance(start, bool):
            problems.append(
                Problem(
                    here,
                    f"{role} needs a non-empty text and an integer answer_start",
                    'write {"text": "...", "answer_start": <offset into the context>}',
                )
            )
            continue
        found = context[start : start + len(text)]
        if found != text:
            problems.append(
                Problem(
                    here,
                    f"{role}: the context at answer_start {start} reads {found!r}, not the answer text {text!r}",
                    "fix answer_start (a character offset into the paragraph's context) or the answer text",
                )
            )
            continue
        spans.add((start, start + len(text)))
    if len(problems) > before:
        return None
    refs = [{"doc": doc_id, "start": start, "end": end} for start, end in sorted(spans)]
    evidence = refs if len(refs) == 1 else [{"any": refs}]
    return {"id": qid, "question": question, "evidence": evidence}


def import_squad(path: str | Path) -> Imported:
    """A SQuAD v1.1 or v2.0 JSON file.

    Each paragraph becomes a doc ``<article title>/<paragraph index>`` (0-based,
    whitespace in the title turned into ``_``; the title itself is kept as the
    doc's title). Each question becomes a case whose one evidence unit is the
    answer span ``{doc, start, end}``; the spans of several annotators become the
    alternatives of ``{any: [...]}`` (identical spans once). ``is_impossible``
    questions become abstention cases. Every answer's text must be found at its
    ``answer_start``.
    """
    path = Path(path)
    problems: list[Problem] = []
    skipped: Counter = Counter()
    text = _read_text(path, problems, "SQuAD file")
    raise_if(problems)
    assert text is not None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise_if([Problem(f"{path}:{err.lineno}", f"malformed JSON: {err.msg}", "fix the JSON syntax")])
    docs, cases, doc_sources, case_sources = _parse_squad(path, data, problems, skipped)
    if problems:  # parse again, slowly, to name the line of each problem
        problems, skipped = [], Counter()
        _parse_squad(path, _load_located_json(text), problems, skipped)
    if not docs and not problems:
        problems.append(_no_docs(path, 0))
    raise_if(problems)
    return _imported(docs, cases, doc_sources, case_sources, skipped)
