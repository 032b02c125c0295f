"""Latency and load of one retrieve stage: per-query latency, p50, p95, max and
queries per second.

Latency varies from run to run, so it never enters the committed figures
(``metrics/<config>.json``, the report, the baseline) nor ``dvc.lock``: the
retrieve stage writes it to ``.ragvet/latency/<config>.json``, a file neither git
nor DVC tracks (an output or dependency would put its hash in ``dvc.lock``), and
the report stage renders it beside evidence recall in ``.ragvet/latency.md``.
When DVC restores a run instead of running the stage, no record is written: the
page says so, and the gate's p95 check refuses to pass. ``ragvet verify`` never
reads it.

Per-query latency is what a kind can time one query at a time: the search of
each question for ``bm25`` (the index is built once, before), each query for
``pgvector``, and the request of each case for ``http`` (measured when it was fetched; a cached response keeps
the latency it had). The batch kinds (``dense``, ``hybrid``, ``rerank``,
``python``, ``run_file``) answer all questions at once: they get queries per
second, and their percentiles are None.

Each record names the machine it was measured on (:func:`machine_fingerprint`):
latency compares only with latency measured on the same hardware, which is what
the gate's optional p95 check (``gate.latency.max_p95_rise``) relies on.
"""

from __future__ import annotations

import math
import os
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

PLACES = 3
# What ``ragvet baseline accept`` keeps of a record: the figures and the machine, not each case's timing.
ACCEPTED = ("cases", "per_query", "p50_ms", "p95_ms", "max_ms", "qps", "machine")


def _cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what the platform reports."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            name, _, value = line.partition(":")
            if name.strip() in ("model name", "Hardware", "cpu model"):
                return value.strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float | None:
    """Physical memory in GiB, to one decimal; None where the system does not say."""
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def machine_fingerprint() -> dict[str, Any]:
    """The hardware a latency figure depends on: operating system, architecture, CPU
    model, logical CPUs and memory. Not the host name: identical CI runners compare,
    and a laptop compares with itself after a rename. Two records with different
    fingerprints are never compared."""
    return {
        "system": platform.system(),
        "arch": platform.machine(),
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "memory_gib": _memory_gib(),
    }


def nearest_rank(values: Sequence[float], share: float) -> float | None:
    """The nearest-rank percentile: the ``ceil(share * n)``-th smallest value
    (``share`` in (0, 1]); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(math.ceil(share * len(ordered)), 1) - 1]


def latency_figures(
    per_query_s: Mapping[str, float], n_cases: int, wall_s: float, machine: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The latency record of one configuration, measured on ``machine`` (:func:`machine_fingerprint`).

    ``per_query_s`` holds the seconds of each case the kind timed (empty for a
    batch kind); ``wall_s`` the seconds of the whole retrieval. ``qps`` is
    ``n_cases / wall_s`` (None when no time passed); p50, p95 and max are over
    the timed cases, in milliseconds (None when there are none).
    """
    ms = [1000.0 * seconds for seconds in per_query_s.values()]

    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, PLACES)

    return {
        "cases": n_cases,
        "per_query": "measured" if ms else "not measured (a batch kind)",
        "p50_ms": rounded(nearest_rank(ms, 0.50)),
        "p95_ms": rounded(nearest_rank(ms, 0.95)),
        "max_ms": rounded(max(ms) if ms else None),
        "qps": rounded(n_cases / wall_s if wall_s > 0 else None),
        "seconds": rounded(wall_s),
        "machine": dict(machine) if machine is not None else None,
        "per_case_ms": {case_id: round(1000.0 * s, PLACES) for case_id, s in sorted(per_query_s.items())},
    }


def accepted_latency(record: Mapping[str, Any]) -> dict[str, Any]:
    """What a baseline keeps of a latency record (:data:`ACCEPTED`)."""
    return {name: record.get(name) for name in ACCEPTED}
