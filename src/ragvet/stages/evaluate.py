"""Stage ``evaluate@<config>``: per-case metrics, per-slice tables and the
configuration's summary; with recorded answers, their human review figures; the few
figures DVC's own views show (``--headline``); and the dev-split abstention sweep for
``dvc plots``."""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import polars as pl
import typer

from ragvet.errors import user_errors
from ragvet.evidence import CountedTexts
from ragvet.inputs.params import fill_path, settled, stage_key, stage_params
from ragvet.measures.abstention import current_thresholds, stale_mark, sweep_counted, threshold_for
from ragvet.measures.answers import add_reviews, answers_file, config_answers
from ragvet.measures.evaluation import evaluate_table
from ragvet.measures.streaming import BATCH_CASES, evaluated_batches
from ragvet.measures.summary import Summaries, config_summary, dev_rows, headline
from ragvet.retrieval.passages import passage_table
from ragvet.schema import chunking_fingerprint
from ragvet.settings import Measuring
from ragvet.storage.atomic import outputs_together
from ragvet.storage.columns import ChunkTable
from ragvet.storage.files import write_json
from ragvet.storage.pipelining import ahead
from ragvet.storage.progress import progress_bar
from ragvet.storage.records import split_membership
from ragvet.storage.results import result_rows, results_frame, round_results, write_result_batches
from ragvet.storage.tables import (
    foreign_passage_ids,
    parquet_rows,
    read_case_table,
    read_chunk_table,
    read_docs,
    read_run_table,
    run_batches,
)


def tallying(frames: Iterable[pl.DataFrame], tallied: Summaries, dev: Counter) -> Iterator[pl.DataFrame]:
    """``frames`` as they pass on to the writer, each added to the summaries, and its dev
    cases counted by ``(answerable, top1_score)`` for the abstention sweep."""
    for frame in frames:
        tallied.add(frame)
        for answerable, score, count in dev_rows(frame).group_by("answerable", "top1_score").len().iter_rows():
            dev[bool(answerable), score] += count
        yield frame


def _whole_table(
    run: Path,
    cases: Path,
    chunks: ChunkTable,
    split_of: Callable[[Sequence[str]], Any],
    texts: CountedTexts,
    measuring: Measuring,
    chunk_level: bool,
    recorded_of: Callable[[set[str], set[str]], dict | None],
) -> tuple[pl.DataFrame, dict | None]:
    """The per-case table of a run scored whole (JSONL, or not numbered for the case table),
    rounded as written, since the summary averages what it holds; with the configuration's
    recorded answers (``recorded_of`` the case and chunk ids: None without), their human
    review joined, and those answers."""
    all_cases = read_case_table(cases)
    ranked = read_run_table(run, chunks.chunk_ids, all_cases.case_ids)
    recorded = recorded_of(set(all_cases.case_ids), set(chunks.chunk_ids))
    table = evaluate_table(all_cases, chunks, ranked, split_of(all_cases.case_ids), texts, measuring, chunk_level)
    if recorded is not None:
        by_case = ranked.by_case(recorded, chunks.chunk_ids)
        table = results_frame(add_reviews(result_rows(table), recorded, by_case, measuring.ks))
    return round_results(table), recorded


@user_errors
def main(
    config: str | None = typer.Argument(None, help="A configuration from params.configs (under DVC: its stage's key)."),
    run: Path = typer.Option(..., help="The configuration's run: the retrieve stage's Parquet, or JSONL."),
    chunks: Path = typer.Option(..., help="Chunks JSONL of the configuration's chunking."),
    corpus: Path = typer.Option(..., help="Validated corpus.jsonl: span coverage counts a span's non-whitespace."),
    cases: Path = typer.Option(..., help="Validated cases: the validate stage's cases.parquet, or cases.jsonl."),
    split: Path = typer.Option(..., help="Frozen split JSON."),
    metrics: Path = typer.Option(..., help="Summary JSON to write; {key} stands for the configuration in every path."),
    per_case: Path = typer.Option(..., help="Per-case table to write (Parquet, metrics/cases/<config>.parquet)."),
    slices: Path = typer.Option(..., help="Per-slice JSON to write."),
    answers: Path = typer.Option(Path("data/answers"), help="Folder of recorded answers, <config>.jsonl."),
    thresholds: Path = typer.Option(Path("abstention.yaml"), help="Tuned abstention thresholds (tune-abstain)."),
    sweep_out: Path | None = typer.Option(None, "--sweep", help="Dev-split abstention sweep JSON to write."),
    headline_out: Path | None = typer.Option(
        None, "--headline", help="DVC metrics JSON to write: the eval split's counts and the gate's guarded metrics."
    ),
    budget: Path | None = typer.Option(
        None, help="The settings stage's budget.json (dvc.yaml's dep), checked against the params."
    ),
    params: Path = typer.Option(Path("params.yaml")),
    batch_cases: int = typer.Option(
        BATCH_CASES, min=1, help="Cases scored at once (memory against speed; the outputs never depend on it)."
    ),
) -> None:
    """Score one configuration's run against the projected evidence."""
    config = stage_key("evaluate", config)
    reads = [f"configs.{config}", "retrievers", "ks", "evidence.span_coverage", "slices", "budget"]
    reads += ["gate.metrics"] if headline_out is not None else []  # the headline's figures
    settings = stage_params(params, reads)
    if budget is not None:
        settled(budget, "budget", settings)
    measuring = Measuring.from_params(settings)
    spec = settings["configs"][config]
    run, chunks = fill_path(run, key=config), fill_path(chunks, chunking=spec["chunking"])
    metrics, per_case = fill_path(metrics, key=config), fill_path(per_case, key=config)
    slices = fill_path(slices, key=config)
    sweep_out = fill_path(sweep_out, key=config) if sweep_out is not None else None
    headline_out = fill_path(headline_out, key=config) if headline_out is not None else None
    passages = foreign_passage_ids(run)  # a system that chunks the corpus its own way
    all_chunks = read_chunk_table(chunks) if passages is None else passage_table(passages)
    frozen, split_of = split_membership(split)  # its fingerprints, and each case's split
    retriever = settings["retrievers"][spec["retriever"]]
    tuned, stale = current_thresholds(thresholds, settings, frozen["dev_split"])
    abstain_below, source = threshold_for(config, tuned, spec["retriever"], retriever, thresholds)
    texts = CountedTexts({doc.doc_id: doc.text for doc in read_docs(corpus)})  # for every batch: one look at a doc
    chunking = chunking_fingerprint(all_chunks.chunk_ids, all_chunks.doc_ids, all_chunks.starts, all_chunks.ends)
    fingerprints = {**frozen, "chunking": chunking}  # the gate compares chunk-level metrics by it
    batched = None  # recorded answers are joined to the whole table
    if not answers_file(answers, config).is_file():
        batched = run_batches(run, cases, all_chunks.chunk_ids, batch_cases)
    recorded = reviewed = None  # reviewed: the whole table, when it carries recorded answers
    if batched is not None:  # a numbered Parquet run and case table: scored a batch of cases at a time
        tag_keys, pairs = batched  # read, scored, tallied and written in four threads, a batch apart
        batches = math.ceil(parquet_rows(cases) / batch_cases)  # for the progress bar
        frames = ahead(
            evaluated_batches(ahead(pairs), all_chunks, split_of, texts, measuring, tag_keys, passages is None)
        )
    else:
        recorded_of = functools.partial(config_answers, answers, config, chunking=spec["chunking"])
        chunk_level = passages is None  # a run of foreign passages has no chunk-level metrics
        table, recorded = _whole_table(run, cases, all_chunks, split_of, texts, measuring, chunk_level, recorded_of)
        reviewed = table if recorded is not None else None
        frames, batches = [table], 1
    tallied = Summaries(settings["ks"], abstain_below, measuring.budget.values, settings["slices"])
    dev: Counter = Counter()
    with outputs_together(per_case, slices, metrics, sweep_out, headline_out):  # never a summary beside old rows
        tallied_frames = ahead(tallying(frames, tallied, dev))
        write_result_batches(
            per_case, progress_bar(tallied_frames, total=batches, desc=f"evaluate {config}", unit=" batches")
        )
        summary = config_summary(
            config,
            spec,
            tallied if reviewed is None else reviewed,
            settings["ks"],
            abstain_below,
            fingerprints,
            source,
            measuring.budget.values,
        )
        if config in stale:  # applied, but its figures describe a threshold chosen for other scores
            summary["abstention"]["stale"] = stale_mark(stale[config], config)
        write_json(slices, tallied.slice_table())
        write_json(metrics, summary)
        if headline_out is not None:
            write_json(headline_out, headline(summary, settings["gate"]["metrics"]))
        if sweep_out is not None:
            write_json(sweep_out, sweep_counted(dev))
    note = f", {len(recorded)} recorded answers" if recorded is not None else ""
    typer.echo(f"{config}: evaluated {tallied.rows()} cases{note}")
    if config in stale:
        typer.echo(f"ragvet: warning: {stale[config].render()}", err=True)
