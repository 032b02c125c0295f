"""Retrievers: each ``kind`` in ``params.retrievers`` turns cases and chunks into a run.

A run is a list of rows ``{case_id, rank, chunk_id, score}``, down to ``depth``
for every case. Scores are rounded to :data:`SCORE_PLACES` *before* ranking and
ties are broken by chunk_id, so float noise can never reorder a run between
machines. Chunks that fail a case's metadata filter are never returned, and
chunks with a score of zero or less are not returned either: a BM25 score of 0
means no query term matched, and ranking those chunks alphabetically would turn
tie-breaking luck into recall.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from stages.errors import Problem
from stages.schema import Case, Chunk, matches_filter

SCORE_PLACES = 6

RunRow = dict[str, Any]


def allowed_mask(case: Case, chunks: Sequence[Chunk]) -> np.ndarray:
    """Which chunks the case's metadata filter admits (all, when it has none)."""
    if not case.filter:
        return np.ones(len(chunks), dtype=bool)
    return np.array([matches_filter(chunk.metadata, case.filter) for chunk in chunks], dtype=bool)


def top_ranked(
    case_id: str,
    scores: np.ndarray,
    allowed: np.ndarray,
    chunk_ids: Sequence[str],
    depth: int,
    min_score: float | None = 0.0,
) -> list[RunRow]:
    """Rank one case's scores into run rows: rounded score descending, then chunk_id.

    ``chunk_ids`` must be sorted, so that a stable sort on the negated score
    breaks ties by chunk_id. Only finite scores above ``min_score`` are kept
    (``None`` keeps every finite score, as cosine similarity may be negative);
    ``-inf`` marks a chunk the retriever did not return.
    """
    rounded = np.round(scores.astype(np.float64), SCORE_PLACES)
    eligible = allowed & np.isfinite(rounded)
    if min_score is not None:
        eligible &= rounded > min_score
    keep = np.flatnonzero(eligible)
    order = keep[np.argsort(-rounded[keep], kind="stable")][:depth]
    return [
        {"case_id": case_id, "rank": rank, "chunk_id": chunk_ids[i], "score": float(rounded[i])}
        for rank, i in enumerate(order, start=1)
    ]


def progress(items: Sequence[Any], desc: str):
    """A progress bar on a terminal, nothing in CI or when output is piped."""
    from tqdm import tqdm

    return tqdm(items, desc=desc, disable=not sys.stderr.isatty(), leave=False)


# --- BM25 -----------------------------------------------------------------

BM25_KEYS = {"kind", "k1", "b", "lowercase", "stopwords", "stemmer", "abstain_below"}


def bm25_tokenize(texts: Sequence[str], spec: dict) -> list[list[str]]:
    """Tokenise with bm25s, the same way for chunks and questions."""
    import bm25s

    stemmer = None
    if spec.get("stemmer", "none") not in (None, "none"):
        import Stemmer

        stemmer = Stemmer.Stemmer(spec["stemmer"]).stemWords
    stopwords = spec.get("stopwords", "en")
    return bm25s.tokenize(
        list(texts),
        lower=spec.get("lowercase", True),
        stopwords=None if stopwords in (None, "none") else stopwords,
        stemmer=stemmer,
        return_ids=False,
        show_progress=False,
    )


def bm25_run(cases: Sequence[Case], chunks: Sequence[Chunk], spec: dict, depth: int) -> list[RunRow]:
    """BM25 (bm25s, Lucene variant) over chunk texts, filtered per case."""
    import bm25s

    chunks = sorted(chunks, key=lambda c: c.chunk_id)
    chunk_ids = [chunk.chunk_id for chunk in chunks]
    index = bm25s.BM25(k1=spec.get("k1", 1.5), b=spec.get("b", 0.75))
    index.index(bm25_tokenize([chunk.text for chunk in chunks], spec), show_progress=False)
    queries = bm25_tokenize([case.question for case in cases], spec)
    rows: list[RunRow] = []
    for case, tokens in zip(progress(cases, "bm25"), queries):
        ids = index.get_tokens_ids(tokens)
        scores = index.get_scores_from_ids(ids) if ids else np.zeros(len(chunks))
        rows.extend(top_ranked(case.case_id, scores, allowed_mask(case, chunks), chunk_ids, depth))
    return rows


def bm25_problems(spec: dict, where: str) -> list[Problem]:
    problems = []
    for key in ("k1", "b"):
        value = spec.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            problems.append(
                Problem(where, f"{key} must be a number ≥ 0, got {value!r}", f"set {key}, e.g. k1: 1.5, b: 0.75")
            )
    if spec.get("stopwords", "en") not in ("en", "english", "none", None):
        problems.append(Problem(where, f"unknown stopwords {spec['stopwords']!r}", "use stopwords: en or none"))
    stemmer = spec.get("stemmer", "none")
    if stemmer not in (None, "none"):
        import Stemmer

        if stemmer not in Stemmer.algorithms():
            problems.append(
                Problem(where, f"unknown stemmer {stemmer!r}", f"use none or one of {', '.join(Stemmer.algorithms())}")
            )
    if not isinstance(spec.get("lowercase", True), bool):
        problems.append(Problem(where, "lowercase must be true or false", "set lowercase: true"))
    return problems


# --- registry -------------------------------------------------------------

Kind = tuple[
    Callable[[Sequence[Case], Sequence[Chunk], dict, int], list[RunRow]], Callable[[dict, str], list[Problem]], set
]

KINDS: dict[str, Kind] = {"bm25": (bm25_run, bm25_problems, BM25_KEYS)}


def retriever_problems(name: str, spec: Any, where: str) -> list[Problem]:
    """Check one ``params.retrievers`` entry: a known kind, known keys, sane values."""
    if not isinstance(spec, dict):
        return [Problem(where, f"retriever {name!r} must be a mapping", "give it a kind, e.g. kind: bm25")]
    kind = spec.get("kind")
    if kind not in KINDS:
        return [Problem(where, f"unknown retriever kind {kind!r}", f"use one of: {', '.join(sorted(KINDS))}")]
    _, check, keys = KINDS[kind]
    problems = [
        Problem(where, f"unknown key {key!r} for kind {kind}", f"remove it; known keys: {', '.join(sorted(keys))}")
        for key in sorted(set(spec) - keys)
    ]
    threshold = spec.get("abstain_below")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))):
        problems.append(Problem(where, "abstain_below must be a number", "set abstain_below: 2.5, or remove it"))
    return problems + check(spec, where)


def retrieve(cases: Sequence[Case], chunks: Sequence[Chunk], spec: dict, depth: int) -> list[RunRow]:
    """Run the retriever ``spec`` for every case; rows sorted by (case_id, rank)."""
    run, _, _ = KINDS[spec["kind"]]
    rows = run(sorted(cases, key=lambda c: c.case_id), chunks, spec, depth)
    return sorted(rows, key=lambda row: (row["case_id"], row["rank"]))
