"""The data model every stage shares, and the fingerprints of its content.

Validated files written by the ``validate`` stage are the only way later stages
see the user's corpus and cases (:mod:`ragvet.inputs.corpus` and :mod:`ragvet.inputs.cases` check them), so every quote
is already resolved to character offsets and later stages can trust ids and spans.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ragvet.storage.files import dumps_line
from ragvet.text.values import nfc

Scalar = str | int | float | bool | None

# The frozen split's two sides: eval is gated and reported, dev is for tuning
# (abstention thresholds) so that eval labels never reach a choice.
EVAL, DEV = "eval", "dev"
SPLITS = (EVAL, DEV)


@dataclass(frozen=True)
class Doc:
    """One corpus document. ``text`` is kept exactly as given: offsets point into it."""

    doc_id: str
    text: str
    title: str | None = None
    metadata: dict[str, Scalar] = field(default_factory=dict)

    def to_row(self) -> dict[str, Any]:
        return {"doc_id": self.doc_id, "text": self.text, "title": self.title, "metadata": self.metadata}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Doc:
        return cls(row["doc_id"], row["text"], row.get("title"), dict(row.get("metadata") or {}))


@dataclass(frozen=True)
class Chunk:
    """A chunk of one document under one chunking: ``text == doc.text[start:end]``."""

    chunk_id: str
    doc_id: str
    ordinal: int
    start: int
    end: int
    text: str
    metadata: dict[str, Scalar] = field(default_factory=dict)
    # Offsets in ``text`` where the budget tokenizer's tokens start (ragvet.measures.tokens);
    # None when the budget counts characters.
    token_starts: tuple[int, ...] | None = None

    def to_row(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "chunk_id": self.chunk_id,
            "doc_id": self.doc_id,
            "ordinal": self.ordinal,
            "start": self.start,
            "end": self.end,
            "text": self.text,
            "metadata": self.metadata,
        }
        return row if self.token_starts is None else {**row, "token_starts": list(self.token_starts)}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Chunk:
        return cls(
            row["chunk_id"],
            row["doc_id"],
            row["ordinal"],
            row["start"],
            row["end"],
            row["text"],
            dict(row.get("metadata") or {}),
            None if row.get("token_starts") is None else tuple(row["token_starts"]),
        )


def chunk_id_for(doc_id: str, ordinal: int) -> str:
    """Chunk ids are ``<doc_id>#<ordinal>``: stable for the same corpus and params."""
    return f"{doc_id}#{ordinal}"


@dataclass(frozen=True, order=True)
class EvidenceUnit:
    """Resolved evidence: a character span ``[start, end)`` of a doc, or the whole doc,
    or a choice between several of those.

    Every single-target input form (quote, offsets, doc, chunk+chunking) resolves to
    one span or doc, which is what lets labels survive a chunking change. The
    ``{any: [ref, ...]}`` form resolves to one unit with ``alternatives``: two or
    more distinct single targets, sorted, any one of which satisfies the unit (the
    answer spans of several annotators, say). Build it with :meth:`any_of`. Its own
    ``doc_id``, ``start`` and ``end`` repeat its first alternative's, so that units
    still sort and group by doc; read :attr:`targets` and :attr:`doc_ids` for all of it.
    """

    doc_id: str
    start: int | None = None
    end: int | None = None
    alternatives: tuple[EvidenceUnit, ...] = ()

    @classmethod
    def any_of(cls, units: Iterable[EvidenceUnit]) -> EvidenceUnit:
        """One unit satisfied by any of ``units``: nested choices are flattened,
        identical targets kept once and sorted, and a single target is returned as is."""
        targets = sorted({target for unit in units for target in unit.targets}, key=_target_key)
        if not targets:
            raise ValueError("an `any` unit needs at least one alternative")
        if len(targets) == 1:
            return targets[0]
        first = targets[0]
        return cls(first.doc_id, first.start, first.end, tuple(targets))

    @property
    def targets(self) -> tuple[EvidenceUnit, ...]:
        """The single-target units that can satisfy this one: its alternatives, or itself."""
        return self.alternatives or (self,)

    @property
    def doc_ids(self) -> tuple[str, ...]:
        """Every doc the unit points into, in target order, each once."""
        return tuple(dict.fromkeys(target.doc_id for target in self.targets))

    @property
    def doc_level(self) -> bool:
        return not self.alternatives and self.start is None

    def label(self) -> str:
        """Short human form used in per-case tables: ``doc`` or ``doc[start:end]``;
        alternatives are joined with `` | ``."""
        if self.alternatives:
            return " | ".join(target.label() for target in self.alternatives)
        return self.doc_id if self.doc_level else f"{self.doc_id}[{self.start}:{self.end}]"

    def to_row(self) -> dict[str, Any]:
        if self.alternatives:
            return {"any": [target.to_row() for target in self.alternatives]}
        if self.doc_level:
            return {"doc": self.doc_id}
        return {"doc": self.doc_id, "start": self.start, "end": self.end}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> EvidenceUnit:
        if "any" in row:
            return cls.any_of(cls.from_row(alternative) for alternative in row["any"])
        return cls(row["doc"], row.get("start"), row.get("end"))


def _target_key(unit: EvidenceUnit) -> tuple[str, int, int]:
    return (unit.doc_id, -1 if unit.start is None else unit.start, -1 if unit.end is None else unit.end)


@dataclass(frozen=True)
class Claim:
    """One claim of a candidate answer, with its human-verified supporting evidence."""

    text: str
    evidence: tuple[EvidenceUnit, ...]

    def to_row(self) -> dict[str, Any]:
        return {"text": self.text, "evidence": [unit.to_row() for unit in self.evidence]}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Claim:
        return cls(row["text"], tuple(EvidenceUnit.from_row(u) for u in row["evidence"]))


@dataclass(frozen=True)
class Case:
    """One evaluation question. ``answerable=False`` marks an abstention case.

    ``judged`` is the judged set of an imported TREC or BEIR query: every doc its
    qrels judged, with the grade, relevant or not (0 and negative grades included).
    ``None`` for a native case, which has no judgements beyond its evidence: its
    ``judged@k`` is then absent, never 0 or 1. Its row leaves the key out, so a
    native case's row and fingerprint are what they were before judged sets existed.
    """

    case_id: str
    question: str
    answerable: bool = True
    evidence: tuple[EvidenceUnit, ...] = ()
    claims: tuple[Claim, ...] = ()
    tags: dict[str, str] = field(default_factory=dict)
    filter: dict[str, Any] = field(default_factory=dict)
    judged: dict[str, int] | None = None

    def to_row(self) -> dict[str, Any]:
        row = {
            "id": self.case_id,
            "question": self.question,
            "answerable": self.answerable,
            "evidence": [unit.to_row() for unit in self.evidence],
            "claims": [claim.to_row() for claim in self.claims],
            "tags": self.tags,
            "filter": self.filter,
        }
        return row if self.judged is None else {**row, "judged": dict(sorted(self.judged.items()))}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Case:
        return cls(
            row["id"],
            row["question"],
            row.get("answerable", True),
            tuple(EvidenceUnit.from_row(u) for u in row.get("evidence", [])),
            tuple(Claim.from_row(c) for c in row.get("claims", [])),
            dict(row.get("tags") or {}),
            dict(row.get("filter") or {}),
            None if row.get("judged") is None else dict(row["judged"]),
        )


def matches_filter(metadata: dict[str, Scalar], flt: dict[str, Any]) -> bool:
    """A metadata filter is a conjunction of ``key: value`` (equality) or
    ``key: [v1, v2]`` (any of). A doc without the key never matches, so a filter
    cannot silently widen to docs nobody labelled with it. Values compare as
    strings, because YAML reads ``2026`` as int and JSON front matter may quote it.
    """
    for key, wanted in flt.items():
        if key not in metadata:
            return False
        options = wanted if isinstance(wanted, list) else [wanted]
        if str(metadata[key]) not in {str(option) for option in options}:
            return False
    return True


@dataclass(frozen=True)
class ProjectedUnit:
    """An evidence unit seen through one chunking.

    ``pieces`` maps each chunk that overlaps the unit to the overlap's character
    interval in doc coordinates. For a doc-level unit every chunk of the doc is a
    piece and only the keys matter. ``length`` is the span's length (0 for
    doc-level). Projected with the docs' texts, as evaluation does, a span's pieces
    and length count non-whitespace characters (``ragvet.evidence.nonspace_before``).
    Overlapping chunks share characters, so coverage is the *union* of pieces, never
    their sum. A unit with alternatives (``{any: [...]}``) has no
    pieces of its own: ``alternatives`` holds each alternative's projection, and
    the unit is available when any one of them is.
    """

    label: str
    doc_level: bool
    length: int
    pieces: dict[str, tuple[int, int]]
    alternatives: tuple[ProjectedUnit, ...] = ()

    @property
    def chunk_ids(self) -> set[str]:
        """Every chunk overlapping the unit, or any of its alternatives."""
        ids = set(self.pieces)
        for alternative in self.alternatives:
            ids |= alternative.chunk_ids
        return ids


# --- fingerprints ---------------------------------------------------------------------


def _digest(rows: Iterable[Any]) -> str:
    """sha256 over canonical JSON lines, hex, first 16 characters."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(dumps_line(row).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()[:16]


def corpus_fingerprint(docs: Iterable[Doc]) -> str:
    """A hash of every doc's id, text, title and metadata, independent of reading order."""
    return _digest(doc.to_row() for doc in sorted(docs, key=lambda doc: doc.doc_id))


def label_text(text: str) -> str:
    """A label's text as its meaning compares it: NFC, each whitespace run one space, the
    ends stripped, so that a change of line endings or of Unicode spelling changes nothing."""
    return " ".join(nfc(text).split())


def occurrence(text: str, exact: str, start: int) -> int:
    """How many times ``exact`` starts in ``text`` before ``start`` (overlaps count): which of
    its occurrences a span label means, a count that text inserted elsewhere leaves alone."""
    count, at = 0, text.find(exact)
    while -1 < at < start:
        count, at = count + 1, text.find(exact, at + 1)
    return count


def _target_meaning(target: EvidenceUnit, texts: Mapping[str, str]) -> dict[str, Any]:
    """What one target says: its document, and for a span the exact text and its occurrence."""
    if target.doc_level or target.start is None or target.end is None:
        return {"doc": target.doc_id}
    text = texts[target.doc_id]
    exact = text[target.start : target.end]
    return {"doc": target.doc_id, "exact": label_text(exact), "occurrence": occurrence(text, exact, target.start)}


def _unit_meaning(unit: EvidenceUnit, texts: Mapping[str, str]) -> Any:
    """A unit's meaning; a choice of alternatives is the sorted list of theirs."""
    meanings = sorted((_target_meaning(target, texts) for target in unit.targets), key=dumps_line)
    return meanings[0] if len(meanings) == 1 else {"any": meanings}


def _units_meaning(units: Iterable[EvidenceUnit], texts: Mapping[str, str]) -> list[Any]:
    return sorted((_unit_meaning(unit, texts) for unit in units), key=dumps_line)


def case_fingerprint(case: Case, texts: Mapping[str, str]) -> str:
    """A hash of what a case's labels say, given its documents' texts (doc id -> text).

    A span is hashed as its document, its exact text (:func:`label_text`) and which
    occurrence of that text it is, never as offsets: a label that only moved (text
    inserted before it in its document) keeps the fingerprint, while one whose text
    changed does not. Evidence and claims are in a canonical order, so re-quoting the
    same span or reordering a list is no label change either; any change to the
    question, labelled text, claims, tags, filter, answerability or judged set (a doc
    or a grade) is."""
    row = case.to_row()
    row["evidence"] = _units_meaning(case.evidence, texts)
    row["claims"] = sorted(
        ({"text": claim.text, "evidence": _units_meaning(claim.evidence, texts)} for claim in case.claims),
        key=dumps_line,
    )
    return _digest([row])


def chunking_fingerprint(
    chunk_ids: Iterable[str], doc_ids: Iterable[str], starts: Iterable[int], ends: Iterable[int]
) -> str:
    """A hash of a chunking's chunks as the evaluation read them: each chunk's id, doc and
    character offsets, in chunk_id order. Chunk-level metrics (``recall@k``, ``mrr``) count
    these chunks, so two results are comparable on them only when this is the same; a
    params change that leaves every chunk as it was leaves it as it was."""
    rows = sorted(zip(chunk_ids, doc_ids, map(int, starts), map(int, ends)))
    return _digest([[list(row) for row in rows]])


def config_fingerprint(chunking: Mapping[str, Any], retriever: Mapping[str, Any]) -> str:
    """A hash of what a configuration retrieves with: its chunking's params and its
    retriever's spec, as canonical JSON. A threshold tuned on one configuration's
    scores means nothing once either changes, so the threshold records this."""
    return _digest([{"chunking": dict(chunking), "retriever": dict(retriever)}])
