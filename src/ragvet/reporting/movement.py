"""The report's section on what a change moved on every case, labelled or not: per gated
configuration the share of cases whose top k changed, the distributions of overlap@k and
RBO over all cases and per slice, and the cases that moved most, as the verdict stage
measured them (:mod:`ragvet.gating.movement`). User text (configuration names, slice
values, case ids) is escaped as everywhere in the report.
"""

from __future__ import annotations

from typing import Any

from ragvet.reporting.markdown import md_details, md_table
from ragvet.text.escaping import md_code, md_prose
from ragvet.text.formatting import fmt

TITLE = "What moved on every case, labelled or not"
HEADER = ("cases", "top k changed", "overlap mean", "p10", "p50", "p90", "RBO mean", "p10", "p50", "p90")


def _cells(figures: dict[str, Any]) -> list[str]:
    spread = [fmt(figures[name][key]) for name in ("overlap", "rbo") for key in ("mean", "p10", "p50", "p90")]
    return [fmt(figures["cases"]), fmt(figures["topk_changed"]), *spread]


def _config_lines(config: str, moved: dict[str, Any]) -> list[str]:
    if "unavailable" in moved:
        return [f"- {md_code(config)}: not measured: {md_prose(moved['unavailable'])}", ""]
    k, changed = moved["k"], moved["topk_changed"]
    share = "no case" if changed is None else f"{fmt(changed)} of {fmt(moved['cases'])} cases"
    lines = [f"- {md_code(config)}: top {k} changed for {share} (RBO p = {fmt(moved['p'])})", ""]
    rows = [["all", "", *_cells(moved)]]
    rows += [
        [md_code(key, table=True), md_code(value, table=True), *_cells(figures)]
        for key, values in moved["slices"].items()
        for value, figures in values.items()
    ]
    lines += md_table(("slice", "value", *HEADER), rows)
    if moved["most_moved"]:
        most = ", ".join(
            f"{md_code(case['case_id'])} (RBO {fmt(case['rbo'])}, overlap {fmt(case['overlap'])})"
            for case in moved["most_moved"]
        )
        lines += ["", f"Moved most: {most}"]
    return [*lines, ""]


def movement_section(verdict: dict[str, Any]) -> list[str]:
    """The section's lines, collapsed; none when the verdict measured no movement."""
    moved = verdict.get("moved")
    if not moved:
        return []
    body = [
        "Each case's top k against the baseline's (the ranking `ragvet baseline accept` kept, or the compared "
        "revision's run), at the deepest k: overlap@k is "
        "|baseline top k ∩ top k| / k (below 1 for a case that retrieved fewer than k chunks, changed or not) "
        "and RBO the extrapolated rank-biased overlap (docs/comparisons.md). No labels are needed, so every "
        "case counts.",
        "",
    ]
    for config, figures in sorted(moved.items()):
        body += _config_lines(config, figures)
    return md_details(TITLE, body[:-1])
