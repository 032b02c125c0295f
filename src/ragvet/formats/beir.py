"""A BEIR folder as ragvet's corpus and cases (:mod:`ragvet.formats.imported`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ragvet.errors import Problem, raise_if
from ragvet.formats.imported import (
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
from ragvet.text.values import as_id, kind_of


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
    rows = jsonl_objects(corpus_path, problems, "corpus.jsonl", '{"_id": ..., "title": ..., "text": ...}')
    docs: list[Row] = []
    doc_sources: dict[str, str] = {}
    empty_docs: set[str] = set()
    seen: dict[str, str] = {}
    for where, row in rows:
        doc_id = as_id(row.get("_id"))
        if doc_id is None:
            problems.append(Problem(where, f"missing or empty _id (got {row.get('_id')!r})", "give every doc an _id"))
            continue
        if not unique(seen, doc_id, where, "doc id", problems):
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
        docs.append(doc_row(doc_id, text, title or None, scalar_metadata(row.get("metadata"), skipped)))
        doc_sources[doc_id] = where
    if not docs and not problems:
        problems.append(no_docs_problem(corpus_path, len(rows)))

    queries_path = folder / "queries.jsonl"
    queries: dict[str, tuple[str, str]] = {}
    all_queries: set[str] = set()
    seen = {}
    for where, row in jsonl_objects(queries_path, problems, "queries.jsonl", '{"_id": ..., "text": ...}'):
        qid = as_id(row.get("_id"))
        if qid is None:
            problems.append(Problem(where, f"missing or empty _id (got {row.get('_id')!r})", "give every query an _id"))
            continue
        if not unique(seen, qid, where, "query id", problems):
            continue
        all_queries.add(qid)
        question = question_text(row.get("text"))
        if question is None:
            skipped["queries with no text"] += 1
            continue
        queries[qid] = (question, where)

    qrels_dir = folder / "qrels"
    qrels_path = qrels_dir / f"{split}.tsv"
    judgements = Judgements()
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
        text = read_text_file(qrels_path, problems, "qrels file") or ""
        known = (all_queries, set(doc_sources), empty_docs)
        for index, (number, line) in enumerate(numbered_lines(text)):
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
            judge(judgements, qid, doc_id, grade, where, known, problems, skipped)
    raise_if(problems)

    elsewhere: dict[str, str] = {}
    for other in sorted(qrels_dir.glob("*.tsv")):
        if other == qrels_path:
            continue
        for _, line in numbered_lines(other.read_text(encoding="utf-8", errors="replace")):
            elsewhere.setdefault(line.split()[0], f"qrels/{other.name}")
    cases, case_sources = document_cases(queries, judgements, min_grade, abstain_unjudged, skipped, elsewhere)
    return sorted_imported(docs, cases, doc_sources, case_sources, skipped)
