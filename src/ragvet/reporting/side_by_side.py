"""Every configuration (or experiment) against one baseline configuration, as markdown:
one table per metric, with the paired interval, the corrected p-value and the cases
won, tied and lost.

Shared by the report and ``ragvet compare``; the table itself is measured by
:func:`ragvet.gating.side_by_side.side_by_side`.
"""

from __future__ import annotations

from ragvet.gating.significance import describe_family
from ragvet.reporting.markdown import md_table
from ragvet.text.escaping import md_code, md_prose
from ragvet.text.formatting import DASH, fmt, fmt_ci, fmt_metric, fmt_p

SIDE_BY_SIDE_TESTS = "every configuration and metric against the baseline configuration"


def side_by_side_section(table: dict | None, confidence: float, title: str = "configuration") -> list[str]:
    """Every configuration (or experiment) against one baseline, one table per
    metric: mean, delta, paired CI, corrected p-value (✱ below α) and the cases
    won, tied and lost. Built by :func:`ragvet.gating.side_by_side.side_by_side`."""
    if not table:
        return []
    baseline = md_code(table["baseline"])
    out = [
        f"## Every {title} against {baseline}",
        "",
        (
            f"Eval split, paired over the cases both have a value for (each mean is over its row's `cases`). "
            f"✱: corrected p < α. W/T/L: cases won, tied and lost against {baseline}. "
            f"{describe_family(table['family'], SIDE_BY_SIDE_TESTS)}"
        ),
        "",
    ]
    for index, metric in enumerate(table["metrics"]):
        rows = []
        for entry in table["entries"]:
            name = md_code(entry["name"], table=True) + (" (baseline)" if entry["baseline"] else "")
            if entry["reason"]:
                rows.append([name, DASH, DASH, DASH, DASH, md_prose(entry["reason"], table=True), DASH])
                continue
            m = entry["metrics"][index]
            if entry["baseline"]:
                rows.append([name, fmt_metric(metric, m["current"]), DASH, DASH, DASH, DASH, fmt(m["cases"])])
                continue
            mark = " ✱" if m.get("significant") else ""
            rows.append(
                [
                    name,
                    fmt_metric(metric, m["current"]),
                    fmt_metric(metric, m["delta"], True) + mark,
                    fmt_ci(m),
                    fmt_p(m["p_corrected"]),
                    f"{m['wins']}/{m['ties']}/{m['losses']}",
                    fmt(m["cases"]),
                ]
            )
        header = [
            md_code(metric, table=True),
            "mean",
            "Δ",
            f"paired {confidence * 100:g}% CI",
            "corrected p",
            "W/T/L",
            "cases",
        ]
        out += md_table(header, rows) + [""]
    return out
