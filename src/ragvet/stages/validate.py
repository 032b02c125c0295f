"""Stage ``validate``: check the corpus, cases and params, and write them resolved.

Every problem in every input is reported in one go: a broken corpus file does
not hide the mistakes in the cases, which are checked against the docs that did
load. Nothing is written unless all inputs are valid, so later stages only ever
see resolved, trusted data.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ragvet.errors import InputError, Problem, user_errors
from ragvet.inputs.cases import cases_file, collect_cases, unused_slices
from ragvet.inputs.corpus import collect_corpus
from ragvet.inputs.freezing import chunk_anchors
from ragvet.inputs.params import validate_params
from ragvet.measures.abstention import threshold_problems, threshold_warnings
from ragvet.measures.answers import stray_answer_cases, stray_answer_files
from ragvet.storage.atomic import outputs_together
from ragvet.storage.files import read_params, write_json
from ragvet.storage.tables import write_case_table, write_cases, write_docs

# What validate writes into --out; left_out.json maps each case `ragvet relabel` marked to its status.
VALIDATED = ("corpus.jsonl", "cases.jsonl", "cases.parquet", "anchors.json", "left_out.json")


@user_errors
def main(
    corpus: Path = typer.Option(..., help="Corpus folder (*.jsonl, *.md, *.txt)."),
    cases: Path = typer.Option(..., help="Cases file (YAML list or JSONL), or a folder holding exactly one."),
    out: Path = typer.Option(
        ..., help="Folder for the validated corpus.jsonl, cases.jsonl, cases.parquet, anchors.json and left_out.json."
    ),
    answers: Path = typer.Option(Path("data/answers"), help="Folder of recorded answers, <config>.jsonl."),
    thresholds: Path = typer.Option(Path("abstention.yaml"), help="Tuned abstention thresholds (tune-abstain)."),
    params: Path = typer.Option(Path("params.yaml"), help="The DVC params file."),
) -> None:
    """Validate every input and write the resolved corpus and cases."""
    roots: list[Problem] = []  # the params' and corpus's own problems, which cause others
    try:
        settings = read_params(params)
        roots += validate_params(settings, str(params))
    except InputError as err:
        settings = {}
        roots += err.problems
    docs, corpus_problems = collect_corpus(corpus)
    roots += corpus_problems
    chunkings = settings.get("chunking") if isinstance(settings.get("chunking"), dict) else {}
    resolved, case_problems = [], []
    left_out: dict[str, str] = {}
    warnings: list[Problem] = []
    if docs:  # against no document at all every case would be an "unknown doc": the root problem says it
        by_id = {doc.doc_id: doc for doc in docs}
        resolved, case_problems = collect_cases(cases, by_id, chunkings, left_out, warnings)
    problems = list(case_problems)
    configs = settings.get("configs") if isinstance(settings.get("configs"), dict) else {}
    problems += stray_answer_files(answers, configs)
    if settings and not problems and not roots:  # the configurations are sound
        problems += threshold_problems(thresholds, settings)
    if docs and not case_problems:  # a case that failed to resolve would look absent
        problems += unused_slices(settings.get("slices"), resolved, f"{params}: slices")
        problems += stray_answer_cases(answers, configs, {case.case_id for case in resolved})
    if problems or roots:
        raise InputError(problems, roots)
    outputs = [out / name for name in VALIDATED]
    with outputs_together(*outputs):  # never a new corpus beside old cases
        write_docs(outputs[0], docs)
        write_cases(outputs[1], resolved)
        write_case_table(outputs[2], (case.to_row() for case in resolved))
        anchored = cases_file(cases, [])  # valid by now: collect_cases resolved the same path
        write_json(outputs[3], chunk_anchors(anchored))  # for the "labels changed" message
        write_json(outputs[4], dict(sorted(left_out.items())))  # for the split, which records them
    abstention = sum(not case.answerable for case in resolved)
    flagged = f", {len(left_out)} left out (status)" if left_out else ""
    typer.echo(f"validated {len(docs)} docs, {len(resolved)} cases ({abstention} abstention){flagged}")
    for warning in warnings:
        typer.echo(f"ragvet: warning: {warning.render()}", err=True)
    # a stale threshold costs only its configuration's abstention figures, which evaluate marks: no reason to stop
    for warning in threshold_warnings(thresholds, settings, None):  # the dev split is not frozen yet
        typer.echo(f"ragvet: warning: {warning.render()}", err=True)
