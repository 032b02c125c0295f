"""How figures are printed in reports and terminal tables: one rule everywhere, so
the same value never reads differently in two sections (a metric, its move, its
interval, a p-value, a slice)."""

from __future__ import annotations

import math
import numbers
from typing import Any

DASH = "–"  # no value: nothing to average over


def is_missing(value: Any) -> bool:
    """None, NaN and infinities are all "no value": none of them can be compared."""
    return value is None or (isinstance(value, float) and not math.isfinite(value))


def fmt(value: Any, signed: bool = False) -> str:
    """3 decimals for floats, plain ints, a dash for None/NaN; never ``-0.000``."""
    if is_missing(value):
        return DASH
    if isinstance(value, numbers.Integral):
        return str(int(value))
    text = f"{value:+.3f}" if signed else f"{value:.3f}"
    return "0.000" if text in ("-0.000", "+0.000") else text


def fmt_p(value: Any) -> str:
    """A p-value: 3 significant digits, ``<0.001`` below that, a dash without a test."""
    if is_missing(value):
        return DASH
    return "<0.001" if value < 0.001 else f"{value:.3g}"


def fmt_metric(metric: str, value: Any, signed: bool = False) -> str:
    """A metric's value or move: context budgets are characters, with no decimals;
    everything else via :func:`fmt`."""
    if metric.startswith("context_chars") and not is_missing(value):
        return (
            f"{value:+,.0f}" if signed and round(value) != 0 else f"{abs(value) if round(value) == 0 else value:,.0f}"
        )
    return fmt(value, signed)


def fmt_ci(entry: dict) -> str:
    """A compared entry's paired interval, ``[low, high]`` in its metric's units; a dash without one."""
    if is_missing(entry.get("ci_low")):
        return DASH
    metric = entry["metric"]
    return f"[{fmt_metric(metric, entry['ci_low'], True)}, {fmt_metric(metric, entry['ci_high'], True)}]"


def arrow(delta: float | None) -> str:
    """A move's direction at the 3 decimals printed: a move that prints as 0.000 is →."""
    if is_missing(delta) or abs(delta) < 0.0005:
        return "→"
    return "↑" if delta > 0 else "↓"


def slice_name(entry: dict) -> str:
    """A slice as ``key=value``, the form params and the terminal use."""
    return f"{entry['key']}={entry['value']}"
