"""Means over cases: per split, per slice, and the abstention cases apart.

Every mean is macro over the cases that have a value and is written beside its
denominators (DESIGN.md, "Metric definitions"), so a figure never hides how many
cases it stands for.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from stages.measures.answers import review_summary
from stages.measures.registry import METRICS, metric_names, sorted_ks
from stages.schema import SPLITS


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def nearest_rank(values: Sequence[float], share: float) -> float | None:
    """The nearest-rank percentile: the smallest value with at least ``share`` of the
    values at or below it (a value that occurs, never an interpolation); None when empty."""
    ordered = sorted(values)
    return ordered[max(math.ceil(share * len(ordered)), 1) - 1] if ordered else None


# Budgets needed are skewed (a few cases need the whole list): their median and 90th
# percentile are reported beside the mean, and ``counted`` says how many cases reached one.
SPREAD = [metric.name for metric in METRICS.values() if metric.budget and not metric.share]


def _aggregate(rows: Sequence[dict], ks: Sequence[int], budgets: Sequence[int] = ()) -> dict[str, Any]:
    """Macro means and their denominators over the answerable cases among ``rows``.

    The one aggregation behind :func:`summarise` and :func:`slice_table`. A metric's
    mean is over the cases where it is not None (``counted`` gives how many), or
    None when there are none. Abstention cases are counted but not averaged.
    """
    unique_ks = sorted_ks(ks)
    answerable = [row for row in rows if row.get("answerable", True)]
    names = metric_names(unique_ks, budgets)
    means: dict[str, float | None] = {}
    counted: dict[str, int] = {}
    for name in names:
        present = [row["metrics"][name] for row in answerable if row["metrics"].get(name) is not None]
        means[name] = _mean(present)
        counted[name] = len(present)
        if name in SPREAD:
            means[f"{name}_p50"], means[f"{name}_p90"] = nearest_rank(present, 0.5), nearest_rank(present, 0.9)

    claims = sum(row["counts"].get("claims", 0) for row in answerable)
    pooled: dict[str, float | None] = {}
    for k in unique_ks:
        available = sum(row["counts"].get(f"claims_available@{k}", 0) for row in answerable)
        pooled[f"claim_availability_pooled@{k}"] = available / claims if claims else None

    with_claims = sum(1 for row in answerable if row["counts"].get("claims", 0) > 0)
    return {
        "metrics": {**means, **pooled},
        "counted": counted,
        "denominators": {
            "cases": len(answerable),
            "abstention_cases": len(rows) - len(answerable),
            "cases_with_claims": with_claims,
            "cases_without_claims": len(answerable) - with_claims,
            "claims": claims,
            "duplicates_removed": sum(row["counts"].get("duplicates_removed", 0) for row in rows),
        },
    }


def _by_split(rows: Sequence[dict]) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {split: [] for split in SPLITS}
    for row in rows:
        split = row.get("split")
        if split not in grouped:
            raise ValueError(f"case {row.get('case_id')!r} has split {split!r}; expected one of {SPLITS}")
        grouped[split].append(row)
    return grouped


def _abstention(rows: Sequence[dict], abstain_below: float | None) -> dict[str, Any]:
    """Abstention cases apart: their count, top-1 score distribution and abstain rates.

    A case with no retrieved chunk (``top1_score`` None) counts as abstaining.
    A rate is None when ``abstain_below`` is None or its denominator is 0.
    """
    abstention = [row for row in rows if not row.get("answerable", True)]
    answerable = [row for row in rows if row.get("answerable", True)]
    scores = sorted(row["top1_score"] for row in abstention if row.get("top1_score") is not None)
    distribution = None
    if scores:
        distribution = {
            "min": scores[0],
            "median": statistics.median(scores),
            "max": scores[-1],
            "mean": math.fsum(scores) / len(scores),
        }

    def rate(group: list[dict]) -> float | None:
        if abstain_below is None or not group:
            return None
        abstains = sum(1 for row in group if row.get("top1_score") is None or row["top1_score"] < abstain_below)
        return abstains / len(group)

    return {
        "cases": len(abstention),
        "top1_score": distribution,
        "abstain_rate": rate(abstention),
        "false_abstain_rate": rate(answerable),
    }


def summarise(
    rows: Sequence[dict], ks: Sequence[int], abstain_below: float | None, budgets: Sequence[int] = ()
) -> dict[str, Any]:
    """Per split: macro means with denominators, claim-pooled availability, and abstention apart.

    ``claim_availability_pooled@k`` is ``Σ claims_available@k / Σ claims`` over the
    answerable cases (None with no claims); it weighs each claim equally, where the
    macro ``claim_availability@k`` weighs each case with claims equally.
    """
    grouped = _by_split(rows)
    summary: dict[str, Any] = {split: _aggregate(grouped[split], ks, budgets) for split in SPLITS}
    summary["abstention"] = {split: _abstention(grouped[split], abstain_below) for split in SPLITS}
    return summary


def slice_table(
    rows: Sequence[dict], slice_keys: Sequence[str], ks: Sequence[int], budgets: Sequence[int] = ()
) -> dict[str, Any]:
    """Per split, per tag key, per tag value: ``{"cases", "metrics", "counted"}`` over answerable cases.

    A case without the tag is left out of that key's slices; a slice with only
    abstention cases is left out.
    """
    table: dict[str, Any] = {}
    for split, split_rows in _by_split(rows).items():
        per_key: dict[str, Any] = {}
        for key in slice_keys:
            groups: dict[str, list[dict]] = {}
            for row in split_rows:
                tags = row.get("tags") or {}
                if row.get("answerable", True) and key in tags:
                    groups.setdefault(str(tags[key]), []).append(row)
            per_key[key] = {}
            for value in sorted(groups):
                aggregate = _aggregate(groups[value], ks, budgets)
                per_key[key][value] = {
                    "cases": aggregate["denominators"]["cases"],
                    "metrics": aggregate["metrics"],
                    "counted": aggregate["counted"],
                }
        table[split] = per_key
    return table


def config_summary(
    config: str,
    spec: Mapping[str, str],
    rows: Sequence[dict],
    ks: Sequence[int],
    abstain_below: float | None,
    fingerprints: Mapping[str, str],
    abstain_source: str | None = None,
    budgets: Sequence[int] = (),
) -> dict:
    """The ``metrics/<config>.json`` content: means with denominators per split,
    abstention figures, and the fingerprints a later gate must match.

    Where rows carry recorded answers, a ``human_review`` section is added; with
    none, the section is absent rather than zero. The abstention threshold and
    where it comes from (``abstain_source``) sit beside the rates it produced.
    """
    summary = {
        "config": config,
        "chunking": spec["chunking"],
        "retriever": spec["retriever"],
        **summarise(rows, ks, abstain_below, budgets),
        "fingerprints": {"eval_split": fingerprints["eval_split"], "corpus": fingerprints["corpus"]},
    }
    if abstain_below is not None:
        summary["abstention"] |= {"abstain_below": abstain_below, "abstain_below_source": abstain_source}
    review = review_summary(rows, ks, SPLITS)
    if review is not None:
        summary["human_review"] = review
    return summary
