"""Rank fusion for the ``hybrid`` retriever: reciprocal rank fusion and weighted
score fusion with min-max or z-score normalisation.

These follow ranx's definitions exactly (the tests use ``ranx.fuse`` as the
oracle), but are written out here: ranx compiles its fusion with numba on first
use, which costs seconds per process, while fusing a few ranked lists per case
in plain Python costs microseconds (``benchmarks/fusion.py`` measures both).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

_EPSILON = 1e-9  # ranx's floor for a zero spread


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], rrf_k: int) -> dict[str, float]:
    """RRF (Cormack et al., 2009): ``score(d) = Σ_m 1 / (rrf_k + rank_m(d))``.

    ``rank_m`` is 1-based; a chunk a member did not return adds nothing.
    """
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, chunk_id in enumerate(ranking, start=1):
            fused[chunk_id] = fused.get(chunk_id, 0.0) + 1.0 / (rrf_k + rank)
    return fused


def normalise(scores: Mapping[str, float], method: str) -> dict[str, float]:
    """Put one member's scores for one case on a common scale.

    ``min-max``: ``(s - min) / max(max - min, 1e-9)``; ``z-score``:
    ``(s - mean) / max(std, 1e-9)`` with the population std. The floor keeps a
    single result (or all-equal scores) finite, as ranx does: they map to 0.
    """
    if not scores:
        return {}
    values = list(scores.values())
    if method == "min-max":
        low = min(values)
        spread = max(max(values) - low, _EPSILON)
        return {key: (value - low) / spread for key, value in scores.items()}
    mean = math.fsum(values) / len(values)
    std = math.sqrt(math.fsum((value - mean) ** 2 for value in values) / len(values))
    return {key: (value - mean) / max(std, _EPSILON) for key, value in scores.items()}


def weighted_fusion(
    member_scores: Sequence[Mapping[str, float]], weights: Sequence[float], method: str
) -> dict[str, float]:
    """``score(d) = Σ_m w_m · norm_m(d)``, a chunk missing from a member adding 0.

    Raw scores of BM25 and cosine similarity live on unrelated scales, which is
    why each member is normalised per case before weighting.
    """
    fused: dict[str, float] = {}
    for scores, weight in zip(member_scores, weights):
        for chunk_id, value in normalise(scores, method).items():
            fused[chunk_id] = fused.get(chunk_id, 0.0) + weight * value
    return fused
