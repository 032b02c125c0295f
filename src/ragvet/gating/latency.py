"""The gate's optional latency check: fail when a gated configuration's p95 latency
rose beyond ``gate.latency.max_p95_rise`` over the accepted baseline's.

Latency depends on the machine, so it is compared only with a baseline measured on
the same hardware (the ``machine`` fingerprint each record carries,
:func:`ragvet.measures.latency.machine_fingerprint`). Anything that makes the two
figures incomparable (another machine, a batch kind that times no query alone) is a
note, never a failure: the check can only fail on a rise it actually measured. A
missing record on either side is a note here too (``ragvet report`` run by hand shows it),
and the verdict and the gate refuse it before comparing
(:func:`ragvet.gating.baselines.missing_latency`), so a check that is on never passes
without a measurement. ``ragvet baseline accept``
records the baseline (``metrics/baseline/latency/<config>.json``) while the check is on.

Pure: :mod:`ragvet.gating.baselines` reads both sides.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragvet.text.formatting import fmt

Record = Mapping[str, Any]


def _machine_differences(baseline: Record, current: Record) -> list[str]:
    """The fingerprint fields that differ, each as ``field: here vs baseline``; [] when the same machine."""
    base, here = baseline.get("machine") or {}, current.get("machine") or {}
    if not base or not here:
        return ["the machine was not recorded"]
    return [
        f"{key}: {here.get(key)!r} here, {base.get(key)!r} in the baseline"
        for key in sorted(base | here)
        if base.get(key) != here.get(key)
    ]


def compare_latency(baseline: Record | None, current: Record | None, max_rise: float) -> dict[str, Any]:
    """One configuration's p95 against its baseline's.

    ``rise`` is ``current / baseline - 1`` (None when either side is missing, or the
    baseline p95 is 0 ms: then any positive p95 fails). It fails when ``rise >
    max_rise``; exactly ``max_rise`` passes. ``note`` says why nothing was compared.
    """
    entry: dict[str, Any] = {
        "metric": "p95_ms",
        "baseline": None if baseline is None else baseline.get("p95_ms"),
        "current": None if current is None else current.get("p95_ms"),
        "rise": None,
        "max_p95_rise": max_rise,
        "failed": False,
        "note": None,
    }
    if current is None:
        entry["note"] = "no latency was measured for it here: run `dvc repro`"
    elif baseline is None:
        entry["note"] = "no latency baseline: `ragvet baseline accept` records it on this machine"
    elif differences := _machine_differences(baseline, current):
        entry["note"] = f"not comparable: measured on another machine ({'; '.join(differences)})"
    elif entry["baseline"] is None or entry["current"] is None:
        entry["note"] = f"p95 not measured ({current.get('per_query') or baseline.get('per_query')})"
    elif entry["baseline"] == 0:
        entry["failed"] = entry["current"] > 0
    else:
        entry["rise"] = round(entry["current"] / entry["baseline"] - 1.0, 6)
        entry["failed"] = entry["rise"] > max_rise
    return entry


def latency_text(entry: Mapping[str, Any]) -> str:
    """One line of the verdict: the p95 move and its limit, or why it was not compared."""
    if entry["note"] is not None:
        return f"p95 latency {entry['note']}"
    rise = "from 0 ms" if entry["rise"] is None else f"{entry['rise'] * 100:+.1f}%"
    return (
        f"p95 latency {fmt(entry['baseline'])} -> {fmt(entry['current'])} ms ({rise}; "
        f"max_p95_rise {entry['max_p95_rise'] * 100:+.1f}%)"
    )
