"""Stage ``evaluate@<config>``: per-case metrics, per-slice tables and the
configuration's metrics JSON; with recorded answers, their human review figures;
and the dev-split abstention sweep for ``dvc plots``."""

from __future__ import annotations

from pathlib import Path

import typer

from stages.errors import user_errors
from stages.measures.abstention import current_thresholds, sweep, threshold_for
from stages.measures.answers import add_reviews, config_answers
from stages.measures.evaluation import evaluate_run
from stages.measures.registry import budget_values
from stages.measures.summary import config_summary, slice_table
from stages.schema import DEV
from stages.storage.files import read_json, read_params, round_floats, write_json
from stages.storage.tables import read_case_table, read_chunk_table, read_docs, read_run_table, write_rows


@user_errors
def main(
    config: str = typer.Argument(..., help="A configuration name from params.configs."),
    run: Path = typer.Option(..., help="The configuration's run: the retrieve stage's Parquet, or JSONL."),
    chunks: Path = typer.Option(..., help="Chunks JSONL of the configuration's chunking."),
    corpus: Path = typer.Option(..., help="Validated corpus.jsonl: span coverage counts a span's non-whitespace."),
    cases: Path = typer.Option(..., help="Validated cases: the validate stage's cases.parquet, or cases.jsonl."),
    split: Path = typer.Option(..., help="Frozen split JSON."),
    metrics: Path = typer.Option(..., help="Metrics JSON to write."),
    per_case: Path = typer.Option(..., help="Per-case JSONL to write."),
    slices: Path = typer.Option(..., help="Per-slice JSON to write."),
    answers: Path = typer.Option(Path("data/answers"), help="Folder of recorded answers, <config>.jsonl."),
    thresholds: Path = typer.Option(Path("abstention.yaml"), help="Tuned abstention thresholds (tune-abstain)."),
    sweep_out: Path | None = typer.Option(None, "--sweep", help="Dev-split abstention sweep JSON to write."),
    params: Path = typer.Option(Path("params.yaml")),
) -> None:
    """Score one configuration's run against the projected evidence."""
    settings = read_params(params)
    spec = settings["configs"][config]
    all_chunks = read_chunk_table(chunks)
    all_cases = read_case_table(cases)
    frozen = read_json(split)
    ranked = read_run_table(run, all_chunks.chunk_ids, all_cases.case_ids)
    recorded = config_answers(answers, config, set(all_cases.case_ids), set(all_chunks.chunk_ids), spec["chunking"])
    retriever = settings["retrievers"][spec["retriever"]]
    tuned = current_thresholds(thresholds, settings, frozen["fingerprints"]["dev_split"])
    abstain_below, source = threshold_for(config, tuned, spec["retriever"], retriever, thresholds)
    membership = {case_id: entry["split"] for case_id, entry in frozen["cases"].items()}
    budgets = budget_values(settings)
    rows = evaluate_run(
        all_cases,
        all_chunks,
        ranked,
        membership,
        settings["ks"],
        settings["evidence"]["span_coverage"],
        {doc.doc_id: doc.text for doc in read_docs(corpus)},
        budgets,
    )
    if recorded is not None:
        rows = add_reviews(rows, recorded, ranked.by_case(recorded, all_chunks.chunk_ids), settings["ks"])
    rows = round_floats(rows)  # the summary averages what the per-case table holds, exactly as the report does
    summary = config_summary(config, spec, rows, settings["ks"], abstain_below, frozen["fingerprints"], source, budgets)
    write_rows(per_case, rows, "case_id")
    write_json(slices, slice_table(rows, settings["slices"], settings["ks"], budgets))
    write_json(metrics, summary)
    if sweep_out is not None:
        write_json(sweep_out, sweep([row for row in rows if row["split"] == DEV]))
    note = f", {len(recorded)} recorded answers" if recorded is not None else ""
    typer.echo(f"{config}: evaluated {len(rows)} cases{note}")


if __name__ == "__main__":
    typer.run(main)
