"""Each eval case of a gated configuration, baseline beside candidate: whether it was
newly missed, newly found or unchanged at the comparison's ``hit@k``, the rank where
its evidence first arrived, and the guarded metrics on each side.

One table feeds both the HTML report's case explorer and the ``dvc plots`` CSV
(``data/moves.csv``), so what a reviewer clicks through and what DVC draws agree. It
grows with the cases, so DVC's cache keeps the CSV, not git.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from ragvet.schema import EVAL
from ragvet.storage.results import column

RANK = "first_relevant_rank"  # the per-case table's rank of the first chunk overlapping any evidence (None: none)
STATUSES = ("newly missed", "newly found", "unchanged")  # the order moved cases are listed in


def _side(table: pl.DataFrame | None, ranks: pl.DataFrame | None, metrics: Sequence[str], prefix: str) -> pl.DataFrame:
    """The eval cases of one side as ``case_id``, ``<prefix>first_rank`` and ``<prefix><metric>`` columns."""
    names = {column("metrics", metric): f"{prefix}{metric}" for metric in metrics}
    schema = {"case_id": pl.String, **dict.fromkeys(names.values(), pl.Float64)}
    if table is None:
        return pl.DataFrame(schema=schema).with_columns(pl.lit(None, pl.Int64).alias(f"{prefix}first_rank"))
    rows = table.filter(pl.col("split") == EVAL)
    picked = rows.select(
        "case_id",
        *(
            pl.col(name).cast(pl.Float64).alias(alias)
            if name in rows.columns
            else pl.lit(None, pl.Float64).alias(alias)
            for name, alias in names.items()
        ),
    )
    if ranks is None or RANK not in ranks.columns:
        return picked.with_columns(pl.lit(None, pl.Int64).alias(f"{prefix}first_rank"))
    return picked.join(
        ranks.select("case_id", pl.col(RANK).cast(pl.Int64).alias(f"{prefix}first_rank")), on="case_id", how="left"
    )


def case_moves(
    comparison: dict,
    current: tuple[pl.DataFrame | None, pl.DataFrame | None],
    baseline: tuple[pl.DataFrame | None, pl.DataFrame | None],
    metrics: Sequence[str],
) -> list[dict]:
    """One row per eval case either side holds, newly missed first, then newly found,
    then unchanged, each by case id: ``config``, ``case_id``, ``status``,
    ``baseline_first_rank`` and ``first_rank`` (None where no chunk of the run
    overlaps its evidence, or the side lacks the case), then ``baseline_<metric>`` and
    ``<metric>`` for each of ``metrics``. ``current`` and ``baseline`` are each
    ``(per-case table, table of case_id and first_relevant_rank)``. A comparison that
    compared nothing (no baseline, other labels) has every case unchanged."""
    base = _side(*baseline, metrics, "baseline_")
    cur = _side(*current, metrics, "")
    joined = base.join(cur, on="case_id", how="full", coalesce=True)
    status = {case_id: name for name in STATUSES[:2] for case_id in comparison.get(name.replace(" ", "_"), [])}
    order = ["baseline_first_rank", "first_rank", *(f"{side}{m}" for m in metrics for side in ("baseline_", ""))]
    rows = [
        {"config": comparison["config"], "case_id": row["case_id"], "status": status.get(row["case_id"], STATUSES[2])}
        | {key: row[key] for key in order}
        for row in joined.iter_rows(named=True)
    ]
    return sorted(rows, key=lambda row: (STATUSES.index(row["status"]), row["case_id"]))
