"""Evidence recall at a context budget: the reference definitions, one case at a time.

A top-k cut hides what a RAG system pays: two configurations with equal
``evidence_recall@5`` can send 1,500 or 5,000 characters to the model. These
functions spend a budget of ``B`` units (characters, or tokens of a real
tokenizer) along the ranking instead:

* chunks are taken in rank order (deduplicated) until ``B`` units are spent;
* a chunk's cost is the number of its *unit starts* (each character, or each
  token's first character) that lie in characters not already sent: characters
  of a doc already sent cost nothing and add nothing;
* the chunk that crosses ``B`` contributes only its first ``B - spent`` unsent
  units: the characters before its next unsent unit start are sent, the rest not;
* availability is as for ``evidence_recall`` (``stages.measures.reference``), over
  the union of what was sent.

A unit start is a position in doc coordinates. In ``chars`` every character of
the chunk starts a unit; with a tokenizer, the chunk's own text is tokenized and
each token's first character starts one (``stages.measures.tokens``), so a
token is paid for once, by the chunk that sends its first character.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stages.evidence import nonspace_before
from stages.measures.reference import check_coverage, dedupe, unit_available
from stages.schema import ProjectedUnit


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
        if not unit.doc_level and chunk_id in counted:  # a doc-level unit needs only the chunk's presence
            hi = min(hi, counted[chunk_id])
        if lo < hi or unit.doc_level:
            pieces[chunk_id] = (lo, hi)
    return dataclasses.replace(unit, pieces=pieces)


def _counted_ends(
    prefixes: Mapping[str, int], chunks: Mapping[str, SentChunk], texts: Mapping[str, str] | None
) -> dict[str, int]:
    """The partly sent chunks' prefix ends, in counted coordinates when ``texts`` are given
    (evaluation projects span pieces so, see ``stages.evidence.nonspace_before``)."""
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

