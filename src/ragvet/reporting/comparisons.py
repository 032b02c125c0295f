"""What the report compares: every configuration's paired comparison with its baseline
(the committed baseline, or a git revision's results), over the report's metrics, the
slices that moved most and the cases newly missed and found.

Not the gate's verdict, which the verdict stage decides (:mod:`ragvet.gating.decision`)
and the report only renders; these are the tables beside it, measured with the gate's
own paired functions (:mod:`ragvet.gating.compare`), so a figure the report shows for a
guarded metric is the figure the gate decided on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ragvet.gating.compare import (
    Pairing,
    Side,
    Statistics,
    compare_metrics,
    fingerprint_reasons,
    gate_metrics,
    newly_missed_k,
    slice_comparisons,
)
from ragvet.reporting.summaries import Summary, summary_k
from ragvet.settings import Gate


def report_metrics(k: int, guarded: Sequence[str] = ()) -> list[str]:
    """The metrics each configuration's comparison table shows: the comparable
    ones first, the context budget last, then any guarded metric not yet listed."""
    shown = [f"evidence_recall@{k}", f"claim_availability@{k}", f"recall@{k}", f"hit@{k}", "mrr", f"context_chars@{k}"]
    return shown + [m for m in guarded if m not in shown]


def report_k(ks: Sequence[int], gate: Gate) -> int:
    """The k of the report's comparisons and its newly missed and found cases: the
    gate's (:func:`newly_missed_k`), else the summary's."""
    return newly_missed_k(gate.metrics) or summary_k(ks)


def compared_metrics(ks: Sequence[int], gate: Gate) -> list[str]:
    """Every metric :func:`compare_configs` and the gate compare: what the report reads
    of each per-case table, with the side-by-side table's."""
    k = report_k(ks, gate)
    return list(dict.fromkeys([*gate_metrics(gate), *report_metrics(k, gate.metrics), f"hit@{k}"]))


def report_pairings(configs: Iterable[str], ks: Sequence[int], gate: Gate) -> dict[str, Pairing]:
    """Each configuration's :class:`Pairing` of what its comparison shows, not yet read: the
    metrics of :func:`report_metrics` (a gated one's guarded metrics among them), the gate's
    slices and the newly missed and found cases at :func:`report_k`. Handed to the gate's
    decision as well (:func:`ragvet.gating.decision.decide`), it covers the gate's figures,
    so a report that decides its verdict reads each configuration's tables once."""
    k = report_k(ks, gate)
    shown = {config: report_metrics(k, gate.metrics if config in gate.configs else ()) for config in configs}
    return {config: Pairing(metrics, gate.slice_metric, gate.slices, k) for config, metrics in shown.items()}


def compare_configs(
    current: dict[str, Side],
    baselines: dict[str, tuple[Summary | None, Side | None]],
    fingerprints: dict,
    ks: Sequence[int],
    gate: Gate,
    against: str | None = None,
    top_slices: int = 5,
    pairings: Mapping[str, Pairing] | None = None,
) -> list[dict]:
    """Paired comparison of every configuration with its baseline, sorted by name.

    Each entry has the paired delta and bootstrap CI of every metric of
    :func:`report_metrics`, the slices whose ``gate.slice_metric`` moved most
    (largest absolute delta, among slices with at least ``min_slice_cases``), and
    the newly missed and newly found cases at ``hit@k``. ``reason`` is set, and
    nothing is compared, when there is no baseline or the fingerprints differ.
    Each configuration's two tables are read once for all of these (its pairing of
    :func:`report_pairings`, taken as it is when the gate's decision has read it): two
    Parquet files a batch of cases at a time, so neither is held whole.
    """
    k = report_k(ks, gate)
    pairings = report_pairings(current, ks, gate) if pairings is None else pairings
    out = []
    stats = Statistics(gate)  # one draw per paired case set, shared by every configuration
    for config in sorted(current):
        rows = current[config]
        base_summary, base_rows = baselines.get(config, (None, None))
        gated = config in gate.configs
        entry: dict[str, Any] = {"config": config, "gated": gated, "k": k, "reason": None}
        if base_summary is None or base_rows is None:
            entry["reason"] = (
                f"no results at `{against}` to compare with (a new configuration)"
                if against
                else "no baseline: create it deliberately with `ragvet baseline accept`"
            )
        else:
            entry["reason"] = "; ".join(fingerprint_reasons(base_summary.get("fingerprints"), fingerprints)) or None
        if entry["reason"]:
            out.append(entry)
            continue
        guarded = gate.metrics if gated else ()
        pairing = pairings[config].read(base_rows, rows)
        entry["metrics"] = compare_metrics(base_rows, rows, pairing.metrics, gate, stats, pairing)
        for compared in entry["metrics"]:  # in place: stats.fill() below fills these dicts
            compared["guarded"] = compared["metric"] in guarded
        moved = [s for s in slice_comparisons(base_rows, rows, gate, stats, pairing) if s["delta"] is not None]
        moved.sort(key=lambda s: (-abs(s["delta"]), s["key"], s["value"]))
        entry["slices"] = moved[:top_slices]
        entry["newly_missed"] = pairing.newly_missed()
        entry["newly_found"] = pairing.newly_found()
        out.append(entry)
    stats.fill()
    return out
