"""What every retriever kind's run gets (:mod:`ragvet.retrieval.kinds`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from ragvet.schema import Case, Chunk, Doc


@dataclass(frozen=True)
class Request:
    """What every kind gets: cases sorted by id, chunks sorted by chunk_id, the
    depth, all retriever specs (for kinds built from other retrievers), and the
    corpus (to locate the foreign passages a run file or an endpoint returns)."""

    cases: Sequence[Case]
    chunks: Sequence[Chunk]
    depth: int
    retrievers: Mapping[str, dict]
    docs: Mapping[str, Doc] = field(default_factory=dict)
    latency: dict[str, float] = field(default_factory=dict)  # seconds per case, for kinds that time each query
    manifests: list[dict] = field(default_factory=list)  # of the vectors engine: ray computed, members' included

    def deeper(self, depth: int) -> Request:
        """The request for a member retriever: its queries are not the configuration's, so not timed."""
        return replace(self, depth=depth, latency={})

    def chunk_by_id(self) -> dict[str, Chunk]:
        return {chunk.chunk_id: chunk for chunk in self.chunks}
