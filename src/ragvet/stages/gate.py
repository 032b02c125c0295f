"""Stage ``gate``: print the gate's verdict and exit by it: 0 passed, 1 failed (2 bad input).

As the pipeline's last stage (``--verdict data/verdict.json``) it reads the verdict the
verdict stage decided, after the report was written, so ``dvc repro`` ends at a failing
gate and the report of that failure exists. By hand it decides the verdict itself
(:func:`ragvet.gating.decision.decide_gate`): against the committed baseline, or with
``--against REV`` against any git revision's results, as CI runs it.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ragvet.errors import InputError, Problem, user_errors
from ragvet.gating.compare import render_verdict
from ragvet.gating.decision import decide_gate, read_verdict, write_verdict
from ragvet.gating.freshness import refuse_stale
from ragvet.inputs.params import stage_params
from ragvet.settings import Gate


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
    verdict: Path | None = typer.Option(
        None, help="Read the verdict the verdict stage wrote (data/verdict.json) instead of deciding it."
    ),
    params: Path = typer.Option(Path("params.yaml")),
) -> None:
    """Print the gate's verdict and exit 1 when it failed.

    With --verdict, the one the verdict stage wrote; otherwise decided here: a paired
    comparison per guarded metric and slice, with bootstrap intervals, and with
    gate.latency.max_p95_rise set, p95 latency against the baseline's on the same machine."""
    if verdict is not None:
        if against is not None or out is not None:
            fix = "give --verdict alone (the verdict stage wrote it), or --against/--out without it"
            raise InputError([Problem("ragvet gate", "--verdict reads a verdict; --against and --out decide one", fix)])
        refuse_stale([verdict], "the gate")  # the verdict and everything it was decided from are current
        decided = read_verdict(verdict)
    else:
        settings = stage_params(params, ["gate", "slices", "ks"])
        gate, depth = Gate.from_params(settings), max(settings["ks"])  # depth: what moved, as the verdict stage
        decided = decide_gate(gate, cases_dir, split, baseline, summaries_dir, latency_dir, against, depth=depth)
        if out is not None:
            write_verdict(decided, out)
    typer.echo(render_verdict(decided))
    if not decided["passed"]:
        raise typer.Exit(1)
