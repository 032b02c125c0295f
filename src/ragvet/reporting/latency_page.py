"""``.ragvet/latency.md``: latency and load beside evidence recall, one row per
configuration.

A page of its own, never part of the committed report: latency varies run to run
(:mod:`ragvet.measures.latency`), and nothing committed may move unless an input moved.
"""

from __future__ import annotations

from ragvet.reporting.summaries import Summary
from ragvet.text.escaping import md_code
from ragvet.text.formatting import fmt


def render_latency(summaries: dict[str, Summary], latencies: dict[str, dict], k: int) -> str:
    """Latency and load beside evidence recall, one row per configuration (eval split).

    A page of its own, never part of the committed report: latency varies run to
    run (see :mod:`ragvet.measures.latency`). A configuration without a latency
    record shows dashes, and the page says plainly that nothing was measured for it
    and how to measure it: DVC restores a run (run cache, ``dvc pull``) without
    running the stage, so a reader would otherwise take the dashes for a failure.
    """
    lines = [
        "# Latency and load",
        "",
        "Measured by this machine's last retrieve stages; it varies run to run, so it is not committed.",
        "Percentiles are over the queries a kind times one by one (bm25, pgvector, http); batch kinds: queries/s.",
        "",
        f"| configuration | evidence_recall@{k} | claim_availability@{k} | p50 ms | p95 ms | max ms | queries/s |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for config in sorted(summaries):
        metrics = summaries[config].get("eval", {}).get("metrics", {})
        timed = latencies.get(config, {})
        figures = [metrics.get(f"evidence_recall@{k}"), metrics.get(f"claim_availability@{k}")]
        figures += [timed.get(name) for name in ("p50_ms", "p95_ms", "max_ms", "qps")]
        lines.append(f"| {md_code(config, table=True)} | " + " | ".join(fmt(value) for value in figures) + " |")
    unmeasured = [config for config in sorted(summaries) if config not in latencies]
    if unmeasured:
        lines += [
            "",
            f"No latency was measured here for {', '.join(md_code(config) for config in unmeasured)}: DVC restored "
            "their runs (from its run cache or a remote) without running them, or they never ran in this clone. "
            "To measure one: `dvc repro -f -s retrieve@<config>`.",
        ]
    return "\n".join(lines) + "\n"
