"""``ragvet tune-abstain``: choose a configuration's abstention threshold on the
dev split and write it to the params file the evaluate stage reads.

The chooser is handed dev cases only; eval figures are computed afterwards, for
the chosen threshold, and printed beside the dev ones. Run ``dvc repro`` next:
the evaluate stage reports the threshold's effect on both splits. A threshold
that abstains on more than half of the answerable dev cases is still recorded,
since the rule chose it, but with a warning.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ragvet.errors import Problem, raise_if, user_errors
from ragvet.measures.abstention import (
    RULES,
    choose_threshold,
    overcautious,
    rates,
    read_thresholds,
    score_rows,
    spec_fingerprint,
    write_thresholds,
)
from ragvet.schema import DEV, EVAL
from ragvet.storage.files import read_params
from ragvet.storage.records import read_split_record
from ragvet.storage.tables import read_cases, read_chunks, read_run, run_path
from ragvet.text.formatting import fmt


@user_errors
def main(
    config: str = typer.Option(..., help="A configuration name from params.configs."),
    rule: str = typer.Option("f1", help=f"How to choose: {' | '.join(RULES)}."),
    target: float | None = typer.Option(None, help="For --rule false-abstention: the highest allowed rate."),
    runs: Path = typer.Option(Path("data/runs"), help="Folder of runs, <config>.parquet."),
    chunks: Path = typer.Option(Path("data/chunks"), help="Folder of chunk tables, <chunking>.jsonl."),
    cases: Path = typer.Option(Path("data/validated/cases.jsonl"), help="Validated cases.jsonl."),
    split: Path = typer.Option(Path("data/split.json"), help="Frozen split JSON."),
    out: Path = typer.Option(Path("abstention.yaml"), help="The thresholds params file to update."),
    params: Path = typer.Option(Path("params.yaml")),
) -> None:
    """Sweep the top-1 score threshold on dev, pick it by RULE, record it."""
    settings = read_params(params)
    configs = settings["configs"]
    problems = []
    if config not in configs:
        problems.append(Problem(str(params), f"unknown configuration {config!r}", f"use one of: {', '.join(configs)}"))
    if rule not in RULES:
        problems.append(Problem("--rule", f"unknown rule {rule!r}", f"use one of: {', '.join(RULES)}"))
    elif rule == "false-abstention" and (target is None or not 0 <= target <= 1):
        problems.append(Problem("--target", f"needs a rate in [0, 1], got {target!r}", "e.g. --target 0.05"))
    raise_if(problems)
    retriever = configs[config]["retriever"]
    if settings["retrievers"][retriever].get("abstain_below") is not None:
        raise_if(
            [
                Problem(
                    f"{params}: retrievers.{retriever}.abstain_below",
                    "a fixed threshold is already set for this retriever",
                    "remove it to let tune-abstain choose one per configuration",
                )
            ]
        )
    missing = [path for path in (run_path(runs, config), cases, split) if not path.is_file()]
    raise_if([Problem(str(path), "not found", "run `dvc repro` first") for path in missing])
    all_cases = read_cases(cases)
    frozen = read_split_record(split)
    chunking = chunks / f"{configs[config]['chunking']}.jsonl"
    chunk_ids = {chunk.chunk_id for chunk in read_chunks(chunking, token_starts=False)}
    run = read_run(run_path(runs, config), chunk_ids, {c.case_id for c in all_cases})
    grouped = score_rows(all_cases, run, {cid: entry["split"] for cid, entry in frozen["cases"].items()})
    try:
        chosen = choose_threshold(grouped[DEV], rule, target)  # dev only: eval labels never reach the choice
    except ValueError as err:
        raise_if(
            [
                Problem(
                    f"{split} (dev split of {config})",
                    str(err),
                    "tune on a retriever with scores and a dev split with both kinds of case",
                )
            ]
        )
    judged = rates(grouped[EVAL], chosen["threshold"])
    entry = {
        "abstain_below": chosen["threshold"],
        "config_fingerprint": spec_fingerprint(settings, config),
        "dev_split_fingerprint": frozen["fingerprints"]["dev_split"],
        "rule": rule,
        "tuned_on": "dev",
    }
    if rule == "false-abstention":
        entry["target"] = target
    thresholds = read_thresholds(out, configs, retuning=config)
    thresholds[config] = entry
    write_thresholds(out, thresholds)
    typer.echo(f"{config}: abstain below {chosen['threshold']:g} (rule {rule}, chosen on dev) -> {out}")
    for name, point in (("dev ", chosen), ("eval", judged)):
        typer.echo(
            f"  {name}: abstains on {fmt(point['abstain_rate'])} of {point['abstention_cases']} abstention cases, "
            f"wrongly on {fmt(point['false_abstain_rate'])} of {point['answerable_cases']} answerable "
            f"(F1 {fmt(point['f1'])})"
        )
    warning = overcautious(chosen)
    if warning is not None:
        typer.echo(f"ragvet: warning: {config}: {warning}", err=True)


if __name__ == "__main__":
    typer.run(main)
