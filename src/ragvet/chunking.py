"""Chunking strategies: every document becomes a list of character spans.

A chunk is only ever a ``(start, end)`` span of the document's original text, so
``chunk.text == doc.text[start:end]`` holds by construction and an evidence span
can be projected onto any chunking. Strategies (``params.yaml: chunking.<name>``):

``fixed``
    Windows of ``window`` characters or ``\\S+`` tokens advancing by
    ``window - overlap``, stopping at the first window that reaches the end.
    Character windows are never trimmed: chunk labels ``doc#n`` mean exactly
    ``[n*step, n*step+window)``, and datasets labelled that way rely on it.
``sentences``
    Sentences (rules in :func:`_sentence_cuts`) packed greedily while the span
    from the first sentence's start to the last one's end is ``<= max_chars``.
    A longer sentence is cut into windows of ``max_chars``.
``markdown``
    Heading-aware recursive splitting (rules in :func:`_split`): a section that
    fits stays whole, a bigger one is split by its next heading level, then by
    paragraphs, sentences and finally windows, and sibling pieces are re-packed.

Why hand-written rather than a library. Chunk boundaries are part of the
reproducibility contract: they decide chunk ids, so a splitter that changed its
heuristics in a minor release would silently move ids, invalidate
``{chunk, chunking}`` labels and break byte-identical baselines. The candidates
also fail the offset requirement or the rules we need:

* langchain-text-splitters recovers ``start_index`` by searching for each
  output string in the input (``str.find``), which has mis-placed repeated text
  (langchain issues #16579, #21475), and it pulls in langchain-core;
* pysbd's ``char_span`` has returned wrong offsets and its cleaning has dropped
  characters (pySBD issues #49, #83), and it only does sentences;
* semchunk can return offsets, but its split rules know neither markdown
  headings nor fenced code, and it sizes chunks with a token counter.

The code below never searches for text: every span is computed from positions
in the original string, and every step keeps all non-whitespace characters.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ragvet.errors import Problem
from ragvet.schema import Chunk, Doc, chunk_id_for
from ragvet.text.values import SAFE_NAME_FIX, is_int, is_positive_int, is_safe_name

Span = tuple[int, int]

_TOKEN = re.compile(r"\S+")
# Terminal punctuation, then any closing quotes/brackets, then whitespace or the line end.
_SENTENCE_END = re.compile(r"[.!?]+[\"'\u2019\u201d)\]]*(?=\s|$)")
# CommonMark ATX heading: up to 3 spaces of indent, 1-6 '#', then a space or the line end.
_HEADING = re.compile(r" {0,3}(#{1,6})(?=\s|$)")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
# Lines that start a new markdown block: list items, block quotes, table rows.
_BLOCK_START = re.compile(r" {0,3}(?:[-*+]\s|\d{1,9}[.)]\s|>|\|)")


# --- public API -------------------------------------------------------------------


def chunk_document(doc: Doc, spec: dict) -> list[Chunk]:
    """Chunk one document under a validated spec.

    Ordinals follow text order, so ``<doc_id>#<ordinal>`` is stable for the same
    text and spec. Each chunk carries a copy of the doc's metadata, because
    retrievers filter chunks by it and must not share one mutable dict.
    """
    spans = STRATEGIES[spec["strategy"]](doc.text, spec)
    return [
        Chunk(
            chunk_id_for(doc.doc_id, ordinal), doc.doc_id, ordinal, start, end, doc.text[start:end], dict(doc.metadata)
        )
        for ordinal, (start, end) in enumerate(spans)
    ]


def chunk_corpus(docs: Iterable[Doc], spec: dict) -> list[Chunk]:
    """Chunk every document; sorted by ``(doc_id, ordinal)`` so the output does
    not depend on the order the corpus was read in."""
    chunks = [chunk for doc in docs for chunk in chunk_document(doc, spec)]
    return sorted(chunks, key=lambda chunk: (chunk.doc_id, chunk.ordinal))


def chunking_problems(name: str, spec: dict, where: str) -> list[Problem]:
    """Every problem with one ``chunking.<name>`` entry of params.yaml.

    Collected, never raised one at a time, so the user fixes params in one pass.
    Once this returns nothing, :func:`chunk_document` may trust the spec.
    """
    problems = []
    if not is_safe_name(name):
        what = f"chunking name {name!r} cannot be used in stage names and file paths"
        problems.append(Problem(where, what, SAFE_NAME_FIX))
    if not isinstance(spec, dict):
        return problems + [
            Problem(
                where,
                f"chunking {name!r} must be a mapping, got {type(spec).__name__}",
                f"write it as keys, e.g. `strategy: sentences` and `max_chars: 600` ({_supported()})",
            )
        ]
    strategy = spec.get("strategy")
    if not isinstance(strategy, str) or strategy not in STRATEGIES:
        got = "is missing" if strategy is None else f"is {strategy!r}, which is unknown"
        return problems + [Problem(where, f"key `strategy` {got}", f"set `strategy` to one of: {_supported()}")]
    return problems + _key_problems(spec, where) + _value_problems(spec, where)


# --- fixed windows ----------------------------------------------------------------


def _fixed_spans(text: str, spec: dict) -> list[Span]:
    """``fixed`` dispatches on ``unit``: the two units share window/overlap semantics."""
    if spec["unit"] == "tokens":
        return _token_windows(text, spec["window"], spec["overlap"])
    return _char_windows(text, spec["window"], spec["overlap"])


def _char_windows(text: str, window: int, overlap: int) -> list[Span]:
    """Exact windows ``[i*step, min(i*step+window, len))``, untrimmed.

    Stopping at the first window that reaches the end avoids a trailing window
    that lies wholly inside the previous one. A whitespace-only text has nothing
    to retrieve, so it has no chunks.
    """
    if not text.strip():
        return []
    spans = []
    for start in range(0, len(text), window - overlap):
        spans.append((start, min(start + window, len(text))))
        if spans[-1][1] == len(text):
            break
    return spans


def _token_windows(text: str, window: int, overlap: int) -> list[Span]:
    """Windows of ``window`` whitespace-separated tokens, from the first token's
    start to the last token's end, so the whitespace between windows is dropped."""
    tokens = [match.span() for match in _TOKEN.finditer(text)]
    spans = []
    for first in range(0, len(tokens), window - overlap):
        last = min(first + window, len(tokens)) - 1
        spans.append((tokens[first][0], tokens[last][1]))
        if last == len(tokens) - 1:
            break
    return spans


# --- markdown line layout ---------------------------------------------------------


@dataclass(frozen=True)
class _Line:
    """One ``\\n``-delimited line: ``end`` excludes the line break.

    ``kind`` is ``blank``, ``heading`` (with ``level``), ``fence`` (a code fence
    line), ``code`` (inside a fenced block), ``block`` (starts a list item, quote
    or table row) or ``text``.
    """

    start: int
    end: int
    kind: str
    level: int = 0


def _line_spans(text: str) -> list[Span]:
    """Line spans split on ``\\n`` only, so a ``\\r`` stays inside its line as whitespace."""
    spans, pos = [], 0
    while (newline := text.find("\n", pos)) >= 0:
        spans.append((pos, newline))
        pos = newline + 1
    spans.append((pos, len(text)))
    return spans


def _layout(text: str) -> list[_Line]:
    """Classify every line, tracking fenced code blocks.

    A ``#`` line inside a fence is code, not a heading. A fence closes only with
    the same character repeated at least as often (CommonMark); an unclosed fence
    runs to the end of the text, as CommonMark renders it.
    """
    lines, fence = [], None
    for start, end in _line_spans(text):
        content = text[start:end]
        opening = _FENCE.match(content)
        if fence is not None:
            closes = opening is not None and _closes(fence, opening.group(1), content[opening.end() :])
            lines.append(_Line(start, end, "fence" if closes else "code"))
            fence = None if closes else fence
        elif opening is not None and not (opening.group(1)[0] == "`" and "`" in content[opening.end() :]):
            fence = opening.group(1)
            lines.append(_Line(start, end, "fence"))
        else:
            lines.append(_classify(content, start, end))
    return lines


def _closes(fence: str, marker: str, rest: str) -> bool:
    """A closing fence repeats the opening character at least as often, with nothing after it."""
    return marker[0] == fence[0] and len(marker) >= len(fence) and not rest.strip()


def _classify(content: str, start: int, end: int) -> _Line:
    """Kind of a line outside fenced code."""
    if not content.strip():
        return _Line(start, end, "blank")
    heading = _HEADING.match(content)
    if heading is not None:
        return _Line(start, end, "heading", len(heading.group(1)))
    return _Line(start, end, "block" if _BLOCK_START.match(content) else "text")


# --- sentences --------------------------------------------------------------------


def _sentence_cuts(text: str, layout: list[_Line]) -> list[int]:
    """Positions where a sentence ends. The rules:

    * in prose (``text`` and ``block`` lines) after ``.``, ``!`` or ``?`` (runs
      such as ``?!`` or ``...`` included), plus any closing quotes or brackets,
      when whitespace or the line end follows; so ``3.5`` and ``e.g.x`` do not
      split, but ``e.g. x`` does (no abbreviation list: it would be
      language-specific, and a split only changes packing granularity);
    * at a blank line, i.e. a paragraph break;
    * before a list item, block quote or table row, so items are separate units
      (a list marker such as ``1.`` does not end a sentence);
    * around a heading line, which is always a sentence of its own;
    * around every line of a fenced code block and its fences: code has no
      sentence punctuation, and its lines are its natural units.

    A single line break inside a paragraph (soft wrap) is not a boundary.
    """
    cuts = []
    for line in layout:
        if line.kind in ("heading", "fence", "code"):
            cuts += [line.start, line.end]
        elif line.kind in ("blank", "block"):
            cuts.append(line.start)
        if line.kind in ("text", "block"):
            cuts += [match.end() for match in _SENTENCE_END.finditer(text, _prose_start(text, line), line.end)]
    return sorted(set(cuts))


def _prose_start(text: str, line: _Line) -> int:
    """Where a line's prose begins: after a list marker, so ``1.`` is no sentence end."""
    marker = _BLOCK_START.match(text, line.start, line.end) if line.kind == "block" else None
    return marker.end() if marker else line.start


def _sentences(text: str) -> list[Span]:
    """Sentence spans of the whole text, trimmed of surrounding whitespace."""
    return _parts(text, 0, len(text), _sentence_cuts(text, _layout(text)))


def _sentence_spans(text: str, spec: dict) -> list[Span]:
    """``sentences``: pack whole sentences up to ``max_chars``; cut only the
    sentences that cannot fit on their own."""
    limit = spec["max_chars"]
    return _pack([window for span in _sentences(text) for window in _windows(text, *span, limit)], limit)


# --- markdown ---------------------------------------------------------------------


def _markdown_spans(text: str, spec: dict) -> list[Span]:
    """``markdown``: split the whole text with separators from coarse to fine:
    heading levels 1..6, paragraphs (blank lines outside code), sentences."""
    layout = _layout(text)
    separators = [
        [line.start for line in layout if line.kind == "heading" and line.level == level] for level in range(1, 7)
    ]
    separators.append([line.start for line in layout if line.kind == "blank"])
    separators.append(_sentence_cuts(text, layout))
    whole = _trim(text, 0, len(text))
    return _split(text, whole, separators, spec["max_chars"]) if whole else []


def _split(text: str, span: Span, separators: list[list[int]], limit: int) -> list[Span]:
    """Recursive splitting of one trimmed span.

    A span that fits is kept whole (a section keeps its heading). Otherwise the
    first separator that cuts it into more than one part is used: splitting a
    ``## A`` section by level 2 gives one part, so level 3 is tried next. The
    text before the first cut (a preamble, or the section's own heading and
    intro) is a part like the others. When no separator cuts, fixed windows do.
    """
    if span[1] - span[0] <= limit:
        return [span]
    for index, cuts in enumerate(separators):
        parts = _parts(text, *span, cuts)
        if len(parts) > 1:
            return _pack_siblings(text, parts, separators[index + 1 :], limit)
    return _windows(text, *span, limit)


def _pack_siblings(text: str, parts: list[Span], finer: list[list[int]], limit: int) -> list[Span]:
    """Pack runs of sibling parts that fit; split the others on their own.

    A part that had to be split is emitted as its own pieces, never merged with
    its neighbours, so a chunk never straddles the boundary of a section that
    was too big to keep whole.
    """
    spans, run = [], []
    for part in parts:
        if part[1] - part[0] <= limit:
            run.append(part)
            continue
        spans += _pack(run, limit) + _split(text, part, finer, limit)
        run = []
    return spans + _pack(run, limit)


# --- shared helpers ---------------------------------------------------------------


def _trim(text: str, start: int, end: int) -> Span | None:
    """The span without surrounding whitespace, or None when nothing is left."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def _parts(text: str, start: int, end: int, cuts: list[int]) -> list[Span]:
    """Cut ``[start, end)`` at the sorted ``cuts`` inside it; trimmed, empty parts dropped.

    Trimming removes only whitespace, so the parts keep every other character.
    """
    inside = cuts[bisect.bisect_right(cuts, start) : bisect.bisect_left(cuts, end)]
    bounds = [start, *inside, end]
    trimmed = (_trim(text, a, b) for a, b in itertools.pairwise(bounds))
    return [span for span in trimmed if span is not None]


def _windows(text: str, start: int, end: int, limit: int) -> list[Span]:
    """Last-resort cut into windows of at most ``limit`` characters, no overlap.

    Each window starts at the next non-whitespace character and is trimmed, so no
    chunk begins or ends with whitespace. A span that fits comes back unchanged.
    """
    spans, pos = [], start
    while (window := _trim(text, pos, min(_skip_space(text, pos, end) + limit, end))) is not None:
        spans.append(window)
        pos = min(window[0] + limit, end)
    return spans


def _skip_space(text: str, pos: int, end: int) -> int:
    """First non-whitespace position at or after ``pos`` (``end`` if none)."""
    while pos < end and text[pos].isspace():
        pos += 1
    return pos


def _pack(spans: list[Span], limit: int) -> list[Span]:
    """Greedily merge consecutive spans while first start to last end is ``<= limit``.

    The merged span includes the whitespace between its pieces, so the chunk
    reads as the original text does.
    """
    packed: list[Span] = []
    for start, end in spans:
        if packed and end - packed[-1][0] <= limit:
            packed[-1] = (packed[-1][0], end)
        else:
            packed.append((start, end))
    return packed


# --- whole documents --------------------------------------------------------------


def _document_spans(text: str, spec: dict) -> list[Span]:
    """One chunk per document, the whole text. This is the chunking under which
    a doc-level run (a system that ranks documents, not passages) is scored:
    its chunk ``<doc_id>#0`` is the document."""
    return [(0, len(text))] if text.strip() else []


# --- validation -------------------------------------------------------------------

_KEYS = {
    "fixed": ("strategy", "unit", "window", "overlap"),
    "sentences": ("strategy", "max_chars"),
    "markdown": ("strategy", "max_chars"),
    "document": ("strategy",),
}
_UNITS = ("chars", "tokens")


def _supported() -> str:
    return ", ".join(sorted(STRATEGIES))


def _key_problems(spec: dict, where: str) -> list[Problem]:
    """Missing and unknown keys: an unknown key is usually a typo of a real one,
    which would otherwise be silently ignored."""
    strategy, expected = spec["strategy"], _KEYS[spec["strategy"]]
    problems = [
        Problem(where, f"key `{key}` is missing for strategy {strategy}", f"add `{key}` ({_describe(key)})")
        for key in expected
        if key not in spec
    ]
    problems += [
        Problem(
            where,
            f"key `{key}` is unknown for strategy {strategy}",
            f"remove it; strategy {strategy} takes: {', '.join(expected)}",
        )
        for key in sorted(map(str, spec))
        if key not in expected
    ]
    return problems


def _value_problems(spec: dict, where: str) -> list[Problem]:
    """Type and range of each present value; overlap is checked against window
    only when window itself is valid, so one mistake gives one problem."""
    problems = [
        Problem(where, f"key `{key}` must be a positive integer, got {spec[key]!r}", f"set `{key}` ({_describe(key)})")
        for key in ("window", "max_chars")
        if key in spec and not is_positive_int(spec[key])
    ]
    if "unit" in spec and spec["unit"] not in _UNITS:
        problems.append(Problem(where, f"key `unit` is {spec['unit']!r}", f"set `unit` ({_describe('unit')})"))
    if "overlap" in spec:
        overlap, window = spec["overlap"], spec.get("window")
        if not is_int(overlap) or overlap < 0:
            problems.append(
                Problem(
                    where,
                    f"key `overlap` must be an integer >= 0, got {overlap!r}",
                    f"set `overlap` ({_describe('overlap')})",
                )
            )
        elif is_positive_int(window) and overlap >= window:
            problems.append(
                Problem(
                    where,
                    f"key `overlap` ({overlap}) must be smaller than `window` ({window})",
                    "lower `overlap` below `window`, or windows would never advance",
                )
            )
    return problems


_SUMMARY = {
    "fixed": "windows of `window` units advancing by `window - overlap`; character windows are never trimmed",
    "sentences": "whole sentences packed greedily up to `max_chars`; a longer sentence is cut into windows",
    "markdown": "heading-aware recursive splitting: sections, then paragraphs, sentences and windows",
    "document": "one chunk per document, the whole text",
}


def strategies_doc() -> str:
    """The markdown table of every strategy and its keys, from :data:`_KEYS` and the
    descriptions validate prints, so that docs/inputs.md cannot drift from the code
    (a test compares them)."""
    rows = [
        f"| `{name}` | {_SUMMARY[name]} | "
        + ("; ".join(f"`{key}`: {_describe(key)}" for key in _KEYS[name][1:]) or "none")
        + " |"
        for name in sorted(STRATEGIES)
    ]
    return "\n".join(["| strategy | what it does | keys besides `strategy` |", "|---|---|---|", *rows]) + "\n"


def _describe(key: str) -> str:
    return {
        "strategy": f"one of: {_supported()}",
        "unit": "chars or tokens (whitespace-separated)",
        "window": "window length in units, an integer > 0 (not `size`: DVC's run cache ignores that key)",
        "overlap": "units shared by consecutive windows, an integer >= 0 and < window",
        "max_chars": "the most characters in one chunk, an integer > 0",
    }[key]


STRATEGIES: dict[str, Callable[[str, dict], list[Span]]] = {
    "fixed": _fixed_spans,
    "sentences": _sentence_spans,
    "markdown": _markdown_spans,
    "document": _document_spans,
}
