"""``kind: bm25``: BM25 (bm25s, Lucene variant) over the chunk texts, per case filtered
(its keys and checks: :mod:`ragvet.retrieval.specs.bm25`)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ragvet.retrieval.ranking import RunRow, top_ranked
from ragvet.retrieval.request import Request
from ragvet.schema import Case
from ragvet.storage.columns import ChunkTexts
from ragvet.storage.progress import progress_bar


def bm25_tokenizer(spec: dict):
    """A bm25s tokenizer with the spec's lowercasing, stop words and stemmer,
    shared by chunks and questions so both map into one vocabulary."""
    from bm25s.tokenization import Tokenizer  # deferred: BM25's run only

    stemmer = None
    if spec.get("stemmer", "none") not in (None, "none"):
        import Stemmer  # deferred: BM25's stemmers only

        stemmer = Stemmer.Stemmer(spec["stemmer"])
    stopwords = spec.get("stopwords", "en")
    return Tokenizer(
        lower=spec.get("lowercase", True),
        stopwords=None if stopwords in (None, "none") else stopwords,
        stemmer=stemmer,
    )


def bm25_run(request: Request, spec: dict) -> list[RunRow]:
    """BM25 over the request's :class:`Chunk` objects, timing each query."""
    return bm25_columns_run(request.cases, ChunkTexts.from_chunks(request.chunks), spec, request.depth, request.latency)


def bm25_columns_run(
    cases: Sequence[Case], table: ChunkTexts, spec: dict, depth: int, latency: dict[str, float] | None = None
) -> list[RunRow]:
    """BM25 (bm25s, Lucene variant) over chunk texts, filtered per case. The
    seconds of each case's search (scoring, filter, ranking) go into ``latency``.

    Texts are tokenised straight to ids in one vocabulary (question words the
    chunks never use are dropped), which is bm25s's fast path. The table's texts
    are released once tokenised and the token ids once indexed, so neither is
    held while the index is built or queried.
    """
    import bm25s  # deferred: BM25's run only

    tokenizer = bm25_tokenizer(spec)
    corpus_ids = tokenizer.tokenize(table.release_texts(), return_as="ids", show_progress=False)
    index = bm25s.BM25(k1=spec.get("k1", 1.5), b=spec.get("b", 0.75))
    index.index((corpus_ids, tokenizer.get_vocab_dict()), show_progress=False)
    del corpus_ids
    questions = [case.question for case in cases]
    queries = tokenizer.tokenize(questions, update_vocab=False, return_as="ids", show_progress=False, allow_empty=False)
    masks: dict[str, np.ndarray] = {}
    rows: list[RunRow] = []
    latency = {} if latency is None else latency
    for case, ids in zip(progress_bar(cases, desc="bm25"), queries):
        started = time.perf_counter()
        if not ids:
            latency[case.case_id] = time.perf_counter() - started
            continue  # no question word is in the vocabulary: every score is 0, nothing is returned
        scores = index.get_scores_from_ids(ids)
        key = json.dumps(case.filter, sort_keys=True, default=str)
        if key not in masks:  # cases share few distinct filters: test each once
            masks[key] = table.allowed(case.filter)
        # Only chunks with a query term score above 0 and can be returned: rank those, not the whole corpus.
        matched = np.flatnonzero(scores > 0)
        rows.extend(
            top_ranked(case.case_id, scores[matched], masks[key][matched], _Subset(table.chunk_ids, matched), depth)
        )
        latency[case.case_id] = time.perf_counter() - started
    return rows


@dataclass(frozen=True)
class _Subset(Sequence[str]):
    """The chunk ids at ``positions`` (ascending, so still sorted), without building the list."""

    ids: Sequence[str]
    positions: np.ndarray

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, index):  # top_ranked reads only the few it returns
        return self.ids[self.positions[index]]
