"""The commands that are neither pipeline stages nor importers: the baseline, caches, a new
or upgraded project, verification, side-by-side comparison, storage and the metrics doc.

Each is a few lines over the library; :mod:`ragvet.cli` names them and imports this module
only when one of them runs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import typer

from ragvet.errors import InputError, Problem, raise_if, user_errors
from ragvet.gating.baselines import accept_baseline, baseline_ranking_path, current_table, experiment_results
from ragvet.gating.reproduction import render, verify_results
from ragvet.gating.retrieved import RUNS
from ragvet.gating.side_by_side import comparable_metrics, side_by_side
from ragvet.inputs.cases import cases_target_problems, cases_text
from ragvet.inputs.labelling import case_row, checked_ranking, moved_queries, read_queries, read_ranking, stratified
from ragvet.inputs.params import validate_params
from ragvet.measures.ann_recall import ann_recall_by_case, mean_ann_recall
from ragvet.measures.registry import metric_problems
from ragvet.pinning import installed_version
from ragvet.project import EXTRAS, create_project
from ragvet.reporting.metrics_doc import metrics_doc
from ragvet.reporting.side_by_side import side_by_side_section
from ragvet.reporting.summaries import summary_k
from ragvet.retrieval.endpoints import clear_http_cache
from ragvet.settings import Budget, Gate
from ragvet.storage.atomic import write_text
from ragvet.storage.files import read_params, write_json
from ragvet.storage.placement import migrate_storage
from ragvet.storage.tables import run_path
from ragvet.upgrade import upgrade_project

baseline_app = typer.Typer(no_args_is_help=True, help="Manage the committed baseline.")
cache_app = typer.Typer(no_args_is_help=True, help="Manage ragvet's caches.")


@baseline_app.command("accept")
@user_errors
def baseline_accept(
    metrics_dir: Path = typer.Option(Path("metrics"), help="Folder with <config>.json and cases/."),
    latency_dir: Path = typer.Option(
        Path(".ragvet/latency"), help="The retrieve stages' latency records, kept while gate.latency is on."
    ),
    runs_dir: Path = typer.Option(Path("data/runs"), help="The retrieve stages' runs: their top k is kept."),
    params: Path = typer.Option(Path("params.yaml")),
) -> None:
    """Make the current results of the gated configurations the new baseline.

    Run it after `dvc repro`, and commit metrics/baseline/ in the same pull
    request as the change that moved the numbers. Where dvc.yaml keeps the
    per-case tables in DVC, the baseline's go there too (`dvc add`): commit
    metrics/baseline/cases.dvc and `dvc push`. With gate.latency.max_p95_rise
    set, it keeps their latency too (metrics/baseline/latency/), measured on
    this machine: the gate compares p95 only on the same machine. It keeps each
    one's top-k ranking (down to the largest k) beside the per-case tables, in
    metrics/baseline/cases/rankings/: what moved is measured against it.
    """
    settings = read_params(params)
    raise_if(validate_params(settings, str(params)))
    gate = Gate.from_params(settings)
    timed = latency_dir if gate.max_p95_rise is not None else None  # the p95 check is on: keep it too
    ranked = (runs_dir, max(settings["ks"]))  # what the gated configurations' users saw, to measure movement
    written = accept_baseline(metrics_dir, list(gate.configs), latency=timed, runs=ranked)
    for path in written:
        typer.echo(f"wrote {path}")


@cache_app.command("clear")
@user_errors
def cache_clear(
    http: bool = typer.Option(False, "--http", help="The cached responses of http retrievers."),
) -> None:
    """Delete cached responses, so the next `dvc repro -f` asks the endpoints again.

    Embeddings are never stale (they are keyed by model and text), so only the
    http cache, which records what a live system answered, is cleared.
    """
    if not http:
        raise InputError([Problem("ragvet cache clear", "say what to clear", "run: ragvet cache clear --http")])
    typer.echo(f"removed {clear_http_cache()} cached http responses")


@user_errors
def init(
    directory: Path = typer.Argument(..., help="Folder for the new project (created; empty unless --force)."),
    corpus: Path | None = typer.Option(None, help="Documents to copy into data/corpus/ (a folder or a .jsonl)."),
    cases: Path | None = typer.Option(None, help="Cases file to copy into data/cases/ (.yaml/.yml or .jsonl)."),
    force: bool = typer.Option(
        False, "--force", help="Write into a non-empty folder, beside its files; a file that differs is never replaced."
    ),
    extra: list[str] = typer.Option([], "--extra", help=f"An extra to pin with ragvet (repeat): {', '.join(EXTRAS)}."),
) -> None:
    """Start a project on your own data: the pipeline, one first configuration, git and DVC.

    The project holds configuration and data only: its dvc.yaml runs the installed
    `ragvet` command, and requirements.txt pins this release. Nothing of the bundled
    sample comes along (no metrics, answers, thresholds or baseline). Prints the next
    steps: import your data, `dvc repro report`, `ragvet baseline accept`, `dvc repro`, commit.
    All or nothing: it refuses a corpus that holds the new folder and any file it would
    replace (an existing project's params.yaml: use `ragvet upgrade`), and a failure
    (git, DVC, a full disk) removes what it made.
    """
    typer.echo(create_project(directory, corpus, cases, force, extra))


@user_errors
def upgrade(
    project: Path = typer.Option(Path("."), help="The project folder (with dvc.yaml), in a clean git work tree."),
    repro: bool = typer.Option(True, "--repro/--no-repro", help="Run `dvc repro` after the upgrade."),
) -> None:
    """Pin the installed ragvet and bring the project to it, then re-run what changed.

    Writes requirements.txt's pin, the pipeline's stages in dvc.yaml (yours kept),
    the params sections and keys it reads with their defaults, and the plot
    templates; removes the copy of ragvet's source an earlier release made. Refuses
    a dirty work tree. Prints each change; review them with `git diff` and commit
    them with the results.
    """
    changes = upgrade_project(project.resolve())
    typer.echo("\n".join(changes) if changes else f"the project is up to date with ragvet {installed_version()}")
    if repro:
        raise typer.Exit(subprocess.run([sys.executable, "-m", "dvc", "repro"], cwd=project).returncode)


@user_errors
def verify(
    against: str = typer.Option("HEAD", help="The git revision whose committed results to compare with."),
    metrics_dir: Path = typer.Option(Path("metrics"), help="Folder with cases/<config>.parquet."),
    runs_dir: Path = typer.Option(Path("data/runs"), help="Folder with the runs, <config>.parquet."),
    params: Path = typer.Option(Path("params.yaml")),
) -> None:
    """Check that recomputed results reproduce the committed ones, within float noise.

    Run it after `dvc repro -f`. Per configuration and case: every rank-derived
    figure equal, scores within 1e-4, and rankings equal but for named near ties
    (when DVC can bring the committed run); on each side, the metrics JSON and slice
    table what its per-case table gives. Exits 1, naming what differs, otherwise.
    """
    settings = read_params(params)
    raise_if(validate_params(settings, str(params)))
    checks = verify_results(list(settings["configs"]), against, Path("."), metrics_dir, runs_dir, settings)
    typer.echo(render(checks, against))
    if not all(check.reproduced for check in checks):
        raise typer.Exit(1)


@user_errors
def compare(
    baseline: str | None = typer.Option(None, help="The configuration to compare with (default: the first gated)."),
    metric: list[str] = typer.Option([], "--metric", help="A metric to compare (repeat; default: comparable ones)."),
    exp: bool = typer.Option(False, "--exp", help="Compare the `dvc exp show` experiments of --baseline instead."),
    cases_dir: Path = typer.Option(Path("metrics/cases"), help="Folder of per-case tables, one per configuration."),
    out: Path | None = typer.Option(None, help="Also write the table as JSON here."),
    params: Path = typer.Option(Path("params.yaml")),
) -> None:
    """Every configuration against a baseline configuration on the eval split.

    Per metric: mean, delta, paired CI, corrected p-value (the gate's
    `correction`, all tests one family) and cases won, tied and lost. With
    --exp, the rows are the experiments of `dvc exp show`, each one's results of
    the baseline configuration against those committed at its baseline commit.
    """
    settings = read_params(params)
    raise_if(validate_params(settings, str(params)))
    chosen = baseline or settings["gate"]["configs"][0]
    if chosen not in settings["configs"]:
        raise InputError(
            [
                Problem(
                    "--baseline", f"unknown configuration {chosen!r}", f"use one of: {', '.join(settings['configs'])}"
                )
            ]
        )
    metrics = metric or comparable_metrics(summary_k(settings["ks"]))
    raise_if(metric_problems(metrics, settings["ks"], "--metric", budgets=Budget.from_params(settings).values))
    gate = Gate.from_params(settings)
    if exp:
        base_name, rows, fingerprints = experiment_results(chosen, Path("."))
        table = side_by_side(rows, base_name, metrics, gate, fingerprints)
    else:
        rows = {config: current_table(cases_dir, config) for config in sorted(settings["configs"])}
        table = side_by_side(rows, chosen, metrics, gate)
    confidence = gate.confidence
    typer.echo("\n".join(side_by_side_section(table, confidence, "experiment" if exp else "configuration")))
    if out is not None:
        write_json(out, table)


@user_errors
def migrate_storage_command(
    project: Path = typer.Option(Path("."), help="The project folder (with dvc.yaml), inside its git clone."),
) -> None:
    """Move the per-case tables, the split's membership and the baseline's tables from git to DVC.

    Nothing is recomputed. Then commit (`git add -A && git commit`) and `dvc push`,
    so that other clones and CI fetch the tables from the DVC remote (docs/storage.md).
    """
    for line in migrate_storage(project) or ["nothing to move: the tables already live in DVC"]:
        typer.echo(line)


@user_errors
def sample_for_labels(
    config: str = typer.Option(..., help="The configuration whose change is sampled (a gated one)."),
    queries: Path = typer.Option(..., help="The unlabelled log (`ragvet import log --out-unlabelled`), JSONL."),
    slice_key: str = typer.Option(..., "--slice", help="The tag whose values are the strata, e.g. tenant."),
    per_slice: int = typer.Option(20, help="Queries drawn from each slice value (all its moved ones when fewer)."),
    seed: int = typer.Option(0, help="The draw's seed: the same seed and inputs give the same file."),
    out: Path = typer.Option(..., help="Cases file to write (.yaml/.yml, or .jsonl)."),
    candidate: Path | None = typer.Option(None, help="The candidate's run [default: data/runs/<config>.parquet]."),
    baseline: Path | None = typer.Option(
        None, help="The baseline's ranking [default: metrics/baseline/cases/rankings/<config>.parquet]."
    ),
    k: int | None = typer.Option(None, help="The depth users see [default: the largest of params' ks]."),
    force: bool = typer.Option(False, help="Replace --out if it exists."),
    params: Path = typer.Option(Path("params.yaml")),
) -> None:
    """Write a stratified sample of the moved, unlabelled queries as cases, ready for annotation.

    A query moved when the set of its top k chunks differs between the baseline's
    ranking and the candidate's run. The moved queries are grouped by the value of
    their --slice tag and up to --per-slice are drawn from each, in an order fixed by
    --seed. Each becomes a case with `status: pending`: add its evidence, remove the
    status, and add it to data/cases/ (docs/comparisons.md).
    """
    raise_if(_sample_problems(out, per_slice, force, k))
    depth = k if k is not None else max(_params_ks(params))
    candidate = candidate or run_path(RUNS, config)
    baseline = baseline or baseline_ranking_path(Path("metrics/baseline"), config)
    rows = read_queries(queries)
    sides = checked_ranking(baseline, "baseline ranking"), checked_ranking(candidate, "run")
    found = moved_queries(rows, sides, depth)
    drawn = stratified(found, slice_key, per_slice, seed)
    cases = [case_row(query) for slice_queries in drawn.values() for query in slice_queries]
    write_text(out, cases_text(cases, out.suffix))
    typer.echo(f"{len(found)} of {len(rows)} unlabelled queries moved (top {depth} changed)")
    for value, slice_queries in drawn.items():
        typer.echo(f"  {slice_key}={value}: {len(slice_queries)} drawn")
    typer.echo(f"wrote {len(cases)} cases to {out}")


@user_errors
def ann_recall(
    exact: Path = typer.Option(..., help="The exact search's run (`index: flat`): the ground truth."),
    approximate: Path = typer.Option(..., help="The approximate index's run (HNSW, IVF) of the same cases."),
    k: list[int] = typer.Option([], "--k", help="A depth to measure; repeat it [default: params' ks]."),
    out: Path | None = typer.Option(None, help="Per-case JSON to write: {case_id: {ann_recall@k: value}}."),
    params: Path = typer.Option(Path("params.yaml")),
) -> None:
    """Measure how much of the exact top k an approximate index returns, per case and on average.

    Give two runs of one chunking and one model, e.g. two configurations whose retrievers
    differ only in `index: flat` and `index: hnsw` (data/runs/<config>.parquet). Relevance
    labels play no part: this measures the index, not the retriever (docs/retrievers.md).
    """
    if bad := [depth for depth in k if depth < 1]:
        raise_if([Problem("--k", f"must be at least 1, got {bad[0]}", "give the depth users see, e.g. --k 10")])
    ks = sorted(set(k)) if k else _params_ks(params)
    exact_rows = read_ranking(exact, "exact run").to_dicts()
    per_case = ann_recall_by_case(exact_rows, read_ranking(approximate, "approximate run").to_dicts(), ks)
    if out is not None:
        write_json(out, per_case)
    for depth in ks:
        mean, cases = mean_ann_recall(per_case, depth)
        shown = f"{mean:.3f} over {cases} cases" if mean is not None else "not measured: no case has an exact top k"
        typer.echo(f"ann_recall@{depth}: {shown}")


def _sample_problems(out: Path, per_slice: int, force: bool, k: int | None) -> list[Problem]:
    """Why sample-for-labels' options cannot be used, before anything is read."""
    problems = cases_target_problems(out, force, "--out")
    if per_slice < 1:
        problems.append(Problem("--per-slice", f"must be at least 1, got {per_slice}", "draw at least one per slice"))
    if k is not None and k < 1:
        problems.append(Problem("--k", f"must be at least 1, got {k}", "give the depth users see, e.g. --k 5"))
    return problems


def _params_ks(params: Path) -> list[int]:
    """The ks of a checked params.yaml."""
    settings = read_params(params)
    raise_if(validate_params(settings, str(params)))
    return list(settings["ks"])


def metrics_doc_command() -> None:
    """Print the metrics documentation generated from the registry (docs/metrics.md)."""
    typer.echo(metrics_doc(), nl=False)
