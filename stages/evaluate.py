"""Stage ``evaluate@<config>``: per-case metrics, per-slice tables and the
configuration's metrics JSON."""

from __future__ import annotations

from pathlib import Path

import typer

from stages.errors import user_errors
from stages.evaluation import config_summary, evaluate_run
from stages.files import read_json, read_params, round_floats, write_json
from stages.metrics import slice_table
from stages.tables import read_cases, read_chunk_table, read_run_table, write_rows


@user_errors
def main(
    config: str = typer.Argument(..., help="A configuration name from params.configs."),
    run: Path = typer.Option(..., help="The configuration's run JSONL."),
    chunks: Path = typer.Option(..., help="Chunks JSONL of the configuration's chunking."),
    cases: Path = typer.Option(..., help="Validated cases.jsonl."),
    split: Path = typer.Option(..., help="Frozen split JSON."),
    metrics: Path = typer.Option(..., help="Metrics JSON to write."),
    per_case: Path = typer.Option(..., help="Per-case JSONL to write."),
    slices: Path = typer.Option(..., help="Per-slice JSON to write."),
    params: Path = typer.Option(Path("params.yaml")),
) -> None:
    """Score one configuration's run against the projected evidence."""
    settings = read_params(params)
    spec = settings["configs"][config]
    all_chunks = read_chunk_table(chunks)
    all_cases = read_cases(cases)
    frozen = read_json(split)
    ranked = read_run_table(run, all_chunks.chunk_ids, [c.case_id for c in all_cases])
    membership = {case_id: entry["split"] for case_id, entry in frozen["cases"].items()}
    rows = evaluate_run(
        all_cases, all_chunks, ranked, membership, settings["ks"], settings["evidence"]["span_coverage"]
    )
    rows = round_floats(rows)  # the summary averages what the per-case table holds, exactly as the report does
    abstain_below = settings["retrievers"][spec["retriever"]].get("abstain_below")
    summary = config_summary(config, spec, rows, settings["ks"], abstain_below, frozen["fingerprints"])
    write_rows(per_case, rows, "case_id")
    write_json(slices, slice_table(rows, settings["slices"], settings["ks"]))
    write_json(metrics, summary)
    typer.echo(f"{config}: evaluated {len(rows)} cases")


if __name__ == "__main__":
    typer.run(main)
