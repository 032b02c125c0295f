"""Stage ``split``: freeze eval/dev membership and the fingerprints the gate checks."""

from __future__ import annotations

from pathlib import Path

import typer

from ragvet.errors import user_errors
from ragvet.inputs.params import stage_params
from ragvet.splitting import freeze_split, left_out_of, split_summary
from ragvet.storage.atomic import outputs_together
from ragvet.storage.files import read_json, write_json
from ragvet.storage.tables import read_cases, read_docs


@user_errors
def main(
    cases: Path = typer.Option(..., help="Validated cases.jsonl."),
    corpus: Path = typer.Option(..., help="Validated corpus.jsonl."),
    out: Path = typer.Option(..., help="Split JSON to write: every case's split and fingerprint (DVC-tracked)."),
    summary: Path | None = typer.Option(None, help="Split summary to write: counts and fingerprints (committed)."),
    anchors: Path | None = typer.Option(None, help="validate's anchors.json: the chunkings labels are anchored on."),
    left_out: Path | None = typer.Option(None, help="validate's left_out.json: the cases relabel marked, left out."),
    params: Path = typer.Option(Path("params.yaml")),
) -> None:
    """Assign each case to eval or dev by a salted hash of its id."""
    settings = stage_params(params, ["split.salt", "split.eval_fraction"])["split"]
    record = freeze_split(read_cases(cases), read_docs(corpus), settings["salt"], settings["eval_fraction"])
    if anchors is not None:  # not a fingerprint: named by the "labels changed" message only
        record["fingerprints"]["anchors"] = read_json(anchors)
    flagged = read_json(left_out) if left_out is not None else {}
    if flagged:  # the gate names the eval split's, the report all of them
        record["left_out"] = left_out_of(flagged, settings["salt"], settings["eval_fraction"])
    written = [out] if summary is None else [out, summary]
    with outputs_together(*written):
        write_json(out, record)
        if summary is not None:
            write_json(summary, split_summary(record))
    typer.echo(f"split: {record['counts']['eval']} eval, {record['counts']['dev']} dev")
