"""Stage ``settings``: write what params.yaml's optional sections resolve to.

DVC refuses a declared params key that params.yaml lacks, so no stage can declare an
optional section. This stage depends on the whole params.yaml instead and writes one
file per resolved section (:func:`ragvet.settings.resolved`): its defaults filled in,
off when absent, ``null`` or empty. The stages that read a section depend on its file,
so an edit that resolves to the same values re-runs nothing after this stage.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ragvet.errors import user_errors
from ragvet.inputs.params import stage_params
from ragvet.settings import resolved
from ragvet.storage.atomic import outputs_together
from ragvet.storage.files import write_json


@user_errors
def main(
    out: Path = typer.Option(Path("data/settings"), help="Folder to write <section>.json into, one per section."),
    params: Path = typer.Option(Path("params.yaml")),
) -> None:
    """Resolve the optional sections of params.yaml and write one file for each."""
    values = resolved(stage_params(params, ["ks", "budget", "judged"]))
    paths = {key: out / f"{key}.json" for key in values}
    with outputs_together(*paths.values()):
        for key, path in paths.items():
            write_json(path, {key: values[key]})
    typer.echo(f"settings: {', '.join(map(str, paths.values()))}")
