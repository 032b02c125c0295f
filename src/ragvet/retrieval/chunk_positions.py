"""What a search across the cluster needs of the chunking, counted as its chunks stream past once.

A chunk's position is its number among the chunking's chunk ids, sorted: the number a run's
``chunk`` column holds. The pairs going to the shards (:func:`ragvet.retrieval.cluster_embedding.store_on_cluster`)
pass through a :class:`ChunkPass`, which counts them, sums the digest of their ids
(:class:`ragvet.storage.tables.IdsDigest`) and records, for each metadata filter of the cases,
a :class:`PositionMask` of the positions it admits: the driver never holds a chunk or a list of
ids. Shards are consecutive chunk_id ranges, so an actor holding shards holds a consecutive
range of positions and receives its range of each mask (:meth:`PositionMask.slice`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from ragvet.errors import InputError, Problem
from ragvet.storage.tables import IdsDigest

PACK_BLOCK = 1 << 16  # bits gathered before they are packed (a multiple of 8)


@dataclass(frozen=True)
class PositionMask:
    """One bit per chunk position, packed eight to a byte (``numpy.packbits``, big-endian)."""

    packed: bytes
    size: int

    def slice(self, start: int, stop: int) -> np.ndarray:
        """The bits of positions ``start`` to ``stop`` (not included) as booleans; ``[]`` when empty."""
        if stop <= start:
            return np.zeros(0, dtype=bool)
        first, last = start // 8, -(-stop // 8)
        bits = np.unpackbits(np.frombuffer(self.packed, dtype=np.uint8, count=last - first, offset=first))
        return bits[start - 8 * first : stop - 8 * first].astype(bool)


class MaskBuilder:
    """A :class:`PositionMask` appended a position at a time, packed a block at a time."""

    def __init__(self) -> None:
        self.packed = bytearray()
        self.pending = bytearray()
        self.size = 0

    def append(self, bit: bool) -> None:
        self.pending.append(bit)
        if len(self.pending) == PACK_BLOCK:
            self._pack()

    def _pack(self) -> None:
        self.packed += np.packbits(np.frombuffer(self.pending, dtype=np.uint8)).tobytes()
        self.size += len(self.pending)
        self.pending = bytearray()

    def mask(self) -> PositionMask:
        """The mask of every position appended (no more may be appended after)."""
        self._pack()
        return PositionMask(bytes(self.packed), self.size)


class ChunkPass:
    """Counts the ``(chunk_id, text, admitted)`` rows of a chunking streamed in chunk_id order
    (:func:`ragvet.storage.tables.chunk_rows_by_id`) on their way to the shards: the digest and
    count of their ids, and one mask per filter from ``admitted``. A chunk id that comes twice is
    an error at ``where``: the run's numbers would name two chunks at once."""

    def __init__(self, filters: int, where: str):
        self.ids = IdsDigest()
        self.builders = [MaskBuilder() for _ in range(filters)]
        self.where = where

    def pairs(self, rows: Iterable[tuple[str, str, tuple[bool, ...]]]) -> Iterator[tuple[str, str]]:
        """``(chunk_id, text)`` of each row, each counted as it passes."""
        previous = None
        for chunk_id, text, admitted in rows:
            if chunk_id == previous:
                what = f"chunk id {chunk_id!r} appears twice"
                raise InputError([Problem(self.where, what, "re-run the chunk stage: each chunk id once")])
            self.ids.add(chunk_id)
            for builder, bit in zip(self.builders, admitted):
                builder.append(bit)
            previous = chunk_id
            yield chunk_id, text

    def pairs_to_search(
        self, rows: Iterable[tuple[str, str, tuple[bool, ...]]], wanted: bool
    ) -> Iterator[tuple[str, str]] | None:
        """:meth:`pairs` of ``rows`` when there is a row and the search is ``wanted`` (there
        are cases); else None, every row counted here at once: a run numbers its chunks by
        the chunking's ids even when nothing is searched, and the cluster is left alone.
        The first row is read before this returns, so a first line that is wrong stops the
        run before anything connects."""
        stream = iter(rows)
        first = next(stream, None)
        if first is None or not wanted:
            for _ in self.pairs(stream if first is None else itertools.chain([first], stream)):
                pass
            return None
        return self.pairs(itertools.chain([first], stream))

    def masks(self) -> list[PositionMask]:
        """Each filter's mask, once the rows are spent."""
        return [builder.mask() for builder in self.builders]
