"""Reading and writing the pipeline's intermediate tables (validated corpus and
cases, chunks, runs, per-case results). One place, so every stage agrees on the
formats and every row is sorted the same way."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

from stages.errors import Problem, raise_if
from stages.files import iter_jsonl, read_jsonl, write_jsonl
from stages.schema import Case, Chunk, Doc


def write_docs(path: Path, docs: Iterable[Doc]) -> None:
    write_jsonl(path, (doc.to_row() for doc in sorted(docs, key=lambda d: d.doc_id)))


def read_docs(path: Path) -> list[Doc]:
    return [Doc.from_row(row) for row in read_jsonl(path)]


def write_cases(path: Path, cases: Iterable[Case]) -> None:
    write_jsonl(path, (case.to_row() for case in sorted(cases, key=lambda c: c.case_id)))


def read_cases(path: Path) -> list[Case]:
    return [Case.from_row(row) for row in read_jsonl(path)]


def write_chunks(path: Path, chunks: Iterable[Chunk]) -> None:
    write_jsonl(path, (chunk.to_row() for chunk in sorted(chunks, key=lambda c: (c.doc_id, c.ordinal))))


def read_chunks(path: Path) -> list[Chunk]:
    return [Chunk.from_row(row) for row in read_jsonl(path)]


RunRow = dict


def read_run(path: Path, chunk_ids: set[str], case_ids: set[str]) -> dict[str, list[RunRow]]:
    """A run grouped by case and sorted by rank; every problem is collected.

    A chunk id twice for one case is an error, not something to dedupe quietly:
    ragvet's own retrievers never do it, so it means the run came from a
    retriever with a bug that recall would otherwise hide.
    """
    problems: list[Problem] = []
    by_case: dict[str, list[RunRow]] = defaultdict(list)
    seen: dict[tuple[str, str], int] = {}
    for line, row in iter_jsonl(path):
        where = f"{path}:{line}"
        if not isinstance(row, dict) or not {"case_id", "rank", "chunk_id", "score"} <= set(row):
            problems.append(Problem(where, "a run row needs case_id, rank, chunk_id and score", "re-run dvc repro"))
            continue
        case_id, chunk_id = row["case_id"], row["chunk_id"]
        if case_id not in case_ids:
            problems.append(Problem(f"{where} (case {case_id})", "unknown case id", "re-run the retrieve stage"))
        if chunk_id not in chunk_ids:
            problems.append(
                Problem(f"{where} (case {case_id})", f"unknown chunk id {chunk_id!r}", "run against the right chunking")
            )
        if (case_id, chunk_id) in seen:
            problems.append(
                Problem(
                    f"{where} (case {case_id})",
                    f"duplicate chunk id {chunk_id!r} (already at line {seen[case_id, chunk_id]})",
                    "make the retriever return each chunk at most once per case",
                )
            )
        seen[case_id, chunk_id] = line
        by_case[case_id].append(row)
    raise_if(problems)
    return {case_id: sorted(rows, key=lambda r: r["rank"]) for case_id, rows in by_case.items()}


def write_rows(path: Path, rows: Sequence[dict], key: str) -> None:
    """JSONL sorted by one key: per-case results by case_id."""
    write_jsonl(path, sorted(rows, key=lambda row: row[key]))
