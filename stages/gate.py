"""Stage ``gate``: compare the gated configurations with the committed baseline
(or with any git revision's results) and exit non-zero when retrieval got worse."""

from __future__ import annotations

from pathlib import Path

import typer

from stages.errors import Problem, raise_if, user_errors
from stages.gating.baselines import (
    baseline_latency_dir,
    baselines_for,
    current_table,
    latency_pairs,
    latency_path,
    rebaselined,
)
from stages.gating.compare import gate_all, gate_metrics, render_verdict
from stages.gating.freshness import refuse_stale
from stages.gating.latency import max_p95_rise
from stages.inputs.params import stage_params
from stages.measures.registry import reads_threshold
from stages.storage.atomic import outputs_together
from stages.storage.files import read_json, write_json


def missing_latency(
    pairs: dict[str, tuple[dict | None, dict | None]], latency_dir: Path, baseline: Path, against: str | None
) -> list[Problem]:
    """A problem for each latency record the p95 check lacks: with the check on, a
    missing record must stop the gate (exit 2), since passing would claim a latency
    comparison that never happened. A record is missing here when DVC restored the run
    (run cache, ``dvc pull``) instead of measuring it, or it was retrieved on another clone."""
    problems = []
    for config, (base, current) in sorted(pairs.items()):
        if current is None:
            problems.append(
                Problem(
                    str(latency_path(latency_dir, config)),
                    f"gate.latency.max_p95_rise is on but no latency was measured here for {config} "
                    "(DVC restored its run rather than running it, or it never ran in this clone)",
                    f"measure it: `dvc repro -f -s retrieve@{config}`, then run the gate again",
                )
            )
        if base is None:
            where = latency_path(baseline_latency_dir(baseline), config).as_posix()
            problems.append(
                Problem(
                    f"{against}:{where}" if against else where,
                    f"gate.latency.max_p95_rise is on but the baseline has no latency record for {config}",
                    "record it on this machine with `ragvet baseline accept` (and commit it), or set "
                    "gate.latency.max_p95_rise: null",
                )
            )
    return problems


def stale_guards(gate_params: dict, summaries_dir: Path) -> list[Problem]:
    """A problem for each gated configuration whose abstention threshold is stale (its
    metrics JSON marks it) while the gate guards a figure that threshold moves
    (:func:`stages.measures.registry.reads_threshold`): only then does a stale threshold
    stop the gate. Nothing is read when no guarded figure reads a threshold."""
    guarded = [metric for metric in gate_params["metrics"] if reads_threshold(metric)]
    problems = []
    for config in gate_params["configs"] if guarded else []:
        path = summaries_dir / f"{config}.json"
        stale = (read_json(path).get("abstention") or {}).get("stale") if path.is_file() else None
        if stale:
            problems.append(
                Problem(
                    str(path),
                    f"the gate guards {', '.join(guarded)} of {config}, which its stale threshold moves: "
                    f"{stale['reason']}",
                    f"run `{stale['fix']}`, then `dvc repro`",
                )
            )
    return problems


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
    """Paired comparison per guarded metric and slice, with bootstrap intervals; with
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


if __name__ == "__main__":
    typer.run(main)
