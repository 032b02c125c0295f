"""Batches produced one ahead of their consumer, in a thread of their own, so that a
stream's stages overlap: reading a batch of a Parquet file and scoring the one before
it, scoring a batch and writing the one before it. Parquet decoding, polars and most
numpy kernels release the GIL, so on two cores the stages run side by side.

The items and their order are those of the source, whichever thread makes them, so no
output depends on the overlap.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

_END = object()  # what the worker's next() returns past the source's last item


def ahead(items: Iterable[T]) -> Iterator[T]:
    """``items`` in order, each next one made in a worker thread while the consumer
    holds the one before. At most one item is made ahead, so memory grows by one batch.
    An exception raised making an item is raised here, in its place in the order, after
    every item before it; closing the iterator early waits for the item in the making."""
    source = iter(items)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragvet-ahead") as worker:
        pending = worker.submit(next, source, _END)
        while (item := pending.result()) is not _END:
            pending = worker.submit(next, source, _END)
            yield item  # type: ignore[misc]
