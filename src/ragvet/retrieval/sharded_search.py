"""Exact top-k over vectors sharded across the actors of a Ray cluster: the ranking of one flat index.

Each actor loads its share of the shards a manifest lists (consecutive chunk_id ranges,
straight from where the vectors live), and for a broadcast batch of queries returns its
own top ``depth`` of every query, ranked as :func:`ragvet.retrieval.ranking.top_ranked`
ranks: exact integer dot products (:func:`ragvet.retrieval.embedding.exact_scores`),
rounded, then score descending and chunk_id ascending. That order is total, so the
global top ``depth`` is contained in the union of the actors' and :func:`merge_top`
finds it by the same key: the same rows, bit for bit, as the flat search in one process.

The shards are consecutive chunk_id ranges, so each actor holds a consecutive range of the
chunking's positions (:func:`holder_ranges`): a metadata filter reaches it as its slice of a
:class:`ragvet.retrieval.chunk_positions.PositionMask`, and each row it returns carries its
chunk's position, the number the run's ``chunk`` column holds.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragvet.retrieval.chunk_positions import PositionMask
from ragvet.retrieval.cluster_embedding import describe, load
from ragvet.retrieval.embedding import GRID
from ragvet.retrieval.ranking import RunRow, top_ranked

QUERY_BLOCK = 256  # queries scored per matrix product on an actor


class VectorShards:
    """One actor's share of the corpus: its chunk_ids (sorted) and their grid integers as float64,
    read from where the vectors live; and each shard's record for the manifest (:meth:`records`),
    so the driver lists the shards without reading one."""

    def __init__(self, location: str, names: Sequence[str]):
        ids: list[str] = []
        grids = []
        self.described = []
        for name in names:
            record, found, grid = describe(name, load(location, name))
            self.described.append(record)
            ids.extend(found)
            if grid.size:
                grids.append(grid)
        self.chunk_ids = ids
        self.grid = np.concatenate(grids).astype(np.float64) if grids else np.zeros((0, 0))

    def records(self) -> list[dict]:
        return self.described

    def top(
        self, case_ids: Sequence[str], queries: np.ndarray, allowed: np.ndarray | None, depth: int, start: int = 0
    ) -> list[RunRow]:
        """This share's top ``depth`` rows of each query, each with its ``chunk`` number: ``start``
        (this share's first position in the chunking) plus its row here. ``allowed``: which of
        this share's rows a filter admits, by row (None for all)."""
        mask = np.ones(len(self.chunk_ids), dtype=bool) if allowed is None else allowed
        rows: list[RunRow] = []
        q_grid = np.rint(np.asarray(queries, dtype=np.float64) * GRID)
        for first in range(0, len(q_grid), QUERY_BLOCK):
            block = (q_grid[first : first + QUERY_BLOCK] @ self.grid.T) / (GRID * GRID)
            for case_id, scores in zip(case_ids[first : first + QUERY_BLOCK], block):
                rows.extend(top_ranked(case_id, scores, mask, self.chunk_ids, depth, min_score=None))
        for row in rows:
            row["chunk"] = start + bisect_left(self.chunk_ids, row["chunk_id"])
        return rows


def merge_top(parts: Sequence[Sequence[RunRow]], depth: int) -> list[RunRow]:
    """Each case's top ``depth`` of the actors' rows by (score descending, chunk_id ascending), ranked 1..n."""
    by_case: dict[str, list[RunRow]] = {}
    for part in parts:
        for row in part:
            by_case.setdefault(row["case_id"], []).append(row)
    merged = []
    for case_id in sorted(by_case):
        best = sorted(by_case[case_id], key=lambda row: (-row["score"], row["chunk_id"]))[:depth]
        merged.extend({**row, "rank": rank} for rank, row in enumerate(best, start=1))
    return merged


def spread(names: Sequence[str], actors: int) -> list[list[str]]:
    """Consecutive runs of shard names, one per actor (at most as many actors as shards)."""
    count = max(1, min(actors, len(names)))
    bounds = np.linspace(0, len(names), count + 1).round().astype(int)
    return [list(names[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]


def start_shards(ray, location: str, names: Sequence[str], actors: int, num_cpus: float) -> list[Any]:
    """Actors holding the shards, spread over the cluster's nodes."""
    remote = ray.remote(VectorShards).options(num_cpus=num_cpus, scheduling_strategy="SPREAD")
    return [remote.remote(location, part) for part in spread(names, actors)]


def holder_ranges(records: Sequence[Sequence[dict]]) -> list[tuple[int, int]]:
    """Each holder's positions in the chunking, ``[start, stop)``, from its shards' records in
    holder order: the holders hold consecutive shards, so the rows of those before it come first."""
    stops = np.cumsum([sum(record.get("rows", 0) for record in part) for part in records]).tolist()
    return list(zip([0, *stops[:-1]], stops))


def cluster_top(
    ray,
    holders: Sequence[Any],
    ranges: Sequence[tuple[int, int]],
    case_ids: Sequence[str],
    queries: np.ndarray,
    allowed: PositionMask | None,
    depth: int,
) -> list[RunRow]:
    """Exact top ``depth`` of each query over every holder's vectors, each row with its
    ``chunk`` number: the query batch is put in the object store once and broadcast, each
    holder receives its ``ranges`` slice of the ``allowed`` mask (None: every chunk), and
    each holder's top is merged."""
    queries_ref = ray.put(np.asarray(queries))
    calls = []
    for holder, (start, stop) in zip(holders, ranges):
        part = None if allowed is None else ray.put(allowed.slice(start, stop))
        calls.append(holder.top.remote(list(case_ids), queries_ref, part, depth, start))
    return merge_top(ray.get(calls), depth)
