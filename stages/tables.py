"""Reading and writing the pipeline's intermediate tables (validated corpus and
cases, chunks, runs, per-case results). One place, so every stage agrees on the
formats and every row is sorted the same way."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from stages.errors import Problem, raise_if
from stages.files import iter_jsonl, read_jsonl, write_jsonl
from stages.schema import Case, Chunk, Doc

if TYPE_CHECKING:  # numpy and polars load only when a stage reads a table with them
    from stages.retrieval import ChunkTexts
    from stages.scoring import ChunkTable, EvidenceTable, RunTable


def write_docs(path: Path, docs: Iterable[Doc]) -> None:
    write_jsonl(path, (doc.to_row() for doc in sorted(docs, key=lambda d: d.doc_id)))


def read_docs(path: Path) -> list[Doc]:
    return [Doc.from_row(row) for row in read_jsonl(path)]


def write_cases(path: Path, cases: Iterable[Case]) -> None:
    write_jsonl(path, (case.to_row() for case in sorted(cases, key=lambda c: c.case_id)))


def read_cases(path: Path) -> list[Case]:
    return [Case.from_row(row) for row in read_jsonl(path)]


def read_evidence_table(path: Path) -> tuple[list[str], EvidenceTable]:
    """The validated cases' ids and evidence as columns, for the evaluation engine.

    Rows go straight from JSON to the columns, without a :class:`Case` per row
    (an order of magnitude faster at 100,000 cases). A file that does not read
    so goes through :func:`read_cases`, which names the line that is wrong.
    """
    import orjson

    from stages.scoring import EvidenceTable

    try:
        with open(path, "rb") as handle:
            rows = [orjson.loads(line) for line in handle if line.strip()]
        return [row["id"] for row in rows], EvidenceTable.from_rows(rows)
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError, OSError):
        cases = read_cases(path)
        return [case.case_id for case in cases], EvidenceTable.from_cases(cases)


def write_chunks(path: Path, chunks: Iterable[Chunk]) -> None:
    write_jsonl(path, (chunk.to_row() for chunk in sorted(chunks, key=lambda c: (c.doc_id, c.ordinal))))


def read_chunks(path: Path) -> list[Chunk]:
    return [Chunk.from_row(row) for row in read_jsonl(path)]


def read_chunk_texts(path: Path) -> ChunkTexts:
    """The chunk ids, texts and metadata BM25 reads, one line at a time, without a
    :class:`Chunk` per row (a million of them with their metadata dicts cost a
    gigabyte more than the index).

    Rows need every field :func:`read_chunks` needs; a file that does not read
    so goes through :func:`read_chunks`, which names the line that is wrong.
    orjson rather than polars: polars re-encodes nested metadata and turns 1.0
    into 1, which a filter compares as a different string.
    """
    import orjson

    from stages.retrieval import ChunkTexts

    def rows(handle):
        for line in handle:
            if line.strip():
                row = orjson.loads(line)
                if not {"chunk_id", "doc_id", "ordinal", "start", "end", "text"} <= row.keys():
                    raise KeyError("a chunk row lacks a field")
                yield row["chunk_id"], row["text"], dict(row.get("metadata") or {})

    try:
        with open(path, "rb") as handle:
            return ChunkTexts.from_rows(rows(handle))
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError, OSError):
        return ChunkTexts.from_chunks(read_chunks(path))


def read_chunk_table(path: Path) -> ChunkTable:
    """The chunk columns the evaluation engine reads (no text), straight into arrays.

    A file that does not parse as chunk rows goes through :func:`read_chunks`,
    which names the line that is wrong.
    """
    import polars as pl

    from stages.scoring import ChunkTable

    schema = {"chunk_id": pl.String, "doc_id": pl.String, "ordinal": pl.Int64, "start": pl.Int64, "end": pl.Int64}
    try:
        frame = pl.read_ndjson(path, schema=schema)
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError):
        frame = None
    if frame is None or frame.null_count().sum_horizontal().item() or frame["chunk_id"].n_unique() != len(frame):
        return ChunkTable.from_chunks(read_chunks(path))
    return ChunkTable(
        frame["chunk_id"].to_list(),
        frame["doc_id"].to_list(),
        frame["ordinal"].to_numpy(),
        frame["start"].to_numpy(),
        frame["end"].to_numpy(),
    )


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


def read_run_table(path: Path, chunk_ids: Sequence[str], case_ids: Sequence[str]) -> RunTable:
    """A run as interned columns (:class:`stages.scoring.RunTable`), with the checks
    of :func:`read_run`: every row complete, known case and chunk ids, no chunk
    twice for one case.

    Millions of rows parse in C (polars) without a Python object per row. When
    any check fails, the file is read again by :func:`read_run`, which names
    every line that is wrong.
    """
    import numpy as np
    import polars as pl

    from stages.scoring import RunTable

    schema = {"case_id": pl.String, "chunk_id": pl.String, "rank": pl.Int64, "score": pl.Float64}
    cases = sorted(set(case_ids))
    numbers = {
        "case": pl.DataFrame({"case_id": cases, "case": np.arange(len(cases))}),
        "chunk": pl.DataFrame({"chunk_id": list(chunk_ids), "chunk": np.arange(len(chunk_ids))}),
    }
    try:
        frame = pl.read_ndjson(path, schema=schema)
        for name, table in numbers.items():  # a hash join interns ids faster than an Enum cast
            frame = frame.join(table, on=f"{name}_id", how="left", maintain_order="left").drop(f"{name}_id")
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError):
        frame = None
    clean = (
        frame is not None
        and not frame.null_count().sum_horizontal().item()
        and frame.select((pl.col("case") * len(chunk_ids) + pl.col("chunk")).n_unique()).item() == len(frame)
    )
    if not clean:  # a problem somewhere: the validating reader finds and names each one
        rows = read_run(path, set(chunk_ids), set(case_ids))
        return RunTable.from_mapping(rows, {chunk_id: row for row, chunk_id in enumerate(chunk_ids)})
    return RunTable(
        cases,
        frame["case"].to_numpy(),
        frame["chunk"].to_numpy(),
        frame["rank"].to_numpy(),
        frame["score"].to_numpy(),
        distinct=True,
    )


def write_rows(path: Path, rows: Sequence[dict], key: str) -> None:
    """JSONL sorted by one key: per-case results by case_id."""
    write_jsonl(path, sorted(rows, key=lambda row: row[key]))
