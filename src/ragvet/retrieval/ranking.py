"""Turning scores into run rows, the same way for every retriever kind.

A run is a list of rows ``{case_id, rank, chunk_id, score}``. Scores are rounded
to :data:`SCORE_PLACES` *before* ranking and ties are broken by chunk_id, so float
noise can never reorder a run between machines, and chunks that fail a case's
metadata filter are never returned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragvet.schema import Case, Chunk, Scalar, matches_filter

SCORE_PLACES = 6

RunRow = dict[str, Any]


def allowed_mask(case: Case, chunks: Sequence[Chunk]) -> np.ndarray:
    """Which chunks the case's metadata filter admits (all, when it has none)."""
    return filter_mask(case, [chunk.metadata for chunk in chunks])


def filter_mask(case: Case, metadata: Sequence[dict[str, Scalar]]) -> np.ndarray:
    """Which of the chunks whose ``metadata`` is given the case's filter admits (all, when it has none)."""
    if not case.filter:
        return np.ones(len(metadata), dtype=bool)
    return np.array([matches_filter(one, case.filter) for one in metadata], dtype=bool)


def rounded_scores(scores: np.ndarray) -> np.ndarray:
    """Finite scores rounded to :data:`SCORE_PLACES`. Above about 1.8e302 the scaling
    inside ``np.round`` overflows to inf, which would tie such scores and rank 1.7e308
    below 1e308; a double that large has no fractional digits, so it stays as it is."""
    with np.errstate(over="ignore"):
        rounded = np.round(scores, SCORE_PLACES)
    return np.where(np.isfinite(rounded), rounded, scores)


def top_ranked(
    case_id: str,
    scores: np.ndarray,
    allowed: np.ndarray,
    chunk_ids: Sequence[str],
    depth: int,
    min_score: float | None = 0.0,
) -> list[RunRow]:
    """Rank one case's scores into run rows: rounded score descending, then chunk_id.

    ``chunk_ids`` must be sorted, so that a stable sort on the negated score
    breaks ties by chunk_id. Only finite scores above ``min_score`` are kept
    (``None`` keeps every finite score, as cosine similarity may be negative);
    ``-inf`` marks a chunk the retriever did not return.
    """
    scores = scores.astype(np.float64, copy=False)
    eligible = allowed & np.isfinite(scores)
    if min_score is not None:
        eligible &= scores > min_score  # rounded again below: a score that rounds to min_score goes too
    keep = np.flatnonzero(eligible)
    if len(keep) > depth:  # partial selection first: rounding and sorting every chunk is the slow part
        values = scores[keep]
        cut = np.partition(values, len(values) - depth)[len(values) - depth]
        keep = keep[values >= cut - 10.0**-SCORE_PLACES]  # anything that may round to the cut's value stays
    rounded = rounded_scores(scores[keep])
    if min_score is not None:
        keep, rounded = keep[rounded > min_score], rounded[rounded > min_score]
    order = np.argsort(-rounded, kind="stable")[:depth]
    rounded, order = rounded[order], keep[order]
    return [
        {"case_id": case_id, "rank": rank, "chunk_id": chunk_ids[i], "score": float(score)}
        for rank, (i, score) in enumerate(zip(order, rounded), start=1)
    ]


def rank_scored(case: Case, scored: Mapping[str, float], chunk_by_id: Mapping[str, Chunk], depth: int) -> list[RunRow]:
    """Rank a case's scored candidates (from fusion, a reranker, a plugin or a run
    file) with the same rounding, tie-breaking and metadata filter as every kind."""
    return rank_by_metadata(case, scored, {chunk_id: chunk_by_id[chunk_id].metadata for chunk_id in scored}, depth)


def rank_by_metadata(
    case: Case, scored: Mapping[str, float], metadata: Mapping[str, dict[str, Scalar]], depth: int
) -> list[RunRow]:
    """:func:`rank_scored` given only each candidate's ``metadata`` (what a filter reads), for
    a search whose candidates come with it rather than as :class:`Chunk` objects."""
    ids = sorted(scored)
    scores = np.array([scored[chunk_id] for chunk_id in ids], dtype=np.float64)
    allowed = filter_mask(case, [metadata[chunk_id] for chunk_id in ids])
    return top_ranked(case.case_id, scores, allowed, ids, depth, min_score=None)


def by_case(rows: Sequence[RunRow]) -> dict[str, list[RunRow]]:
    grouped: dict[str, list[RunRow]] = {}
    for row in rows:
        grouped.setdefault(row["case_id"], []).append(row)
    return grouped
