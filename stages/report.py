"""Stage ``report``: one markdown comparison of all configurations (fit for a
pull-request comment) and per-configuration data for ``dvc plots``."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import typer

from stages.abstention import read_thresholds, threshold_for
from stages.errors import user_errors
from stages.evaluation import config_summary
from stages.files import read_json, read_jsonl, read_params, round_floats, write_text
from stages.reporting import plot_rows, render_report


def csv_text(rows: list[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]) if rows else [], lineterminator="\n")
    writer.writeheader()
    writer.writerows(round_floats(rows))
    return buffer.getvalue()


@user_errors
def main(
    cases_dir: Path = typer.Option(..., help="Folder of per-case JSONL, one per configuration."),
    split: Path = typer.Option(..., help="Frozen split JSON."),
    baseline: Path = typer.Option(..., help="Committed baseline folder."),
    out: Path = typer.Option(..., help="Markdown report to write."),
    plots: Path = typer.Option(..., help="Folder for plot CSVs, one per configuration."),
    thresholds: Path = typer.Option(Path("abstention.yaml"), help="Tuned abstention thresholds (tune-abstain)."),
    params: Path = typer.Option(Path("params.yaml")),
) -> None:
    """Summarise every configuration and compare the gated ones with the baseline."""
    settings = read_params(params)
    fingerprints = read_json(split)["fingerprints"]
    tuned = read_thresholds(thresholds, settings["configs"])
    summaries = {}
    for config, spec in sorted(settings["configs"].items()):
        retriever = spec["retriever"]
        abstain_below, source = threshold_for(config, tuned, retriever, settings["retrievers"][retriever], thresholds)
        rows = read_jsonl(cases_dir / f"{config}.jsonl")
        summaries[config] = config_summary(
            config, spec, rows, settings["ks"], abstain_below, fingerprints, abstain_source=source
        )
    gated = settings["gate"]["configs"]
    baselines = {
        config: read_json(baseline / f"{config}.json") for config in gated if (baseline / f"{config}.json").exists()
    }
    write_text(out, render_report(summaries, baselines, gated, settings["ks"]))
    rows = plot_rows(summaries, settings["ks"])
    for stale in plots.glob("*.csv") if plots.exists() else []:
        if stale.stem not in summaries:
            stale.unlink()
    for config in summaries:
        write_text(plots / f"{config}.csv", csv_text([row for row in rows if row["config"] == config]))
    typer.echo(f"report: {len(summaries)} configurations -> {out}")


if __name__ == "__main__":
    typer.run(main)
