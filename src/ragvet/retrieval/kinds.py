"""Retrievers: each ``kind`` in ``params.retrievers`` turns cases and chunks into a run.

A run is a list of rows ``{case_id, rank, chunk_id, score}``, down to ``depth``
for every case. Scores are rounded to :data:`ragvet.retrieval.ranking.SCORE_PLACES`
*before* ranking and ties are broken by chunk_id, so float noise can never reorder a
run between machines. Chunks that fail a case's metadata filter are never returned, and
chunks with a score of zero or less are not returned either: a BM25 score of 0
means no query term matched, and ranking those chunks alphabetically would turn
tie-breaking luck into recall.

This module only joins each kind's spec (:mod:`ragvet.retrieval.specs`: its keys and
checks) to its run, which lives with the code it runs: :mod:`~ragvet.retrieval.bm25`,
:mod:`~ragvet.retrieval.dense`, :mod:`~ragvet.retrieval.composite` (hybrid, rerank),
:mod:`~ragvet.retrieval.plugins` (python, run_file), :mod:`~ragvet.retrieval.endpoints`
(http) and :mod:`~ragvet.retrieval.postgres` (pgvector).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ragvet.errors import InputError, Problem
from ragvet.retrieval.bm25 import bm25_columns_run, bm25_run
from ragvet.retrieval.composite import hybrid_run, rerank_run
from ragvet.retrieval.dense import cluster_file_run, dense_run
from ragvet.retrieval.dense import streams_chunk_file as dense_streams_chunk_file
from ragvet.retrieval.endpoints import http_run
from ragvet.retrieval.passages import is_foreign
from ragvet.retrieval.plugins import python_run, run_file_run
from ragvet.retrieval.postgres import cluster_file_run as pgvector_file_run
from ragvet.retrieval.postgres import pgvector_run
from ragvet.retrieval.postgres import streams_chunk_file as pgvector_streams_chunk_file
from ragvet.retrieval.ranking import RunRow
from ragvet.retrieval.request import Request
from ragvet.retrieval.specs.registry import SPECS, Spec
from ragvet.schema import Case, Chunk, Doc
from ragvet.storage.columns import ChunkTexts
from ragvet.storage.tables import IdsDigest

# A run over a chunk file the retriever streams itself: (cases, chunk file, spec, depth,
# manifests, latency) to its rows, each with its ``chunk`` number, and the sorted ids' digest.
FileRun = Callable[[Sequence[Case], Path, dict, int, list[dict], dict[str, float]], tuple[list[RunRow], IdsDigest]]


def _never(spec: dict) -> bool:
    return False


@dataclass(frozen=True)
class Kind:
    """A retriever kind: what its entries accept, and its run; for a kind some of whose
    entries stream the chunk file (``streams``), their run over that file."""

    spec: Spec
    run: Callable[[Request, dict], list[RunRow]]
    streams: Callable[[dict], bool] = _never
    file_run: FileRun | None = None


def run_named(request: Request, name: str) -> list[RunRow]:
    """The run of the retriever called ``name`` (a member of a hybrid or rerank).

    Members rank the chunking's chunks: fusing or re-scoring foreign passages with
    chunks would mix two segmentations of the corpus in one ranking.
    """
    spec = request.retrievers[name]
    rows = kind_for(spec).run(request, spec)
    if is_foreign(row["chunk_id"] for row in rows):
        raise InputError(
            [
                Problem(
                    f"params.yaml: retriever {name!r}",
                    "it returns foreign passages, so it cannot be a member of a hybrid or rerank",
                    "evaluate it as a configuration of its own",
                )
            ]
        )
    return rows


KINDS: dict[str, Kind] = {
    "bm25": Kind(SPECS["bm25"], bm25_run),
    "dense": Kind(
        SPECS["dense"],
        lambda request, spec: dense_run(request.cases, request.chunks, spec, request.depth, request.manifests),
        dense_streams_chunk_file,
        lambda cases, path, spec, depth, manifests, _: cluster_file_run(cases, path, spec, depth, manifests),
    ),
    "hybrid": Kind(SPECS["hybrid"], partial(hybrid_run, run_member=run_named)),
    "rerank": Kind(SPECS["rerank"], partial(rerank_run, run_member=run_named)),
    "python": Kind(SPECS["python"], python_run),
    "run_file": Kind(SPECS["run_file"], run_file_run),
    "http": Kind(SPECS["http"], http_run),
    "pgvector": Kind(SPECS["pgvector"], pgvector_run, pgvector_streams_chunk_file, pgvector_file_run),
}


def kind_for(spec: dict) -> Kind:
    """The retriever kind a spec names (its run, and its keys and checks)."""
    return KINDS[spec["kind"]]


def retrieve(
    cases: Sequence[Case],
    chunks: Sequence[Chunk] | ChunkTexts,
    spec: dict,
    depth: int,
    retrievers: Mapping[str, dict] | None = None,
    docs: Mapping[str, Doc] | None = None,
    latency: dict[str, float] | None = None,
    manifests: list[dict] | None = None,
) -> list[RunRow]:
    """Run the retriever ``spec`` for every case; rows sorted by (case_id, rank).

    ``retrievers`` holds every named spec, which hybrid and rerank need for
    their members; ``docs`` the corpus, where foreign passages are located. The
    rows rank either the chunking's chunks or foreign passages, never both
    (:func:`ragvet.retrieval.passages.is_foreign`). Kinds that time each query
    (bm25, http) put its seconds in ``latency``; ``engine: ray`` puts the manifest of the
    vectors it computed in ``manifests``. The bm25 kind also takes the chunks as :class:`ChunkTexts`
    (the retrieve stage reads them so, to fit a million chunks in less memory);
    every other kind needs :class:`Chunk` objects.
    """
    cases = sorted(cases, key=lambda c: c.case_id)
    if isinstance(chunks, ChunkTexts):
        if spec["kind"] != "bm25":
            raise ValueError(f"the {spec['kind']} kind needs Chunk objects, not ChunkTexts")
        rows = bm25_columns_run(cases, chunks, spec, depth, latency)
    else:
        chunks = sorted(chunks, key=lambda c: c.chunk_id)
        timed = {} if latency is None else latency
        request = Request(
            cases, chunks, depth, retrievers or {}, docs or {}, timed, [] if manifests is None else manifests
        )
        rows = kind_for(spec).run(request, spec)
        try:
            is_foreign(row["chunk_id"] for row in rows)
        except ValueError as err:
            raise InputError([Problem(f"retriever kind {spec['kind']}", str(err), "rank chunks or passages")]) from None
    return _run_order(rows)


def _run_order(rows: list[RunRow]) -> list[RunRow]:
    return sorted(rows, key=lambda row: (row["case_id"], row["rank"]))


def streams_chunk_file(spec: dict) -> bool:
    """Whether the retriever ``spec`` reads the chunk file itself (:func:`retrieve_chunk_file`),
    so the retrieve stage holds no chunk: ``kind: dense`` with ``engine: ray`` and ``index:
    flat`` (:func:`ragvet.retrieval.dense.streams_chunk_file`), pgvector's owned table with
    ``engine: ray`` (:func:`ragvet.retrieval.postgres.streams_chunk_file`)."""
    return kind_for(spec).streams(spec)


def retrieve_chunk_file(
    cases: Sequence[Case],
    chunks: Path,
    spec: dict,
    depth: int,
    manifests: list[dict],
    latency: dict[str, float] | None = None,
) -> tuple[list[RunRow], IdsDigest]:
    """:func:`retrieve` for a retriever that streams the chunk file itself
    (:func:`streams_chunk_file`): its rows, each with its ``chunk`` number, and the digest of
    the chunking's sorted ids (the run's numbering). Kinds that time each query put its
    seconds in ``latency``."""
    file_run = kind_for(spec).file_run
    if file_run is None or not streams_chunk_file(spec):
        raise ValueError(f"a {spec['kind']} retriever of these keys does not stream the chunk file")
    ordered = sorted(cases, key=lambda c: c.case_id)
    rows, numbering = file_run(ordered, chunks, spec, depth, manifests, {} if latency is None else latency)
    return _run_order(rows), numbering
