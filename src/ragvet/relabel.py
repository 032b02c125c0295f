"""``ragvet relabel``: re-anchor the span and quote labels of documents that changed, and
apply the reviewed ones.

Without options, each label that stores its anchor (``ragvet freeze-labels`` writes them)
and whose document's hash is no longer the anchor's is found again from its stored text and
context; ``--from REV`` instead reads REV's corpus and cases (through git, or DVC where it
tracks them) and takes each label's anchor in REV's document. Either way
(:mod:`ragvet.inputs.relabeling`) the moved labels are rewritten with their new anchor, the
changed and orphaned ones written to a review file and their cases marked ``status:
pending`` or ``status: orphaned`` (out of the splits until relabelled); ``--accept FILE``
applies the entries accepted there and clears the marks it settled.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer

from ragvet.errors import InputError, Problem, raise_if, user_errors
from ragvet.evidence import EvidenceResolver
from ragvet.gating.baselines import file_at, folder_at
from ragvet.inputs.cases import cases_file
from ragvet.inputs.corpus import collect_corpus, load_corpus
from ragvet.inputs.relabeling import (
    MIN_SIMILARITY,
    Outcome,
    accepted_edits,
    case_items,
    case_statuses,
    decided_statuses,
    labels_of,
    read_decisions,
    relabel,
    relabel_stored,
    review_entries,
    review_text,
    rewrite_cases,
)
from ragvet.storage.atomic import outputs_together, write_text
from ragvet.text.values import as_id


@user_errors
def main(
    rev: str | None = typer.Option(None, "--from", help="The revision the labels were written against (commit, tag)."),
    accept: Path | None = typer.Option(None, "--accept", help="Apply the accepted entries of this review file."),
    cases: Path = typer.Option(Path("data/cases"), help="Cases file (YAML list or JSONL), or a folder holding one."),
    corpus: Path = typer.Option(Path("data/corpus"), help="The corpus folder, as the work tree has it."),
    review: Path = typer.Option(Path("relabel-review.yaml"), help="Where the labels to review are written."),
    min_similarity: float = typer.Option(
        MIN_SIMILARITY, min=0.0, max=1.0, help="The lowest score (0-1) of a changed label's candidate; below: orphaned."
    ),
) -> None:
    """Re-anchor span and quote labels in documents that changed.

    Without options: each label storing its anchor whose document changed since (its
    hash differs) is found again from its stored text and 32 characters of context.
    With --from REV: each label whose document's text differs from REV's is found
    again from its text and context there. Moved labels (the same text, its context
    agreeing) are rewritten in the cases file with their new anchor; changed and
    orphaned ones go to the review file, their cases marked `status: pending` or
    `status: orphaned` (exit 1). With --accept FILE: the entries marked
    `decision: accept` are applied. The cases file changes all at once, its YAML
    comments and layout kept.
    """
    if rev is not None and accept is not None:
        raise InputError([Problem("ragvet relabel", "give --from REV or --accept FILE, not both", "drop one")])
    if accept is not None:
        raise typer.Exit(_accept(accept, corpus))
    raise typer.Exit(_relabel(rev, cases, corpus, review, min_similarity))


def _relabel(rev: str | None, cases: Path, corpus: Path, review: Path, min_similarity: float) -> int:
    """Re-anchor from the stored anchors, or against ``rev``; 1 when something awaits review."""
    found: list[Problem] = []
    path = cases_file(cases, found)
    raise_if(found)
    docs = {doc.doc_id: doc.text for doc in load_corpus(corpus)}
    text = path.read_text(encoding="utf-8")
    labels = labels_of(case_items(text, path.suffix.lower()))
    if rev is None:
        outcomes, unanchored = relabel_stored(labels, docs, min_similarity)
        if unanchored and not outcomes:
            raise_if(
                [
                    Problem(
                        str(path),
                        f"none of its {len(unanchored)} span and quote labels stores its anchor",
                        "give the revision they were written against (ragvet relabel --from REV), "
                        "or anchor them first while the documents are as labelled (ragvet freeze-labels)",
                    )
                ]
            )
        source = "as their anchors had them"
    else:
        outcomes, unanchored = _outcomes_from(rev, path, corpus, labels, docs, min_similarity), []
        source = f"as {rev} had them"
    moved = [(o.label.case, o.label.path, o.replacement) for o in outcomes if o.status == "moved" and o.replacement]
    new_text, problems = rewrite_cases(text, path.suffix.lower(), moved + case_statuses(outcomes), str(path))
    raise_if(problems)
    entries = review_entries(outcomes, docs)
    with outputs_together(path, review):
        if new_text != text:
            write_text(path, new_text)
        if entries:
            write_text(review, review_text(entries, rev or "stored anchors", path.as_posix(), str(review)))
    typer.echo(_relabel_summary(outcomes, source, path if new_text != text else None, review if entries else None))
    if unanchored:
        typer.echo(f"{len(unanchored)} labels store no anchor: re-anchor them with --from REV", err=True)
    return 1 if entries else 0


def _outcomes_from(
    rev: str, path: Path, corpus: Path, labels: list, docs: dict[str, str], min_similarity: float
) -> list[Outcome]:
    """The outcome of each label re-anchored against REV's corpus and cases."""
    with tempfile.TemporaryDirectory() as folder:
        for name, data in folder_at(rev, corpus.as_posix(), Path.cwd()).items():
            (Path(folder) / name).parent.mkdir(parents=True, exist_ok=True)
            (Path(folder) / name).write_bytes(data)
        old_docs = {doc.doc_id: doc.text for doc in collect_corpus(folder)[0]}
    old_cases = file_at(rev, path.as_posix(), Path.cwd())
    if old_cases is None:
        raise_if([Problem(str(path), f"the cases file does not exist at {rev}", "name a revision that has it")])
    old_labels = labels_of(case_items(old_cases.decode("utf-8"), path.suffix.lower()))
    return relabel(old_labels, labels, old_docs, docs, min_similarity)


def _relabel_summary(outcomes: list[Outcome], source: str, path: Path | None, review: Path | None) -> str:
    counts = {status: sum(o.status == status for o in outcomes) for status in ("kept", "moved", "changed", "orphaned")}
    lines = [", ".join(f"{n} {status}" for status, n in counts.items()) + f" of the labels {source}"]
    for o in outcomes:
        if o.status == "moved" and o.replacement and o.old and o.new:
            was, now = f"{o.old['start']}-{o.old['end']}", f"{o.new['start']}-{o.new['end']}"
            lines.append(f"  moved    {o.label.case} {o.label.role}: {was} -> {now}")
        elif o.status in ("changed", "orphaned"):
            lines.append(f"  {o.status:<8} {o.label.case} {o.label.role}: {o.note}")
    if path is not None:
        lines.append(f"rewrote {path}")
    if review is not None:
        lines.append(f"to review: {review} (set each decision, then: ragvet relabel --accept {review})")
    return "\n".join(lines)


def _accept(review: Path, corpus: Path) -> int:
    """Apply the accepted entries of ``review``; 1 when some are still pending."""
    if not review.is_file():
        raise_if([Problem(str(review), "review file not found", "pass the file ragvet relabel wrote")])
    data, problems = read_decisions(review.read_text(encoding="utf-8"), str(review))
    raise_if(problems)
    path = Path(data["cases"])
    if not path.is_file():
        raise_if([Problem(f"{review}:1", f"the cases file {path} is not there", "run from the project's folder")])
    text = path.read_text(encoding="utf-8")
    items = case_items(text, path.suffix.lower())
    resolver = EvidenceResolver({doc.doc_id: doc for doc in load_corpus(corpus)})
    edits, problems = accepted_edits(data, labels_of(items), resolver, str(review))
    raise_if(problems)
    ids = {as_id(item.get("id")) for item in items if isinstance(item, dict)}
    new_text, problems = rewrite_cases(text, path.suffix.lower(), edits + decided_statuses(data, ids), str(path))
    raise_if(problems)
    if new_text != text:
        write_text(path, new_text)
    decisions = [entry["decision"] for entry in data["entries"]]
    pending = decisions.count("pending")
    typer.echo(
        f"applied {len(edits)} accepted label{'s' if len(edits) != 1 else ''} to {path}, "
        f"{decisions.count('reject')} rejected, {pending} pending"
    )
    return 1 if pending else 0
