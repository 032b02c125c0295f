"""Many configurations side by side: each against one chosen baseline configuration.

A leaderboard of means says little when most adjacent pairs are not separable.
So every configuration (or experiment) is compared with the baseline the way
the gate compares a change: paired over the same eval-split cases, with the
delta's bootstrap interval, a permutation p-value, and the cases it won, tied
and lost. The p-values of the whole table are corrected as one family (the
gate's ``correction``), and only a corrected p below α earns a significance mark.

Only metrics comparable across chunkings belong here by default: configurations
with different chunkings have different chunk-level denominators.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragvet.gating.compare import Side, Statistics, compare_metrics, fingerprint_reasons
from ragvet.gating.significance import correct_entries
from ragvet.measures.registry import METRICS
from ragvet.settings import Gate


def comparable_metrics(k: int) -> list[str]:
    """The registry's metrics comparable across chunkings, at cutoff ``k``. Budget
    metrics are cut at a budget, not at ``k``: ask for them by name (``--metric``).
    ``judged@k`` describes the judgements, not the retrieval: the report shows it apart."""
    return [
        metric.key(k)
        for metric in METRICS.values()
        if metric.comparable_across_chunkings and not metric.budget and not metric.judgements
    ]


def side_by_side(
    rows: Mapping[str, Side | None],
    baseline: str,
    metrics: Sequence[str],
    gate: Gate,
    fingerprints: Mapping[str, dict | None] | None = None,
) -> dict:
    """Every entry of ``rows`` (a configuration or experiment name -> per-case
    rows, or its table's Parquet file, read a batch of cases at a time; None when it has
    no results) against ``rows[baseline]``.

    ``fingerprints`` (name -> eval-split and corpus fingerprints), when given,
    keeps out an entry whose labels or corpus differ from the baseline's: its
    ``reason`` says why and it has no figures. The others get, per metric, the
    means, delta, CI, raw and corrected p-values, wins, ties and losses (a win is
    a case that moved in the metric's good direction), and ``significant``.
    """
    fingerprints = fingerprints or {}
    base_rows = rows[baseline]
    entries: list[dict] = []
    stats = Statistics(gate)  # one draw per paired case set, shared by every configuration
    for name in sorted(rows):
        entry: dict[str, Any] = {"name": name, "baseline": name == baseline, "reason": None, "metrics": []}
        if rows[name] is None:
            entry["reason"] = "no results: run `dvc repro` (or the experiment) first"
        elif base_rows is None:
            entry["reason"] = "the baseline configuration has no results: run `dvc repro` first"
        elif name != baseline and fingerprints:
            entry["reason"] = "; ".join(fingerprint_reasons(fingerprints.get(baseline), fingerprints.get(name))) or None
        if entry["reason"] is None:
            entry["metrics"] = compare_metrics(base_rows, rows[name], list(metrics), gate, stats)
        entries.append(entry)
    stats.fill()
    tests = [m for e in entries if not e["baseline"] for m in e["metrics"]]
    alpha, method = gate.alpha, gate.correction
    size = correct_entries(tests, method)
    for test in tests:
        test["significant"] = test["p_corrected"] is not None and test["p_corrected"] < alpha
    family = {"size": size, "correction": method, "alpha": alpha, "significance": True}
    return {"baseline": baseline, "metrics": list(metrics), "family": family, "entries": entries}
