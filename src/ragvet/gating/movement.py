"""What a change moved on every case, labelled or not: how far a configuration's top k moved
from the ranking its baseline kept (:func:`ragvet.gating.baselines.baseline_ranking_path`),
summarised over the cases and per slice, with the cases that moved most.

The figures per case are :mod:`ragvet.measures.overlap`'s (``overlap@k``,
``topk_changed@k``, ``rbo@k``); here they are read from the two files and summarised.
A distribution is its mean and its 10th, 50th and 90th percentiles (linear interpolation
between the two nearest cases, numpy's default); all None over no case.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ragvet.errors import InputError, Problem
from ragvet.gating.baselines import baseline_ranking_path
from ragvet.measures.overlap import moved
from ragvet.storage.results import column, per_case_path, read_results
from ragvet.storage.tables import run_path

PERCENTILES = (10, 50, 90)


def per_case_movement(run: Path, baseline_ranking: Path, k: int, p: float) -> pl.DataFrame:
    """``case_id, overlap@k, topk_changed@k, rbo@k`` of every case either file ranks."""
    sides = [pl.read_parquet(path, columns=["case_id", "rank", "chunk_id"]) for path in (baseline_ranking, run)]
    return moved(*sides, k, p)


def distribution(values: np.ndarray) -> dict[str, float | None]:
    """``mean, p10, p50, p90`` of ``values``; each None when there is none."""
    if len(values) == 0:
        return {"mean": None, **{f"p{q}": None for q in PERCENTILES}}
    return {"mean": float(np.mean(values)), **{f"p{q}": float(np.percentile(values, q)) for q in PERCENTILES}}


def _figures(moves: pl.DataFrame, k: int) -> dict[str, Any]:
    """The cases counted, the share whose top k changed, and the two distributions."""
    changed = moves[f"topk_changed@{k}"].to_numpy()
    return {
        "cases": len(moves),
        "topk_changed": float(changed.mean()) if len(changed) else None,
        "overlap": distribution(moves[f"overlap@{k}"].to_numpy()),
        "rbo": distribution(moves[f"rbo@{k}"].to_numpy()),
    }


def movement_summary(
    moves: pl.DataFrame, tags: pl.DataFrame, slices: Sequence[str], k: int, p: float, most: int
) -> dict[str, Any]:
    """The movement of every case of ``moves`` (:func:`per_case_movement`): over all of
    them, per value of each slice key (``tags`` holds ``case_id`` and the per-case
    table's ``tags.<key>`` columns; a case without the tag is not in that slice), and
    the ``most`` cases that moved most (lowest ``rbo@k``, then lowest ``overlap@k``,
    then case id), only those whose top k changed or whose order did."""
    summary: dict[str, Any] = {"k": k, "p": p, **_figures(moves, k), "slices": {}}
    joined = moves.join(tags, on="case_id", how="left")
    for key in slices:
        name = column("tags", key)
        if name not in joined.columns:
            continue
        values = sorted(value for value in joined[name].unique().to_list() if value is not None)
        summary["slices"][key] = {value: _figures(joined.filter(pl.col(name) == value), k) for value in values}
    ranked = moves.filter(pl.col(f"rbo@{k}") < 1.0).sort([f"rbo@{k}", f"overlap@{k}", "case_id"]).head(most)
    summary["most_moved"] = [
        {"case_id": case_id, "overlap": overlap, "rbo": rbo}
        for case_id, overlap, rbo in ranked.select("case_id", f"overlap@{k}", f"rbo@{k}").iter_rows()
    ]
    return summary


def movement_by_config(
    configs: Sequence[str], runs: Path, baseline: Path, cases: Path, slices: Sequence[str], k: int, p: float, most: int
) -> dict[str, dict[str, Any]]:
    """:func:`movement_summary` of each configuration's run in ``runs`` against the ranking
    the ``baseline`` folder kept, sliced by the tags of its per-case table in ``cases``. A
    baseline accepted before rankings were kept has none: that configuration's entry says
    so (``unavailable``) with the fix, since nothing was measured."""
    found: dict[str, dict[str, Any]] = {}
    for config in sorted(configs):
        ranking, run = baseline_ranking_path(baseline, config), run_path(runs, config)
        if not ranking.is_file():
            what = f"the baseline keeps no ranking ({ranking.as_posix()})"
            found[config] = {"unavailable": f"{what}: accept it again with `ragvet baseline accept`"}
            continue
        if not run.is_file():
            fix = f"run `dvc repro` (or `dvc checkout {run.as_posix()}`)"
            raise InputError(
                [Problem(str(run), f"the run of gated configuration {config} is not in the work tree", fix)]
            )
        table = read_results(per_case_path(cases, config), columns=("tags",))
        tags = table.select("case_id", *(name for name in table.columns if name.startswith("tags.")))
        found[config] = movement_summary(per_case_movement(run, ranking, k, p), tags, slices, k, p, most)
    return found
