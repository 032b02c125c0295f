"""A SQuAD file (v1.1 or v2.0) as ragvet's corpus and span-labelled cases (:mod:`ragvet.formats.imported`)."""

from __future__ import annotations

import bisect
import json
import json.decoder
import json.scanner
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragvet.errors import Problem, raise_if
from ragvet.formats.imported import (
    WHITESPACE,
    Imported,
    Row,
    doc_row,
    no_docs_problem,
    question_text,
    read_text_file,
    sorted_imported,
    unique,
)
from ragvet.text.nesting import loads
from ragvet.text.values import as_id, kind_of


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
    return f"{WHITESPACE.sub('_', title.strip())}/{index}"


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
            if not unique(seen_docs, doc_id, where, "doc id (article title and paragraph index)", problems):
                continue
            if not context.strip():
                skipped["paragraphs with no context"] += 1
                skipped["questions on a paragraph with no context"] += len(qas)
                continue
            docs.append(doc_row(doc_id, context, title))
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
    if not unique(seen, qid, where, "question id", problems):
        return None
    question = question_text(qa.get("question"))
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
    text = read_text_file(path, problems, "SQuAD file")
    raise_if(problems)
    assert text is not None
    try:
        data = loads(text)
    except json.JSONDecodeError as err:
        raise_if([Problem(f"{path}:{err.lineno}", f"malformed JSON: {err.msg}", "fix the JSON syntax")])
    docs, cases, doc_sources, case_sources = _parse_squad(path, data, problems, skipped)
    if problems:  # parse again, slowly, to name the line of each problem
        problems, skipped = [], Counter()
        _parse_squad(path, loads(text, _load_located_json), problems, skipped)
    if not docs and not problems:
        problems.append(no_docs_problem(path, 0))
    raise_if(problems)
    return sorted_imported(docs, cases, doc_sources, case_sources, skipped)
