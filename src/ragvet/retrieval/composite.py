"""The kinds built from other retrievers, their members: ``hybrid`` fuses the members'
runs, ``rerank`` re-scores its first stage's with an encoder (their keys and checks:
:mod:`ragvet.retrieval.specs.hybrid`, :mod:`ragvet.retrieval.specs.rerank`).

A member's run comes from ``run_member(request, name)``: the kinds table
(:mod:`ragvet.retrieval.kinds`) runs any kind by name, and checks what it returns.
"""

from __future__ import annotations

from collections.abc import Callable

from ragvet.retrieval.dense import bi_encoder_scores_many, cross_encoder_scores_many
from ragvet.retrieval.embedding import EmbeddingCache
from ragvet.retrieval.fusion import reciprocal_rank_fusion, weighted_fusion
from ragvet.retrieval.models import DEFAULT_MODEL, PORTABLE
from ragvet.retrieval.ranking import RunRow, by_case, rank_scored
from ragvet.retrieval.request import Request

RunMember = Callable[[Request, str], list[RunRow]]


def hybrid_run(request: Request, spec: dict, run_member: RunMember) -> list[RunRow]:
    """Fuse the members' runs, each retrieved to ``candidates`` (default 100)."""
    members = [by_case(run_member(request.deeper(spec.get("candidates", 100)), name)) for name in spec["members"]]
    chunk_by_id = request.chunk_by_id()
    rows: list[RunRow] = []
    for case in request.cases:
        runs = [member.get(case.case_id, []) for member in members]
        if spec.get("fusion", "rrf") == "rrf":
            fused = reciprocal_rank_fusion([[r["chunk_id"] for r in run] for run in runs], spec.get("rrf_k", 60))
        else:
            scores = [{r["chunk_id"]: r["score"] for r in run} for run in runs]
            weights = spec.get("weights") or [1.0] * len(runs)
            fused = weighted_fusion(scores, weights, spec.get("normalisation", "min-max"))
        rows.extend(rank_scored(case, fused, chunk_by_id, request.depth))
    return rows


def rerank_run(request: Request, spec: dict, run_member: RunMember) -> list[RunRow]:
    """Re-score the first stage's top ``top_n`` (default 50) with an encoder.

    The run holds only re-scored chunks, so it is as deep as ``min(top_n, depth)``.
    """
    first = by_case(run_member(request.deeper(spec.get("top_n", 50)), spec["first_stage"]))
    chunk_by_id = request.chunk_by_id()
    items = [(case, [row["chunk_id"] for row in first.get(case.case_id, [])]) for case in request.cases]
    pairs = [(case.question, [chunk_by_id[chunk_id].text for chunk_id in ids]) for case, ids in items]
    batch, precision = spec.get("batch_size", 32), spec.get("precision", PORTABLE)
    if spec.get("scorer", "bi-encoder") == "cross-encoder":
        scored = cross_encoder_scores_many(spec["model"], pairs, batch, precision)
    else:
        with EmbeddingCache() as cache:
            scored = bi_encoder_scores_many(
                spec.get("model", DEFAULT_MODEL),
                pairs,
                query_prefix=spec.get("query_prefix", ""),
                passage_prefix=spec.get("passage_prefix", ""),
                batch_size=batch,
                cache=cache,
                precision=precision,
            )
    rows: list[RunRow] = []
    for (case, ids), scores in zip(items, scored):
        rows.extend(rank_scored(case, dict(zip(ids, map(float, scores))), chunk_by_id, request.depth))
    return rows
