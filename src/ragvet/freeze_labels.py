"""``ragvet freeze-labels``: rewrite every ``{chunk, chunking}`` evidence reference of
a cases file into the ``{doc, start, end}`` span it resolves to under the chunking's
current params, and store every span and quote label's anchor.

Such a label ties its chunking forever: changing the chunking's params re-resolves
the label, changes the eval-split fingerprint and fails the gate ("labels changed").
The frozen spans are the same spans, so every figure stays the same, and the
chunking is free to change afterwards. Each span and quote label then stores its anchor
(its text, 32 characters of context either side and its document's content hash), from
which ``ragvet relabel`` finds it again once the document is edited. YAML keeps its
comments (see :mod:`ragvet.inputs.freezing`); nothing is written when any reference
cannot be frozen or anchored.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ragvet.errors import Problem, raise_if, user_errors
from ragvet.evidence import EvidenceResolver
from ragvet.inputs.cases import cases_file
from ragvet.inputs.corpus import load_corpus
from ragvet.inputs.freezing import freeze_jsonl, freeze_yaml, span_freezer
from ragvet.inputs.relabeling import anchoring_edits, case_items, labels_of, rewrite_cases
from ragvet.storage.atomic import write_text
from ragvet.storage.files import read_params


@user_errors
def main(
    cases: Path = typer.Option(Path("data/cases"), help="Cases file (YAML list or JSONL), or a folder holding one."),
    corpus: Path = typer.Option(Path("data/corpus"), help="Corpus folder the references point into."),
    out: Path | None = typer.Option(None, help="Where to write the frozen cases (default: CASES, in place)."),
    params: Path = typer.Option(Path("params.yaml"), help="The DVC params file: the chunkings' current params."),
) -> None:
    """Freeze chunk-anchored labels into spans, and store each span and quote label's anchor."""
    found: list[Problem] = []
    cases = cases_file(cases, found)
    raise_if(found)
    docs = {doc.doc_id: doc for doc in load_corpus(corpus)}
    resolver = EvidenceResolver(docs, read_params(params).get("chunking") or {})
    rewrite = freeze_yaml if cases.suffix in (".yaml", ".yml") else freeze_jsonl
    text, count, problems = rewrite(cases.read_text(encoding="utf-8"), cases, span_freezer(resolver))
    raise_if(problems)
    suffix = cases.suffix.lower()
    edits, left, problems = anchoring_edits(labels_of(case_items(text, suffix)), resolver, str(cases))
    raise_if(problems)
    text, problems = rewrite_cases(text, suffix, edits, str(cases))
    raise_if(problems)
    target = out or cases
    write_text(target, text)
    typer.echo(
        f"froze {count} chunk reference{'s' if count != 1 else ''} into spans, "
        f"anchored {len(edits)} label{'s' if len(edits) != 1 else ''} -> {target}"
    )
    if left:
        typer.echo(f"{left} labels anchored in an earlier text of their document: run `ragvet relabel`", err=True)


if __name__ == "__main__":
    typer.run(main)
