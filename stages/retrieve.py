"""Stage ``retrieve@<config>``: rank chunks for every case with one configuration."""

from __future__ import annotations

from pathlib import Path

import typer

from stages.errors import user_errors
from stages.inputs.params import fill_path, stage_key, stage_params
from stages.storage.atomic import outputs_together
from stages.storage.tables import read_cases, read_chunk_texts, read_chunks, write_run


@user_errors
def main(
    config: str | None = typer.Argument(None, help="A configuration from params.configs (under DVC: its stage's key)."),
    chunks: Path = typer.Option(..., help="Chunks JSONL of the configuration's chunking ({chunking}: its name)."),
    cases: Path = typer.Option(..., help="Validated cases.jsonl."),
    out: Path = typer.Option(..., help="Run (Parquet) to write; {key} stands for the configuration name."),
    params: Path = typer.Option(Path("params.yaml")),
) -> None:
    """Write a run ``{case_id, rank, chunk_id, score}`` down to ``depth``."""
    from stages.retrieval.kinds import retrieve  # numpy and the retriever kinds load here, not for `ragvet --help`

    config = stage_key("retrieve", config)
    settings = stage_params(params, [f"configs.{config}", "retrievers", "depth"])
    chunks, out = fill_path(chunks, chunking=settings["configs"][config]["chunking"]), fill_path(out, key=config)
    retrievers = settings["retrievers"]
    spec = retrievers[settings["configs"][config]["retriever"]]
    all_cases = read_cases(cases)
    # bm25 reads the chunks as columns (a million Chunk objects would not fit beside its index)
    chunk_rows = read_chunk_texts(chunks) if spec["kind"] == "bm25" else read_chunks(chunks)
    rows = retrieve(all_cases, chunk_rows, spec, settings["depth"], retrievers)
    chunk_ids = chunk_rows.chunk_ids if spec["kind"] == "bm25" else [chunk.chunk_id for chunk in chunk_rows]
    with outputs_together(out):
        write_run(out, rows, [case.case_id for case in all_cases], chunk_ids)
    empty = len(all_cases) - len({row["case_id"] for row in rows})
    typer.echo(f"{config}: {len(rows)} ranked chunks for {len(all_cases)} cases; {empty} cases retrieved nothing")


if __name__ == "__main__":
    typer.run(main)
