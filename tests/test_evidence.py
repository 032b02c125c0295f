"""Evidence references resolve to exact original offsets, and project onto chunkings."""

from __future__ import annotations

import re

import pytest
from builders import resolve_reference, span_chunk
from hypothesis import given, settings
from hypothesis import strategies as st

from ragvet.errors import InputError
from ragvet.evidence import (
    EvidenceResolver,
    chunks_by_doc,
    find_quote,
    normalise_whitespace,
    normalise_whitespace_index,
    project_unit,
    relevant_chunks,
)
from ragvet.schema import Doc, EvidenceUnit

# Offsets: "up" 16, "to" 19, "\n" 21, "five" 24, "unused" 29-35, "Days are lost." 42-56 and 57-71.
TEXT = "Staff may carry up to\n  five unused days. Days are lost. Days are lost."
DOCS = {"leave-2026": Doc("leave-2026", TEXT), "benefits": Doc("benefits", "Dental cover starts in May.")}
FIXED_10 = {"strategy": "fixed", "unit": "chars", "window": 10, "overlap": 0}
CHUNKINGS = {"fixed-10": FIXED_10}


def problems_of(ref: dict) -> list[str]:
    unit, problems = EvidenceResolver(DOCS, CHUNKINGS).resolve(ref, "cases.yaml:7 (case c1)", "evidence 1")
    assert unit is None
    assert problems and all(p.where == "cases.yaml:7 (case c1)" for p in problems)
    return [p.what + " | " + p.fix for p in problems]


# --- whitespace normalisation ---------------------------------------------------------


def test_normalise_whitespace_index_maps_back_to_original_offsets():
    assert normalise_whitespace_index("a  b\n\tc") == ("a b c", [0, 1, 3, 4, 6])
    assert normalise_whitespace_index(" \n x ") == (" x ", [0, 3, 4])
    assert normalise_whitespace_index("") == ("", [])


def test_quote_with_different_whitespace_resolves_to_exact_original_span():
    unit = resolve_reference({"doc": "leave-2026", "quote": " up to five\tunused "}, DOCS)
    # "up" starts at 16 and "unused" ends at 35; the original "\n  " between "to" and "five" is kept.
    assert unit == EvidenceUnit("leave-2026", 16, 35)
    assert TEXT[16:35] == "up to\n  five unused"


# --- the four forms ----------------------------------------------------------------------


def test_offsets_and_doc_forms():
    assert resolve_reference({"doc": "leave-2026", "start": 0, "end": 5}, DOCS) == EvidenceUnit("leave-2026", 0, 5)
    assert resolve_reference({"doc": "benefits"}, DOCS) == EvidenceUnit("benefits")
    assert resolve_reference({"doc": "benefits"}, DOCS).doc_level


def test_chunk_and_chunking_resolve_to_that_chunks_span():
    # fixed-10 chars: benefits#1 is [10, 20).
    unit = resolve_reference({"chunk": "benefits#1", "chunking": "fixed-10"}, DOCS, CHUNKINGS)
    assert unit == EvidenceUnit("benefits", 10, 20)


def test_chunk_reference_problems():
    [msg] = problems_of({"chunk": "benefits#9", "chunking": "fixed-10"})
    assert "unknown chunk id 'benefits#9'" in msg and "3 chunks (benefits#0 to benefits#2)" in msg
    [msg] = problems_of({"chunk": "benefits#1", "chunking": "fixed-11"})
    assert "unknown chunking 'fixed-11'" in msg and "fixed-10" in msg
    [msg] = problems_of({"chunk": "benefits#1"})
    assert "`chunking` is missing" in msg
    [msg] = problems_of({"chunk": "benefits", "chunking": "fixed-10"})
    assert "<doc_id>#<ordinal>" in msg


def test_chunk_reference_under_an_invalid_chunking_is_reported_not_crashed():
    resolver = EvidenceResolver(DOCS, {"bad": {"strategy": "fixed", "window": 0}})
    unit, problems = resolver.resolve({"chunk": "benefits#0", "chunking": "bad"}, "w", "evidence 1")
    assert unit is None and "chunking 'bad' is invalid" in problems[0].what


# --- bad references ----------------------------------------------------------------------


def test_unknown_doc_suggests_close_ids():
    [msg] = problems_of({"doc": "leave-2062", "quote": "five"})
    assert "unknown doc 'leave-2062'" in msg and "did you mean 'leave-2026'" in msg


def test_quote_not_found_says_where_it_stops_matching():
    [msg] = problems_of({"doc": "leave-2026", "quote": "carry up to 5 unused days"})
    assert "not found in doc 'leave-2026'" in msg
    assert "first 12 characters match at offset 10" in msg and "'five unused" in msg and "'5 unused days'" in msg


def test_quote_not_found_because_of_letter_case_says_so():
    [msg] = problems_of({"doc": "leave-2026", "quote": "staff MAY carry"})
    assert "different letter case at offset 0" in msg


def test_ambiguous_quote_lists_offsets_and_occurrence_picks_one():
    [msg] = problems_of({"doc": "leave-2026", "quote": "Days are lost."})
    assert "found 2 times" in msg and "offsets 42, 57" in msg and "occurrence: n" in msg
    second = resolve_reference({"doc": "leave-2026", "quote": "Days are lost.", "occurrence": 2}, DOCS)
    assert second == EvidenceUnit("leave-2026", 57, 71)
    assert TEXT[57:71] == "Days are lost."


def test_occurrence_out_of_range_or_invalid():
    [msg] = problems_of({"doc": "leave-2026", "quote": "Days are lost.", "occurrence": 3})
    assert "occurs 2 times" in msg and "between 1 and 2" in msg
    [msg] = problems_of({"doc": "leave-2026", "quote": "Days are lost.", "occurrence": 0})
    assert "integer ≥ 1" in msg


def test_offsets_out_of_range_reversed_or_not_integers():
    [msg] = problems_of({"doc": "benefits", "start": 20, "end": 99})
    assert "out of range" in msg and "27 characters" in msg
    [msg] = problems_of({"doc": "benefits", "start": 5, "end": 5})
    assert "start must be before end" in msg
    [msg] = problems_of({"doc": "benefits", "start": 1.5, "end": 4})
    assert "must both be integers" in msg
    [msg] = problems_of({"doc": "benefits", "start": 1})
    assert "must both be integers" in msg


def test_unknown_keys_mixed_forms_and_no_form():
    msgs = problems_of({"doc": "benefits", "qoute": "Dental"})
    assert any("unknown key `qoute`" in m and "did you mean `quote`" in m for m in msgs)
    [msg] = problems_of({"doc": "benefits", "quote": "Dental", "start": 0, "end": 6})
    assert "not both" in msg
    unknown, no_form = problems_of({"body": "Dental"})
    assert "unknown key `body`" in unknown and "matches none of the four forms" in no_form
    [msg] = problems_of({})
    assert "matches none of the four forms" in msg
    [msg] = problems_of("benefits")  # type: ignore[arg-type]
    assert "must be a mapping" in msg


def test_empty_quote():
    [msg] = problems_of({"doc": "benefits", "quote": " \n "})
    assert "non-empty text" in msg


def test_resolve_reference_raises_with_every_problem():
    with pytest.raises(InputError) as err:
        resolve_reference({"doc": "nope", "quote": "x", "extra": 1}, DOCS, where="f.yaml:3")
    assert len(err.value.problems) == 2


# --- property: whitespace-insensitive matching keeps original coordinates ----------------

WORDS = st.text(alphabet="abc.", min_size=1, max_size=4)
SPACE = st.text(alphabet=" \t\n\u00a0", min_size=1, max_size=3)


@st.composite
def text_and_slice(draw):
    words = draw(st.lists(WORDS, min_size=1, max_size=12))
    gaps = draw(st.lists(SPACE, min_size=len(words) + 1, max_size=len(words) + 1))
    text = gaps[0] + "".join(w + g for w, g in zip(words, gaps[1:]))
    start = draw(st.integers(0, len(text) - 1))
    end = draw(st.integers(start + 1, len(text)))
    return text, start, end, draw(st.randoms())


@settings(max_examples=300, deadline=None)
@given(text_and_slice())
def test_property_perturbed_quote_resolves_to_a_span_that_normalises_equal(case):
    text, start, end, rnd = case
    piece = text[start:end]
    if not piece.strip():
        return
    # Perturb the quote's whitespace: every run becomes a random run.
    quote = "".join(rnd.choice([" ", "\n ", "\t\t"]) if ch.isspace() else ch for ch in normalise_whitespace(piece))
    # The slice's own span, with its whitespace ends trimmed.
    lead = len(piece) - len(piece.lstrip())
    expected = (start + lead, start + len(piece.rstrip()))
    spans = find_quote(text, quote)
    assert expected in spans
    # The same spans as searching the normalised text through its offset map.
    flat, index = normalise_whitespace_index(text)
    needle = normalise_whitespace(quote)
    starts = [i for i in range(len(flat)) if flat.startswith(needle, i)]
    assert spans == [(index[i], index[i + len(needle) - 1] + 1) for i in starts]
    for lo, hi in spans:
        assert normalise_whitespace(text[lo:hi]) == normalise_whitespace(piece)
        assert not text[lo].isspace() and not text[hi - 1].isspace()
    docs = {"d": Doc("d", text)}
    ref = {"doc": "d", "quote": quote, "occurrence": spans.index(expected) + 1}
    assert resolve_reference(ref, docs) == EvidenceUnit("d", *expected)


# --- projection onto a chunking -------------------------------------------------------------

# Overlapping windows: [0,10) [5,15) [10,20), and another doc.
CHUNKS = [span_chunk("a", 2, 10, 20), span_chunk("a", 0, 0, 10), span_chunk("a", 1, 5, 15), span_chunk("b", 0, 0, 8)]


def test_chunks_by_doc_groups_in_ordinal_order():
    grouped = chunks_by_doc(CHUNKS)
    assert list(grouped) == ["a", "b"]
    assert [c.chunk_id for c in grouped["a"]] == ["a#0", "a#1", "a#2"]


def test_project_unit_keeps_overlaps_of_at_least_one_character():
    by_doc = chunks_by_doc(CHUNKS)
    projected = project_unit(EvidenceUnit("a", 8, 12), by_doc["a"])
    assert projected.label == "a[8:12]" and not projected.doc_level and projected.length == 4
    assert projected.pieces == {"a#0": (8, 10), "a#1": (8, 12), "a#2": (10, 12)}
    # A span touching a chunk's end does not overlap it.
    assert project_unit(EvidenceUnit("a", 15, 18), by_doc["a"]).pieces == {"a#2": (15, 18)}
    assert project_unit(EvidenceUnit("a", 10, 11), by_doc["a"]).pieces == {"a#1": (10, 11), "a#2": (10, 11)}


def test_project_doc_level_unit_takes_every_chunk_of_the_doc():
    projected = project_unit(EvidenceUnit("a"), CHUNKS)  # other docs' chunks are ignored
    assert projected.label == "a" and projected.doc_level and projected.length == 0
    assert projected.pieces == {"a#0": (0, 10), "a#1": (5, 15), "a#2": (10, 20)}


def test_relevant_chunks_is_the_union_over_units():
    by_doc = chunks_by_doc(CHUNKS)
    assert relevant_chunks([EvidenceUnit("a", 0, 3), EvidenceUnit("b")], by_doc) == {"a#0", "b#0"}
    assert relevant_chunks([EvidenceUnit("a", 14, 16)], by_doc) == {"a#1", "a#2"}
    assert relevant_chunks([EvidenceUnit("missing", 0, 3)], by_doc) == set()
    assert relevant_chunks([], by_doc) == set()


_SPACES = " \t\n\x0b\x0c\r\x1c\x85\xa0\u2028\u3000"


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from("abA.\\*" + _SPACES), max_size=40),
    quote=st.text(alphabet=st.sampled_from("abA.\\*" + _SPACES), max_size=8),
)
def test_property_find_quote_agrees_with_the_whitespace_regex(text, quote):
    """The literal scan finds exactly what searching with ``w1\\s+w2...`` (the former
    implementation) finds, overlaps included, over every kind of Unicode whitespace."""
    words = normalise_whitespace(quote).split(" ")
    expected = []
    if words != [""]:
        pattern = re.compile(r"\s+".join(map(re.escape, words)))
        match = pattern.search(text)
        while match:
            expected.append(match.span())
            match = pattern.search(text, match.start() + 1)
    assert find_quote(text, quote) == expected


def test_find_quote_overlapping_and_mixed_whitespace():
    """Hand-checked: "a a" occurs at 0-4 (over a tab run) and at 3-6, overlapping."""
    assert find_quote("a\t\ta a", "a  a") == [(0, 4), (3, 6)]


def test_text_of_offsets_is_checked_and_belongs_to_offsets_only():
    unit, problems = EvidenceResolver(DOCS, CHUNKINGS).resolve(
        {"doc": "benefits", "start": 0, "end": 12, "text": "Dental cover"}, "cases.yaml:7 (case c1)", "evidence 1"
    )
    assert unit == EvidenceUnit("benefits", 0, 12) and not problems
    [msg] = problems_of({"doc": "benefits", "start": 0, "end": 12, "text": "Dental plan"})
    assert msg.startswith("evidence 1: offsets [0:12] of doc 'benefits' read 'Dental cover…', not the label's text")
    [msg] = problems_of({"doc": "benefits", "quote": "Dental", "text": "Dental"})
    assert "`text` only applies to start/end offsets" in msg
