"""The ``ragvet`` command: a thin shell over the stage modules and the library.

Each pipeline stage is also a subcommand, so a user can run one by hand exactly
as dvc.yaml does.
"""

from __future__ import annotations

from pathlib import Path

import typer

from stages import chunk, evaluate, freeze_labels, gate, interop, report, retrieve, split, tune_abstain, validate
from stages.errors import raise_if, user_errors
from stages.gating.baselines import accept_baseline
from stages.gating.reproduction import render, verify_results
from stages.inputs.params import validate_params
from stages.project import create_project
from stages.reporting.markdown import metrics_doc
from stages.storage.files import read_params
from stages.storage.placement import migrate_storage

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Offline retrieval evaluation for RAG.")
for module in (validate, chunk, split, retrieve, evaluate, report, gate):
    app.command(module.__name__.rsplit(".", 1)[1])(module.main)

baseline_app = typer.Typer(no_args_is_help=True, help="Manage the committed baseline.")
app.add_typer(baseline_app, name="baseline")
app.add_typer(interop.import_app, name="import")
app.add_typer(interop.export_app, name="export")
app.command("tune-abstain")(tune_abstain.main)
app.command("freeze-labels")(freeze_labels.main)


@baseline_app.command("accept")
@user_errors
def baseline_accept(
    metrics_dir: Path = typer.Option(Path("metrics"), help="Folder with <config>.json and cases/."),
    params: Path = typer.Option(Path("params.yaml")),
) -> None:
    """Make the current results of the gated configurations the new baseline.

    Run it after `dvc repro`, and commit metrics/baseline/ in the same pull
    request as the change that moved the numbers. Where dvc.yaml keeps the
    per-case tables in DVC, the baseline's go there too (`dvc add`): commit
    metrics/baseline/cases.dvc and `dvc push`.
    """
    settings = read_params(params)
    raise_if(validate_params(settings, str(params)))
    written = accept_baseline(metrics_dir, settings["gate"]["configs"])
    for path in written:
        typer.echo(f"wrote {path}")


@app.command("init")
@user_errors
def init(
    directory: Path = typer.Argument(..., help="Folder for the new project (created; must be empty)."),
    corpus: Path | None = typer.Option(None, help="Documents to copy into data/corpus/ (a folder or a .jsonl)."),
    cases: Path | None = typer.Option(None, help="Cases file to copy into data/cases/ (.yaml/.yml or .jsonl)."),
    force: bool = typer.Option(False, "--force", help="Write into a non-empty folder."),
) -> None:
    """Start a project on your own data: the pipeline, one first configuration, git and DVC.

    Nothing of the bundled sample comes along (no metrics, answers, thresholds or
    baseline). Prints the next steps: import your data, `dvc repro report`,
    `ragvet baseline accept`, `dvc repro`, commit.
    """
    typer.echo(create_project(directory, corpus, cases, force))


@app.command("verify")
@user_errors
def verify(
    against: str = typer.Option("HEAD", help="The git revision whose committed results to compare with."),
    metrics_dir: Path = typer.Option(Path("metrics"), help="Folder with cases/<config>.jsonl."),
    runs_dir: Path = typer.Option(Path("data/runs"), help="Folder with the runs, <config>.parquet."),
    params: Path = typer.Option(Path("params.yaml")),
) -> None:
    """Check that recomputed results reproduce the committed ones, within float noise.

    Run it after `dvc repro -f`. Per configuration and case: every rank-derived
    figure equal, scores within 1e-4, and rankings equal but for named near ties
    (when DVC can bring the committed run). Exits 1, naming what differs, otherwise.
    """
    settings = read_params(params)
    raise_if(validate_params(settings, str(params)))
    checks = verify_results(list(settings["configs"]), against, Path("."), metrics_dir, runs_dir)
    typer.echo(render(checks, against))
    if not all(check.reproduced for check in checks):
        raise typer.Exit(1)


@app.command("migrate-storage")
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


@app.command("metrics-doc")
def metrics_doc_command() -> None:
    """Print the metrics documentation generated from the registry (docs/metrics.md)."""
    typer.echo(metrics_doc(), nl=False)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
