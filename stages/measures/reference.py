"""Retrieval and evidence-availability metrics: one case at a time, then macro means.

These are the reference definitions of ragvet's figures (DESIGN.md, "Metric
definitions"). Every function takes a ranked list of chunk ids, best first, and
treats it the same way:

* The list is deduplicated first, keeping the first occurrence of each id; ranks
  are positions in the deduplicated list, starting at 1.
* ``k <= 0`` selects no chunk, which gives ``0.0``.
* A ``k`` beyond the list counts the missing ranks as non-relevant, as trec_eval
  does (so ``precision@k`` still divides by ``k``).
* A case with nothing to find (no relevant chunk, no evidence unit, no claim) has
  no value for the metric that needs it: the function returns ``None`` and the
  case is reported apart, never averaged in as ``0``.

Chunk-level ``recall``, ``hit``, ``mrr``, ``precision`` and ``ndcg`` agree with
trec_eval (``recall_k``, ``success_k``, ``recip_rank``, ``P_k``, ``ndcg_cut_k``)
under binary relevance; the test suite checks this against pytrec_eval and ranx.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stages.measures.registry import METRICS, sorted_ks
from stages.schema import ProjectedUnit

# ---------------------------------------------------------------------------
# Reference functions (one case)
# ---------------------------------------------------------------------------


def dedupe(retrieved: Sequence[str]) -> tuple[list[str], int]:
    """Drop repeated ids, keeping the first occurrence of each.

    Returns ``(deduplicated list, number of entries removed)``; an empty input
    gives ``([], 0)``.
    """
    seen: set[str] = set()
    kept: list[str] = []
    for chunk_id in retrieved:
        if chunk_id not in seen:
            seen.add(chunk_id)
            kept.append(chunk_id)
    return kept, len(retrieved) - len(kept)


def _top(retrieved: Sequence[str], k: int | None) -> list[str]:
    """The deduplicated top-``k`` (all of it when ``k`` is None, nothing when ``k <= 0``)."""
    ranked, _ = dedupe(retrieved)
    if k is None:
        return ranked
    return ranked[: max(k, 0)]


def recall_at_k(retrieved: Sequence[str], relevant: Collection[str], k: int) -> float | None:
    """Chunk-level recall: ``|top-k ∩ relevant| / |relevant|``.

    ``None`` when ``relevant`` is empty; ``0.0`` when ``k <= 0``.
    """
    rel = set(relevant)
    if not rel:
        return None
    return len(rel.intersection(_top(retrieved, k))) / len(rel)


def hit_at_k(retrieved: Sequence[str], relevant: Collection[str], k: int) -> float | None:
    """``1.0`` if any relevant chunk is in the top-k, else ``0.0`` (trec_eval ``success_k``).

    ``None`` when ``relevant`` is empty; ``0.0`` when ``k <= 0``.
    """
    rel = set(relevant)
    if not rel:
        return None
    return 1.0 if rel.intersection(_top(retrieved, k)) else 0.0


def first_relevant_rank(retrieved: Sequence[str], relevant: Collection[str]) -> int | None:
    """1-based rank of the first relevant chunk in the deduplicated list, or ``None``."""
    rel = set(relevant)
    for rank, chunk_id in enumerate(_top(retrieved, None), start=1):
        if chunk_id in rel:
            return rank
    return None


def reciprocal_rank(retrieved: Sequence[str], relevant: Collection[str], depth: int | None = None) -> float | None:
    """``1 / rank`` of the first relevant chunk within ``depth``, ``0.0`` if none (trec_eval ``recip_rank``).

    ``depth=None`` looks at the whole list (which the retrieve stage already cut at
    ``params.depth``). ``None`` when ``relevant`` is empty; ``0.0`` when ``depth <= 0``.
    """
    if not set(relevant):
        return None
    rank = first_relevant_rank(_top(retrieved, depth), relevant)
    return 0.0 if rank is None else 1.0 / rank


def precision_at_k(retrieved: Sequence[str], relevant: Collection[str], k: int) -> float | None:
    """trec_eval ``P_k``: ``|top-k ∩ relevant| / k``; ranks past the list count as non-relevant.

    ``None`` when ``relevant`` is empty; ``0.0`` when ``k <= 0``.
    """
    rel = set(relevant)
    if not rel:
        return None
    if k <= 0:
        return 0.0
    return len(rel.intersection(_top(retrieved, k))) / k


def _discount(rank: int) -> float:
    return 1.0 / math.log2(rank + 1)


def ndcg_at_k(retrieved: Sequence[str], relevant: Collection[str], k: int) -> float | None:
    """trec_eval ``ndcg_cut_k`` with binary relevance: ``DCG@k / IDCG@k``.

    ``DCG@k = Σ_{i ≤ k, doc_i relevant} 1 / log2(i + 1)`` over the deduplicated list;
    ``IDCG@k = Σ_{i ≤ min(k, |relevant|)} 1 / log2(i + 1)``, the DCG of a perfect ranking.
    ``None`` when ``relevant`` is empty; ``0.0`` when ``k <= 0``.
    """
    rel = set(relevant)
    if not rel:
        return None
    if k <= 0:
        return 0.0
    dcg = math.fsum(_discount(rank) for rank, chunk_id in enumerate(_top(retrieved, k), start=1) if chunk_id in rel)
    idcg = math.fsum(_discount(rank) for rank in range(1, min(k, len(rel)) + 1))
    return dcg / idcg


def _union_length(intervals: Iterable[tuple[int, int]]) -> int:
    """Characters covered by the union of half-open intervals ``[start, end)``."""
    covered = 0
    reach: int | None = None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            covered += max(end - start, 0)
            reach = end
        elif end > reach:
            covered += end - reach
            reach = end
    return covered


def check_coverage(span_coverage: float) -> None:
    """Refuse a share outside [0, 1]: a programming error, since validate checks params."""
    if not 0.0 <= span_coverage <= 1.0:
        raise ValueError(f"span_coverage must be between 0 and 1, got {span_coverage!r}")


def unit_available(unit: ProjectedUnit, top_k: Collection[str], span_coverage: float = 1.0) -> bool:
    """Whether one evidence unit is available in a set of chunks.

    A ``{doc}`` unit is available when any of its chunks (``unit.pieces`` keys) is in
    ``top_k``. A span is available when at least one of its chunks is in ``top_k``
    and the *union* of their pieces covers at least ``span_coverage * length``
    characters (overlapping chunks are not counted twice; projected for evaluation,
    pieces and length count non-whitespace characters only). A zero-length span is
    available when any of its chunks is in ``top_k``. ``span_coverage`` must be in
    ``[0, 1]``; ``0`` means "any overlap". A unit with alternatives is available
    when any one of them is (each judged on its own, never pooled).
    """
    check_coverage(span_coverage)
    if unit.alternatives:
        return any(unit_available(alternative, top_k, span_coverage) for alternative in unit.alternatives)
    chosen = set(top_k)
    present = [piece for chunk_id, piece in unit.pieces.items() if chunk_id in chosen]
    if not present:
        return False
    if unit.doc_level or unit.length <= 0:
        return True
    # A ratio, not ``covered >= coverage * length``: 3/10 and 0.3 round to the same double.
    return _union_length(present) / unit.length >= span_coverage


def evidence_recall_at_k(
    retrieved: Sequence[str], units: Sequence[ProjectedUnit], k: int, span_coverage: float = 1.0
) -> float | None:
    """Share of evidence units available in the top-k (see :func:`unit_available`).

    ``available units / units``. ``None`` when there are no units; ``0.0`` when ``k <= 0``.
    """
    check_coverage(span_coverage)
    if not units:
        return None
    top = set(_top(retrieved, k))
    return sum(unit_available(unit, top, span_coverage) for unit in units) / len(units)


def _claim_available(claim: Sequence[ProjectedUnit], top: Collection[str], span_coverage: float) -> bool:
    return any(unit_available(unit, top, span_coverage) for unit in claim)


def claim_evidence_availability(
    retrieved: Sequence[str], claims: Sequence[Sequence[ProjectedUnit]], k: int, span_coverage: float = 1.0
) -> float | None:
    """Share of claims with at least one evidence unit available in the top-k.

    ``available claims / claims``; a claim with no units is never available. This
    is annotated evidence availability, not a judgement of any answer. ``None``
    when there are no claims; ``0.0`` when ``k <= 0``.
    """
    check_coverage(span_coverage)
    if not claims:
        return None
    top = set(_top(retrieved, k))
    return sum(_claim_available(claim, top, span_coverage) for claim in claims) / len(claims)


def context_chars_at_k(retrieved: Sequence[str], chunk_lengths: Mapping[str, int], k: int) -> int:
    """Characters in the deduplicated top-k chunks: ``Σ len(chunk)``, the context budget.

    Overlapping chunks are counted in full, as they would be sent to a model.
    Defined for every case, abstention cases included; ``0`` when ``k <= 0`` or the
    list is empty. An id missing from ``chunk_lengths`` raises ``KeyError``.
    """
    total = 0
    for chunk_id in _top(retrieved, k):
        if chunk_id not in chunk_lengths:
            raise KeyError(f"retrieved chunk {chunk_id!r} is not in the chunking")
        total += chunk_lengths[chunk_id]
    return total


@dataclass(frozen=True)
class CaseInput:
    """Everything a per-case metric may read. ``retrieved`` is already deduplicated."""

    retrieved: list[str]
    relevant: frozenset[str]
    units: Sequence[ProjectedUnit]
    claims: Sequence[Sequence[ProjectedUnit]]
    chunk_lengths: Mapping[str, int]
    span_coverage: float


def _k(k: int | None) -> int:
    if k is None:
        raise ValueError("this metric needs a cutoff k")
    return k


# Each registered metric's definition over one case, by name.
REFERENCE: dict[str, Callable[[CaseInput, int | None], float | int | None]] = {
    "recall": lambda c, k: recall_at_k(c.retrieved, c.relevant, _k(k)),
    "hit": lambda c, k: hit_at_k(c.retrieved, c.relevant, _k(k)),
    "mrr": lambda c, k: reciprocal_rank(c.retrieved, c.relevant),
    "precision": lambda c, k: precision_at_k(c.retrieved, c.relevant, _k(k)),
    "ndcg": lambda c, k: ndcg_at_k(c.retrieved, c.relevant, _k(k)),
    "evidence_recall": lambda c, k: evidence_recall_at_k(c.retrieved, c.units, _k(k), c.span_coverage),
    "claim_availability": lambda c, k: claim_evidence_availability(c.retrieved, c.claims, _k(k), c.span_coverage),
    "context_chars": lambda c, k: context_chars_at_k(c.retrieved, c.chunk_lengths, _k(k)),
}


def case_metrics(
    retrieved: Sequence[str],
    relevant: Collection[str],
    units: Sequence[ProjectedUnit],
    claims: Sequence[Sequence[ProjectedUnit]],
    chunk_lengths: Mapping[str, int],
    ks: Sequence[int],
    span_coverage: float,
) -> dict[str, Any]:
    """Every per-case metric and count of one case.

    ``retrieved`` is the run for the case, best first, already cut at the depth.
    For an abstention case (no relevant chunk, no unit, no claim) every metric is
    ``None`` except ``context_chars@k``. ``missed_evidence`` lists the labels of the
    units not available at ``max(ks)`` (given as ``missed_evidence_at``), in the
    order given.
    """
    unique_ks = sorted_ks(ks)
    check_coverage(span_coverage)
    ranked, removed = dedupe(retrieved)
    case = CaseInput(ranked, frozenset(relevant), units, claims, chunk_lengths, span_coverage)
    values: dict[str, float | int | None] = {}
    for metric in METRICS.values():
        for k in unique_ks if metric.at_k else [None]:
            values[metric.key(k)] = REFERENCE[metric.name](case, k)

    counts: dict[str, int] = {
        "relevant": len(case.relevant),
        "evidence": len(units),
        "claims": len(claims),
        "duplicates_removed": removed,
        "retrieved": len(ranked),
    }
    for k in unique_ks:
        top = set(ranked[:k])
        counts[f"claims_available@{k}"] = sum(_claim_available(claim, top, span_coverage) for claim in claims)

    deepest = set(ranked[: unique_ks[-1]])
    missed: list[str] = []
    for unit in units:
        if not unit_available(unit, deepest, span_coverage) and unit.label not in missed:
            missed.append(unit.label)

    return {
        "metrics": values,
        "counts": counts,
        "missed_evidence": missed,
        "missed_evidence_at": unique_ks[-1],
        "first_relevant_rank": first_relevant_rank(ranked, case.relevant),
    }
