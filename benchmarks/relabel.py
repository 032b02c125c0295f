"""Relabelling after generated edits of real text: how many labels ``ragvet relabel`` finds
again by itself, and that it never accepts a changed or deleted one silently.

    python benchmarks/relabel.py ../shared/datasets/cranfield [--seed 7] [--labels-per-doc 3] [--stored]

The texts are the sample corpus (``data/corpus``) and Cranfield's abstracts (the ``.W``
sections of ``cran.all.1400`` in the folder given). Each document gets up to
``--labels-per-doc`` non-overlapping labels, each a whole sentence or a run of 3-12 of
its words, as a span ``{doc, start, end}`` or a quote ``{doc, quote}``. Then, seeded, each
document gets one edit (one in ten none, and one in four also whitespace changes):

* **insert**: a sentence of another document inserted before a label;
* **delete**: a label's text deleted;
* **change**: one word inside a label replaced by another word;
* **duplicate**: a labelled text copied to another place of the document;
* **whitespace**: line endings made CRLF and some spaces doubled.

Every label's true fate is tracked through an offset map of the edit. Prints, per corpus
and overall: the share of unchanged labels re-anchored automatically to their true place
(kept or moved; goal >= 99.5%), the changed or deleted labels accepted as kept or moved
(goal 0), the share of changed labels in review at their true place (goal >= 95%), the
share of deleted labels orphaned (goal >= 95%), and microseconds per label of
:func:`ragvet.inputs.relabeling.relabel` in this one process (goal <= 150). With
``--stored``, each label first stores its anchor in the old text (as ``ragvet freeze-labels``
writes it) and :func:`ragvet.inputs.relabeling.relabel_stored`, which ``ragvet relabel``
without ``--from`` runs, is timed instead: the old texts are not read.
"""

from __future__ import annotations

import argparse
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path

from ragvet.evidence import find_quote, normalise_whitespace, stored_anchor
from ragvet.inputs.corpus import load_corpus
from ragvet.inputs.relabeling import MIN_SIMILARITY, Label, old_span, relabel, relabel_stored

ROOT = Path(__file__).resolve().parents[1]
SENTENCE = re.compile(r"[^\s][^.!?]*[.!?]+")
WORD = re.compile(r"[A-Za-z]{3,}")
EDITS = ("insert", "delete", "change", "duplicate", "whitespace")


@dataclass
class Truth:
    """A label's true fate: unchanged, changed or deleted, and its true new place."""

    label: Label
    fate: str
    start: int | None = None
    end: int | None = None


def cranfield_abstracts(folder: Path) -> dict[str, str]:
    """The ``.W`` text of every Cranfield document, by ``cran-<n>``."""
    text = (folder / "cran.all.1400").read_text(encoding="utf-8", errors="replace")
    docs = {}
    for block in text.split(".I ")[1:]:
        number, _, rest = block.partition("\n")
        body = rest.split(".W\n", 1)[-1].strip()
        if len(body) > 80:
            docs[f"cran-{number.strip()}"] = body + "\n"
    return docs


def sentences(text: str) -> list[tuple[int, int]]:
    return [match.span() for match in SENTENCE.finditer(text) if len(match[0]) >= 30]


def pick_labels(doc: str, text: str, count: int, rng: random.Random) -> list[tuple[Label, int, int]]:
    """Up to ``count`` labels in different sentences: ``(label, start, end)``."""
    found = []
    chosen = rng.sample(sentences(text), min(count, len(sentences(text))))
    for number, (start, end) in enumerate(sorted(chosen)):
        words = list(re.finditer(r"\S+", text[start:end]))
        if rng.random() < 0.5 and len(words) > 6:
            size = rng.randint(3, min(12, len(words) - 1))
            first = rng.randint(0, len(words) - size)
            start, end = start + words[first].start(), start + words[first + size - 1].end()
        if rng.random() < 0.5:
            ref = {"doc": doc, "start": start, "end": end}
        else:
            quote = normalise_whitespace(text[start:end])
            spans = find_quote(text, quote)
            ref = {"doc": doc, "quote": quote}
            if len(spans) > 1:
                ref["occurrence"] = spans.index((start, end)) + 1
        found.append((Label(f"{doc}/{number}", "evidence 1", ("evidence", 0), ref), start, end))
    return found


def apply(text: str, operations: list[tuple[int, int, str]]) -> tuple[str, list[int], list[int]]:
    """``text`` with each ``(position, deleted length, inserted text)`` applied; for every
    old character, the new offset where it starts and the one where it ends (a replaced
    character starts where its replacement starts and ends where it ends)."""
    pieces: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    at = size = 0
    for position, deleted, inserted in sorted(operations):
        keep = text[at:position]
        pieces.append(keep)
        starts.extend(range(size, size + len(keep)))
        ends.extend(range(size + 1, size + len(keep) + 1))
        size += len(keep)
        starts.extend([size] * deleted)
        ends.extend([size + len(inserted)] * deleted)
        pieces.append(inserted)
        size += len(inserted)
        at = position + deleted
    keep = text[at:]
    pieces.append(keep)
    starts.extend(range(size, size + len(keep)))
    ends.extend(range(size + 1, size + len(keep) + 1))
    return "".join(pieces), starts, ends


def edit(
    text: str, labels: list[tuple[Label, int, int]], others: list[str], rng: random.Random
) -> tuple[str, list[Truth]]:
    """One seeded edit of ``text`` and every label's fate."""
    kind = "none" if rng.random() < 0.1 or not labels else rng.choice(EDITS)
    target = rng.randrange(len(labels)) if labels else -1
    operations: list[tuple[int, int, str]] = []
    fates = ["unchanged"] * len(labels)
    if kind != "none":
        _, start, end = labels[target]
        if kind == "insert":
            sentence_start = max((s for s, _ in sentences(text) if s <= start), default=start)
            pasted = rng.choice(others)  # another document's sentence, as an editor might paste one
            inserted = pasted[slice(*rng.choice(sentences(pasted) or [(0, len(pasted))]))]
            operations.append((sentence_start, 0, inserted + " "))
        elif kind == "delete":
            operations.append((start, end - start, ""))
            fates[target] = "deleted"
        elif kind == "change":
            words = [w for w in WORD.finditer(text, start, end)]
            if words:
                word = rng.choice(words)
                vocabulary = [w for o in others for w in WORD.findall(o)] or ["changed"]
                new = rng.choice([w for w in vocabulary if w.lower() != word[0].lower()] or ["changed"])
                operations.append((word.start(), len(word[0]), new))
                fates[target] = "changed"
        elif kind == "duplicate":
            far = [e for _, e in sentences(text) if e < start - 40 or e > end + 40]
            where = rng.choice(far) if far else len(text)
            operations.append((where, 0, " " + text[start:end]))
    if kind == "whitespace" or rng.random() < 0.25:
        taken = [(position, position + deleted) for position, deleted, _ in operations]
        for match in re.finditer(r"\n| ", text):
            if any(lo <= match.start() <= hi for lo, hi in taken):  # the edits never overlap
                continue
            if match[0] == "\n":
                operations.append((match.start(), 1, "\r\n"))
            elif rng.random() < 0.05:
                operations.append((match.start(), 1, "  "))
    new_text, starts, ends = apply(text, operations)
    truths = [  # a label ends where its last character does: text inserted right after it is not in it
        Truth(label, fate) if fate == "deleted" else Truth(label, fate, starts[start], ends[end - 1])
        for (label, start, end), fate in zip(labels, fates)
    ]
    return new_text, truths


def anchored(label: Label, text: str) -> Label:
    """``label`` storing its anchor in ``text``, as freeze-labels writes it (a span its text too)."""
    start, end = old_span(label.ref, text)  # type: ignore[misc]
    quote = "quote" in label.ref
    covered = {} if quote else {"text": text[start:end]}
    return Label(
        label.case, label.role, label.path, {**label.ref, **covered, "anchor": stored_anchor(text, start, end, quote)}
    )


def measure(name: str, docs: dict[str, str], seed: int, per_doc: int, stored: bool = False) -> dict[str, float]:
    rng = random.Random(seed)
    texts = list(docs.values())
    new_docs, truths = {}, []
    for doc, text in docs.items():
        labels = pick_labels(doc, text, per_doc, rng)
        new_docs[doc], found = edit(text, labels, rng.sample(texts, 3), rng)
        truths += found
    labels = [truth.label for truth in truths]
    warm = Label("warm-up", "evidence 1", ("evidence", 0), {"doc": "d", "start": 0, "end": 4})
    relabel([warm], [warm], {"d": "abcd efgh"}, {"d": "abce efgh"})  # imports rapidfuzz once, outside the timing
    if stored:
        labels = [anchored(label, docs[label.ref["doc"]]) for label in labels]
    started = time.process_time()
    if stored:
        outcomes = relabel_stored(labels, new_docs, MIN_SIMILARITY)[0]
    else:
        outcomes = relabel(labels, labels, docs, new_docs, MIN_SIMILARITY)
    seconds = time.process_time() - started
    fates = {truth.label.case: truth for truth in truths}
    counts = dict.fromkeys(
        ("unchanged", "unchanged_auto", "changed", "changed_review", "deleted", "deleted_orphaned", "silent"), 0
    )
    for outcome in outcomes:
        truth = fates[outcome.label.case]
        place = (outcome.new["start"], outcome.new["end"]) if outcome.new else (None, None)
        if outcome.status == "kept":
            place = (truth.start, truth.end) if truth.fate == "unchanged" else place
        right = place == (truth.start, truth.end)
        counts[truth.fate] += 1
        if truth.fate == "unchanged":
            counts["unchanged_auto"] += outcome.status in ("kept", "moved") and right
        else:
            counts["silent"] += outcome.status in ("kept", "moved")
            if truth.fate == "changed":
                counts["changed_review"] += outcome.status == "changed" and right
            else:
                counts["deleted_orphaned"] += outcome.status == "orphaned"
    counts["us_per_label"] = 1e6 * seconds / max(1, len(outcomes))
    counts["labels"] = len(outcomes)
    print(f"{name}: {len(docs)} documents, {len(outcomes)} labels, relabelled in {seconds:.2f} s of CPU")
    return counts


def share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.2f}% ({part}/{whole})" if whole else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cranfield", type=Path, help="the Cranfield folder (holding cran.all.1400)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--labels-per-doc", type=int, default=3)
    parser.add_argument("--stored", action="store_true", help="re-anchor from stored anchors (ragvet relabel)")
    args = parser.parse_args()
    corpora = {
        "sample": {doc.doc_id: doc.text for doc in load_corpus(ROOT / "data" / "corpus")},
        "cranfield": cranfield_abstracts(args.cranfield),
    }
    rows = {name: measure(name, docs, args.seed, args.labels_per_doc, args.stored) for name, docs in corpora.items()}
    print()
    print(
        "| corpus | labels | unchanged re-anchored automatically | changed/deleted accepted as kept/moved "
        "| changed in review at the right place | deleted orphaned | µs per label |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows["both"] = {key: sum(row[key] for row in rows.values()) for key in rows["sample"]}
    rows["both"]["us_per_label"] = sum(r["us_per_label"] * r["labels"] for n, r in rows.items() if n != "both") / max(
        1, rows["both"]["labels"]
    )
    for name, c in rows.items():
        print(
            f"| {name} | {c['labels']} | {share(c['unchanged_auto'], c['unchanged'])} | {c['silent']} "
            f"| {share(c['changed_review'], c['changed'])} | {share(c['deleted_orphaned'], c['deleted'])} "
            f"| {c['us_per_label']:.0f} |"
        )


if __name__ == "__main__":
    main()
