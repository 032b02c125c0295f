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

import dataclasses
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragvet.evidence import nonspace_before
from ragvet.measures.registry import METRICS, sorted_ks
from ragvet.schema import Chunk, ProjectedUnit

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


def judged_at_k(docs: Sequence[str], judged: Collection[str] | None, k: int) -> float | None:
    """ir_measures' ``Judged@k``: the share of the top-k results that have a judgement.

    ``docs`` holds the doc of each retrieved chunk, best first, one entry per
    (deduplicated) chunk; ``judged`` the docs the case's qrels judged, of any grade.
    A chunk counts as judged when its doc is, and each chunk of the top k counts, so
    on a run of one chunk per document this is exactly ir_measures' figure:
    ``|{judged chunks in the top k}| / min(k, |docs|)``. Like ir_measures, the
    denominator is the number of results when fewer than ``k`` were retrieved: a
    rank nothing filled is not an unjudged result. ``0.0`` when nothing is retrieved
    (ir_measures' value for a judged query missing from the run) or ``k <= 0``;
    ``None`` when the case has no judged set (a native case).
    """
    if judged is None:
        return None
    top = docs[: max(k, 0)]
    if not top:
        return 0.0
    wanted = set(judged)
    return sum(doc in wanted for doc in top) / len(top)


# ---------------------------------------------------------------------------
# At a context budget
# ---------------------------------------------------------------------------
# Evidence recall at a context budget: the reference definitions, one case at a time.
#
# A top-k cut hides what a RAG system pays: two configurations with equal
# ``evidence_recall@5`` can send 1,500 or 5,000 characters to the model. These
# functions spend a budget of ``B`` units (characters, or tokens of a real
# tokenizer) along the ranking instead:
#
# * chunks are taken in rank order (deduplicated) until ``B`` units are spent;
# * a chunk's cost is the number of its *unit starts* (each character, or each
#   token's first character) that lie in characters not already sent: characters
#   of a doc already sent cost nothing and add nothing;
# * the chunk that crosses ``B`` contributes only its first ``B - spent`` unsent
#   units: the characters before its next unsent unit start are sent, the rest not;
# * availability is as for ``evidence_recall`` (:func:`unit_available`), over the
#   union of what was sent.
#
# A unit start is a position in doc coordinates. In ``chars`` every character of
# the chunk starts a unit; with a tokenizer, the chunk's own text is tokenized and
# each token's first character starts one (``ragvet.measures.tokens``), so a
# token is paid for once, by the chunk that sends its first character.


@dataclass(frozen=True)
class SentChunk:
    """One retrieved chunk as the budget sees it: its doc, its ``[start, end)`` in doc
    coordinates, and its unit starts, ascending, in doc coordinates."""

    doc_id: str
    start: int
    end: int
    unit_starts: tuple[int, ...]


def char_chunk(doc_id: str, start: int, end: int) -> SentChunk:
    """A chunk whose units are characters: every position starts one."""
    return SentChunk(doc_id, start, end, tuple(range(start, end)))


def sent_chunk(chunk: Chunk) -> SentChunk:
    """A chunk as the budget sees it: its stored token starts, else its characters."""
    if chunk.token_starts is None:
        return char_chunk(chunk.doc_id, chunk.start, chunk.end)
    return SentChunk(chunk.doc_id, chunk.start, chunk.end, tuple(chunk.start + s for s in chunk.token_starts))


def _is_sent(position: int, intervals: Sequence[tuple[int, int]]) -> bool:
    return any(lo <= position < hi for lo, hi in intervals)


def sent_prefixes(retrieved: Sequence[str], chunks: Mapping[str, SentChunk], budget: int) -> dict[str, int]:
    """Which chunks a budget of ``budget`` units sends, each with the end of its sent
    prefix (``chunk.end`` when sent whole).

    The union of ``[start, prefix end)`` over the result is exactly the set of
    characters sent: the crossing chunk's already-sent characters lie in that union
    anyway. A chunk of which nothing new is sent is left out. ``budget <= 0`` or an
    empty list sends nothing (``{}``).
    """
    sent: dict[str, list[tuple[int, int]]] = {}
    prefixes: dict[str, int] = {}
    spent = 0
    for chunk_id in dedupe(retrieved)[0]:
        chunk = chunks[chunk_id]
        before = sent.setdefault(chunk.doc_id, [])
        unsent = [p for p in chunk.unit_starts if not _is_sent(p, before)]
        if spent + len(unsent) <= budget:
            spent += len(unsent)
            prefixes[chunk_id] = chunk.end
            before.append((chunk.start, chunk.end))
            continue
        end = unsent[budget - spent]  # the first unit start the budget cannot pay for
        if end > chunk.start:
            prefixes[chunk_id] = end
        break
    return prefixes


def _clip(unit: ProjectedUnit, prefixes: Mapping[str, int], counted: Mapping[str, int]) -> ProjectedUnit:
    """``unit`` seen through the sent chunks only, a partly sent chunk's piece cut at
    its prefix end (``counted``: that end in the unit's coordinates)."""
    if unit.alternatives:
        return dataclasses.replace(unit, alternatives=tuple(_clip(a, prefixes, counted) for a in unit.alternatives))
    pieces = {}
    for chunk_id, (lo, hi) in unit.pieces.items():
        if chunk_id not in prefixes:
            continue
        if chunk_id in counted and not unit.doc_level:  # a doc-level unit needs only the chunk's presence
            if lo >= counted[chunk_id]:  # the piece starts past what was sent
                continue
            hi = min(hi, counted[chunk_id])
        pieces[chunk_id] = (lo, hi)
    return dataclasses.replace(unit, pieces=pieces)


def _counted_ends(
    prefixes: Mapping[str, int], chunks: Mapping[str, SentChunk], texts: Mapping[str, str] | None
) -> dict[str, int]:
    """The partly sent chunks' prefix ends, in counted coordinates when ``texts`` are given
    (evaluation projects span pieces so, see ``ragvet.evidence.nonspace_before``)."""
    ends = {}
    for chunk_id, end in prefixes.items():
        if end < chunks[chunk_id].end:
            doc = chunks[chunk_id].doc_id
            ends[chunk_id] = end if texts is None else nonspace_before(texts[doc], [end])[0]
    return ends


def evidence_recall_at_budget(
    retrieved: Sequence[str],
    units: Sequence[ProjectedUnit],
    chunks: Mapping[str, SentChunk],
    budget: int,
    span_coverage: float = 1.0,
    texts: Mapping[str, str] | None = None,
) -> float | None:
    """``evidence_recall@B``: share of evidence units available in what a budget of
    ``budget`` units sends (see :func:`sent_prefixes`).

    ``available units / units``; ``None`` when there are no units (abstention);
    ``0.0`` when ``budget <= 0``. ``texts`` as for the units' projection: given when
    span pieces are in counted coordinates.
    """
    check_coverage(span_coverage)
    if not units:
        return None
    prefixes = sent_prefixes(retrieved, chunks, budget)
    counted = _counted_ends(prefixes, chunks, texts)
    return sum(unit_available(_clip(unit, prefixes, counted), prefixes, span_coverage) for unit in units) / len(units)


def budget_to_evidence(
    retrieved: Sequence[str],
    units: Sequence[ProjectedUnit],
    chunks: Mapping[str, SentChunk],
    span_coverage: float = 1.0,
    texts: Mapping[str, str] | None = None,
) -> int | None:
    """``tokens_to_evidence``: the smallest budget at which every evidence unit is
    available, in the budget's unit.

    ``None`` when there are no units (abstention) or when even the whole retrieved
    list (cut at the depth) leaves a unit unavailable. What a budget sends only
    grows with the budget, so the smallest one is found by bisection between 0 and
    the cost of the whole list.
    """
    if not units:
        return None

    def enough(budget: int) -> bool:
        return evidence_recall_at_budget(retrieved, units, chunks, budget, span_coverage, texts) == 1.0

    high = sum(len(chunks[chunk_id].unit_starts) for chunk_id in dedupe(retrieved)[0])  # at least the whole cost
    if not enough(high):
        return None
    low = 0
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle + 1, high)
    return low


# ---------------------------------------------------------------------------
# Span precision and IoU (Chroma's chunking evaluation), over characters
# ---------------------------------------------------------------------------


def _intersection_length(a: Iterable[tuple[int, int]], b: Iterable[tuple[int, int]]) -> int:
    """Characters in both unions: ``|∪a ∩ ∪b| = |∪a| + |∪b| - |∪a ∪ ∪b|``."""
    a, b = list(a), list(b)
    return _union_length(a) + _union_length(b) - _union_length(a + b)


def _span_overlap(spans: Sequence[tuple[str, int, int]], chunks: Sequence[SentChunk]) -> tuple[int, int, int]:
    """``(|E|, |E ∩ R|, Σ|Rᵢ|)`` in characters: ``E`` the union of the evidence spans,
    ``R`` the union of the chunks, each doc apart; ``Σ|Rᵢ|`` counts shared characters
    once per chunk."""
    docs = {doc for doc, _, _ in spans}
    evidence = {doc: [(lo, hi) for d, lo, hi in spans if d == doc] for doc in docs}
    found = sum(
        _intersection_length(evidence[doc], [(c.start, c.end) for c in chunks if c.doc_id == doc]) for doc in docs
    )
    return sum(_union_length(e) for e in evidence.values()), found, sum(c.end - c.start for c in chunks)


def span_precision_at_k(
    retrieved: Sequence[str], spans: Sequence[tuple[str, int, int]], chunks: Mapping[str, SentChunk], k: int
) -> float | None:
    """``|E ∩ R| / Σ|Rᵢ|`` over the top-k: the share of the characters sent that are
    evidence (shared characters count twice in the denominator). ``0.0`` when
    nothing is sent (``k <= 0``, an empty list); ``None`` without span evidence."""
    if not spans:
        return None
    _, found, sent = _span_overlap(spans, [chunks[c] for c in _top(retrieved, k)])
    return found / sent if sent else 0.0


def span_iou_at_k(
    retrieved: Sequence[str], spans: Sequence[tuple[str, int, int]], chunks: Mapping[str, SentChunk], k: int
) -> float | None:
    """``|E ∩ R| / (|E| + Σ|Rᵢ| - |E ∩ R|)`` over the top-k, in characters. ``0.0`` when
    the denominator is 0 (only empty spans, nothing sent); ``None`` without span evidence."""
    if not spans:
        return None
    wanted, found, sent = _span_overlap(spans, [chunks[c] for c in _top(retrieved, k)])
    union = wanted + sent - found
    return found / union if union else 0.0


@dataclass(frozen=True)
class CaseInput:
    """Everything a per-case metric may read. ``retrieved`` is already deduplicated."""

    retrieved: list[str]
    relevant: frozenset[str]
    units: Sequence[ProjectedUnit]
    claims: Sequence[Sequence[ProjectedUnit]]
    chunk_lengths: Mapping[str, int]
    span_coverage: float
    sent_chunks: Mapping[str, SentChunk]
    texts: Mapping[str, str] | None
    spans: Sequence[tuple[str, int, int]]  # the plain evidence spans (doc, start, end), doc coordinates
    judged: frozenset[str] | None  # the docs of the case's judged set; None for a native case


def _k(k: int | None) -> int:
    if k is None:
        raise ValueError("this metric needs a cutoff k")
    return k


def _retrieved_docs(c: CaseInput) -> list[str]:
    """The doc of each retrieved chunk, best first; none needed without a judged set."""
    return [] if c.judged is None else [c.sent_chunks[chunk_id].doc_id for chunk_id in c.retrieved]


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
    "evidence_recall_budget": lambda c, b: evidence_recall_at_budget(
        c.retrieved, c.units, c.sent_chunks, _k(b), c.span_coverage, c.texts
    ),
    "tokens_to_evidence": lambda c, b: budget_to_evidence(
        c.retrieved, c.units, c.sent_chunks, c.span_coverage, c.texts
    ),
    "span_precision": lambda c, k: span_precision_at_k(c.retrieved, c.spans, c.sent_chunks, _k(k)),
    "span_iou": lambda c, k: span_iou_at_k(c.retrieved, c.spans, c.sent_chunks, _k(k)),
    "judged": lambda c, k: judged_at_k(_retrieved_docs(c), c.judged, _k(k)),
}


def case_metrics(
    retrieved: Sequence[str],
    relevant: Collection[str],
    units: Sequence[ProjectedUnit],
    claims: Sequence[Sequence[ProjectedUnit]],
    chunk_lengths: Mapping[str, int],
    ks: Sequence[int],
    span_coverage: float,
    budgets: Sequence[int] = (),
    sent_chunks: Mapping[str, SentChunk] | None = None,
    texts: Mapping[str, str] | None = None,
    spans: Sequence[tuple[str, int, int]] = (),
    judged: Collection[str] | None = None,
    judgements: bool | None = None,
) -> dict[str, Any]:
    """Every per-case metric and count of one case.

    ``retrieved`` is the run for the case, best first, already cut at the depth.
    The budget metrics are computed at each of ``budgets`` (none without), spending
    the units of ``sent_chunks``; ``texts`` as for the units' projection. ``spans`` are
    the case's own evidence spans without alternatives, for span precision and IoU.
    ``judged`` are the docs of its judged set (``judged@k``, which reads each retrieved
    chunk's doc from ``sent_chunks``). ``judgements`` says whether the judgements
    metrics are computed at all: some case of the run has a judged set (by default,
    whether this one has); a case without one then gets None.
    For an abstention case (no relevant chunk, no unit, no claim) every metric is
    ``None`` except ``context_chars@k``. ``missed_evidence`` lists the labels of the
    units not available at ``max(ks)`` (given as ``missed_evidence_at``), in the
    order given.
    """
    unique_ks = sorted_ks(ks)
    check_coverage(span_coverage)
    ranked, removed = dedupe(retrieved)
    case = CaseInput(
        ranked,
        frozenset(relevant),
        units,
        claims,
        chunk_lengths,
        span_coverage,
        sent_chunks or {},
        texts,
        spans,
        None if judged is None else frozenset(judged),
    )
    values: dict[str, float | int | None] = {}
    for metric in METRICS.values():
        for cutoff in metric.cutoffs(unique_ks, sorted(set(budgets)), judged is not None or bool(judgements)):
            values[metric.key(cutoff)] = REFERENCE[metric.name](case, cutoff)

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
