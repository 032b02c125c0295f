"""The rows of the ``dvc plots`` data (``metrics/plots/*.csv``) and of the HTML page's
charts: metrics against k, evidence recall against the context budget, per-slice bars.

Eval split only, one line (or bar) per configuration, sorted, so the CSVs are
byte-identical across runs and ``dvc plots diff`` shows only real moves.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from typing import Any

import polars as pl

from ragvet.reporting.summaries import Summary, split_figures
from ragvet.schema import EVAL
from ragvet.storage.files import round_floats
from ragvet.text.escaping import csv_cell


def csv_header(fields: Sequence[str]) -> str:
    """A CSV's first line: its field names."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(fields)
    return buffer.getvalue()


def csv_body(rows: Sequence[dict], fields: Sequence[str]) -> str:
    """The CSV lines of ``rows`` (``fields`` of each, empty where a row lacks one), floats
    rounded as in every output and each cell inert in a spreadsheet."""
    return _csv_lines([csv_cell(row.get(key, "")) for key in fields] for row in round_floats(list(rows)))


def csv_frame_body(frame: pl.DataFrame, fields: Sequence[str]) -> str:
    """:func:`csv_body` of a frame's rows, the same text, made a column at a time: only
    float columns rounded, only columns that can hold text made inert (millions of rows in seconds)."""
    columns = []
    for key in fields:
        if key not in frame.columns:
            columns.append([""] * frame.height)
            continue
        series = frame[key]
        values = series.to_list()
        if series.dtype.is_float():
            values = round_floats(values)
        elif not series.dtype.is_numeric():  # text, categories, anything csv_cell may change
            values = [csv_cell(value) for value in values]
        columns.append(values)
    return _csv_lines(zip(*columns)) if frame.height else ""


def _csv_lines(rows: Iterable[Sequence[Any]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def csv_text(rows: list[dict]) -> str:
    """Rows as CSV, the first row's fields as the header (:func:`csv_header`, :func:`csv_body`)."""
    fields = list(rows[0]) if rows else []
    return csv_header(fields) + csv_body(rows, fields)


def plot_rows(summaries: dict[str, Summary], ks: list[int]) -> list[dict]:
    """Eval-split rows ``{config, k, recall, evidence_recall, claim_availability, hit, context_chars}``
    sorted by (config, k): one line per configuration in ``dvc plots``."""
    rows = []
    for name in sorted(summaries):
        means, _ = split_figures(summaries[name], EVAL)
        for k in sorted(set(ks)):
            rows.append(
                {
                    "config": name,
                    "k": k,
                    "recall": means.get(f"recall@{k}"),
                    "evidence_recall": means.get(f"evidence_recall@{k}"),
                    "claim_availability": means.get(f"claim_availability@{k}"),
                    "hit": means.get(f"hit@{k}"),
                    "context_chars": means.get(f"context_chars@{k}"),
                }
            )
    return rows


def budget_rows(summaries: dict[str, Summary], k: int, budgets: Sequence[int] = (), unit: str = "chars") -> list[dict]:
    """Eval-split ``{config, budget, unit, evidence_recall}``: evidence recall against
    the context budget, one line per configuration in the budget plot.

    With ``budgets`` (``budget.values``, in ``unit``): one row per value, from
    ``evidence_recall_budget@B``. Without: one point per configuration, the
    characters its top ``k`` cost (``context_chars@k``) against ``evidence_recall@k``.
    """
    rows = []
    for name in sorted(summaries):
        means, _ = split_figures(summaries[name], EVAL)
        if budgets:
            points = [(b, unit, means.get(f"evidence_recall_budget@{b}")) for b in sorted(budgets)]
        else:
            points = [(means.get(f"context_chars@{k}"), f"chars in the top {k}", means.get(f"evidence_recall@{k}"))]
        rows += [{"config": name, "budget": b, "unit": u, "evidence_recall": v} for b, u, v in points]
    return rows


def slice_rows(slices: dict[str, dict], k: int) -> list[dict]:
    """Eval-split ``{config, slice, cases, recall, evidence_recall}`` at ``k`` from
    each configuration's slice table, sorted by (config, slice): the per-slice bars."""
    rows = []
    for name in sorted(slices):
        for key, values in sorted((slices[name].get(EVAL) or {}).items()):
            for value, entry in sorted(values.items()):
                means = entry.get("metrics") or {}
                rows.append(
                    {
                        "config": name,
                        "slice": f"{key}={value}",
                        "cases": entry.get("cases"),
                        "recall": means.get(f"recall@{k}"),
                        "evidence_recall": means.get(f"evidence_recall@{k}"),
                    }
                )
    return rows
