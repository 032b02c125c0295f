"""Stage ``retrieve@<config>``: rank chunks for every case with one configuration."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from ragvet.errors import user_errors
from ragvet.inputs.params import fill_path, stage_key, stage_params
from ragvet.measures.latency import latency_figures, machine_fingerprint
from ragvet.retrieval.kinds import retrieve, retrieve_chunk_file, streams_chunk_file
from ragvet.retrieval.passages import is_foreign
from ragvet.storage.atomic import outputs_together
from ragvet.storage.files import write_json
from ragvet.storage.tables import read_cases, read_chunk_texts, read_chunks, read_docs, write_run


@user_errors
def main(
    config: str | None = typer.Argument(None, help="A configuration from params.configs (under DVC: its stage's key)."),
    chunks: Path = typer.Option(..., help="Chunks JSONL of the configuration's chunking."),
    cases: Path = typer.Option(..., help="Validated cases.jsonl."),
    corpus: Path | None = typer.Option(None, help="Validated corpus.jsonl: where foreign passages are located."),
    out: Path = typer.Option(..., help="Run (Parquet) to write; {key} stands for the configuration in every path."),
    latency: Path | None = typer.Option(None, help="Latency JSON to write (p50, p95, max, queries per second)."),
    vectors: Path | None = typer.Option(
        None, help="JSON to write: the manifests of the vectors engine: ray computed ([] for every other run)."
    ),
    params: Path = typer.Option(Path("params.yaml")),
) -> None:
    """Write a run ``{case_id, rank, chunk_id, score}`` down to ``depth``.

    It ranks the chunking's chunks, or holds the foreign passages the system returned."""
    config = stage_key("retrieve", config)
    settings = stage_params(params, [f"configs.{config}", "retrievers", "depth"])
    chunks, out = fill_path(chunks, chunking=settings["configs"][config]["chunking"]), fill_path(out, key=config)
    latency = fill_path(latency, key=config) if latency is not None else None
    vectors = fill_path(vectors, key=config) if vectors is not None else None
    retrievers = settings["retrievers"]
    spec = retrievers[settings["configs"][config]["retriever"]]
    all_cases = read_cases(cases)
    timed: dict[str, float] = {}
    manifests: list[dict] = []
    if streams_chunk_file(spec):  # the chunk file streamed by the search: no chunk held here
        started = time.perf_counter()
        rows, chunk_ids = retrieve_chunk_file(all_cases, chunks, spec, settings["depth"], manifests, timed)
        foreign = False
    else:
        # bm25 reads the chunks as columns (a million Chunk objects would not fit beside its index)
        chunk_rows = read_chunk_texts(chunks) if spec["kind"] == "bm25" else read_chunks(chunks, token_starts=False)
        docs = {doc.doc_id: doc for doc in read_docs(corpus)} if corpus and spec["kind"] != "bm25" else {}
        started = time.perf_counter()
        rows = retrieve(all_cases, chunk_rows, spec, settings["depth"], retrievers, docs, timed, manifests)
        foreign = is_foreign(row["chunk_id"] for row in rows)
        if foreign:  # a run of foreign passages numbers its own passages
            chunk_ids = [row["chunk_id"] for row in rows]
        else:
            chunk_ids = chunk_rows.chunk_ids if spec["kind"] == "bm25" else [chunk.chunk_id for chunk in chunk_rows]
    figures = latency_figures(timed, len(all_cases), time.perf_counter() - started, machine_fingerprint())
    with outputs_together(out, latency, vectors):
        write_run(out, rows, [case.case_id for case in all_cases], chunk_ids, foreign)
        if vectors is not None:  # where the vectors live, small enough for DVC; the same for the same inputs
            write_json(vectors, {"manifests": manifests})
        if latency is not None:  # varies run to run: a file outside DVC and git, never in the metrics
            write_json(latency, {"config": config, **figures})
    empty = len(all_cases) - len({row["case_id"] for row in rows})
    typer.echo(f"{config}: {len(rows)} ranked chunks for {len(all_cases)} cases; {empty} cases retrieved nothing")
    typer.echo(f"{config}: {figures['qps']} queries/s, p50 {figures['p50_ms']} ms, p95 {figures['p95_ms']} ms")
