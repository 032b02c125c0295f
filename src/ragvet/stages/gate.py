"""Stage ``gate``: compare the gated configurations with the committed baseline
(or with any git revision's results) and exit non-zero when retrieval got worse."""

from __future__ import annotations

from pathlib import Path

import typer

from ragvet.errors import raise_if, user_errors
from ragvet.gating.baselines import baselines_for, current_table, latency_pairs, missing_latency, rebaselined
from ragvet.gating.compare import gate_all, gate_metrics, render_verdict
from ragvet.gating.freshness import refuse_stale, stale_guards
from ragvet.gating.latency import max_p95_rise
from ragvet.inputs.params import stage_params
from ragvet.storage.atomic import outputs_together
from ragvet.storage.files import read_json, write_json


@user_errors
def main(
    cases_dir: Path = typer.Option(Path("metrics/cases"), help="Folder of per-case tables, one per configuration."),
    split: Path = typer.Option(Path("data/split.json"), help="Frozen split JSON."),
    baseline: Path = typer.Option(Path("metrics/baseline"), help="Committed baseline folder."),
    out: Path | None = typer.Option(None, help="Verdict JSON to write."),
    summaries_dir: Path = typer.Option(
        Path("metrics"), help="Folder of the metrics JSON evaluate wrote: a stale threshold is marked there."
    ),
    latency_dir: Path = typer.Option(
        Path(".ragvet/latency"), help="The retrieve stages' latency records, for gate.latency."
    ),
    against: str | None = typer.Option(None, help="Compare with this git revision's results instead."),
    params: Path = typer.Option(Path("params.yaml")),
) -> None:
    """Compare the gated configurations with the baseline and fail on a drop.

    A paired comparison per guarded metric and slice, with bootstrap intervals; with
    gate.latency.max_p95_rise set, p95 latency against the baseline's on the same machine."""
    settings = stage_params(params, ["gate", "slices"])
    refuse_stale([cases_dir, split], "the gate")  # never compare results the current params did not produce
    raise_if(stale_guards(settings["gate"], summaries_dir))
    configs, metrics = settings["gate"]["configs"], gate_metrics(settings["gate"])
    timed = latency_pairs(max_p95_rise(settings["gate"]), configs, baseline, latency_dir, against)
    raise_if(missing_latency(timed or {}, latency_dir, baseline, against))
    current = {config: current_table(cases_dir, config, metrics) for config in configs}
    verdict = gate_all(
        settings["gate"],
        settings["slices"],
        baselines_for(configs, baseline, against, metrics),
        current,
        read_json(split)["fingerprints"],
        against,
        rebaselined(configs, baseline, cases_dir, against),
        timed,
    )
    if out is not None:
        with outputs_together(out):
            write_json(out, verdict)
    typer.echo(render_verdict(verdict))
    if not verdict["passed"]:
        raise typer.Exit(1)
