"""Each eval case of a gated configuration, baseline beside candidate: whether it was
newly missed, newly found or unchanged at the comparison's ``hit@k``, the rank where
its evidence first arrived, and the guarded metrics on each side.

One table feeds both the HTML report's case explorer and the ``dvc plots`` CSV
(``data/moves.csv``), so what a reviewer clicks through and what DVC draws agree. It
grows with the cases, so DVC's cache keeps the CSV, not git, and the report makes it a
batch of cases at a time (:func:`move_batches`) and writes it a line at a time
(:func:`moves_lines`): memory holds the moved cases' rows, not the table.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator, Sequence

import polars as pl

from ragvet.gating.compare import Side, side_batches
from ragvet.reporting.plots import csv_body, csv_header
from ragvet.schema import EVAL
from ragvet.storage.results import column

RANK = "first_relevant_rank"  # the per-case table's rank of the first chunk overlapping any evidence (None: none)
STATUSES = ("newly missed", "newly found", "unchanged")  # the order moved cases are listed in
ROW_BATCH = 1 << 16  # rows made into dicts, and formatted, at once


def _side(table: pl.DataFrame | None, metrics: Sequence[str], prefix: str) -> pl.DataFrame:
    """The eval cases of one side as ``case_id``, ``<prefix>first_rank`` and ``<prefix><metric>`` columns."""
    names = {column("metrics", metric): f"{prefix}{metric}" for metric in metrics}
    schema = {"case_id": pl.String, **dict.fromkeys(names.values(), pl.Float64)}
    if table is None:
        return pl.DataFrame(schema=schema).with_columns(pl.lit(None, pl.Int64).alias(f"{prefix}first_rank"))
    rows = table.filter(pl.col("split") == EVAL)
    return rows.select(
        pl.col("case_id").cast(pl.String),
        *(
            pl.col(name).cast(pl.Float64).alias(alias)
            if name in rows.columns
            else pl.lit(None, pl.Float64).alias(alias)
            for name, alias in names.items()
        ),
        (pl.col(RANK) if RANK in rows.columns else pl.lit(None)).cast(pl.Int64).alias(f"{prefix}first_rank"),
    )


def move_batches(
    comparison: dict, current: Side | None, baseline: Side | None, metrics: Sequence[str]
) -> Iterator[list[dict]]:
    """One row per eval case either side holds, in batches of up to :data:`ROW_BATCH` rows
    in case-id order (:func:`ragvet.gating.compare.side_batches`: two Parquet files are
    never held whole; :func:`case_moves` puts them in move order): ``config``, ``case_id``, ``status``,
    ``baseline_first_rank`` and ``first_rank`` (None where no chunk of the run overlaps
    its evidence, or the side lacks the case), then ``baseline_<metric>`` and
    ``<metric>`` for each of ``metrics``. ``current`` and ``baseline`` are per-case
    tables (or their files) with their ``first_relevant_rank`` column; None where there
    is none. A comparison that compared nothing (no baseline, other labels) has every
    case unchanged."""
    status = {case_id: name for name in STATUSES[:2] for case_id in comparison.get(name.replace(" ", "_"), [])}
    order = ["baseline_first_rank", "first_rank", *(f"{side}{m}" for m in metrics for side in ("baseline_", ""))]
    wanted = {"case_id", "split", RANK, *(column("metrics", metric) for metric in metrics)}
    held = [side for side in (baseline, current) if side is not None]
    for batch in side_batches(held, wanted):
        tables = iter(batch)
        base = _side(next(tables) if baseline is not None else None, metrics, "baseline_")
        cur = _side(next(tables) if current is not None else None, metrics, "")
        joined = base.join(cur, on="case_id", how="full", coalesce=True).sort("case_id")
        for start in range(0, joined.height, ROW_BATCH):  # rows as dicts a slice at a time
            yield [
                {
                    "config": comparison["config"],
                    "case_id": row["case_id"],
                    "status": status.get(row["case_id"], STATUSES[2]),
                }
                | {key: row[key] for key in order}
                for row in joined.slice(start, ROW_BATCH).iter_rows(named=True)
            ]


def case_moves(comparison: dict, current: Side | None, baseline: Side | None, metrics: Sequence[str]) -> list[dict]:
    """Every row of :func:`move_batches`, newly missed first, then newly found, then
    unchanged, each by case id."""
    return first_moves(move_batches(comparison, current, baseline, metrics))[0]


def first_moves(batches: Iterable[list[dict]], limit: int | None = None) -> tuple[list[dict], int]:
    """The first ``limit`` rows (all of them when None) of :func:`move_batches`' ``batches`` in
    move order (newly missed, newly found, unchanged, each by case id), and how many rows
    came. The batches come in case-id order, so each status keeps only its first ``limit``
    rows: at ten million cases the rows held stay at most three times ``limit``."""
    kept: dict[str, list[dict]] = {status: [] for status in STATUSES}
    count = 0
    for batch in batches:
        count += len(batch)
        for row in batch:
            rows = kept[row["status"]]
            if limit is None or len(rows) < limit:
                rows.append(row)
    ordered = [row for status in STATUSES for row in sorted(kept[status], key=lambda row: row["case_id"])]
    return ordered[:limit], count


def moves_lines(configs: Iterable[Iterable[list[dict]]]) -> Iterator[str]:
    """The moves CSV (:func:`ragvet.reporting.plots.csv_body`, the first row's fields as
    the header) of each configuration's :func:`move_batches`, in turn, each in
    :func:`case_moves`' order, a few lines at a time. The unchanged rows, which are most of
    them, go to a temporary file as CSV lines until the configuration's moved rows are
    out, so memory holds only the rows that moved."""
    fields: list[str] | None = None
    for batches in configs:
        moved: list[dict] = []
        with tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n") as spill:
            for batch in batches:
                if fields is None and batch:
                    fields = list(batch[0])
                    yield csv_header(fields)
                moved += [row for row in batch if row["status"] != STATUSES[2]]
                unchanged = [row for row in batch if row["status"] == STATUSES[2]]
                spill.write(csv_body(unchanged, fields or []))
            if moved:
                yield csv_body(first_moves([moved])[0], fields or [])
            spill.seek(0)
            yield from spill
    if fields is None:
        yield csv_header([])
