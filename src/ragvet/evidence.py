"""Evidence references: resolving them to character spans, and seeing them through a chunking.

A case names its evidence in one of four forms (DESIGN.md, "Inputs"):

``{doc, quote}``
    The quote is looked up in the doc's text with whitespace normalised on both
    sides (every run of whitespace counts as one space, and the quote's leading
    and trailing whitespace is ignored). It must occur exactly once, or
    ``occurrence: n`` (1-based) picks one. The resolved span is in the doc's
    *original* coordinates: from its first matched character to its last.
``{doc, start, end}``
    Character offsets ``[start, end)`` into the doc's text. With ``text``, the text
    the offsets are meant to cover: when the doc no longer reads it there (an edit
    moved or rewrote it), the label is refused rather than left pointing at other text.

A span or quote label may carry its ``anchor``, ``{prefix, suffix, doc_sha256}`` (a
quote's also its ``start``): the :data:`CONTEXT` characters before and after the text and
the sha256 of the document's text it was taken in, which ``ragvet relabel`` re-anchors
the label from once the document changed. In the document of that hash the anchor must
read as stored: one that does not is stale (the label was moved by hand) and refused.
``{doc}``
    Document-level relevance: any chunk of the doc satisfies it.
``{chunk, chunking}``
    A chunk id valid under the named chunking of ``params.yaml``. The doc is
    chunked under that spec and the chunk's span taken, so the label maps onto
    every other chunking.
``{any: [ref, ref, ...]}``
    One unit satisfied by any one of its alternatives, each itself one of the
    four forms above: the answer spans of several annotators, for instance.
    Identical alternatives count once, and a single alternative is a plain unit.
    Every alternative's chunks are relevant chunks.

Every form becomes an :class:`~ragvet.schema.EvidenceUnit`. Matching is
case-sensitive and never fuzzy: a quote that is almost there is reported with a
hint, never guessed.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ragvet.chunking import chunk_document, chunking_problems
from ragvet.errors import Problem
from ragvet.schema import Chunk, Doc, EvidenceUnit, ProjectedUnit, label_text
from ragvet.text.values import as_id, is_int, kind_of, nfc

REFERENCE_KEYS = ("doc", "quote", "occurrence", "start", "end", "text", "anchor", "chunk", "chunking", "any")
ANCHOR_KEYS = ("prefix", "suffix", "doc_sha256")  # a quote's anchor also has `start`
CONTEXT = 32  # characters of prefix and suffix, as Hypothesis stores them
ANCHOR_FIX = "run `ragvet freeze-labels` to write the anchor of where the label points now, or restore the label"
FORMS = "{doc, quote}, {doc, start, end}, {doc} or {chunk, chunking}"

_WS = re.compile(r"\s+")
_MAX_OFFSETS_SHOWN = 8
_SNIPPET = 30
_MAX_SUGGESTION_LOOKUPS = 50  # difflib over a big corpus is slow: stop suggesting after this many unknown ids


# --- whitespace-normalised matching ------------------------------------------------


def normalise_whitespace(text: str) -> str:
    """Every run of whitespace becomes one space, and the ends are stripped."""
    return _WS.sub(" ", text).strip()


def normalise_whitespace_index(text: str) -> tuple[str, list[int]]:
    """Collapse each run of whitespace to one space, for matching only.

    Returns ``(normalised, index_map)`` with ``len(index_map) == len(normalised)``:
    ``index_map[i]`` is the offset in ``text`` of normalised character ``i`` (for
    a collapsed run, the run's first character). The ends are *not* stripped, so
    the map stays a plain left-to-right correspondence.
    """
    parts: list[str] = []
    index: list[int] = []
    pos = 0
    for match in _WS.finditer(text):
        start, end = match.span()
        if start > pos:
            parts.append(text[pos:start])
            index.extend(range(pos, start))
        parts.append(" ")
        index.append(start)
        pos = end
    if pos < len(text):
        parts.append(text[pos:])
        index.extend(range(pos, len(text)))
    return "".join(parts), index


def find_quote(text: str, quote: str) -> list[tuple[int, int]]:
    """Every occurrence of ``quote`` in ``text``, whitespace-normalised, as ``(start, end)``
    spans in original coordinates: the first to the last matched character.

    Overlapping occurrences count: a quote that matches twice is ambiguous either way.
    Each place the quote's first word occurs is tried in turn, every later whitespace
    run standing for any whitespace run: no offset map (a big corpus costs no memory)
    and no regex compiled per quote (~120 us each, most of validate at 100,000 cases).
    """
    words = normalise_whitespace(quote).split(" ")
    if words == [""]:
        return []
    spans = []
    start = text.find(words[0])
    while start != -1:
        end = _rest_matches(text, start + len(words[0]), words[1:])
        if end is not None:
            spans.append((start, end))
        start = text.find(words[0], start + 1)
    return spans


def _rest_matches(text: str, pos: int, words: list[str]) -> int | None:
    """Where ``words`` end when each follows a whitespace run from ``pos`` on, else ``None``.
    A word starts with a non-space, so the run is taken whole: the one way ``\\s+`` can match."""
    for word in words:
        gap = _WS.match(text, pos)
        if gap is None or not text.startswith(word, gap.end()):
            return None
        pos = gap.end() + len(word)
    return pos


def _excerpt(text: str, start: int, end: int) -> str:
    """A short, one-line excerpt of ``text[start:end]`` with ellipses where it was cut."""
    lo, hi = max(0, start), min(len(text), end)
    body = normalise_whitespace(text[lo:hi])
    return f"{'…' if lo > 0 else ''}{body}{'…' if hi < len(text) else ''}"


def _not_found_hint(text: str, quote: str) -> str:
    """Why a quote was not found: another Unicode spelling of the same characters, a
    letter-case difference, or where it stops matching."""
    needle = normalise_whitespace(quote)
    flat, index = normalise_whitespace_index(text)
    if nfc(needle) != needle or nfc(flat) != flat:
        if nfc(needle) in nfc(flat):
            return (
                "it occurs with the same characters spelled differently in Unicode (composed vs decomposed "
                "accents, NFC vs NFD): normalise the doc or the quote to NFC, e.g. "
                "python -c \"import unicodedata,sys; print(unicodedata.normalize('NFC', sys.stdin.read()))\""
            )
    folded = flat.casefold().find(needle.casefold()) if len(flat.casefold()) == len(flat) else -1
    if folded != -1:
        at = index[folded]
        return f"it occurs with different letter case at offset {at}: {_excerpt(text, at, at + len(needle) + 10)!r}"
    # The longest prefix of the needle found in the doc (prefixes found are closed under shortening).
    lo, hi, best_at = 0, len(needle), -1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        at = flat.find(needle[:mid])
        if at != -1:
            lo, best_at = mid, at
        else:
            hi = mid - 1
    if lo >= min(8, len(needle) // 2) and best_at != -1:
        start = index[best_at]
        where = index[best_at + lo - 1] + 1
        doc_next = _excerpt(text, where, where + _SNIPPET).lstrip("…")
        quote_next = needle[lo : lo + _SNIPPET]
        return (
            f"its first {lo} characters match at offset {start} ({_excerpt(text, start, where)!r}), "
            f"then the doc reads {doc_next!r} where the quote reads {quote_next!r}"
        )
    return "not even its first few characters occur in the doc"


@functools.lru_cache(maxsize=256)  # every label of a document stores its hash: hashed once a document
def doc_sha256(text: str) -> str:
    """The content hash an anchor records: sha256 of the document's text as ragvet reads it, hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def stored_anchor(text: str, start: int, end: int, quote: bool) -> dict[str, Any]:
    """The ``anchor`` of a label covering ``text[start:end]``: a quote's records its start too,
    a span's position is its own start and end."""
    anchor: dict[str, Any] = {
        "prefix": text[max(0, start - CONTEXT) : start],
        "suffix": text[end : end + CONTEXT],
        "doc_sha256": doc_sha256(text),
    }
    return {**anchor, "start": start} if quote else anchor


# --- resolving references ------------------------------------------------------------


class EvidenceResolver:
    """Resolves references against one corpus, caching what is costly per doc.

    ``chunkings`` is ``params["chunking"]``: name → spec. Use one resolver for a
    whole cases file, so each doc is chunked at most once per chunking.
    """

    def __init__(self, docs: Mapping[str, Doc], chunkings: Mapping[str, Any] | None = None):
        self.docs = docs
        self.chunkings = dict(chunkings or {})
        self._chunks: dict[tuple[str, str], list[Chunk]] = {}
        self._chunking_ok: dict[str, bool] = {}
        self._suggestions: dict[str, list[str]] = {}
        self._hashes: dict[str, str] = {}
        self.outdated: dict[str, int] = {}  # doc id -> labels anchored in an earlier text of it

    # -- the public entry point -------------------------------------------------------

    def resolve(self, ref: Any, where: str, role: str = "evidence") -> tuple[EvidenceUnit | None, list[Problem]]:
        """Resolve one reference. Returns the unit, or ``None`` and every problem found.

        ``where`` is ``file:line (case id)``; ``role`` says which reference of the
        case this is (``evidence 2``, ``claim 1 evidence 1``) and starts each message.
        """
        if not isinstance(ref, dict):
            return None, [
                Problem(
                    where,
                    f"{role}: a reference must be a mapping, got {kind_of(ref)} {ref!r}",
                    f'write one of {FORMS}, e.g. {{doc: leave-policy, quote: "carry up to five days"}}',
                )
            ]
        problems = self._key_problems(ref, where, role)
        if "any" in ref:
            unit = self._resolve_any(ref, where, role, problems)
        elif "chunk" in ref or "chunking" in ref:
            unit = self._resolve_chunk(ref, where, role, problems)
        elif "doc" in ref:
            unit = self._resolve_doc(ref, where, role, problems)
        else:
            problems.append(
                Problem(
                    where,
                    f"{role}: the reference {ref!r} matches none of the four forms",
                    f"write one of {FORMS}",
                )
            )
            unit = None
        return (None, problems) if problems else (unit, [])

    # -- forms ------------------------------------------------------------------------

    def _key_problems(self, ref: dict, where: str, role: str) -> list[Problem]:
        problems = []
        for key in ref:
            if key in REFERENCE_KEYS:
                continue
            close = difflib.get_close_matches(str(key), REFERENCE_KEYS, n=1)
            hint = f"did you mean `{close[0]}`? " if close else ""
            problems.append(
                Problem(
                    where,
                    f"{role}: unknown key `{key}` in an evidence reference",
                    f"{hint}a reference takes only: {', '.join(REFERENCE_KEYS)} (as {FORMS})",
                )
            )
        return problems

    def _resolve_any(self, ref: dict, where: str, role: str, problems: list[Problem]) -> EvidenceUnit | None:
        extra = [key for key in ref if key != "any" and key in REFERENCE_KEYS]
        if extra:
            problems.append(
                Problem(
                    where,
                    f"{role}: an {{any: [...]}} reference cannot also have {', '.join(extra)}",
                    "put every alternative inside the `any` list, e.g. {any: [{doc: a, start: 0, end: 9}, {doc: b}]}",
                )
            )
            return None
        alternatives = ref["any"]
        if not isinstance(alternatives, list) or not alternatives:
            got = "an empty list" if alternatives == [] else f"{kind_of(alternatives)} {alternatives!r}"
            problems.append(
                Problem(
                    where,
                    f"{role}: `any` must be a non-empty list of references, got {got}",
                    f"list the alternatives, each one of {FORMS}",
                )
            )
            return None
        units = []
        for index, alternative in enumerate(alternatives, start=1):
            unit, found = self.resolve(alternative, where, f"{role} alternative {index}")
            problems.extend(found)
            if unit is not None:
                units.append(unit)
        return None if problems else EvidenceUnit.any_of(units)

    def _resolve_doc(self, ref: dict, where: str, role: str, problems: list[Problem]) -> EvidenceUnit | None:
        has_quote = "quote" in ref
        has_offsets = "start" in ref or "end" in ref
        if has_quote and has_offsets:
            problems.append(
                Problem(
                    where,
                    f"{role}: give either a quote or start/end offsets, not both",
                    "keep the quote (it survives edits elsewhere in the doc) and remove start/end, or the reverse",
                )
            )
            return None
        if "occurrence" in ref and not has_quote:
            problems.append(
                Problem(
                    where,
                    f"{role}: `occurrence` only applies to a quote",
                    "remove `occurrence`, or add the `quote`",
                )
            )
        if "text" in ref and not has_offsets:
            problems.append(
                Problem(
                    where,
                    f"{role}: `text` only applies to start/end offsets (the text they cover)",
                    "remove `text`, or give `start` and `end`",
                )
            )
        if "anchor" in ref and not (has_quote or has_offsets):
            problems.append(Problem(where, f"{role}: `anchor` only applies to a quote or a span", "remove `anchor`"))
        doc = self._doc(ref["doc"], where, role, problems)
        if doc is None:
            return None
        if not (has_quote or has_offsets):
            return EvidenceUnit(doc.doc_id)
        if has_quote:
            unit = self._resolve_quote(doc, ref, where, role, problems)
        else:
            unit = self._resolve_offsets(doc, ref, where, role, problems)
        if unit is not None and "anchor" in ref:
            self._check_anchor(doc, ref, unit, f"{where}", role, problems)
        return unit

    def _check_anchor(self, doc: Doc, ref: dict, unit: EvidenceUnit, where: str, role: str, problems: list) -> None:
        """An anchor has its keys, and in the document of its hash reads as stored. Taken in
        another text of the document, it is out of date: counted, for one warning a document."""
        anchor, quote = ref["anchor"], "quote" in ref
        keys = (*ANCHOR_KEYS, "start") if quote else ANCHOR_KEYS
        shape = "{prefix: ..., suffix: ..., doc_sha256: ...%s}" % (", start: ..." if quote else "")
        fix = f"write it as {shape} or remove it: {ANCHOR_FIX}"
        if not isinstance(anchor, dict) or set(anchor) != set(keys):
            got = sorted(map(str, anchor)) if isinstance(anchor, dict) else kind_of(anchor)
            problems.append(Problem(where, f"{role}: `anchor` must have exactly {', '.join(keys)}, got {got}", fix))
            return
        if not all(isinstance(anchor[key], str) for key in ANCHOR_KEYS) or (quote and not is_int(anchor["start"])):
            problems.append(Problem(where, f"{role}: `anchor` values have the wrong types: {anchor!r}", fix))
            return
        if not quote and "text" not in ref:
            problems.append(
                Problem(where, f"{role}: an anchored span needs the `text` it covers", "add `text`, or remove `anchor`")
            )
            return
        if anchor["doc_sha256"] != self._hash(doc):
            self.outdated[doc.doc_id] = self.outdated.get(doc.doc_id, 0) + 1
            return
        assert unit.start is not None and unit.end is not None
        expected = stored_anchor(doc.text, unit.start, unit.end, quote)
        wrong = [key for key in keys if anchor[key] != expected[key]]
        if wrong:
            verb = "do" if len(wrong) > 1 else "does"
            problems.append(
                Problem(
                    where,
                    f"{role}: the anchor's {' and '.join(wrong)} {verb} not read as doc {doc.doc_id!r} does around "
                    "the label, though the doc is the text the anchor was taken in: the label moved without its anchor",
                    ANCHOR_FIX,
                )
            )

    def _hash(self, doc: Doc) -> str:
        if doc.doc_id not in self._hashes:
            self._hashes[doc.doc_id] = doc_sha256(doc.text)
        return self._hashes[doc.doc_id]

    def outdated_warnings(self, where: str) -> list[Problem]:
        """One warning for each document whose labels carry the anchor of an earlier text of it."""
        return [
            Problem(
                where,
                f"{count} label{'s' if count > 1 else ''} of doc {doc_id!r} carry the anchor of an earlier text "
                "of it (the doc changed since they were anchored)",
                "run `ragvet relabel` to re-anchor them from their stored text and context",
            )
            for doc_id, count in sorted(self.outdated.items())
        ]

    def _doc(self, value: Any, where: str, role: str, problems: list[Problem]) -> Doc | None:
        doc_id = as_id(value)
        if not doc_id:
            problems.append(
                Problem(
                    where,
                    f"{role}: `doc` must be a non-empty doc id, got {value!r}",
                    "set `doc` to a doc id of the corpus (a file path without suffix, or a JSONL doc_id)",
                )
            )
            return None
        doc = self.docs.get(doc_id)
        if doc is None:
            close = self._suggest(doc_id)
            hint = (
                f"did you mean {' or '.join(repr(c) for c in close)}?"
                if close
                else ("check it against the corpus: doc ids are file paths without suffix, or a JSONL line's doc_id")
            )
            problems.append(Problem(where, f"{role}: unknown doc {doc_id!r}", hint))
        return doc

    def _suggest(self, doc_id: str) -> list[str]:
        if doc_id not in self._suggestions:
            if len(self._suggestions) >= _MAX_SUGGESTION_LOOKUPS:
                return []
            self._suggestions[doc_id] = difflib.get_close_matches(doc_id, list(self.docs), n=3, cutoff=0.6)
        return self._suggestions[doc_id]

    def _resolve_quote(
        self, doc: Doc, ref: dict, where: str, role: str, problems: list[Problem]
    ) -> EvidenceUnit | None:
        quote, occurrence = ref["quote"], ref.get("occurrence")
        if not isinstance(quote, str) or not normalise_whitespace(quote):
            problems.append(
                Problem(
                    where,
                    f"{role}: `quote` must be non-empty text, got {quote!r}",
                    "copy the supporting passage from the doc into `quote` (quote it in YAML if it has a colon)",
                )
            )
            return None
        if occurrence is not None and (not is_int(occurrence) or occurrence < 1):
            problems.append(
                Problem(
                    where,
                    f"{role}: `occurrence` must be an integer ≥ 1, got {occurrence!r}",
                    "set `occurrence: 1` for the first occurrence, 2 for the second, and so on",
                )
            )
            return None
        spans = find_quote(doc.text, quote)
        short = normalise_whitespace(quote)
        short = short if len(short) <= 60 else short[:60] + "…"
        if not spans:
            problems.append(
                Problem(
                    where,
                    f"{role}: quote {short!r} not found in doc {doc.doc_id!r}; {_not_found_hint(doc.text, quote)}",
                    "copy the quote exactly from the doc (only whitespace may differ), or fix the `doc`",
                )
            )
            return None
        if occurrence is None and len(spans) > 1:
            shown = ", ".join(str(s) for s, _ in spans[:_MAX_OFFSETS_SHOWN])
            more = f" and {len(spans) - _MAX_OFFSETS_SHOWN} more" if len(spans) > _MAX_OFFSETS_SHOWN else ""
            problems.append(
                Problem(
                    where,
                    f"{role}: quote {short!r} is ambiguous: found {len(spans)} times in doc "
                    f"{doc.doc_id!r} at offsets {shown}{more}",
                    f"add `occurrence: n` (1 to {len(spans)}) to pick one, or lengthen the quote until it is unique",
                )
            )
            return None
        if occurrence is not None and occurrence > len(spans):
            problems.append(
                Problem(
                    where,
                    f"{role}: `occurrence: {occurrence}` but quote {short!r} occurs "
                    f"{len(spans)} time{'s' if len(spans) != 1 else ''} in doc {doc.doc_id!r}",
                    f"set `occurrence` between 1 and {len(spans)}" if len(spans) > 1 else "remove `occurrence`",
                )
            )
            return None
        start, end = spans[(occurrence or 1) - 1]
        return EvidenceUnit(doc.doc_id, start, end)

    def _resolve_offsets(
        self, doc: Doc, ref: dict, where: str, role: str, problems: list[Problem]
    ) -> EvidenceUnit | None:
        start, end, size = ref.get("start"), ref.get("end"), len(doc.text)
        if not (is_int(start) and is_int(end)):
            problems.append(
                Problem(
                    where,
                    f"{role}: `start` and `end` must both be integers, got start={start!r}, end={end!r}",
                    f"give character offsets [start, end) into doc {doc.doc_id!r}, or use a `quote` instead",
                )
            )
            return None
        if not 0 <= start < end <= size:
            why = "start must be before end" if start >= end else f"doc {doc.doc_id!r} has {size} characters"
            problems.append(
                Problem(
                    where,
                    f"{role}: offsets [{start}:{end}] are out of range ({why})",
                    f"use 0 ≤ start < end ≤ {size}; a `quote` is easier to keep right when the doc changes",
                )
            )
            return None
        if "text" in ref and not self._reads(doc, ref, where, role, problems):
            return None
        return EvidenceUnit(doc.doc_id, start, end)

    @staticmethod
    def _reads(doc: Doc, ref: dict, where: str, role: str, problems: list[Problem]) -> bool:
        """Whether the offsets still cover the label's ``text`` (compared as :func:`label_text`
        does: whitespace runs and Unicode spelling aside); a located problem when not."""
        start, end, text = ref["start"], ref["end"], ref["text"]
        if not isinstance(text, str):
            problems.append(
                Problem(where, f"{role}: `text` must be a string, got {text!r}", "quote the text the offsets cover")
            )
            return False
        found = doc.text[start:end]
        if label_text(found) == label_text(text):
            return True
        problems.append(
            Problem(
                where,
                f"{role}: offsets [{start}:{end}] of doc {doc.doc_id!r} read {_excerpt(doc.text, start, end)!r}, "
                f"not the label's text {_excerpt(text, 0, len(text))!r}: the doc changed under the label",
                "run `ragvet relabel` to re-anchor it from its stored anchor (without one: `ragvet relabel --from "
                "REV`, REV the last revision where the label matched), or correct start, end and text",
            )
        )
        return False

    def _resolve_chunk(self, ref: dict, where: str, role: str, problems: list[Problem]) -> EvidenceUnit | None:
        extra = [key for key in ("doc", "quote", "occurrence", "start", "end", "text") if key in ref]
        if extra:
            problems.append(
                Problem(
                    where,
                    f"{role}: a {{chunk, chunking}} reference cannot also have {', '.join(extra)}",
                    "the chunk id names its doc already: remove them, or drop `chunk`/`chunking` for another form",
                )
            )
            return None
        if "chunk" not in ref or "chunking" not in ref:
            missing = "chunking" if "chunk" in ref else "chunk"
            problems.append(
                Problem(
                    where,
                    f"{role}: a chunk reference needs both `chunk` and `chunking`; `{missing}` is missing",
                    "a chunk id is only valid under the chunking that made it: name it, e.g. "
                    "{chunk: leave-policy#3, chunking: fixed-300}",
                )
            )
            return None
        name, chunk_id = ref["chunking"], ref["chunk"]
        if not isinstance(name, str) or name not in self.chunkings:
            defined = ", ".join(sorted(map(str, self.chunkings))) or "none"
            problems.append(
                Problem(
                    where,
                    f"{role}: unknown chunking {name!r}",
                    f"use a chunking defined in params.yaml (defined: {defined})",
                )
            )
            return None
        if not isinstance(chunk_id, str) or "#" not in chunk_id:
            problems.append(
                Problem(
                    where,
                    f"{role}: chunk id {chunk_id!r} is not of the form <doc_id>#<ordinal>",
                    "write the chunk id as ragvet's chunk stage does, e.g. leave-policy#3",
                )
            )
            return None
        doc_part = chunk_id.rsplit("#", 1)[0]
        doc = self._doc(doc_part, where, role, problems)
        if doc is None:
            return None
        chunks = self._chunk(name, doc, where, role, problems)
        if chunks is None:
            return None
        for chunk in chunks:
            if chunk.chunk_id == chunk_id:
                return EvidenceUnit(doc.doc_id, chunk.start, chunk.end)
        valid = f"{chunks[0].chunk_id} to {chunks[-1].chunk_id}" if chunks else "none"
        problems.append(
            Problem(
                where,
                f"{role}: unknown chunk id {chunk_id!r}: under chunking {name!r} doc {doc.doc_id!r} "
                f"has {len(chunks)} chunk{'s' if len(chunks) != 1 else ''} ({valid})",
                "fix the ordinal, or name the chunking the label was made with",
            )
        )
        return None

    def _chunk(self, name: str, doc: Doc, where: str, role: str, problems: list[Problem]) -> list[Chunk] | None:
        spec = self.chunkings[name]
        if name not in self._chunking_ok:
            self._chunking_ok[name] = not chunking_problems(name, spec, f"params.yaml: chunking.{name}")
        if not self._chunking_ok[name]:
            problems.append(
                Problem(
                    where,
                    f"{role}: chunking {name!r} is invalid, so its chunk ids cannot be resolved",
                    f"fix params.yaml: chunking.{name} first (see its own problems)",
                )
            )
            return None
        key = (name, doc.doc_id)
        if key not in self._chunks:
            self._chunks[key] = chunk_document(doc, spec)
        return self._chunks[key]


# --- evidence through a chunking ---------------------------------------------------


def space_positions(text: str) -> np.ndarray:
    """The offsets of ``text``'s whitespace characters, ascending: those ``str.isspace``
    matches (numpy's ``isspace`` tests each code point by the same table, so a whole doc
    is classified in C rather than one Python call a character)."""
    points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), "<U1")
    return np.flatnonzero(np.strings.isspace(points))


def nonspace_before(text: str, offsets: Iterable[int]) -> list[int]:
    """How many non-whitespace characters of ``text`` precede each offset.

    Span coverage counts a span's non-whitespace characters only (docs/DESIGN.md,
    "Metric definitions"): chunkers trim the whitespace at chunk boundaries, so a
    span that starts with a space, or runs across two sentences, would otherwise
    never be fully covered. Offsets mapped through this function are *counted
    coordinates*: the length of ``[a, b)`` there is its number of non-whitespace
    characters, and a union of intervals keeps that meaning. The vectorised engine
    counts through :class:`CountedTexts`, the same rule over a whole corpus.
    """
    at = np.clip(np.asarray(list(offsets), np.int64), 0, len(text))
    spaces = space_positions(text[: int(at.max(initial=0))])  # nothing past the last offset counts
    return (at - np.searchsorted(spaces, at)).tolist()


class CountedTexts(Mapping[str, str]):
    """The docs' texts, and where their whitespace lies, so that :func:`nonspace_before`
    is answered for any number of (doc, offset) pairs by one sorted search, never a
    rescan of a text: the docs lie one after another on one line, and their whitespace
    positions on it form one sorted array, found once. Memory: 4 bytes a whitespace
    character (8 past 2**31 characters in all)."""

    def __init__(self, texts: Mapping[str, str]) -> None:
        self._texts = texts
        self._number = {doc_id: n for n, doc_id in enumerate(texts)}
        self._length = np.fromiter(map(len, texts.values()), np.int64, len(texts))
        self._start = np.cumsum(self._length) - self._length  # where each doc starts on the line
        kind = np.int32 if self._length.sum() < 2**31 else np.int64
        found = [(space_positions(text) + start).astype(kind) for text, start in zip(texts.values(), self._start)]
        counts = np.fromiter(map(len, found), np.int64, len(found))
        self._before = np.cumsum(counts) - counts  # whitespace characters of the docs before each
        self._spaces = np.concatenate([np.zeros(0, kind), *found])

    @classmethod
    def of(cls, texts: Mapping[str, str]) -> CountedTexts:
        """``texts`` itself when it is one already (its positions are kept), else a new one over them."""
        return texts if isinstance(texts, CountedTexts) else cls(texts)

    def __getitem__(self, doc_id: str) -> str:
        return self._texts[doc_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._texts)

    def __len__(self) -> int:
        return len(self._texts)

    def numbers(self, doc_ids: Sequence[str]) -> np.ndarray:
        """Each doc's number, for :meth:`before` (a KeyError for a doc the texts lack)."""
        return np.fromiter(map(self._number.__getitem__, doc_ids), np.int64, len(doc_ids))

    def before(self, docs: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """:func:`nonspace_before` of each ``offsets[i]`` in doc number ``docs[i]`` (:meth:`numbers`)."""
        at = np.clip(offsets, 0, self._length[docs])
        on_line = (self._start[docs] + at).astype(self._spaces.dtype)  # a search in the array's own type: no copy
        order = np.argsort(on_line)  # sorted keys search from where the last one ended: 5x fewer cache misses
        spaces = np.empty(len(on_line), np.int64)
        spaces[order] = np.searchsorted(self._spaces, on_line[order])
        return at - (spaces - self._before[docs])


def project_unit(
    unit: EvidenceUnit, doc_chunks: Sequence[Chunk], texts: Mapping[str, str] | None = None
) -> ProjectedUnit:
    """``unit`` seen through one chunking: the chunks of its doc that overlap its span
    by at least one character, each with the overlap ``(start, end)``. A doc-level
    unit's pieces are all its doc's chunks, whole. A unit with alternatives projects
    each of them (see :class:`ProjectedUnit`).

    With the docs' ``texts``, a span's pieces and length are in counted coordinates
    (:func:`nonspace_before`), as coverage is measured; without them, in doc
    coordinates, which is all that finding the relevant chunks needs.

    ``doc_chunks`` should be the doc's chunks (for alternatives, the chunks of every
    doc in ``unit.doc_ids``); chunks of other docs are ignored.
    """
    if unit.alternatives:
        alternatives = tuple(project_unit(target, doc_chunks, texts) for target in unit.alternatives)
        return ProjectedUnit(unit.label(), False, 0, {}, alternatives)
    own = [chunk for chunk in doc_chunks if chunk.doc_id == unit.doc_id]
    if unit.doc_level:
        return ProjectedUnit(unit.label(), True, 0, {c.chunk_id: (c.start, c.end) for c in own})
    assert unit.start is not None and unit.end is not None
    pieces = {}
    for chunk in own:
        lo, hi = max(unit.start, chunk.start), min(unit.end, chunk.end)
        if lo < hi:
            pieces[chunk.chunk_id] = (lo, hi)
    if texts is None or not pieces:  # a span no chunk overlaps is unavailable at any length
        return ProjectedUnit(unit.label(), False, unit.end - unit.start, pieces)
    bounds = [unit.start, unit.end, *(bound for piece in pieces.values() for bound in piece)]
    start, end, *counted = nonspace_before(texts[unit.doc_id], bounds)
    counted_pieces = {chunk_id: (counted[2 * n], counted[2 * n + 1]) for n, chunk_id in enumerate(pieces)}
    return ProjectedUnit(unit.label(), False, end - start, counted_pieces)


def relevant_chunks(units: Iterable[EvidenceUnit], chunks_by_doc: Mapping[str, Sequence[Chunk]]) -> set[str]:
    """Chunk ids overlapping any evidence span by at least one character; for a
    doc-level unit, every chunk of the doc. Every alternative of an ``{any: [...]}``
    unit counts: each annotator's span is relevant."""
    relevant: set[str] = set()
    for unit in units:
        for target in unit.targets:
            relevant.update(project_unit(target, chunks_by_doc.get(target.doc_id, ())).pieces)
    return relevant


def chunks_by_doc(chunks: Iterable[Chunk]) -> dict[str, list[Chunk]]:
    """Group chunks by doc id, each doc's chunks in ordinal order."""
    grouped: dict[str, list[Chunk]] = defaultdict(list)
    for chunk in chunks:
        grouped[chunk.doc_id].append(chunk)
    return {doc_id: sorted(group, key=lambda c: c.ordinal) for doc_id, group in sorted(grouped.items())}
