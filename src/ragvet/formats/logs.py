"""Reading a production search log: what each query returned, and what users clicked.

A log is JSONL (one object per line) or Parquet (read one batch of rows at a time), in
one of two layouts, decided by its first row:

* per query: ``{query_id, question, results: [{<passage>, rank|score, clicked?, grade?}],
  tenant?, tags?}``;
* per passage: ``{query_id, question, <passage>, rank|score, clicked?, grade?, tenant?,
  tags?}``, the rows of one query next to each other.

A ``<passage>`` is what the ``run_file`` retriever reads (:mod:`ragvet.formats.runfiles`):
``chunk_id``, ``doc_id``, or a foreign passage ``doc_id`` with ``start`` and ``end`` or
with ``text`` (and ``occurrence``). A null value counts as absent (Parquet writes a null
for every field a row lacks).

Each query becomes a line of the run file (its passages in rank order) and, when its
clicks or grades name a relevant passage, a case (:func:`graded` is the rule). Nothing
here writes a file: :class:`LogImport` yields the lines, and :mod:`ragvet.interop`
writes them all or none. Memory holds one query's rows and 8 bytes per query id, the
hash that finds a repeated id (the ids are read a second time only when two hashes
meet, to tell where).
"""

from __future__ import annotations

import functools
from array import array
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import orjson
import polars as pl

from ragvet.errors import Problem
from ragvet.formats.imported import json_object_line, question_text
from ragvet.formats.runfiles import checked_rank_score
from ragvet.storage.files import decode_utf8, dumps_line
from ragvet.storage.progress import progress_bar
from ragvet.text.values import (
    SURROGATE_FIX,
    as_id,
    did_you_mean,
    id_flaw,
    id_problem,
    is_int,
    is_scalar,
    kind_of,
    lone_surrogate,
    surrogate_what,
)

LOG_SUFFIXES = (".jsonl", ".parquet")
QUERY_KEYS = ("query_id", "question", "tenant", "tags")
PASSAGE_KEYS = ("chunk_id", "doc_id", "start", "end", "text", "occurrence")
RESULT_KEYS = (*PASSAGE_KEYS, "rank", "score", "clicked", "grade")
QUERY_ROW_KEYS = (*QUERY_KEYS, "results")
PASSAGE_ROW_KEYS = (*QUERY_KEYS, *RESULT_KEYS)
CLICK_GRADE = 1  # a clicked result without a grade of its own
MAX_PROBLEMS = 1000  # reading stops here: a log with a wrong column would otherwise list every row
BATCH_ROWS = 8192  # Parquet rows held at once
EXAMPLE = '{"query_id": "q1", "question": "...", "results": [{"chunk_id": "doc#0", "rank": 1, "clicked": true}]}'

Row = dict[str, Any]


class Result(NamedTuple):
    """One returned passage: ``passage`` holds its keys of :data:`PASSAGE_KEYS`. A named
    tuple, made in one call for every passage of a log (a frozen dataclass sets each
    field by a call of its own)."""

    where: str
    passage: dict[str, Any]
    level: str  # chunk, doc or passage, as the run file reader names them
    rank: int | None
    score: float | None
    clicked: bool
    grade: int | None

    @property
    def key(self) -> tuple:
        """What makes two results the same passage."""
        return tuple(sorted(self.passage.items()))

    @property
    def doc_id(self) -> str:
        """The doc a judgement goes to: a chunk id ``<doc_id>#<n>`` names its doc first."""
        return self.passage["chunk_id"].rpartition("#")[0] if self.level == "chunk" else self.passage["doc_id"]


@dataclass
class Query:
    where: str
    query_id: str
    question: str
    tags: dict[str, str]
    results: list[Result] = field(default_factory=list)


def graded(results: list[Result]) -> list[int | None]:
    """The grade of each result (in rank order), ``None`` for unjudged.

    A ``grade`` is the result's grade; a click without one is grade :data:`CLICK_GRADE`;
    a result neither clicked nor graded is judged 0 when it ranks above the lowest
    clicked result, which the user read and passed over, and unjudged below it, where
    the user may never have looked: the "skip-above" rule of Joachims (2002),
    "Optimizing search engines using clickthrough data", KDD.
    """
    clicks = [index for index, result in enumerate(results) if result.clicked]
    lowest = clicks[-1] if clicks else -1
    grades: list[int | None] = []
    for index, result in enumerate(results):
        if result.grade is not None:
            grades.append(result.grade)
        elif result.clicked:
            grades.append(CLICK_GRADE)
        else:
            grades.append(0 if index < lowest else None)
    return grades


def evidence_of(result: Result, chunking: str | None) -> dict[str, Any]:
    """The evidence reference a relevant result becomes, in the cases format."""
    passage = result.passage
    if result.level == "chunk":
        return {"chunk": passage["chunk_id"], "chunking": chunking}
    if "text" in passage:
        occurrence = {"occurrence": passage["occurrence"]} if "occurrence" in passage else {}
        return {"doc": passage["doc_id"], "quote": passage["text"], **occurrence}
    return {key if key != "doc_id" else "doc": value for key, value in passage.items()}


# --- reading rows ----------------------------------------------------------------------


def jsonl_rows(path: Path, problems: list[Problem]) -> Iterator[tuple[str, Row]]:
    """``(file:line, object)`` for each non-blank line of a JSONL log; a bad line is a problem, not a row."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            where = f"{path}:{number}"
            text, problem = decode_utf8(raw, str(path))
            if problem is not None:
                problems.append(Problem(where, problem.what, problem.fix))
                continue
            if not text.strip():
                continue
            value = json_object_line(text, where, "a log line", EXAMPLE, problems)
            if value is not None:
                yield where, value


# What each column of a Parquet log must hold, by polars' dtype.
_COLUMN_KINDS = {
    "query_id": "id",
    "question": "text",
    "tenant": "scalar",
    "tags": "struct",
    "results": "results",
    "chunk_id": "id",
    "doc_id": "id",
    "text": "text",
    "start": "int",
    "end": "int",
    "occurrence": "int",
    "rank": "int",
    "score": "number",
    "clicked": "bool",
    "grade": "int",
}
_KIND_WORDS = {
    "id": "text or integers",
    "text": "text",
    "scalar": "text, numbers or booleans",
    "struct": "a struct of text, number or boolean fields",
    "results": "a list of structs (one per returned passage)",
    "int": "integers",
    "number": "numbers",
    "bool": "booleans",
}


def _fits(dtype: Any, kind: str) -> bool:
    if dtype == pl.Null:
        return True
    checks = {
        "id": lambda: dtype == pl.String or dtype.is_integer(),
        "text": lambda: dtype == pl.String,
        "scalar": lambda: dtype in (pl.String, pl.Boolean) or dtype.is_numeric(),
        "struct": lambda: isinstance(dtype, pl.Struct),
        "results": lambda: isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.Struct),
        "int": lambda: dtype.is_integer(),
        "number": lambda: dtype.is_numeric(),
        "bool": lambda: dtype == pl.Boolean,
    }
    return checks[kind]()


def _schema_problems(path: Path, schema: Any) -> list[Problem]:
    """A column of the wrong type is one problem, not one per row."""
    problems = []
    columns = list(schema.items())
    for name, dtype in columns:
        if name == "results" and isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.Struct):
            columns += [(f"results.{f.name}", f.dtype) for f in dtype.inner.fields]
    for name, dtype in columns:
        kind = _COLUMN_KINDS.get(name.removeprefix("results."))
        if kind is not None and not _fits(dtype, kind):
            problems.append(
                Problem(
                    f"{path} (column {name})",
                    f"column {name!r} has type {dtype}; it must hold {_KIND_WORDS[kind]}",
                    f"write {name} as {_KIND_WORDS[kind]} (e.g. cast it before writing the Parquet file)",
                )
            )
    return problems


def _parquet_rows(path: Path, problems: list[Problem]) -> Iterator[tuple[str, Row]]:
    try:
        schema = pl.read_parquet_schema(path)
    except Exception as err:  # polars raises its own types for a file that is not Parquet
        problems.append(Problem(str(path), f"not a readable Parquet file ({err})", "write the log as Parquet or JSONL"))
        return
    found = _schema_problems(path, schema)
    if found:
        problems.extend(found)
        return
    number = 0
    for batch in pl.scan_parquet(path).collect_batches(chunk_size=BATCH_ROWS):
        for row in batch.iter_rows(named=True):
            number += 1
            yield f"{path}: row {number}", row


def _present(row: Row) -> Row:
    """A row without its null values (absent, as Parquet writes an absent field)."""
    return {key: value for key, value in row.items() if value is not None}


# --- checking rows ---------------------------------------------------------------------


class _Shape:
    """What the first result fixed for the whole log: the run file reader refuses a run
    that mixes chunk ids, doc ids and passages, and a log ranked by ``rank`` on some
    results and by ``score`` alone on others has no one order."""

    def __init__(self) -> None:
        self.level: str | None = None
        self.ranked: bool | None = None
        self.first = ""

    def problem(self, result: Result) -> Problem | None:
        if self.level is None:
            self.level, self.ranked, self.first = result.level, result.rank is not None, result.where
            return None
        if result.level != self.level:
            return Problem(
                result.where,
                f"this result is a {result.level}, the log's first ({self.first}) a {self.level}",
                "return one kind of passage in the whole log: chunk ids, doc ids, or foreign passages",
            )
        if (result.rank is not None) != self.ranked:
            has = "a rank" if self.ranked else "no rank"
            return Problem(
                result.where,
                f"the log's first result ({self.first}) has {has} and this one does not agree",
                "give every result a rank, or none (results are then ordered by descending score)",
            )
        return None


_KEY_SET = functools.cache(frozenset)  # each key tuple's set, made once: a row's keys are checked in one step


def _unknown(where: str, row: Row, keys: tuple[str, ...], what: str) -> list[Problem]:
    if row.keys() <= _KEY_SET(keys):
        return []
    return [
        Problem(where, f"unknown {what} field `{key}`", f"{did_you_mean(key, keys)}a {what} has: {', '.join(keys)}")
        for key in row
        if key not in keys
    ]


def _passage(where: str, item: Row) -> tuple[dict[str, Any], str] | Problem:
    """The passage keys of a result and its level, checked."""
    ids = [key for key in ("chunk_id", "doc_id") if key in item]
    if len(ids) != 1:
        got = "both" if ids else "neither"
        return Problem(
            where, f"a result needs exactly one of chunk_id or doc_id, this one has {got}", f"write {EXAMPLE}"
        )
    identifier = as_id(item[ids[0]])
    if identifier is None or id_flaw(identifier):
        flaw = (
            id_problem(item[ids[0]], ids[0]) if identifier is None else f"{ids[0]} {identifier!r} {id_flaw(identifier)}"
        )
        return Problem(where, flaw, "write the id the corpus or the chunking gives it")
    located = {key: item[key] for key in PASSAGE_KEYS[2:] if key in item}
    if ids[0] == "chunk_id":
        if located:
            return Problem(where, f"a chunk result takes no {', '.join(located)}", "locate passages by doc_id only")
        if "#" not in identifier:
            return Problem(where, f"chunk_id {identifier!r} is not a ragvet chunk id <doc_id>#<n>", "use doc_id")
        return {"chunk_id": identifier}, "chunk"
    if not located:
        return {"doc_id": identifier}, "doc"
    spans = "start" in located or "end" in located
    fix = "locate a passage by start and end (character offsets, end > start ≥ 0) or by its text"
    if spans and ("text" in located or "occurrence" in located):
        return Problem(where, "a passage has start and end, or text, not both", fix)
    if spans and not (
        is_int(located.get("start")) and is_int(located.get("end")) and 0 <= located["start"] < located["end"]
    ):
        return Problem(where, f"start {located.get('start')!r} and end {located.get('end')!r} are not a span", fix)
    if not spans and not (isinstance(located.get("text"), str) and located["text"].strip()):
        return Problem(where, f"a passage's text must be non-empty text, got {located.get('text')!r}", fix)
    if "occurrence" in located and not (is_int(located["occurrence"]) and located["occurrence"] >= 1):
        return Problem(where, f"occurrence must be a whole number ≥ 1, got {located['occurrence']!r}", fix)
    return {"doc_id": identifier, **located}, "passage"


def _result(where: str, item: Any) -> Result | list[Problem]:
    if not isinstance(item, dict):
        return [Problem(where, f"a result must be a mapping, got {kind_of(item)}", f"write {EXAMPLE}")]
    item = _present(item)
    problems = _unknown(where, item, RESULT_KEYS, "result")
    passage = _passage(where, item)
    if isinstance(passage, Problem):
        problems.append(passage)
    rank, score = item.get("rank"), item.get("score")
    checked = checked_rank_score(where, rank, score)
    if rank is None and score is None:
        problems.append(
            Problem(where, "a result needs a rank or a score", "add rank (1 is best) or score (higher is better)")
        )
    elif isinstance(checked, Problem):
        problems.append(checked)
    clicked, grade = item.get("clicked", False), item.get("grade")
    if not isinstance(clicked, bool):
        problems.append(
            Problem(where, f"clicked must be true or false, got {kind_of(clicked)} {clicked!r}", "write true or false")
        )
    if grade is not None and not is_int(grade):
        problems.append(
            Problem(where, f"grade must be a whole number, got {kind_of(grade)} {grade!r}", "write 0, 1, 2, ...")
        )
    if problems:
        return problems
    return Result(where, passage[0], passage[1], checked[0], checked[1], clicked, grade)


def _tags(where: str, row: Row) -> dict[str, str] | Problem:
    """``tags`` (a mapping of single values) and ``tenant``, kept as text as case tags are."""
    raw = row.get("tags", {})
    if not isinstance(raw, dict) or not all(is_scalar(value) for value in raw.values()):
        return Problem(where, f"tags must be a mapping of single values, got {raw!r}", 'write {"region": "emea"}')
    raw = _present(raw)
    if "tenant" in row:
        if not is_scalar(row["tenant"]):
            return Problem(where, f"tenant must be one value, got {kind_of(row['tenant'])}", 'write "tenant": "acme"')
        raw = {**raw, "tenant": row["tenant"]}
    return {
        str(key): ("true" if value else "false") if isinstance(value, bool) else str(value)
        for key, value in raw.items()
    }


def query_fields(where: str, row: Row) -> tuple[str, str, dict[str, str]] | list[Problem]:
    """A row's query id, question and tags, checked."""
    problems = []
    found = lone_surrogate(row)
    if found is not None:
        return [Problem(where, surrogate_what(found), SURROGATE_FIX)]
    query_id = as_id(row.get("query_id"))
    if query_id is None:
        problems.append(Problem(where, id_problem(row.get("query_id"), "query_id"), "give every row its query's id"))
    elif id_flaw(query_id):
        problems.append(Problem(where, f"query_id {query_id!r} {id_flaw(query_id)}", "remove the character"))
    question = question_text(row.get("question"))
    if question is None:
        problems.append(
            Problem(where, f"missing or empty question (got {row.get('question')!r})", "give the query's text")
        )
    tags = _tags(where, row)
    if isinstance(tags, Problem):
        problems.append(tags)
    return problems or (query_id, question, tags)


def unlabelled_row(query: Query) -> Row:
    """A query without a relevant result as a row of a per-query log, its results in rank
    order: grade them (or add clicks) and import the file again."""
    results = []
    for rank, result in enumerate(query.results, start=1):
        labels = {"clicked": True} if result.clicked else {}
        labels.update({"grade": result.grade} if result.grade is not None else {})
        results.append({**result.passage, "rank": rank, **labels})
    tags = {"tags": query.tags} if query.tags else {}
    return {"query_id": query.query_id, "question": query.question, **tags, "results": results}


# --- the import ------------------------------------------------------------------------


@dataclass
class LogImport:
    """The conversion of one log: :meth:`lines` yields ``(output, line)`` for the outputs
    ``cases``, ``run`` and ``unlabelled``, and leaves every problem in ``problems``
    (no line is yielded after the first) and the tallies in ``counts``."""

    path: Path
    min_grade: int = 1
    chunking: str | None = None
    problems: list[Problem] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    layout: str | None = None
    _fields_of: tuple[bytes, tuple[str, str, dict[str, str]]] | None = field(default=None, init=False, repr=False)

    def lines(self) -> Iterator[tuple[str, str]]:
        shape, hashes = _Shape(), array("q")
        for query in progress_bar(self._queries(), desc="import log", unit=" queries"):
            hashes.append(hash(query.query_id))
            self._order(query, shape)
            if self.problems:
                continue
            yield from self._query_lines(query)
        if not self.problems and not self.counts["cases"]:
            self.problems.append(self._no_cases())
        self.problems += self._repeats(hashes)

    def _no_cases(self) -> Problem:
        """A log with no case would write an empty cases file, which the cases loader refuses."""
        if not self.counts["queries"]:
            return Problem(str(self.path), "the log has no queries", f"write one row per query: {EXAMPLE}")
        return Problem(
            str(self.path),
            f"no query has a relevant result (a click, or a grade ≥ {max(self.min_grade, 1)}), so there is no case "
            f"to write (of {self.counts['queries']} queries)",
            "import a log in which some results are clicked or graded (or lower --min-grade)",
        )

    def _rows(self) -> Iterator[tuple[str, Row]]:
        suffix = self.path.suffix.lower()
        rows = _parquet_rows(self.path, self.problems) if suffix == ".parquet" else jsonl_rows(self.path, self.problems)
        for where, row in rows:
            if len(self.problems) >= MAX_PROBLEMS:
                self.problems.append(
                    Problem(
                        str(self.path), f"reading stopped after {MAX_PROBLEMS} problems", "fix these, then import again"
                    )
                )
                return
            yield where, row

    def _queries(self) -> Iterator[Query]:
        """Each query with its results; a per-passage log's rows grouped as they come."""
        current: Query | None = None
        for where, row in self._rows():
            row = _present(row)
            if self.layout is None:
                self.layout = "query" if "results" in row else "passage"
            if self.layout == "query":
                query = self._query_row(where, row, query_fields(where, row))
                if query is not None:
                    yield query
                continue
            query = self._passage_row(where, row, self._passage_fields(where, row), current)
            if query is not current and current is not None:
                yield current
            current = query
        if current is not None:
            yield current

    def _passage_fields(self, where: str, row: Row) -> tuple[str, str, dict[str, str]] | list[Problem]:
        """:func:`query_fields` of a per-passage row, the row before's when its query's
        fields are the same JSON text (a query's rows repeat them) and no text of the row
        is half a UTF-16 pair: checked once a query, not once a returned passage."""
        try:
            written = orjson.dumps([row.get(key) for key in QUERY_KEYS])  # 1, 1.0 and true differ
        except orjson.JSONEncodeError:
            return query_fields(where, row)
        if self._fields_of is not None and self._fields_of[0] == written and lone_surrogate(row) is None:
            return self._fields_of[1]
        fields = query_fields(where, row)
        self._fields_of = None if isinstance(fields, list) else (written, fields)
        return fields

    def _query_row(self, where: str, row: Row, fields: Any) -> Query | None:
        problems = _unknown(where, row, QUERY_ROW_KEYS, "query row")
        if isinstance(fields, list):
            problems += fields
        results = row.get("results")
        if not isinstance(results, list):
            problems.append(
                Problem(
                    where, f"results must be a list of returned passages, got {kind_of(results)}", f"write {EXAMPLE}"
                )
            )
            results = []
        checked = [_result(f"{where} (result {index})", item) for index, item in enumerate(results, start=1)]
        problems += [problem for result in checked if isinstance(result, list) for problem in result]
        if problems:
            self.problems += problems
            return None
        return Query(where, *fields, results=checked)

    def _passage_row(self, where: str, row: Row, fields: Any, current: Query | None) -> Query | None:
        problems = _unknown(where, row, PASSAGE_ROW_KEYS, "passage row")
        if isinstance(fields, list):
            self.problems += problems + fields
            return current
        kept = _KEY_SET(RESULT_KEYS)
        result = _result(where, {key: value for key, value in row.items() if key in kept})
        problems += result if isinstance(result, list) else []
        if problems:
            self.problems += problems
            return current
        query_id, question, tags = fields
        if current is None or current.query_id != query_id:
            return Query(where, query_id, question, tags, [result])
        if (question, tags) != (current.question, current.tags):
            self.problems.append(
                Problem(
                    where,
                    f"query {query_id!r} has another question or tags than at its first row ({current.where})",
                    "give every row of a query the same question, tenant and tags",
                )
            )
        current.results.append(result)
        return current

    def _order(self, query: Query, shape: _Shape) -> None:
        """Put the results in rank order (by rank, else by descending score, ties in log
        order), numbering them 1, 2, ...; a repeated rank or passage is a problem."""
        for result in query.results:
            problem = shape.problem(result)
            if problem is not None:
                self.problems.append(problem)
        if query.results and query.results[0].rank is not None:
            query.results.sort(key=lambda result: result.rank or 0)
        else:
            query.results.sort(key=lambda result: -(result.score or 0.0))
        ranks: dict[int, str] = {}
        passages: dict[tuple, str] = {}
        for result in query.results:  # each result's where is its own: another one there is a repeat
            for seen, key in ((ranks, result.rank), (passages, result.key)):
                first = result.where if key is None else seen.setdefault(key, result.where)
                if first != result.where:
                    what = f"rank {key}" if seen is ranks else "a passage"
                    self.problems.append(
                        Problem(
                            result.where,
                            f"query {query.query_id!r} has {what} twice (also at {first})",
                            "give each passage of a query one row and its own rank",
                        )
                    )

    def _query_lines(self, query: Query) -> Iterator[tuple[str, str]]:
        """A labelled query's run lines and case; an unlabelled one's row of the log."""
        self.counts["queries"] += 1
        self.counts["results"] += len(query.results)
        case = self._case(query)
        if case is None:
            yield "unlabelled", dumps_line(unlabelled_row(query)) + "\n"
            return
        for rank, result in enumerate(query.results, start=1):
            yield "run", dumps_line({"case_id": query.query_id, **result.passage, "rank": rank}) + "\n"
        yield "cases", dumps_line(case) + "\n"

    def _case(self, query: Query) -> Row | None:
        """The query's case, with evidence and judged grades from :func:`graded`; ``None``
        when no result is relevant (a case needs evidence, and ``answerable: false``
        would claim the corpus cannot answer it)."""
        tags = {"tags": query.tags} if query.tags else {}
        row: Row = {"id": query.query_id, "question": query.question, **tags}
        grades = graded(query.results)
        threshold = max(self.min_grade, 1)
        relevant = [result for result, grade in zip(query.results, grades) if grade is not None and grade >= threshold]
        if not relevant:
            judged = any(grade is not None for grade in grades)
            self.counts["unlabelled: judged, none relevant" if judged else "unlabelled: no clicks or grades"] += 1
            return None
        judged_docs: dict[str, int] = {}
        for result, grade in zip(query.results, grades):
            if grade is not None:
                judged_docs[result.doc_id] = max(grade, judged_docs.get(result.doc_id, grade))
        if relevant[0].level == "chunk" and self.chunking is None:
            self.problems.append(
                Problem(
                    query.where,
                    "the log ranks ragvet chunk ids and has clicks or grades: their evidence {chunk, chunking} "
                    "needs the chunking they come from",
                    "pass --chunking NAME, the chunking of params.yaml that made the chunk ids",
                )
            )
        evidence = list({dumps_line(ref): ref for ref in (evidence_of(r, self.chunking) for r in relevant)}.values())
        self.counts["cases"] += 1
        self.counts["evidence units"] += len(evidence)
        self.counts["judged docs"] += len(judged_docs)
        return {**row, "evidence": evidence, "judged": dict(sorted(judged_docs.items()))}

    def _repeats(self, hashes: array) -> list[Problem]:
        """Each query id met a second time, at its row: read again only for the ids whose
        hash was met twice, so memory holds 8 bytes per query."""
        ordered = np.frombuffer(hashes, dtype=np.int64)  # a view of the array: sorted in place, no copy
        ordered.sort()
        twice = set(ordered[1:][ordered[1:] == ordered[:-1]].tolist())
        if not twice:
            return []
        first: dict[str, str] = {}
        problems = []
        fix = (
            "give each query one row"
            if self.layout == "query"
            else "put the rows of one query next to each other (sort the log by query_id)"
        )
        kept, self.problems = self.problems, []
        for query in self._queries():
            if hash(query.query_id) not in twice:
                continue
            if query.query_id in first:
                problems.append(
                    Problem(query.where, f"query {query.query_id!r} again (first at {first[query.query_id]})", fix)
                )
            first.setdefault(query.query_id, query.where)
        self.problems = kept
        return problems
