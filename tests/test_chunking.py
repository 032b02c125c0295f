"""Chunking: exact hand-computed spans for each strategy, properties over random
text, and the validation of chunking specs from params.yaml."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragvet.chunking import STRATEGIES, _layout, _sentences, chunk_corpus, chunk_document, chunking_problems
from ragvet.schema import Doc

FIXED_300 = {"strategy": "fixed", "unit": "chars", "window": 300, "overlap": 50}


def spans(text: str, spec: dict) -> list[tuple[int, int]]:
    return [(c.start, c.end) for c in chunk_document(Doc("d", text), spec)]


def texts(text: str, spec: dict) -> list[str]:
    return [c.text for c in chunk_document(Doc("d", text), spec)]


def fixed(size: int, overlap: int, unit: str = "chars") -> dict:
    return {"strategy": "fixed", "unit": unit, "window": size, "overlap": overlap}


def sentences(max_chars: int) -> dict:
    return {"strategy": "sentences", "max_chars": max_chars}


def markdown(max_chars: int) -> dict:
    return {"strategy": "markdown", "max_chars": max_chars}


# --- fixed windows ----------------------------------------------------------------


def test_fixed_chars_300_50_on_700_chars_matches_sample_labels():
    assert spans("x" * 700, FIXED_300) == [(0, 300), (250, 550), (500, 700)]


def test_fixed_chars_stops_at_first_window_reaching_the_end():
    # [500, 550) would lie inside [250, 550): no such trailing window.
    assert spans("x" * 550, FIXED_300) == [(0, 300), (250, 550)]
    assert spans("x" * 300, FIXED_300) == [(0, 300)]
    assert spans("x" * 10, FIXED_300) == [(0, 10)]


def test_fixed_chars_small_windows_and_no_trimming():
    assert spans("abcdefghij", fixed(4, 1)) == [(0, 4), (3, 7), (6, 10)]
    assert texts("ab    cd", fixed(3, 0)) == ["ab ", "   ", "cd"]
    assert spans(" a ", fixed(2, 0)) == [(0, 2), (2, 3)]


def test_fixed_tokens_windows_span_first_to_last_token():
    text = "one two  three four five"
    # tokens: one(0,3) two(4,7) three(9,14) four(15,19) five(20,24)
    assert spans(text, fixed(2, 1, "tokens")) == [(0, 7), (4, 14), (9, 19), (15, 24)]
    assert spans(text, fixed(3, 0, "tokens")) == [(0, 14), (15, 24)]
    assert spans(text, fixed(5, 2, "tokens")) == [(0, 24)]
    assert spans("  lead\n\ttab  ", fixed(9, 0, "tokens")) == [(2, 11)]


# --- sentences --------------------------------------------------------------------


def test_sentences_are_packed_greedily_up_to_max_chars():
    text = "One two. Three four! Five?\n\nSix seven."
    # sentences: (0,8) (9,20) (21,26) (28,38)
    assert spans(text, sentences(20)) == [(0, 20), (21, 38)]
    assert spans(text, sentences(19)) == [(0, 8), (9, 26), (28, 38)]
    assert spans(text, sentences(38)) == [(0, 38)]
    assert spans("  Padded.  \n", sentences(100)) == [(2, 9)]


def test_over_long_sentence_is_cut_into_trimmed_windows():
    assert spans("Hi. abcdefghij klm. End.", sentences(6)) == [(0, 3), (4, 10), (10, 16), (16, 19), (20, 24)]
    # the window "abcde " is trimmed; the next one starts at the next non-space
    assert spans("abcde fghij", sentences(6)) == [(0, 5), (6, 11)]
    # the remainder of a cut sentence may share a chunk with the next sentence
    assert texts("abcdefgh. Ok.", sentences(7)) == ["abcdefg", "h. Ok."]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Pi is 3.14 today. Yes", ["Pi is 3.14 today.", "Yes"]),
        ('He said "stop." Then left', ['He said "stop."', "Then left"]),
        ("Really?! Wow... ok", ["Really?!", "Wow...", "ok"]),
        ("e.g. this and e.g.that", ["e.g.", "this and e.g.that"]),
        ("soft\nwrapped line. next", ["soft\nwrapped line.", "next"]),
        ("para one\n\n  para two  ", ["para one", "para two"]),
        ("# Heading\nbody text", ["# Heading", "body text"]),
        ("intro:\n- first\n- second\n  cont\n1. third", ["intro:", "- first", "- second\n  cont", "1. third"]),
        ("> quoted\n| a | b |", ["> quoted", "| a | b |"]),
        ("see:\n```\nx = 1. y\n# c\n```\nafter", ["see:", "```", "x = 1. y", "# c", "```", "after"]),
        ("end.\r\nnext", ["end.", "next"]),
    ],
)
def test_sentence_boundaries(text, expected):
    assert [text[start:end] for start, end in _sentences(text)] == expected


def test_sentence_boundaries_are_exact_when_nothing_packs():
    text = "Aa. Bb! Cc?\n\nDd\n# Ee\n- Ff"
    assert texts(text, sentences(3)) == ["Aa.", "Bb!", "Cc?", "Dd", "# E", "e", "- F", "f"]
    assert texts(text, sentences(4)) == ["Aa.", "Bb!", "Cc?", "Dd", "# Ee", "- Ff"]


# --- markdown ---------------------------------------------------------------------

DOC_MD = "# A\nIntro a.\n\n## A1\nText one.\n\n## A2\nText two.\n\n# B\nBody b.\n"
# sections: "# A..." (0,46) with "# A\nIntro a." (0,12), "## A1\nText one." (14,29),
# "## A2\nText two." (31,46); "# B\nBody b." (48,59)


def test_markdown_document_that_fits_is_one_chunk():
    assert spans(DOC_MD, markdown(59)) == [(0, 59)]


def test_markdown_sections_kept_whole_and_big_one_split_by_subsections():
    # A (46 chars) > 30: split at level 2, then intro + A1 packed (29 chars); B whole.
    assert spans(DOC_MD, markdown(30)) == [(0, 29), (31, 46), (48, 59)]
    assert texts(DOC_MD, markdown(46)) == ["# A\nIntro a.\n\n## A1\nText one.\n\n## A2\nText two.", "# B\nBody b."]
    assert spans(DOC_MD, markdown(20)) == [(0, 12), (14, 29), (31, 46), (48, 59)]


def test_markdown_recurses_to_sentences_when_sections_are_too_big():
    assert texts(DOC_MD, markdown(12)) == ["# A\nIntro a.", "## A1", "Text one.", "## A2", "Text two.", "# B\nBody b."]


def test_markdown_splits_by_paragraph_then_windows():
    text = "# T\n\nalpha beta\n\ngamma delta epsilon"
    # parts by paragraph: "# T" (0,3) "alpha beta" (5,15) "gamma delta epsilon" (17,36)
    assert spans(text, markdown(15)) == [(0, 15), (17, 32), (32, 36)]
    assert texts(text, markdown(15))[1:] == ["gamma delta eps", "ilon"]


def test_markdown_split_section_is_not_merged_with_its_siblings():
    text = "# A\nx\n# B\nlong sentence one. long sentence two.\n# C\ny"
    # B (41 chars) is split by sentences; the small A and C are never packed with its pieces.
    assert texts(text, markdown(25)) == ["# A\nx", "# B\nlong sentence one.", "long sentence two.", "# C\ny"]


def test_markdown_hash_inside_code_fence_is_not_a_heading():
    text = "# Title\nIntro.\n\n```\n# not a heading\nx = 1\n```\n\n# Next\nEnd."
    # only two level-1 sections: (0,45) with the code block, and (47,58)
    assert spans(text, markdown(45)) == [(0, 45), (47, 58)]
    assert texts(text, markdown(20)) == ["# Title\nIntro.", "```\n# not a heading", "x = 1\n```", "# Next\nEnd."]


def test_markdown_tilde_fence_and_unclosed_fence():
    text = "~~~\n# no\n~~~\n# Yes\nz"
    assert texts(text, markdown(12)) == ["~~~\n# no\n~~~", "# Yes\nz"]
    # an unclosed fence runs to the end: nothing after it is a heading
    text = "# A\nb\n```\n# c\n# d"
    assert texts(text, markdown(8)) == ["# A\nb", "```\n# c", "# d"]
    # were "# c" and "# d" headings, they would be packed as two small sections
    assert texts(text.replace("```", "xxx"), markdown(8)) == ["# A", "b\nxxx", "# c\n# d"]


def test_markdown_line_kinds():
    text = "#tag\n####### seven\n ### three\n    # four-space indent\n- item\n\n```py\n# code\n````\n```\nafter"
    kinds = [(line.kind, line.level) for line in _layout(text)]
    assert kinds == [
        ("text", 0),
        ("text", 0),
        ("heading", 3),
        ("text", 0),
        ("block", 0),
        ("blank", 0),
        ("fence", 0),
        ("code", 0),
        ("fence", 0),
        ("fence", 0),
        ("code", 0),
    ]


# --- documents and corpus ---------------------------------------------------------


@pytest.mark.parametrize("spec", [FIXED_300, fixed(2, 1, "tokens"), sentences(10), markdown(10)])
@pytest.mark.parametrize("text", ["", "   ", "\n\t \n"])
def test_empty_or_whitespace_text_has_no_chunks(spec, text):
    assert chunk_document(Doc("d", text), spec) == []


def test_chunk_ids_ordinals_and_metadata():
    doc = Doc("leave-policy-2026", "x" * 700, "Leave", {"doc_type": "policy", "year": 2026})
    chunks = chunk_document(doc, FIXED_300)
    assert [c.chunk_id for c in chunks] == ["leave-policy-2026#0", "leave-policy-2026#1", "leave-policy-2026#2"]
    assert [c.ordinal for c in chunks] == [0, 1, 2]
    assert all(c.metadata == doc.metadata and c.metadata is not doc.metadata for c in chunks)
    assert chunks[0].metadata is not chunks[1].metadata


def test_chunk_corpus_sorted_by_doc_then_ordinal():
    docs = [Doc("b", "x" * 400), Doc("a", "y" * 600), Doc("c", " ")]
    chunks = chunk_corpus(docs, FIXED_300)
    assert [c.chunk_id for c in chunks] == ["a#0", "a#1", "a#2", "b#0", "b#1"]
    assert chunk_corpus(reversed(docs), FIXED_300) == chunks


# --- properties over random text --------------------------------------------------

_ALPHABET = "ab .!?#`~-*>|\n\n\t\r\u00a0\u2003é1\"')"
_LINES = [
    "# H",
    "## Sub sect",
    "### x",
    "```",
    "~~~",
    "text. more",
    "",
    "   ",
    "- item",
    "1. one",
    "> q",
    "word",
    "Long sentence without any punctuation at all here",
    "a.b",
    "#no",
]
random_text = st.one_of(
    st.text(alphabet=_ALPHABET, max_size=300),
    st.lists(st.sampled_from(_LINES), max_size=30).map("\n".join),
    st.text(max_size=120),
)


@st.composite
def specs(draw) -> dict:
    kind = draw(st.sampled_from(["chars", "tokens", "sentences", "markdown"]))
    if kind in ("chars", "tokens"):
        size = draw(st.integers(1, 40))
        return fixed(size, draw(st.integers(0, size - 1)), kind)
    return {"strategy": kind, "max_chars": draw(st.integers(1, 80))}


def _check_invariants(text: str, spec: dict) -> None:
    doc = Doc("doc-1", text, metadata={"k": "v"})
    chunks = chunk_document(doc, spec)
    assert chunk_document(doc, spec) == chunks  # determinism
    for ordinal, chunk in enumerate(chunks):
        assert chunk.ordinal == ordinal and chunk.chunk_id == f"doc-1#{ordinal}" and chunk.doc_id == "doc-1"
        assert 0 <= chunk.start < chunk.end <= len(text)
        assert chunk.text == text[chunk.start : chunk.end]
        assert chunk.metadata == {"k": "v"}
    starts = [c.start for c in chunks]
    assert starts == sorted(set(starts))
    covered = set()
    for chunk in chunks:
        covered.update(range(chunk.start, chunk.end))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())
    if not text.strip():
        assert chunks == []
    _check_size(text, spec, chunks)


def _check_size(text, spec, chunks) -> None:
    if spec["strategy"] == "fixed" and spec["unit"] == "chars":
        step = spec["window"] - spec["overlap"]
        assert all(
            (c.start, c.end) == (i * step, min(i * step + spec["window"], len(text))) for i, c in enumerate(chunks)
        )
        assert not chunks or chunks[-1].end == len(text)
    elif spec["strategy"] == "fixed":
        assert all(1 <= len(re.findall(r"\S+", c.text)) <= spec["window"] for c in chunks)
        assert all(not c.text[0].isspace() and not c.text[-1].isspace() for c in chunks)
    else:
        assert all(len(c.text) <= spec["max_chars"] for c in chunks)
        assert all(not c.text[0].isspace() and not c.text[-1].isspace() for c in chunks)
        assert all(a.end <= b.start for a, b in itertools.pairwise(chunks))  # no overlap


@settings(max_examples=300, deadline=None)
@given(text=random_text, spec=specs())
def test_invariants_hold_for_every_strategy(text, spec):
    _check_invariants(text, spec)


@settings(max_examples=200, deadline=None)
@given(text=random_text, size=st.integers(1, 80))
def test_sentences_and_markdown_agree_on_coverage(text, size):
    # the same non-whitespace characters end up in chunks under both strategies
    for spec in (sentences(size), markdown(size)):
        _check_invariants(text, spec)


def test_registry_names():
    assert sorted(STRATEGIES) == ["document", "fixed", "markdown", "sentences"]


# --- validation -------------------------------------------------------------------

WHERE = "params.yaml: chunking.x"


@pytest.mark.parametrize(
    "spec",
    [FIXED_300, fixed(1, 0, "tokens"), sentences(600), markdown(1200)],
)
def test_valid_specs_have_no_problems(spec):
    assert chunking_problems("fixed-300", spec, WHERE) == []


@pytest.mark.parametrize(
    ("spec", "key"),
    [
        ({"strategy": "windows", "window": 3}, "strategy"),
        ({"window": 3}, "strategy"),
        ({"strategy": ["fixed"]}, "strategy"),
        ({"strategy": "fixed", "unit": "chars", "window": 300}, "overlap"),
        ({"strategy": "fixed", "unit": "chars", "overlap": 0}, "window"),
        ({"strategy": "fixed", "window": 300, "overlap": 0}, "unit"),
        ({**FIXED_300, "windwo": 3}, "windwo"),
        ({**FIXED_300, "window": 0}, "window"),
        ({**FIXED_300, "window": -5}, "window"),
        ({**FIXED_300, "window": 300.0}, "window"),
        ({**FIXED_300, "window": "300"}, "window"),
        ({**FIXED_300, "window": True}, "window"),
        ({**FIXED_300, "overlap": -1}, "overlap"),
        ({**FIXED_300, "overlap": 300}, "overlap"),
        ({**FIXED_300, "overlap": 301}, "overlap"),
        ({**FIXED_300, "overlap": 1.5}, "overlap"),
        ({**FIXED_300, "unit": "words"}, "unit"),
        ({"strategy": "sentences"}, "max_chars"),
        ({"strategy": "sentences", "max_chars": 0}, "max_chars"),
        ({"strategy": "markdown", "max_chars": "big"}, "max_chars"),
        ({"strategy": "markdown", "max_chars": 100, "overlap": 5}, "overlap"),
    ],
)
def test_each_bad_spec_names_its_key(spec, key):
    problems = chunking_problems("x", spec, WHERE)
    assert problems, spec
    assert all(p.where == WHERE and p.what and p.fix for p in problems)
    assert any(f"`{key}`" in p.what for p in problems)


def test_unknown_strategy_lists_supported_ones():
    (problem,) = chunking_problems("x", {"strategy": "semantic"}, WHERE)
    assert "'semantic'" in problem.what
    assert "document, fixed, markdown, sentences" in problem.fix


def test_every_problem_is_collected_at_once():
    spec = {"strategy": "fixed", "unit": "lines", "window": 0, "overlap": -1, "extra": 1}
    keys = {key for p in chunking_problems("x", spec, WHERE) for key in re.findall(r"`(\w+)`", p.what)}
    assert keys == {"unit", "window", "overlap", "extra"}


def test_overlap_not_compared_with_an_invalid_window():
    problems = chunking_problems("x", {**FIXED_300, "window": "big", "overlap": 50}, WHERE)
    assert [p.what for p in problems] == ["key `window` must be a positive integer, got 'big'"]


def test_non_mapping_spec_and_bad_name():
    assert "mapping" in chunking_problems("x", ["fixed"], WHERE)[0].what  # type: ignore[arg-type]
    problems = chunking_problems("a/b", FIXED_300, WHERE)
    assert len(problems) == 1 and "'a/b'" in problems[0].what


def test_document_strategy_is_one_chunk_per_doc():
    doc = Doc("d", "  Whole text.\n", metadata={"year": "2026"})
    (only,) = chunk_document(doc, {"strategy": "document"})
    assert (only.chunk_id, only.start, only.end, only.text) == ("d#0", 0, 14, "  Whole text.\n")
    assert chunk_document(Doc("e", " \n"), {"strategy": "document"}) == []
    assert chunking_problems("whole", {"strategy": "document", "window": 3}, "w")[0].what.startswith("key `window`")
