"""Each eval case of a gated configuration, baseline beside candidate: whether it was
newly missed, newly found or unchanged at the comparison's ``hit@k``, the rank where
its evidence first arrived, and the guarded metrics on each side.

One table feeds both the HTML report's case explorer and the ``dvc plots`` CSV
(``data/moves.csv``), so what a reviewer clicks through and what DVC draws agree. It
grows with the cases, so DVC's cache keeps the CSV, not git, and the report makes it a
batch of cases at a time (:func:`move_frames`) and writes it a line at a time
(:func:`moves_lines`): memory holds the moved cases' rows, not the table.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator, Sequence

import polars as pl

from ragvet.gating.compare import Side, side_batches
from ragvet.reporting.plots import csv_body, csv_frame_body, csv_header
from ragvet.schema import EVAL
from ragvet.storage.results import column

RANK = "first_relevant_rank"  # the per-case table's rank of the first chunk overlapping any evidence (None: none)
STATUSES = ("newly missed", "newly found", "unchanged")  # the order moved cases are listed in


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


def move_frames(
    comparison: dict, current: Side | None, baseline: Side | None, metrics: Sequence[str]
) -> Iterator[pl.DataFrame]:
    """One row per eval case either side holds, a frame per batch of cases in case-id order
    (:func:`ragvet.gating.compare.side_batches`: two Parquet files are never held whole;
    :func:`first_moves` puts them in move order): ``config``, ``case_id``, ``status``,
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
        moved = pl.col("case_id").replace_strict(status, default=STATUSES[2], return_dtype=pl.String)
        yield joined.select(pl.lit(comparison["config"]).alias("config"), "case_id", moved.alias("status"), *order)


def case_moves(comparison: dict, current: Side | None, baseline: Side | None, metrics: Sequence[str]) -> list[dict]:
    """Every row of :func:`move_frames`, newly missed first, then newly found, then
    unchanged, each by case id."""
    return first_moves(move_frames(comparison, current, baseline, metrics))[0]


def first_moves(frames: Iterable[pl.DataFrame], limit: int | None = None) -> tuple[list[dict], int]:
    """The first ``limit`` rows (all of them when None) of :func:`move_frames`' ``frames`` in
    move order (:func:`move_order`), as dicts, and how many rows came. The frames come in
    case-id order, so each status keeps only its first ``limit`` rows, and only those
    become dicts: at ten million cases the rows held stay at most three times ``limit``."""
    kept: dict[str, list[dict]] = {status: [] for status in STATUSES}
    count = 0
    for frame in frames:
        count += frame.height
        for status, rows in kept.items():
            room = None if limit is None else limit - len(rows)
            if room != 0:
                chosen = frame.filter(pl.col("status") == status)
                rows += (chosen if room is None else chosen.head(room)).to_dicts()
    return sorted((row for rows in kept.values() for row in rows), key=move_order)[:limit], count


def move_order(row: dict) -> tuple[int, str]:
    """Where a move row goes: newly missed first, then newly found, then unchanged, each by case id."""
    return STATUSES.index(row["status"]), row["case_id"]


def moves_lines(configs: Iterable[Iterable[pl.DataFrame]]) -> Iterator[str]:
    """The moves CSV (:func:`ragvet.reporting.plots.csv_frame_body`, the first row's fields
    as the header) of each configuration's :func:`move_frames`, in turn, each in
    :func:`case_moves`' order, a batch at a time. The unchanged rows, which are most of
    them, go to a temporary file as CSV lines until the configuration's moved rows are
    out, so memory holds only the rows that moved."""
    fields: list[str] | None = None
    for frames in configs:
        moved: list[pl.DataFrame] = []
        with tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n") as spill:
            for frame in frames:
                if fields is None and frame.height:
                    fields = frame.columns
                    yield csv_header(fields)
                unchanged = pl.col("status") == STATUSES[2]
                moved.append(frame.filter(~unchanged))
                spill.write(csv_frame_body(frame.filter(unchanged), fields or []))
            rows = first_moves(moved)[0]
            if rows:
                yield csv_body(rows, fields or [])
            spill.seek(0)
            yield from spill
    if fields is None:
        yield csv_header([])
