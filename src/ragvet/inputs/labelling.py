"""Which unlabelled queries to label next: those a change moved, drawn per slice.

The gate sees only labelled cases; a change may move the top k of traffic nobody labelled.
The queries here are those of an unlabelled log (``ragvet import log --out-unlabelled``
writes one: ``{query_id, question, tags?, tenant?, ...}`` per line). A query *moved* when
the set of its top ``k`` chunks differs between the baseline's ranking and the
candidate's (``topk_changed@k``, :mod:`ragvet.measures.overlap`); a query one ranking
lacks moved. The moved queries are grouped by the value of one tag (the slice; a query
without it is in the slice ``(none)``), and each slice gives its first ``n`` in the
order of ``sha256(seed, query id)``: the same seed and inputs give the same sample on any
machine, and a query added to the log never changes the order of the others.

Each drawn query becomes a case ready for annotation: its id, question and tags, and
``status: pending``, so that validate accepts the file and leaves the case out of the
splits until an annotator adds its evidence and removes the status (docs/inputs.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import polars as pl

from ragvet.errors import InputError, Problem, raise_if
from ragvet.formats.imported import unique
from ragvet.formats.logs import jsonl_rows, query_fields
from ragvet.gating.movement import Ranking, Sides, moved_batches
from ragvet.settings import RBO_PERSISTENCE
from ragvet.storage.rankings import RANKING_COLUMNS

NO_SLICE = "(none)"  # the slice of a query without the slice tag
T = TypeVar("T")


@dataclass(frozen=True)
class Query:
    """One query of the unlabelled log."""

    query_id: str
    question: str
    tags: dict[str, str]


def checked_ranking(path: Path, what: str) -> Ranking:
    """A ranking's file (a retrieve stage's run, or the baseline's recorded ranking) and its
    name in errors, refused with the file named when it is not a readable Parquet file with
    ``case_id, rank, chunk_id`` columns; only its schema is read here."""
    names = _ranking_read(path, what, pl.read_parquet_schema)
    missing = [name for name in RANKING_COLUMNS if name not in names]
    if missing:
        raise InputError(
            [
                Problem(
                    str(path),
                    f"the {what} has no column {', '.join(missing)} (it has {', '.join(names)})",
                    "give a run as the retrieve stage writes it: case_id, rank, chunk_id",
                )
            ]
        )
    return path, str(path)


def read_ranking(path: Path, what: str) -> pl.DataFrame:
    """A ranking's ``case_id, rank, chunk_id`` (:func:`checked_ranking`), read whole."""
    checked_ranking(path, what)
    return _ranking_read(path, what, lambda found: pl.read_parquet(found, columns=list(RANKING_COLUMNS)))


def _ranking_read(path: Path, what: str, read: Callable[[Path], T]) -> T:
    """``read(path)``, a missing or unreadable file a problem naming it."""
    if not path.is_file():
        raise InputError([Problem(str(path), f"the {what} does not exist", "give the path of a ragvet run (.parquet)")])
    try:
        return read(path)
    except (pl.exceptions.PolarsError, OSError) as err:
        what_went = f"not a readable Parquet {what} ({type(err).__name__}: {str(err).splitlines()[0][:200]})"
        raise InputError([Problem(str(path), what_went, "give a run as the retrieve stage writes it")]) from None


def read_queries(path: Path) -> list[tuple[str, str, dict[str, str]]]:
    """``(query_id, question, tags)`` of every line of an unlabelled log (JSONL), every bad
    line a problem at its line, and a repeated query id too."""
    if not path.is_file():
        raise InputError(
            [
                Problem(
                    str(path), "the unlabelled log does not exist", "write it with `ragvet import log --out-unlabelled`"
                )
            ]
        )
    problems: list[Problem] = []
    seen: dict[str, str] = {}
    queries = []
    for where, row in jsonl_rows(path, problems):
        fields = query_fields(where, row)
        if isinstance(fields, list):
            problems += fields
        elif unique(seen, fields[0], where, "query_id", problems):
            queries.append(fields)
    if not queries and not problems:
        problems.append(
            Problem(str(path), "the unlabelled log holds no query", "give the log of the queries to sample")
        )
    raise_if(problems)
    return queries


def moved_queries(queries: Iterable[tuple[str, str, dict[str, str]]], sides: Sides, k: int) -> list[Query]:
    """The queries whose top ``k`` set changed from the baseline's ranking to the
    candidate's (``sides``, :func:`checked_ranking`), both read a batch of cases at a time
    (:func:`ragvet.gating.movement.moved_batches`: each table in case-id order)."""
    queries = list(queries)
    wanted = pl.Series("case_id", [query_id for query_id, _, _ in queries], dtype=pl.String).implode()
    changed = pl.col(f"topk_changed@{k}") == 1
    ids: set[str] = set()
    # A query neither ranking holds is in no batch: both its lists are empty, so it did not move.
    for frame in moved_batches(sides, [k], RBO_PERSISTENCE):
        ids.update(frame.filter(changed & pl.col("case_id").is_in(wanted))["case_id"].to_list())
    return [Query(query_id, question, tags) for query_id, question, tags in queries if query_id in ids]


def draw_order(seed: int, query_id: str) -> str:
    """A query's place in the seeded order: the same on every machine, independent of the others."""
    return hashlib.sha256(f"{seed}\0{query_id}".encode()).hexdigest()


def stratified(queries: Iterable[Query], slice_key: str, per_slice: int, seed: int) -> dict[str, list[Query]]:
    """Up to ``per_slice`` queries of each slice value (``tags[slice_key]``), first in the
    seeded order, by slice value, each slice's queries by id."""
    slices: dict[str, list[Query]] = {}
    for query in queries:
        slices.setdefault(query.tags.get(slice_key, NO_SLICE), []).append(query)
    return {
        value: sorted(sorted(found, key=lambda q: draw_order(seed, q.query_id))[:per_slice], key=lambda q: q.query_id)
        for value, found in sorted(slices.items())
    }


def case_row(query: Query) -> dict:
    """A drawn query as a case of the cases format, waiting for its evidence."""
    return {
        "id": query.query_id,
        "question": query.question,
        **({"tags": query.tags} if query.tags else {}),
        "status": "pending",
    }
