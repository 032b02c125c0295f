"""Anchors of labelled text, and finding that text again in an edited document.

An anchor is what a span or quote label says about its document, in the W3C Web
Annotation model that Hypothesis uses for annotations that survive edits: the exact
text (``TextQuoteSelector.exact``), up to :data:`CONTEXT` characters before and after
it (``prefix``, ``suffix``) and where it started (``TextPositionSelector.start``).

Placing an anchor in the edited document gives one of three answers:

``moved``
    The exact text occurs there, and exactly one occurrence has the best agreement
    of context: its prefix and suffix both read the same, or one of them does and no
    text like the label has both at another place. The label's text is unchanged and
    only its position moved, so it can be applied without review.
``changed``
    The best approximate candidate scores at least ``min_similarity`` (Hypothesis's
    weighting of quote, prefix, suffix and position similarity), or the exact text
    occurs but the context cannot tell which occurrence is meant: a person decides.
``orphaned``
    Nothing scores high enough: the labelled text was deleted or rewritten.

Whitespace runs compare as one space (a change of line endings moves nothing), and
text compares in its NFC spelling, offsets mapped back to the document's own.
Whether a prefix or suffix reads the same is rapidfuzz's normalised Indel similarity; a
candidate's score counts errors as Hypothesis does, with rapidfuzz's Levenshtein distance.
No edit distance is computed here.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass

from ragvet.evidence import CONTEXT, find_quote, normalise_whitespace
from ragvet.text.values import nfc

WEIGHTS = (50, 20, 20, 2)  # quote, prefix, suffix, position: Hypothesis's (dom-anchor-text-quote) weighting
MIN_QUOTE_SIMILARITY = 0.5  # Hypothesis drops a candidate with more errors than half the quote's length
SIDE_AGREES = 90  # a prefix or suffix agrees when its similarity (0-100) is at least this
TIE_MARGIN = 0.01  # two occurrences whose context similarities are this close (of their maximum) tie
NEAR_WINDOW = 64  # characters either side of the old position searched for a local candidate
PIECE = 64  # characters of a long exact text aligned at a time (rapidfuzz's bit-parallel width)
SLACK = 16  # characters either side of an approximate match's ends tried as its ends


@dataclass(frozen=True)
class Anchor:
    """A label's text with its context and position in the document it was written for."""

    exact: str
    prefix: str
    suffix: str
    start: int


@dataclass(frozen=True)
class Placement:
    """Where an anchor landed in the edited document: ``status`` is moved, changed or
    orphaned; ``start``/``end`` are the new offsets (``None`` for an orphan); ``note`` says why."""

    status: str
    start: int | None
    end: int | None
    similarity: float
    note: str = ""


def anchor_at(text: str, start: int, end: int) -> Anchor:
    """The anchor of ``text[start:end]``."""
    return Anchor(text[start:end], text[max(0, start - CONTEXT) : start], text[end : end + CONTEXT], start)


def place(anchor: Anchor, text: str, min_similarity: float) -> Placement:
    """Where ``anchor`` is in ``text`` (see the module's docstring)."""
    parts = (anchor.exact, anchor.prefix, anchor.suffix)
    if unicodedata.is_normalized("NFC", text) and all(unicodedata.is_normalized("NFC", part) for part in parts):
        return _place(anchor, text, min_similarity)
    view, offsets = nfc_view(text)
    found = _place(Anchor(*(nfc(part) for part in parts), anchor.start), view, min_similarity)
    if found.start is None or found.end is None:
        return found
    return Placement(found.status, offsets[found.start], offsets[found.end], found.similarity, found.note)


def nfc_view(text: str) -> tuple[str, list[int]]:
    """``text`` in NFC, and for each of its offsets (and its end) the offset in ``text``.

    Each starter character with the combining marks after it is composed on its own,
    so every offset of the view maps to the start of the characters it came from."""
    pieces: list[str] = []
    offsets: list[int] = []
    start = 0
    for index in range(1, len(text) + 1):
        if index == len(text) or unicodedata.combining(text[index]) == 0:
            piece = unicodedata.normalize("NFC", text[start:index])
            pieces.append(piece)
            offsets.extend([start] * len(piece))
            start = index
    offsets.append(len(text))
    return "".join(pieces), offsets


def _place(anchor: Anchor, text: str, min_similarity: float) -> Placement:
    """:func:`place` in a text and an anchor both in NFC."""
    at = text.find(anchor.exact)
    if at != -1 and text.find(anchor.exact, at + 1) == -1:  # the common case, found fast
        end = at + len(anchor.exact)
        if _context(anchor, text, at, end)[0] == 2 and len(find_quote(text, anchor.exact)) <= 1:
            return Placement("moved", at, end, 1.0)
    exact = _exact_spans(anchor, text)
    found = _place_exact(anchor, text, exact, min_similarity) if exact else None
    return found or _place_approximate(anchor, text, exact, min_similarity)


def _place_exact(anchor: Anchor, text: str, exact: list[tuple[int, int]], min_similarity: float) -> Placement | None:
    """The placement the exact occurrences decide by their context, or ``None`` when no
    occurrence has any side of its context agreeing."""
    agreement = sorted(
        ((_context(anchor, text, start, end), start, end) for start, end in exact),
        key=lambda found: (found[0], -abs(found[1] - anchor.start)),  # of equals, the nearest first
        reverse=True,
    )
    (best, start, end), rest = agreement[0], agreement[1:]
    if best[0] == 0:
        return None
    unique = not rest or _clearly_better(best, rest[0][0], anchor)
    if unique and best[0] == 2:
        return Placement("moved", start, end, 1.0)
    if unique:
        apart = [span for span in _approximate(anchor, text, exact) if span[1] <= start or span[0] >= end]
        rival = _rival(anchor, text, apart, min_similarity)
        if rival is None:
            return Placement("moved", start, end, 1.0)
        note = f"the exact text occurs at {start} with one side of its context; text like it has the whole context"
        return Placement("changed", *rival, note)
    tied = 1 + sum(_clearly_better(best, other, anchor) is False for other, _, _ in rest)
    note = f"the exact text occurs {tied} times with the same context: check which one is meant"
    return Placement("changed", start, end, 1.0, note)


def _place_approximate(anchor: Anchor, text: str, exact: list[tuple[int, int]], min_similarity: float) -> Placement:
    """The best-scoring candidate, exact occurrences (none with its context) included:
    changed when it scores ``min_similarity`` or more, else orphaned."""
    candidates = exact + _approximate(anchor, text, exact)
    if not candidates:
        return Placement("orphaned", None, None, 0.0, "the document is empty")
    score, start, end = max((_score(anchor, text, start, end), start, end) for start, end in candidates)
    if score < min_similarity:
        return Placement("orphaned", None, None, round(score, 3), f"no candidate scores {min_similarity} or more")
    note = "the exact text occurs, but neither its prefix nor its suffix agrees" if exact else "the text changed"
    return Placement("changed", start, end, round(score, 3), note)


def _approximate(anchor: Anchor, text: str, exact: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The approximate candidates that are not exact occurrences, their ends refined."""
    spans = [_refined(anchor, text, *span) for span in _approximate_spans(anchor, text)]
    return [span for span in dict.fromkeys(spans) if span not in exact]


def _rival(
    anchor: Anchor, text: str, approximate: list[tuple[int, int]], min_similarity: float
) -> tuple[int, int, float] | None:
    """An approximate candidate with both sides of its context agreeing, scoring at least
    ``min_similarity``: the label's text changed where it was, and its old words occur
    elsewhere in a context only half like its own. ``approximate`` holds the candidates
    apart from that occurrence (one holding it is the occurrence with text added next to
    it). ``(start, end, score)``, or ``None``."""
    found = [
        (_score(anchor, text, start, end), start, end)
        for start, end in approximate
        if _context(anchor, text, start, end)[0] == 2
    ]
    best = max(found, default=None)
    if best is None or best[0] < min_similarity:
        return None
    return best[1], best[2], round(best[0], 3)


def _exact_spans(anchor: Anchor, text: str) -> list[tuple[int, int]]:
    """Every occurrence of the exact text, whitespace runs matching any whitespace run,
    widened over the whitespace the exact text starts or ends with."""
    lead = len(anchor.exact) - len(anchor.exact.lstrip())
    trail = len(anchor.exact) - len(anchor.exact.rstrip())
    spans = []
    for start, end in find_quote(text, anchor.exact):
        while lead and start > 0 and text[start - 1].isspace():
            start -= 1
        while trail and end < len(text) and text[end].isspace():
            end += 1
        spans.append((start, end))
    return spans


@functools.lru_cache(maxsize=4096)  # the anchor's texts and the windows around candidates recur
def _flat(text: str) -> str:
    return normalise_whitespace(text)


def _side_similarity(old: str, new: str, before: bool) -> float:
    """How alike an old prefix (``before``) or suffix is to the new one, 0 to 100: the
    new one cut to the old one's length on the side away from the label."""
    from rapidfuzz.fuzz import ratio  # deferred: only relabelling matches text

    old, new = _flat(old), _flat(new)
    if not old:
        return 100.0 if not new else 0.0
    new = new[-len(old) :] if before else new[: len(old)]
    return ratio(old, new)


def _context(anchor: Anchor, text: str, start: int, end: int) -> tuple[int, float]:
    """How well the context around ``text[start:end]`` agrees with the anchor's: how many of
    the prefix and suffix read the same (0, 1 or 2), then their similarities weighted by
    their lengths (a prefix cut short by the document's start says little)."""
    prefix = _side_similarity(anchor.prefix, text[max(0, start - 2 * CONTEXT) : start], True)
    suffix = _side_similarity(anchor.suffix, text[end : end + 2 * CONTEXT], False)
    weighted = prefix * len(_flat(anchor.prefix)) + suffix * len(_flat(anchor.suffix))
    return (prefix >= SIDE_AGREES) + (suffix >= SIDE_AGREES), weighted


def _clearly_better(best: tuple[int, float], other: tuple[int, float], anchor: Anchor) -> bool:
    """Whether one occurrence's context agrees better than another's: more sides agreeing,
    or, as many, a weighted similarity higher by more than :data:`TIE_MARGIN` of its maximum."""
    if best[0] != other[0]:
        return best[0] > other[0]
    most = 100 * (len(_flat(anchor.prefix)) + len(_flat(anchor.suffix)))
    return best[1] - other[1] > TIE_MARGIN * most


def _approximate_spans(anchor: Anchor, text: str) -> list[tuple[int, int]]:
    """The best approximate matches of the exact text in the whole document and near its
    old position (rapidfuzz's partial alignment), whitespace at their ends dropped.

    An exact text longer than :data:`PIECE` characters is aligned by its first and its
    last :data:`PIECE` characters, each span reaching the exact text's length from there:
    one changed word leaves one of them intact, and rapidfuzz aligns up to 64 characters
    bit-parallel, ten times faster than a 200-character needle."""
    from rapidfuzz.fuzz import partial_ratio_alignment  # deferred: only relabelling matches text

    needle = anchor.exact.strip()
    if not needle:
        return []
    if len(needle) >= len(text):
        return [(0, len(text))]
    lo = max(0, anchor.start - NEAR_WINDOW)
    hi = min(len(text), anchor.start + len(anchor.exact) + NEAR_WINDOW)
    pieces = [(needle, 0)] if len(needle) <= PIECE else [(needle[:PIECE], 0), (needle[-PIECE:], len(needle) - PIECE)]
    spans = []
    for offset, window in ((0, text), (lo, text[lo:hi])):
        for piece, at in pieces:
            found = partial_ratio_alignment(piece, window, score_cutoff=100 * MIN_QUOTE_SIMILARITY)
            if found is None or found.dest_end <= found.dest_start:
                continue
            start = max(0, offset + found.dest_start - found.src_start - at)
            end = min(len(text), start + len(needle)) if len(pieces) > 1 else offset + found.dest_end
            spans.append(_stripped(text, start, end))
    return list(dict.fromkeys(span for span in spans if span[1] > span[0]))


def _stripped(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _refined(anchor: Anchor, text: str, start: int, end: int) -> tuple[int, int]:
    """The span near an approximate match that scores best (:func:`_score`): its ends tried
    at each boundary of the kind the exact text's own ends sit at (between
    words, or between a word and punctuation) within :data:`SLACK` characters, the
    nearest winning ties.

    rapidfuzz aligns a window as long as the exact text, so a longer or shorter word
    inside it would otherwise leave the span cut short or running on; the prefix and
    suffix in the score tell a changed first or last word from the context around it."""
    starts = _boundaries(text, start, _kind(anchor.prefix[-1:], anchor.exact.strip()[:1]), True)
    ends = _boundaries(text, end, _kind(anchor.exact.strip()[-1:], anchor.suffix[:1]), False)
    scored = [
        (_score(anchor, text, lo, hi), -abs(lo - start) - abs(hi - end), lo, hi)
        for lo in starts
        for hi in ends
        if hi > lo
    ]
    return (start, end) if not scored else max(scored)[2:]


def _kind(before: str, after: str) -> str | None:
    """What boundary lies between two characters: ``space`` (one side whitespace or the
    document's end), ``word`` (a word character next to another), or ``None`` (inside a word)."""
    if not before or not after or before.isspace() or after.isspace():
        return "space"
    return None if before.isalnum() and after.isalnum() else "word"


_TOKEN = {"space": re.compile(r"\S+"), "word": re.compile(r"\w+|[^\w\s]")}


def _boundaries(text: str, at: int, kind: str | None, starts: bool) -> list[int]:
    """The starts (or ends) of the tokens of ``kind`` within :data:`SLACK` characters of ``at``;
    just ``at`` when the exact text's end sits inside a word."""
    if kind is None:
        return [at]
    lo, hi = max(0, at - SLACK), min(len(text), at + SLACK)
    found = [match.start() if starts else match.end() for match in _TOKEN[kind].finditer(text, lo, hi)]
    wanted = ("space",) if kind == "space" else ("space", "word")  # a token cut at lo or hi is no boundary
    return [offset for offset in found if _kind(text[offset - 1 : offset], text[offset : offset + 1]) in wanted] or [at]


def _score(anchor: Anchor, text: str, start: int, end: int) -> float:
    """Hypothesis's weighted similarity of a candidate, 0 to 1: its text against the exact
    text, the text before and after it against the prefix and suffix (each one minus its
    edit distance over its length, as Hypothesis counts errors), its position against the
    old one. A candidate less than half like the exact text scores 0."""
    from rapidfuzz.distance import Levenshtein  # deferred: only relabelling matches text

    quote = Levenshtein.normalized_similarity(_flat(anchor.exact), _flat(text[start:end]))
    if quote < MIN_QUOTE_SIMILARITY:
        return 0.0
    prefix, suffix = _flat(anchor.prefix), _flat(anchor.suffix)
    before, after = _flat(text[max(0, start - 2 * CONTEXT) : start]), _flat(text[end : end + 2 * CONTEXT])
    prefix_score = Levenshtein.normalized_similarity(prefix, before[-len(prefix) :]) if prefix else float(not before)
    suffix_score = Levenshtein.normalized_similarity(suffix, after[: len(suffix)]) if suffix else float(not after)
    position = 1 - min(1.0, abs(start - anchor.start) / max(1, len(text)))
    weights = WEIGHTS
    total = weights[0] * quote + weights[1] * prefix_score + weights[2] * suffix_score + weights[3] * position
    return total / sum(weights)


def text_diff(old: str, new: str) -> str:
    """A one-line diff of two texts for a person reading the review file, word by word:
    removed text in ``[-...-]``, added text in ``{+...+}``. diff-match-patch diffs the
    words as characters (its line-mode recipe, with words for lines)."""
    from diff_match_patch import diff_match_patch  # deferred: only a review file shows a diff

    words: list[str] = [""]
    index: dict[str, int] = {}

    def encoded(text: str) -> str:
        codes = []
        for word in _WORD.findall(text):
            if word not in index:
                index[word] = len(words)
                words.append(word)
            codes.append(chr(index[word]))
        return "".join(codes)

    differ = diff_match_patch()
    diffs = differ.diff_main(encoded(old), encoded(new), False)
    differ.diff_charsToLines(diffs, words)
    differ.diff_cleanupSemantic(diffs)
    marks = {-1: "[-{}-]", 0: "{}", 1: "{{+{}+}}"}
    return "".join(marks[op].format(piece) for op, piece in diffs)


_WORD = re.compile(r"\w+|\s+|[^\w\s]")
