"""How figures are printed in reports and terminal tables: one rule everywhere, so
the same value never reads differently in two sections."""

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
