"""Stage ``verdict``: decide the gate's verdict once, and write it for the stages after.

It compares the gated configurations with the committed baseline, paired per guarded
metric and slice with bootstrap intervals (and, with ``gate.latency.max_p95_rise`` set,
p95 latency on the same machine), and writes the verdict to ``metrics/gate.json`` and
``data/verdict.json`` (:mod:`ragvet.gating.decision`). A failing verdict is a result, not
an error: it exits 0, so that the report, which renders it, is written; the ``gate``
stage after the report exits 1 on it. Bad input exits 2, as every stage.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import typer

from ragvet.errors import user_errors
from ragvet.gating.decision import decide_gate, write_verdict
from ragvet.gating.movement import empty_table, rankings_kept_by_ids
from ragvet.inputs.params import stage_params
from ragvet.settings import Gate
from ragvet.storage.atomic import outputs_together, write_parquet
from ragvet.storage.results import row_group_writer


@user_errors
def main(
    cases_dir: Path = typer.Option(Path("metrics/cases"), help="Folder of per-case tables, one per configuration."),
    split: Path = typer.Option(Path("data/split.json"), help="Frozen split JSON."),
    baseline: Path = typer.Option(Path("metrics/baseline"), help="Committed baseline folder."),
    out: Path = typer.Option(Path("metrics/gate.json"), help="Verdict JSON to write, figures rounded (committed)."),
    verdict: Path = typer.Option(
        Path("data/verdict.json"), help="The same verdict with every figure unrounded, for the report and the gate."
    ),
    summaries_dir: Path = typer.Option(
        Path("metrics"), help="Folder of the metrics JSON evaluate wrote: a stale threshold is marked there."
    ),
    latency_dir: Path = typer.Option(
        Path(".ragvet/latency"), help="The retrieve stages' latency records, for gate.latency."
    ),
    runs: Path = typer.Option(
        Path("data/runs"), help="The retrieve stages' runs: each gated one's movement from the baseline's ranking."
    ),
    movement: Path | None = typer.Option(
        None, help="Parquet to write: every case's overlap@k, topk_changed@k and RBO at the largest k."
    ),
    params: Path = typer.Option(Path("params.yaml")),
) -> None:
    """Decide the gate's verdict and write it.

    It exits 0 whether the verdict passed or failed: the gate stage exits by it."""
    settings = stage_params(params, ["gate", "slices", "ks"])
    gate = Gate.from_params(settings)
    # what moved on every case, labelled or not, at the deepest k: the baseline keeps that many ranks
    depth = max(settings["ks"])
    # each case's movement is written as it is measured, a row group at a time; renamed only
    # once the verdict's own block has renamed both of its files
    rows = row_group_writer(movement, write_parquet, empty_table(depth)) if movement is not None else nullcontext()
    with outputs_together(movement), rows as moves:
        decided = decide_gate(gate, cases_dir, split, baseline, summaries_dir, latency_dir, None, runs, depth, moves)
        write_verdict(decided, out, verdict)
    typer.echo(f"verdict: {'PASSED' if decided['passed'] else 'FAILED'} -> {out}, {verdict}")
    for ranking in rankings_kept_by_ids(list(gate.configs), baseline, runs):
        typer.echo(f"verdict: {ranking} keeps ids, not the run's numbers: movement pairs it by ids, several times")
        typer.echo("  slower on millions of cases; `ragvet baseline accept` keeps a numbered one (the same figures)")
