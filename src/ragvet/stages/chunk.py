"""Stage ``chunk@<name>``: split the validated corpus with one named chunking."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import typer

from ragvet.chunking import chunk_corpus
from ragvet.errors import user_errors
from ragvet.inputs.params import fill_path, settled, stage_key, stage_params
from ragvet.measures.tokens import load_tokenizer, token_starts
from ragvet.settings import Budget
from ragvet.storage.atomic import outputs_together
from ragvet.storage.tables import read_docs, write_chunks


@user_errors
def main(
    name: str | None = typer.Argument(None, help="A chunking name from params.chunking (under DVC: its stage's key)."),
    corpus: Path = typer.Option(..., help="Validated corpus.jsonl."),
    out: Path = typer.Option(..., help="Chunks JSONL to write; {key} stands for the chunking name."),
    tokenizer: Path | None = typer.Option(
        None, help="The settings stage's tokenizer.json (dvc.yaml's dep), checked against the params."
    ),
    params: Path = typer.Option(Path("params.yaml")),
) -> None:
    """Chunk every document; ids are ``<doc_id>#<ordinal>``. When the budget counts
    tokens, each chunk carries its tokens' start offsets, so evaluation never tokenizes."""
    name = stage_key("chunk", name)
    settings = stage_params(params, [f"chunking.{name}", "budget"])
    if tokenizer is not None:
        settled(tokenizer, "tokenizer", settings)
    out = fill_path(out, key=name)
    chunks = chunk_corpus(read_docs(corpus), settings["chunking"][name])
    budget = Budget.from_params(settings)
    if budget.counts_tokens:
        starts = token_starts(load_tokenizer(budget.tokenizer), [chunk.text for chunk in chunks])
        chunks = [dataclasses.replace(chunk, token_starts=s) for chunk, s in zip(chunks, starts)]
    with outputs_together(out):
        write_chunks(out, chunks)
    typer.echo(f"chunking {name}: {len(chunks)} chunks")
