"""The comparison tables: each configuration against its baseline (metric by metric
with its paired interval, the slices that moved most, the newly missed and found
cases), its one-line headline when collapsed, and the context budget beside recall.

Rendered from :func:`ragvet.reporting.comparisons.compare_configs`; nothing is measured
here. The budget table sits apart because a recall gain bought with a larger context
is not free, and the reviewer should see the two side by side.
"""

from __future__ import annotations

from collections.abc import Collection

from ragvet.reporting.cases import case_list
from ragvet.reporting.markdown import md_details, md_table
from ragvet.reporting.summaries import ALL_CASES
from ragvet.text.escaping import html_text, md_code, md_prose
from ragvet.text.formatting import DASH, arrow, fmt, fmt_ci, fmt_metric, is_missing, slice_name


def _guard_mark(compared: dict, skipped: Collection[str]) -> str:
    """How a metric of the table stands in the gate: guarded, guarded but not compared, or neither."""
    if not compared["guarded"]:
        return ""
    return " (guarded, not compared: see the verdict)" if compared["metric"] in skipped else " (guarded)"


def config_section(
    comp: dict, case_info: dict[str, dict], confidence: float, cap: int | None, skipped: Collection[str] = ()
) -> list[str]:
    """One configuration against its baseline: its metrics with their paired intervals, the
    slices that moved most and its newly missed and found cases (collapsed), or why nothing
    was compared; at most ``cap`` cases per list. A guarded metric the gate ``skipped``
    (not comparable across the chunkings) is marked so: its figures here decided nothing."""
    k = comp["k"]
    if comp["reason"]:
        return [f"{md_code(comp['config'])}: {md_prose(comp['reason'])}.", ""]
    rows = [
        [
            md_code(m["metric"], table=True) + _guard_mark(m, skipped),
            fmt_metric(m["metric"], m["baseline"]),
            fmt_metric(m["metric"], m["current"]),
            fmt_metric(m["metric"], m["delta"], True),
            fmt_ci(m),
            arrow(m["delta"]),
            fmt(m["cases"]),
        ]
        for m in comp["metrics"]
    ]
    header = ["metric", "baseline", "current", "delta", f"paired {confidence * 100:g}% CI", "", "cases"]
    out = md_table(header, rows) + [""]
    if comp["slices"]:
        metric = comp["slices"][0]["metric"]
        slice_rows = [
            [
                md_code(slice_name(s), table=True),
                fmt(s["cases"]),
                fmt(s["baseline"]),
                fmt(s["current"]),
                fmt(s["delta"], True),
                fmt_ci(s),
                arrow(s["delta"]),
            ]
            for s in comp["slices"]
        ]
        body = md_table(["slice", "cases", "baseline", "current", "delta", "CI", ""], slice_rows)
        out += md_details(f"Slices that moved most ({html_text(metric)})", body)
    for key, label, evidence in (
        ("newly_missed", "hit in the baseline, missed now", True),
        ("newly_found", "missed in the baseline, hit now", False),
    ):
        ids = comp[key]
        title = f"{key.replace('_', ' ').capitalize()} at hit@{k}: {len(ids)} case{'s' if len(ids) != 1 else ''}"
        if ids:
            out += md_details(f"{title} ({label})", case_list(ids, case_info, evidence, cap))
        else:
            out += [f"{title}.", ""]
    return out


def headline(comp: dict) -> str:
    """One line for a collapsed configuration: its evidence recall move."""
    config = f"<code>{html_text(comp['config'])}</code>"
    if comp["reason"]:
        return f"{config}: {html_text(comp['reason'], limit=None)}"
    ev = next(m for m in comp["metrics"] if m["metric"] == f"evidence_recall@{comp['k']}")
    return (
        f"{config}: evidence_recall@{comp['k']} {fmt(ev['baseline'])} → {fmt(ev['current'])} "
        f"({fmt(ev['delta'], True)}) {arrow(ev['delta'])}, {len(comp['newly_missed'])} newly missed, "
        f"{len(comp['newly_found'])} newly found"
    )


def budget_section(comparisons: list[dict]) -> list[str]:
    rows = []
    for comp in comparisons:
        if comp["reason"]:
            continue
        by_name = {m["metric"]: m for m in comp["metrics"]}
        k = comp["k"]
        ev, rc, ctx = by_name[f"evidence_recall@{k}"], by_name[f"recall@{k}"], by_name[f"context_chars@{k}"]
        share = DASH
        if not is_missing(ctx["baseline"]) and ctx["baseline"]:
            share = f"{(ctx['current'] - ctx['baseline']) / ctx['baseline'] * 100:+.1f}%"
        rows.append(
            [
                md_code(comp["config"], table=True),
                f"{fmt(ev['current'])} ({fmt(ev['delta'], True)})",
                f"{fmt(rc['current'])} ({fmt(rc['delta'], True)})",
                f"{fmt_metric(ctx['metric'], ctx['baseline'])} → {fmt_metric(ctx['metric'], ctx['current'])}",
                share,
            ]
        )
    if not rows:
        return []
    k = comparisons[0]["k"]
    header = ["config", f"evidence_recall@{k} (Δ)", f"recall@{k} (Δ)", f"context_chars@{k} {ALL_CASES}", "context Δ"]
    intro = (
        "A recall gain bought with a larger context is not free: the generator reads every one of these "
        "characters. Compare recall at an equal budget."
    )
    return ["## Context budget beside recall", "", intro, "", *md_table(header, rows), ""]
