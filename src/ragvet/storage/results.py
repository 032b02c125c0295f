"""The per-case results table (``metrics/cases/<config>.parquet``): one row per case,
sorted by case_id, one flat column per field of the per-case row.

Columns are the row's keys: ``case_id``, ``split``, ``answerable``, ``top1_score``,
``first_relevant_rank``, ``missed_evidence`` (a list), ``missed_evidence_at``, and
one column per entry of the nested mappings, named ``<group>.<key>``:
``metrics.ndcg@10``, ``counts.retrieved``, ``tags.<tag key>``,
``human_review.<field>``. A null is the row's None; a null tag is a tag the case
does not carry. Columnar, so the evaluate stage writes it from the engine's arrays
and a gate reads the few columns it compares; :func:`result_rows` gives the
nested rows back, equal to what the JSONL table held.

Every reader goes through :func:`read_results`, which takes a path, bytes or a
binary file object (a file fetched from git or through ``dvc.api.open``).
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, Any

import numpy as np
import polars as pl

from ragvet.errors import InputError, Problem, raise_if
from ragvet.storage.atomic import ROW_GROUP_ROWS, atomic_output, write_parquet
from ragvet.storage.files import FLOAT_PLACES, round_floats

GROUPS = ("metrics", "counts", "tags", "human_review")
ALWAYS = ("tags",)  # every row has its tags, empty or not; other groups only where the table has them
SUFFIX = ".parquet"
CASES_FOLDER = "cases"  # under metrics/ and under metrics/baseline/
_REQUIRED = ("case_id", "split", "answerable")


def cases_dir(results: Path) -> Path:
    """The folder of per-case tables in a results folder (``metrics`` or ``metrics/baseline``)."""
    return Path(results) / CASES_FOLDER


def per_case_path(folder: Path, config: str) -> Path:
    """The per-case table of ``config`` in a folder of them (:func:`cases_dir`): the one path rule."""
    return Path(folder) / f"{config}{SUFFIX}"


def column(group: str, key: str) -> str:
    """The flat column of ``row[group][key]``."""
    return f"{group}.{key}"


def group_keys(frame: pl.DataFrame, group: str) -> list[str]:
    """The keys of ``group`` the table has columns for, in column order."""
    prefix = f"{group}."
    return [name[len(prefix) :] for name in frame.columns if name.startswith(prefix)]


def _base_schema() -> dict[str, pl.DataType]:

    return {
        "case_id": pl.String,
        "split": pl.String,
        "answerable": pl.Boolean,
        "top1_score": pl.Float64,
        "first_relevant_rank": pl.Int64,
        "missed_evidence": pl.List(pl.String),
        "missed_evidence_at": pl.Int64,
    }


# Dtype of a group column whose values are all None (a table with no value to infer from).
_NULL_DTYPES = {"metrics": "Float64", "counts": "Int64", "tags": "String", "human_review": "Int64"}


def mapping_columns(group: str, mappings: Sequence[dict[str, Any] | None]) -> list[pl.Series]:
    """One column per key of ``group`` over the rows' mappings, keys sorted; null
    where a row lacks the key."""
    present = [mapping or {} for mapping in mappings]
    out = []
    for key in sorted({key for mapping in present for key in mapping}):
        values = pl.Series(column(group, key), [mapping.get(key) for mapping in present], strict=False)
        out.append(values.cast(getattr(pl, _NULL_DTYPES[group])) if values.dtype == pl.Null else values)
    return out


def results_frame(rows: Sequence[dict[str, Any]]) -> pl.DataFrame:
    """Nested per-case rows as the flat table: ``result_rows(results_frame(rows)) == rows``
    for rows that share their keys. A key missing from some rows is null there
    (``answerable`` defaults to True, as the JSONL readers assumed); a top-level
    key no row has gets no column, except case_id, split and answerable."""
    base = [
        pl.Series(name, [row.get(name, True if name == "answerable" else None) for row in rows], dtype=dtype)
        for name, dtype in _base_schema().items()
        if name in _REQUIRED or any(name in row for row in rows)
    ]
    return pl.DataFrame(
        base + [s for group in GROUPS for s in mapping_columns(group, [row.get(group) for row in rows])]
    )


def list_column(name: str, rows: np.ndarray, values: Sequence[str], n_rows: int) -> pl.Series:
    """A list column of ``n_rows`` from flat ``values`` and the row of each (rows
    ascending, values in order within a row); empty lists elsewhere. Built in
    columns: a Python list per row costs a polars Series per row."""
    flat = pl.DataFrame({"row": pl.Series(rows, dtype=pl.Int64), name: pl.Series(values, dtype=pl.String)})
    grouped = flat.group_by("row", maintain_order=True).agg(pl.col(name))
    every = pl.DataFrame({"row": pl.arange(0, n_rows, eager=True, dtype=pl.Int64)})
    full = every.join(grouped, on="row", how="left", maintain_order="left")
    return full.select(pl.col(name).fill_null(pl.lit([], dtype=pl.List(pl.String))))[name]


def result_rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
    """The nested rows the table stands for: tags without their null entries,
    ``human_review`` None where every field is null (a case with no recorded answer)."""
    plain = [name for name in frame.columns if "." not in name]
    groups = {
        group: [(column(group, key), key) for key in group_keys(frame, group)]
        for group in GROUPS
        if group in ALWAYS or group_keys(frame, group)
    }
    rows = []
    for record in frame.iter_rows(named=True):
        row = {name: record[name] for name in plain}
        for group, names in groups.items():
            values = {key: record[name] for name, key in names}
            if group == "tags":
                values = {key: value for key, value in values.items() if value is not None}
            row[group] = None if group == "human_review" and all(v is None for v in values.values()) else values
        rows.append(row)
    return rows


def round_array(values: np.ndarray, places: int = FLOAT_PLACES) -> np.ndarray:
    """Floats rounded exactly as :func:`ragvet.storage.files.round_floats` rounds one:
    Python's correctly rounded ``round(x, places)``, NaN for non-finite, ``0.0`` for ``-0.0``.

    ``rint(x * 10**places) / 10**places`` is that value whenever the product's one
    rounding cannot have crossed a half-integer: the division of two exact
    integers is correctly rounded, as ``round`` is. Where the scaled value ``s`` lies
    within ``|s| * 2**-50`` (at least 4 ulps) of a half-integer, or beyond 2**52 where
    doubles step by more than one, the element goes through ``round_floats`` itself.
    """
    values = np.asarray(values, dtype=np.float64)
    scale = 10.0**places
    finite = np.isfinite(values)
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = values * scale
        whole = np.rint(scaled)
        rounded = whole / scale
        off = np.abs(scaled - whole)  # exact (Sterbenz), at most 0.5
        off -= 0.5
        size = np.abs(scaled)
        unsure = finite & ((np.abs(off) <= size * 2.0**-50) | ~(size < 2.0**52))
    for index in np.flatnonzero(unsure):
        rounded[index] = round_floats(float(values[index]), places)
    rounded[~finite] = math.nan
    rounded[rounded == 0] = 0.0
    return rounded


def round_results(frame: pl.DataFrame) -> pl.DataFrame:
    """Every float column rounded (:func:`round_array`), non-finite values null."""
    floats = [name for name, dtype in frame.schema.items() if dtype == pl.Float64]
    return frame.with_columns(
        pl.Series(name, round_array(frame[name].to_numpy()), nan_to_null=True)
        for name in floats  # null: NaN
    )


def write_results(path: Path, frame: pl.DataFrame) -> None:
    """Write the table sorted by case_id, columns by name (as the JSONL rows sorted
    their keys), atomically; the same frame gives the same bytes."""
    table = frame.select(sorted(frame.columns)).sort("case_id")
    write_parquet(path, table, compression="zstd", statistics=False, row_group_size=1 << 30)


@contextmanager
def row_group_writer(
    path: Path,
    write_whole: Callable[[Path, pl.DataFrame], None],
    empty: pl.DataFrame,
    metadata: dict[str, str] | None = None,
    **options: Any,
) -> Iterator[Callable[[pl.DataFrame], None]]:
    """A function that takes a table's rows a batch at a time and writes them to ``path``
    in row groups of exactly :data:`ROW_GROUP_ROWS` rows (the last one shorter), holding
    at most one group beyond a batch: the same rows give the same bytes whatever the batches.

    A table of up to that many rows (``empty`` when no row came) is written by
    ``write_whole`` when the block ends: one row group, the bytes of the table written whole.
    A longer one goes through pyarrow's ``ParquetWriter`` (``options`` for it), atomically;
    every batch has the same columns in the same order. ``metadata`` goes to the file's
    key-value metadata then (``write_whole`` writes its own). Nothing is written when the
    block fails."""
    held: list[pl.DataFrame] = []  # the rows not yet in a group, as polars frames
    rows = 0  # the rows held
    with ExitStack() as stack:
        writer = None

        def group(table: Any) -> None:
            nonlocal writer
            if writer is None:
                import pyarrow.parquet as parquet  # deferred: only a table of more than one row group loads it

                schema = table.schema if metadata is None else table.schema.with_metadata(metadata)
                writer = parquet.ParquetWriter(stack.enter_context(atomic_output(path)), schema, **options)
                stack.callback(writer.close)  # closed before the temporary file is renamed or removed
            writer.write_table(table.cast(writer.schema), row_group_size=ROW_GROUP_ROWS)

        def write(frame: pl.DataFrame) -> None:
            nonlocal rows
            held.append(frame)
            rows += frame.height
            while rows > ROW_GROUP_ROWS:  # a second group is coming: write the first
                import pyarrow as pa  # deferred with the writer

                # Arrow views of the held frames, joined without a copy; the group alone is copied
                # into whole columns, so its bytes are those of one frame, whatever the batches.
                joined = pa.concat_tables([part.to_arrow() for part in held])
                group(joined.slice(0, ROW_GROUP_ROWS).combine_chunks())
                rest = joined.slice(ROW_GROUP_ROWS)
                held[:] = [pl.from_arrow(rest.combine_chunks())] if rest.num_rows else []
                rows -= ROW_GROUP_ROWS

        yield write
        rest = pl.concat(held, how="vertical", rechunk=True) if held else empty
        if writer is None:
            write_whole(path, rest)
        elif rest.height:
            group(rest.to_arrow())


def write_result_batches(path: Path, frames: Iterable[pl.DataFrame]) -> None:
    """Write the per-case table from batches of rows in case_id order, holding one row
    group at a time (:func:`row_group_writer`): a table of up to :data:`ROW_GROUP_ROWS`
    rows as :func:`write_results` writes it, a longer one in row groups of exactly that
    many rows. Every batch has the same columns (the stream's schema)."""
    options = {"compression": "zstd", "write_statistics": False}
    with row_group_writer(path, write_results, pl.DataFrame(), **options) as write:
        for frame in frames:
            write(frame.select(sorted(frame.columns)))


def in_id_order(ids: pl.Series) -> bool:
    """Whether each case id is above the one before it, as evaluate writes a table: the
    ids are then distinct and sorted, known without a hash table or a sort (at ten
    million cases, a group-by on the ids took 2 GB)."""
    return len(ids) < 2 or bool((ids.slice(1) > ids.slice(0, len(ids) - 1)).all(ignore_nulls=False))


def read_results(
    source: Path | str | bytes | IO[bytes],
    where: str | None = None,
    columns: Sequence[str] | None = None,
    rows: int | None = None,
) -> pl.DataFrame:
    """The per-case table from a path, its bytes or a binary file object. ``columns``
    reads only those, a group name (``"metrics"``) standing for all its columns, plus
    case_id, split and answerable; absent ones are skipped. ``where`` names the source in errors.
    ``rows`` reads only the first that many (0: the columns and their types, checked).
    A file that is not such a table is an :class:`InputError`, never a traceback."""
    label = where or (str(source) if isinstance(source, (str, Path)) else "per-case table")
    fix = (
        "rerun `dvc repro` to rewrite it (a baseline's: `ragvet baseline accept`), "
        "or compare with a revision whose results are intact"
    )
    readable = io.BytesIO(source) if isinstance(source, bytes) else source
    try:
        names = pl.read_parquet_schema(readable).keys()
        if hasattr(readable, "seek"):
            readable.seek(0)
        asked = set(columns or ())
        wanted = (
            None
            if columns is None
            else [n for n in names if n in asked or n.partition(".")[0] in asked or n in _REQUIRED]
        )
        frame = pl.read_parquet(readable, columns=wanted, n_rows=rows)
    except (OSError, pl.exceptions.PolarsError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError([Problem(label, f"not a readable per-case Parquet table ({first})", fix)]) from None
    missing = [name for name in _REQUIRED if name not in frame.columns]
    if missing:
        raise InputError([Problem(label, f"per-case table lacks column(s) {', '.join(missing)}", fix)])
    raise_if([Problem(label, what, fix) for what in _type_flaws(frame)])
    return frame


def _type_flaws(frame: pl.DataFrame) -> list[str]:
    """Columns of the wrong type: an integer case_id never pairs with the text ids of the
    other side, and a text metric cannot be averaged; a committed table can hold either."""
    flaws = [
        f"column {name} holds {frame.schema[name]} values, a per-case table's holds {_base_schema()[name]}"
        for name in _REQUIRED
        if frame.schema[name] not in (_base_schema()[name], pl.Null)
    ]
    return flaws + [
        f"column {name} holds {dtype} values, a per-case table's holds numbers"
        for name, dtype in frame.schema.items()
        if name.startswith("metrics.") and not (dtype.is_numeric() or dtype == pl.Null)
    ]
