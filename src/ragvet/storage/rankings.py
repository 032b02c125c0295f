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

A run the retrieve stage wrote also numbers its ids: ``case`` and ``chunk``, each id's
position among the sorted ids of the cases file and the chunking, whose digests its
metadata holds (:data:`ragvet.storage.tables.RUN_METADATA`), and a kept ranking keeps them
(:func:`numbering`). Two rankings numbered alike are read and paired by those integers
(``key="case"``: the numbers ascend as the ids do), never touching a billion strings; the
case ids are read only where a result names its cases.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import polars as pl

from ragvet.errors import InputError, Problem
from ragvet.storage.tables import RUN_METADATA, parquet_slices, text_scan, unreadable

RANKING_COLUMNS = ("case_id", "rank", "chunk_id")  # what a ranking is, as a run or a kept baseline
NUMBERED_COLUMNS = ("case", "rank", "chunk")  # a numbered ranking's integers (:func:`numbering`)
BATCH_ROWS = 1 << 20  # rows read at once: about 10,000 cases of a run at depth 100
# Ids read as strings however the file stores them (a run keeps them as categories), so that a
# pass over millions of them does not grow polars' category mapping (tables.parquet_slices).
ID_COLUMNS = ("case_id", "chunk_id")
NUMBERS_FIX = "re-run the retrieve stage (dvc repro), then `ragvet baseline accept` for a kept ranking"
ORDER_FIX = "write it sorted by case_id (the retrieve stage and `ragvet baseline accept` do): re-run them"


def numbering(source: Path | bytes) -> str | None:
    """The numbering a Parquet ranking's ``case`` and ``chunk`` columns follow (its
    :data:`RUN_METADATA` entry, the digests of the sorted ids they count), or None for a
    ranking without them: two rankings with the same numbering name the same case and
    chunk by the same number."""
    handle = source if isinstance(source, Path) else io.BytesIO(source)
    try:
        names = pl.read_parquet_schema(handle)
        found = pl.read_parquet_metadata(handle).get(RUN_METADATA) if {"case", "chunk"} <= set(names) else None
    except (pl.exceptions.PolarsError, OSError):
        return None  # the reader names the unreadable file
    return found


def numbered_rows(
    source: Path | bytes, numbers: np.ndarray, columns: Sequence[str], ranked: int | None = None
) -> pl.DataFrame:
    """The ``columns`` (ids as strings) of the rows of the case ``numbers`` in a numbered
    ranking, only those ranked at most ``ranked`` when given: one scan that reads only the
    row groups whose ``case`` range holds some of them, and decodes the other columns of
    the matching rows only, so a few cases' ids cost a few cases' rows, not a billion."""
    if not len(numbers):
        return text_scan(source, ID_COLUMNS).select(columns).head(0).collect()
    wanted = pl.col("case").is_between(int(numbers.min()), int(numbers.max())) & pl.col("case").is_in(numbers.tolist())
    if ranked is not None:
        wanted &= pl.col("rank") <= ranked
    return text_scan(source, ID_COLUMNS).filter(wanted).select(columns).collect()


def case_ids_of(source: Path | bytes, numbers: np.ndarray, ranked: int | None = None) -> pl.DataFrame:
    """``case, case_id`` of the given case ``numbers`` in a numbered ranking
    (:func:`numbered_rows`); with ``ranked``, a rank each of those cases has a row at or
    above (the highest of their first ranks), only those rows are read: about one per case."""
    return numbered_rows(source, numbers, ["case", "case_id"], ranked).unique("case")


def in_rank_order(case: np.ndarray, rank: np.ndarray, chunk: np.ndarray) -> bool:
    """Whether numbered rows are sorted by ``(case, rank, chunk)``: the order of
    ``(case_id, rank, chunk_id)``, since the numbers follow the sorted ids. The retrieve
    stage writes its runs so, which spares a reader the sort."""
    if len(case) < 2:
        return True
    step_case, step_rank = np.diff(case), np.diff(rank)
    ahead = (step_case > 0) | ((step_case == 0) & ((step_rank > 0) | ((step_rank == 0) & (np.diff(chunk) >= 0))))
    return bool(ahead.all())


def positions_in_case(case: np.ndarray) -> np.ndarray:
    """Each row's position within its case (0 for a case's first row), the rows of a case
    together: for a ranking in rank order, its place in that case's list."""
    first = np.flatnonzero(np.r_[True, case[1:] != case[:-1]])[: len(case)]
    return np.arange(len(case)) - np.repeat(first, np.diff(np.r_[first, len(case)]))


def first_rows(case: np.ndarray, depth: int) -> np.ndarray:
    """The positions, ascending, of each case's first ``depth`` rows (the rows of a case
    together): those :func:`positions_in_case` places below ``depth``, found from each
    case's first row and length, so that keeping 10 of a case's 100 ranks builds arrays
    of the rows kept, not of every row."""
    first = np.flatnonzero(np.r_[True, case[1:] != case[:-1]])[: len(case)]
    kept = np.minimum(np.diff(np.r_[first, len(case)]), max(depth, 0))
    return np.repeat(first - (np.cumsum(kept) - kept), kept) + np.arange(kept.sum())


def _out_of_order(ids: pl.Series, before: str | int | None) -> int | None:
    """The position in ``ids`` of the first id below the one before it (``before``
    precedes the first), or of the first null; None when they ascend."""
    if ids.null_count():
        return int(ids.is_null().arg_max())
    previous = ids.shift(1, fill_value=before) if before is not None else ids.shift(1)
    falls = ids < previous
    return int(falls.arg_max()) if falls.any() else None


def case_batches(
    source: Path | bytes,
    where: str,
    columns: Sequence[str] = RANKING_COLUMNS,
    key: str = "case_id",
    rows: int | None = None,
) -> Iterator[pl.DataFrame]:
    """The table at ``source`` (a Parquet file's path or bytes, named ``where`` in errors)
    as frames of ``columns`` holding whole cases, in the order of ``key`` (the case id,
    or a numbered ranking's ``case``), ``case_id`` as strings: one empty frame for a
    table of no rows, else no empty frame. A case whose rows go on past a slice's end is
    held back and joined to the next slice's, so a batch is about ``rows`` rows
    (:data:`BATCH_ROWS` by default) plus one case."""
    held, read, yielded = None, 0, False
    for frame in parquet_slices(source, rows or BATCH_ROWS, list(columns), where, text=ID_COLUMNS):
        if "case_id" in columns:
            frame = frame.with_columns(pl.col("case_id").cast(pl.String))
        wrong = _out_of_order(frame[key], held[key][-1] if held is not None else None)
        if wrong is not None:
            named = "case ids" if key == "case_id" else f"case numbers ({key})"
            what = f"{named} not in ascending order (row {read + wrong + 1}: {frame[key][wrong]!r})"
            raise InputError([Problem(where, what, ORDER_FIX)])
        read += frame.height
        held = frame if held is None else pl.concat([held, frame])
        last = held[key].search_sorted(held[key][-1], side="left") if held.height else 0
        if last:
            yield held.slice(0, last)
            yielded = True
        held = held.slice(last)
    if held is not None and (held.height or not yielded):
        yield held


def in_case_order(source: Path, where: str) -> bool:
    """Whether a ranking's cases come in ascending case-id order, each case's rows together,
    as :func:`case_batches` needs them: so when the retrieve stage numbered it
    (:func:`numbering`; it writes its runs sorted), else as a pass over its case ids finds."""
    if numbering(source) is not None:
        return True
    last = None
    for frame in parquet_slices(source, BATCH_ROWS, ["case_id"], where, text=ID_COLUMNS):
        ids = frame["case_id"].cast(pl.String)
        if _out_of_order(ids, last) is not None:
            return False
        last = ids[-1] if len(ids) else last
    return True


def case_ordered(source: Path, target: Path, columns: Sequence[str], where: str) -> Path:
    """``source`` when its cases come in order (:func:`in_case_order`), else its ``columns``
    sorted by case id into ``target``: a run another tool wrote in some other order. That
    sort holds the table whole, which a run in case order never needs."""
    if in_case_order(source, where):
        return source
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        scan = pl.scan_parquet(source).select(columns).with_columns(pl.col("case_id").cast(pl.String))
        scan.sort("case_id", maintain_order=True).sink_parquet(target)
    except (OSError, pl.exceptions.PolarsError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError([Problem(where, f"cannot be sorted by case id ({first})", ORDER_FIX)]) from None
    return target


def numbered_batches(
    source: Path | bytes, where: str, columns: Sequence[str] = NUMBERED_COLUMNS, rows: int | None = None
) -> Iterator[pl.DataFrame]:
    """:func:`case_batches` of a numbered ranking by its case numbers (about ``rows`` rows
    at a time), each batch's ranks and chunk numbers checked: every row has both, and no
    chunk number is negative."""
    for frame in case_batches(source, where, columns, key="case", rows=rows):
        missing = frame.select(pl.col("rank", "chunk").null_count().sum()).sum_horizontal().item()
        if missing or (frame["chunk"] < 0).any():
            what = "a row without a rank or a chunk number, or with a negative chunk number"
            raise InputError([Problem(where, what, NUMBERS_FIX)])
        yield frame


class RowIds:
    """The text ids (:data:`ID_COLUMNS`) of chosen rows of a Parquet ranking, turned into
    strings for those rows only. A run stores its ids dictionary-encoded; pyarrow reads a
    row group of them as the dictionaries' indices (``read_dictionary``), the chosen rows
    are taken from those and only they are decoded: keeping the first 10 of a run's 100
    ranks per case decodes a tenth of its ids, where reading them as strings decoded all.
    The rows asked for ascend from call to call (the last row group read is held)."""

    def __init__(self, source: Path, where: str) -> None:
        import pyarrow.parquet as parquet  # deferred: only keeping a numbered run's ranking reads with it

        self._where, self._group, self._table = where, -1, None
        lacking = [name for name in ID_COLUMNS if name not in parquet.read_schema(source).names]  # numbering() read it
        if lacking:
            raise unreadable(where, f"unable to find column {lacking[0]!r}")
        self._file = parquet.ParquetFile(source, read_dictionary=list(ID_COLUMNS))
        groups = self._file.metadata
        self._ends = np.cumsum([groups.row_group(index).num_rows for index in range(groups.num_row_groups)])

    def take(self, rows: np.ndarray) -> pl.DataFrame:
        """``case_id, chunk_id`` as strings of the file's ``rows`` (ascending positions)."""
        import pyarrow as pa  # deferred with the reader

        text = pa.schema([(name, pa.string()) for name in ID_COLUMNS])
        groups = np.searchsorted(self._ends, rows, side="right")
        parts = [pa.table({name: pa.array([], pa.string()) for name in ID_COLUMNS})]
        try:
            for group in np.unique(groups).tolist():
                if group != self._group:
                    self._table, self._group = self._file.read_row_group(group, columns=list(ID_COLUMNS)), group
                start = int(self._ends[group]) - self._table.num_rows
                parts.append(self._table.take(rows[groups == group] - start).cast(text))
        except (OSError, pa.ArrowException) as err:
            raise unreadable(self._where, err) from None
        return pl.from_arrow(pa.concat_tables(parts))


def paired_batches(tables: Iterable[Iterator[pl.DataFrame]], key: str = "case_id") -> Iterator[list[pl.DataFrame]]:
    """The batches of several :func:`case_batches` streams lined up by ``key``: each item
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
        cut = min((frame[key][-1] for frame, over in zip(held, done) if not over), default=None)
        batch = []
        for side, frame in enumerate(held):
            upto = frame.height if cut is None else frame[key].search_sorted(cut, side="right")
            batch.append(frame.slice(0, upto))
            held[side] = frame.slice(upto)
        yield batch
