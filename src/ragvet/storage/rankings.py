"""Rankings read a batch of whole cases at a time, and several tables paired by case id.

A ranking is a table of ``case_id, rank, chunk_id`` rows: a retrieve stage's run, or the
top ranks a baseline keeps of one. Comparing two runs of millions of cases must not hold
either (a run of ten million cases at depth 100 is a billion rows of string ids), so they
are read a slice of rows at a time and cut at case boundaries (:func:`case_batches`), and
the batches of several such tables are lined up by case id (:func:`paired_batches`), a
merge of ascending ids: memory is a few batches, whatever the tables' size.

That needs each table's cases in ascending case-id order, each case's rows together: the
retrieve stage writes its runs sorted by ``(case_id, rank)``, a kept ranking is sorted, and
a per-case table is in case-id order. The rows within one case may come in any order (a
reader sorts a batch). A table that breaks the order is refused at the row where it does
(exit 2): pairing it by merge would pair the wrong rows, and sorting it would need it whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import polars as pl

from ragvet.errors import InputError, Problem
from ragvet.storage.tables import parquet_slices

RANKING_COLUMNS = ("case_id", "rank", "chunk_id")  # what a ranking is, as a run or a kept baseline
BATCH_ROWS = 1 << 20  # rows read at once: about 10,000 cases of a run at depth 100
ORDER_FIX = "write it sorted by case_id (the retrieve stage and `ragvet baseline accept` do): re-run them"


def _out_of_order(ids: pl.Series, before: str | None) -> int | None:
    """The position in ``ids`` of the first id below the one before it (``before``
    precedes the first), or of the first null; None when they ascend."""
    if ids.null_count():
        return int(ids.is_null().arg_max())
    previous = ids.shift(1, fill_value=before) if before is not None else ids.shift(1)
    falls = ids < previous
    return int(falls.arg_max()) if falls.any() else None


def case_batches(
    source: Path | bytes, where: str, columns: Sequence[str] = RANKING_COLUMNS, rows: int | None = None
) -> Iterator[pl.DataFrame]:
    """The table at ``source`` (a Parquet file's path or bytes, named ``where`` in errors)
    as frames of ``columns`` holding whole cases, in case-id order, ``case_id`` as
    strings: one empty frame for a table of no rows, else no empty frame. A case whose
    rows go on past a slice's end is held back and joined to the next slice's, so a
    batch is about ``rows`` rows (:data:`BATCH_ROWS` by default) plus one case."""
    held, read, yielded = None, 0, False
    for frame in parquet_slices(source, rows or BATCH_ROWS, list(columns)):
        frame = frame.with_columns(pl.col("case_id").cast(pl.String))
        wrong = _out_of_order(frame["case_id"], held["case_id"][-1] if held is not None else None)
        if wrong is not None:
            what = f"case ids not in ascending order (row {read + wrong + 1}: {frame['case_id'][wrong]!r})"
            raise InputError([Problem(where, what, ORDER_FIX)])
        read += frame.height
        held = frame if held is None else pl.concat([held, frame])
        last = held["case_id"].search_sorted(held["case_id"][-1], side="left") if held.height else 0
        if last:
            yield held.slice(0, last)
            yielded = True
        held = held.slice(last)
    if held is not None and (held.height or not yielded):
        yield held


def paired_batches(tables: Iterable[Iterator[pl.DataFrame]]) -> Iterator[list[pl.DataFrame]]:
    """The batches of several :func:`case_batches` streams lined up by case id: each item
    holds, for every table, its rows of the same run of cases (an empty frame where a
    table has none of them), whole cases only, ascending from item to item.

    Each table holds at most one batch beyond what was yielded: the cut is at the lowest
    of the unfinished tables' last case ids, below which every table has read all its rows."""
    streams = [iter(table) for table in tables]
    held = [next(stream) for stream in streams]  # each stream gives at least one frame
    done = [False] * len(streams)
    while True:
        for side, stream in enumerate(streams):
            while not done[side] and held[side].height == 0:
                more = next(stream, None)
                done[side] = more is None
                held[side] = held[side] if more is None else more
        if all(frame.height == 0 for frame in held):
            return
        cut = min((frame["case_id"][-1] for frame, over in zip(held, done) if not over), default=None)
        batch = []
        for side, frame in enumerate(held):
            upto = frame.height if cut is None else frame["case_id"].search_sorted(cut, side="right")
            batch.append(frame.slice(0, upto))
            held[side] = frame.slice(upto)
        yield batch
