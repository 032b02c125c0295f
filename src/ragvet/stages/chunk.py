"""Stage ``chunk@<name>``: split the validated corpus with one named chunking."""

from __future__ import annotations

from pathlib import Path

import typer

from ragvet.chunking import chunk_corpus
from ragvet.errors import InputError, Problem, user_errors
from ragvet.inputs.params import fill_path, settled, stage_key, stage_params
from ragvet.measures.tokenizing import token_starts
from ragvet.measures.tokens import load_tokenizer
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
    budget = Budget.from_params(settings)
    # Loaded before the corpus: a bad tokenizer fails at once, and its library is mapped
    # before the corpus can take the address space it needs.
    tokenizer = load_tokenizer(budget.tokenizer) if budget.counts_tokens else None
    largest = None  # (characters, doc_id) of the longest document, for the out-of-memory message
    try:
        docs = read_docs(corpus)
        largest = max(((len(doc.text), doc.doc_id) for doc in docs), default=None)
        chunks = chunk_corpus(docs, settings["chunking"][name])
        del docs  # the chunks hold their own texts
        starts = None if tokenizer is None else token_starts(tokenizer, [chunk.text for chunk in chunks])
        with outputs_together(out):
            write_chunks(out, chunks, starts)
    except MemoryError:
        raise InputError([out_of_memory(corpus, name, budget, largest)]) from None
    typer.echo(f"chunking {name}: {len(chunks)} chunks")


def out_of_memory(corpus: Path, name: str, budget: Budget, largest: tuple[int, str] | None) -> Problem:
    """What to do when chunking the corpus does not fit in memory: its cost grows with the
    corpus, and with the number of tokens when the budget counts them."""
    what = f"out of memory chunking with {name!r}"
    if largest is not None:
        what += f" (the largest document, {largest[1]!r}, has {largest[0]:,} characters)"
    fix = "split the largest documents into smaller ones, or run with more memory"
    if budget.counts_tokens:
        fix = f"set budget.unit: chars (token starts cost memory per token), {fix}"
    return Problem(str(corpus), what + "; no output was changed", fix)
