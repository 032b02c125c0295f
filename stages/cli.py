"""The ``ragvet`` command: a thin shell over the stage modules and the library.

Each pipeline stage is also a subcommand, so a user can run one by hand exactly
as dvc.yaml does.
"""

from __future__ import annotations

from pathlib import Path

import typer

from stages import chunk, evaluate, gate, interop, report, retrieve, split, tune_abstain, validate
from stages.errors import raise_if, user_errors
from stages.gating.baselines import accept_baseline
from stages.inputs.params import validate_params
from stages.reporting.markdown import metrics_doc
from stages.storage.files import read_params

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Offline retrieval evaluation for RAG.")
for module in (validate, chunk, split, retrieve, evaluate, report, gate):
    app.command(module.__name__.rsplit(".", 1)[1])(module.main)

baseline_app = typer.Typer(no_args_is_help=True, help="Manage the committed baseline.")
app.add_typer(baseline_app, name="baseline")
app.add_typer(interop.import_app, name="import")
app.add_typer(interop.export_app, name="export")
app.command("tune-abstain")(tune_abstain.main)


@baseline_app.command("accept")
@user_errors
def baseline_accept(
    metrics_dir: Path = typer.Option(Path("metrics"), help="Folder with <config>.json and cases/."),
    params: Path = typer.Option(Path("params.yaml")),
) -> None:
    """Make the current results of the gated configurations the new baseline.

    Run it after `dvc repro`, and commit metrics/baseline/ in the same pull
    request as the change that moved the numbers.
    """
    settings = read_params(params)
    raise_if(validate_params(settings, str(params)))
    written = accept_baseline(metrics_dir, settings["gate"]["configs"])
    for path in written:
        typer.echo(f"wrote {path}")


@app.command("metrics-doc")
def metrics_doc_command() -> None:
    """Print the metrics documentation generated from the registry (docs/metrics.md)."""
    typer.echo(metrics_doc(), nl=False)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
