"""What the report reads of a configuration's summary (``metrics/<config>.json``, as
evaluate wrote it): one split's means and denominators, the k of the single-k tables,
and the names of the context budget's two denominators.

The sections that print a summary's figures (the absolute tables, the judged share,
the plot rows) read a split here, so they cannot read it differently.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# One configuration's summary, as evaluate wrote it (ragvet.measures.summary).
Summary = dict[str, Any]


def summary_k(ks: Sequence[int]) -> int:
    """The k for the single-k table: the largest k <= 5, else the smallest k."""
    ordered = sorted(ks)
    small = [k for k in ordered if k <= 5]
    return small[-1] if small else ordered[0]


def split_figures(summary: Summary, split: str) -> tuple[dict, dict]:
    """``(means, denominators)`` of one split (``eval`` or ``dev``); empty when the summary has none."""
    part = summary.get(split) or {}
    return part.get("metrics") or {}, part.get("denominators") or {}


# The context budget is averaged over two denominators: a configuration's summary
# counts answerable cases only, as every metric there; the paired comparison counts
# every eval case, since abstention cases cost context too. Each table shows one and
# names it, so that two figures for the same configuration never look like one.
ANSWERABLE_ONLY = "(mean over answerable cases)"
ALL_CASES = "(mean over all paired eval cases, abstention included)"
