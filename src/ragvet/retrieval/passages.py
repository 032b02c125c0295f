"""Foreign passages: what a system that chunks the corpus its own way returns.

A passage is located in the corpus by ``{doc_id, start, end}`` or by
``{doc_id, text}`` (with ``occurrence: n`` when the text occurs more than once).
Text is located exactly as a quote of evidence is, by the same resolver
(:class:`ragvet.evidence.EvidenceResolver`): whitespace normalised for matching
only, and a text found nowhere or more than once is an error naming the case.

A located passage becomes a :class:`~ragvet.schema.Chunk` whose id is
``<doc_id>@<start>-<end>``: a form no ragvet chunk id (``<doc_id>#<ordinal>``)
can take, so a run says by its ids alone whether it ranks the chunking's chunks
or foreign passages. Evidence is then projected onto those passages exactly as
onto ragvet's chunks, which makes evidence_recall@k and claim_availability@k
comparable across the two; chunk-level metrics are not (see
:func:`ragvet.measures.registry.chunk_level`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ragvet.errors import Problem
from ragvet.evidence import EvidenceResolver
from ragvet.schema import Chunk, Doc
from ragvet.storage.columns import ChunkTable

PASSAGE_KEYS = ("doc_id", "start", "end", "text", "occurrence")
PASSAGE_FORMS = "{doc_id, start, end} or {doc_id, text}"
_PASSAGE_ID = re.compile(r"(?P<doc>.+)@(?P<start>\d+)-(?P<end>\d+)", re.DOTALL)


def passage_id(doc_id: str, start: int, end: int) -> str:
    """The id of the passage ``doc.text[start:end]``."""
    return f"{doc_id}@{start}-{end}"


def parse_passage_id(item_id: str) -> tuple[str, int, int] | None:
    """``(doc_id, start, end)`` of a passage id; None for anything else (a ragvet chunk id)."""
    match = _PASSAGE_ID.fullmatch(item_id)
    return (match["doc"], int(match["start"]), int(match["end"])) if match else None


def is_foreign(item_ids: Iterable[str]) -> bool:
    """Whether a run's ids are foreign passages; a run that mixes them with chunk ids is a ``ValueError``."""
    kinds = {parse_passage_id(item_id) is not None for item_id in item_ids}
    if len(kinds) > 1:
        raise ValueError("the run mixes the chunking's chunk ids with foreign passages")
    return kinds == {True}


class PassageLocator:
    """Locates passages in one corpus; one per run, so each doc is searched as one resolver does."""

    def __init__(self, docs: Mapping[str, Doc]):
        self.docs = docs
        self._resolver = EvidenceResolver(docs)

    def locate(self, passage: Any, where: str) -> Chunk | list[Problem]:
        """The passage as a chunk of its doc (with the doc's metadata, for filters), or its problems."""
        if not isinstance(passage, Mapping) or "doc_id" not in passage:
            return [Problem(where, f"a passage must be {PASSAGE_FORMS}, got {passage!r:.80}", "name its doc_id")]
        unknown = sorted(set(passage) - set(PASSAGE_KEYS))
        if unknown:
            return [
                Problem(where, f"unknown passage keys {unknown}", f"a passage takes only {', '.join(PASSAGE_KEYS)}")
            ]
        if "text" not in passage and not {"start", "end"} <= set(passage):
            return [Problem(where, f"a passage needs start and end, or text: got {sorted(passage)}", PASSAGE_FORMS)]
        ref: dict[str, Any] = {"doc": passage["doc_id"]}
        if "text" in passage:
            ref["quote"] = passage["text"]
        for key in ("start", "end", "occurrence"):
            if key in passage:
                ref[key] = passage[key]
        unit, problems = self._resolver.resolve(ref, where, "passage")
        if unit is None:
            return problems
        doc = self.docs[unit.doc_id]
        return Chunk(
            passage_id(unit.doc_id, unit.start, unit.end),
            unit.doc_id,
            0,
            unit.start,
            unit.end,
            doc.text[unit.start : unit.end],
            dict(doc.metadata),
        )


def passage_table(item_ids: Sequence[str]):
    """The evaluation engine's chunk table of a foreign run's passages, in id order.

    Ordinals number each doc's passages by ``(start, end)``; the engine sorts by
    them to find overlaps, and copes with passages that overlap each other.
    """
    ids = sorted(set(item_ids))
    spans = [parse_passage_id(item_id) for item_id in ids]
    if any(span is None for span in spans):
        raise ValueError("the run mixes the chunking's chunk ids with foreign passages")
    order = sorted(range(len(ids)), key=lambda i: (spans[i][0], spans[i][1], spans[i][2]))
    ordinal = [0] * len(ids)
    for position, row in enumerate(order):
        previous = order[position - 1] if position else None
        same_doc = previous is not None and spans[previous][0] == spans[row][0]
        ordinal[row] = ordinal[previous] + 1 if same_doc else 0
    return ChunkTable.from_chunks(
        [
            Chunk(item_id, doc, ordinal[i], start, end, "")
            for i, (item_id, (doc, start, end)) in enumerate(zip(ids, spans))
        ]
    )
