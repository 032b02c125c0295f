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

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ragvet.errors import InputError, Problem, raise_if
from ragvet.retrieval import dense
from ragvet.retrieval.endpoints import HTTP_KEYS, endpoint_items, http_problems
from ragvet.retrieval.fusion import FUSIONS, NORMALISATIONS, reciprocal_rank_fusion, weighted_fusion
from ragvet.retrieval.passages import PassageLocator, is_foreign
from ragvet.retrieval.plugins import add_score, call_plugin, external_scores, item_id
from ragvet.retrieval.postgres import PGVECTOR_KEYS, existing_run, owned_run, pgvector_problems
from ragvet.retrieval.ranking import RunRow, by_case, rank_scored, top_ranked
from ragvet.schema import Case, Chunk, Doc
from ragvet.storage.columns import ChunkTexts
from ragvet.storage.files import link_out_of_project
from ragvet.storage.progress import progress_bar
from ragvet.text.values import is_number, is_positive_int

# --- BM25 -----------------------------------------------------------------

BM25_KEYS = {"kind", "k1", "b", "lowercase", "stopwords", "stemmer", "abstain_below"}


def bm25_tokenizer(spec: dict):
    """A bm25s tokenizer with the spec's lowercasing, stop words and stemmer,
    shared by chunks and questions so both map into one vocabulary."""
    from bm25s.tokenization import Tokenizer  # not for `ragvet --help`

    stemmer = None
    if spec.get("stemmer", "none") not in (None, "none"):
        import Stemmer  # not for `ragvet --help`

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
    import bm25s  # not for `ragvet --help`

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


def bm25_problems(spec: dict, where: str) -> list[Problem]:
    problems = []
    for key in ("k1", "b"):
        value = spec.get(key, 0)
        if not is_number(value) or value < 0:
            problems.append(
                Problem(where, f"{key} must be a number ≥ 0, got {value!r}", f"set {key}, e.g. k1: 1.5, b: 0.75")
            )
    if spec.get("stopwords", "en") not in ("en", "english", "none", None):
        problems.append(Problem(where, f"unknown stopwords {spec['stopwords']!r}", "use stopwords: en or none"))
    stemmer = spec.get("stemmer", "none")
    if stemmer not in (None, "none"):
        import Stemmer  # not for `ragvet --help`

        if stemmer not in Stemmer.algorithms():
            problems.append(
                Problem(where, f"unknown stemmer {stemmer!r}", f"use none or one of {', '.join(Stemmer.algorithms())}")
            )
    if not isinstance(spec.get("lowercase", True), bool):
        problems.append(Problem(where, "lowercase must be true or false", "set lowercase: true"))
    return problems


# --- registry -------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """What every kind gets: cases sorted by id, chunks sorted by chunk_id, the
    depth, all retriever specs (for kinds built from other retrievers), and the
    corpus (to locate the foreign passages a run file or an endpoint returns)."""

    cases: Sequence[Case]
    chunks: Sequence[Chunk]
    depth: int
    retrievers: Mapping[str, dict]
    docs: Mapping[str, Doc] = field(default_factory=dict)
    latency: dict[str, float] = field(default_factory=dict)  # seconds per case, for kinds that time each query

    def deeper(self, depth: int) -> Request:
        """The request for a member retriever: its queries are not the configuration's, so not timed."""
        return replace(self, depth=depth, latency={})

    def chunk_by_id(self) -> dict[str, Chunk]:
        return {chunk.chunk_id: chunk for chunk in self.chunks}


@dataclass(frozen=True)
class Kind:
    run: Callable[[Request, dict], list[RunRow]]
    problems: Callable[[dict, str, Mapping[str, Any]], list[Problem]]
    keys: frozenset[str]


def _simple(run: Callable[[Sequence[Case], Sequence[Chunk], dict, int], list[RunRow]], check, keys) -> Kind:
    """A kind that needs no other retriever: adapt ``run(cases, chunks, spec, depth)``."""
    return Kind(
        lambda request, spec: run(request.cases, request.chunks, spec, request.depth),
        lambda spec, where, _retrievers: check(spec, where),
        frozenset(keys),
    )


def _simple_request(run: Callable[[Request, dict], list[RunRow]], check, keys) -> Kind:
    """A kind that needs no other retriever but the whole request."""
    return Kind(run, lambda spec, where, _retrievers: check(spec, where), frozenset(keys))


def run_named(request: Request, name: str) -> list[RunRow]:
    """The run of the retriever called ``name`` (a member of a hybrid or rerank).

    Members rank the chunking's chunks: fusing or re-scoring foreign passages with
    chunks would mix two segmentations of the corpus in one ranking.
    """
    spec = request.retrievers[name]
    rows = kind_for(spec).run(request, spec)
    if is_foreign(row["chunk_id"] for row in rows):
        raise InputError(
            [
                Problem(
                    f"params.yaml: retriever {name!r}",
                    "it returns foreign passages, so it cannot be a member of a hybrid or rerank",
                    "evaluate it as a configuration of its own",
                )
            ]
        )
    return rows


# --- hybrid ---------------------------------------------------------------

HYBRID_KEYS = {"kind", "members", "fusion", "rrf_k", "weights", "normalisation", "candidates", "abstain_below"}


def hybrid_run(request: Request, spec: dict) -> list[RunRow]:
    """Fuse the members' runs, each retrieved to ``candidates`` (default 100)."""
    members = [by_case(run_named(request.deeper(spec.get("candidates", 100)), name)) for name in spec["members"]]
    chunk_by_id = request.chunk_by_id()
    rows: list[RunRow] = []
    for case in request.cases:
        runs = [member.get(case.case_id, []) for member in members]
        if spec.get("fusion", "rrf") == "rrf":
            fused = reciprocal_rank_fusion([[r["chunk_id"] for r in run] for run in runs], spec.get("rrf_k", 60))
        else:
            scores = [{r["chunk_id"]: r["score"] for r in run} for run in runs]
            weights = spec.get("weights") or [1.0] * len(runs)
            fused = weighted_fusion(scores, weights, spec.get("normalisation", "min-max"))
        rows.extend(rank_scored(case, fused, chunk_by_id, request.depth))
    return rows


def _members_problems(names: Any, key: str, where: str, retrievers: Mapping[str, Any]) -> list[Problem]:
    known = ", ".join(sorted(retrievers))
    if not isinstance(names, list) or not names:
        return [Problem(where, f"{key} must be a non-empty list of retriever names", f"e.g. {key}: [bm25, dense]")]
    return [
        Problem(where, f"{key} names unknown retriever {name!r}", f"use one of: {known}")
        for name in names
        if not isinstance(name, str) or name not in retrievers  # a list or mapping is not hashable
    ]


def hybrid_problems(spec: dict, where: str, retrievers: Mapping[str, Any]) -> list[Problem]:
    problems = _members_problems(spec.get("members"), "members", where, retrievers)
    fusion = spec.get("fusion", "rrf")
    if fusion not in FUSIONS:
        problems.append(Problem(where, f"unknown fusion {fusion!r}", f"use one of: {', '.join(FUSIONS)}"))
    for key in ("rrf_k", "candidates"):
        if key in spec and not is_positive_int(spec[key]):
            problems.append(Problem(where, f"{key} must be an integer > 0", f"e.g. {key}: 60"))
    weights = spec.get("weights")
    if weights is not None and (
        not isinstance(weights, list)
        or len(weights) != len(spec.get("members") or [])
        or not all(is_number(w) for w in weights)
    ):
        problems.append(Problem(where, "weights must be one number per member", "e.g. weights: [0.3, 0.7]"))
    if spec.get("normalisation", "min-max") not in NORMALISATIONS:
        problems.append(Problem(where, "unknown normalisation", f"use one of: {', '.join(NORMALISATIONS)}"))
    return problems


# --- rerank ---------------------------------------------------------------

RERANK_KEYS = {
    "kind",
    "first_stage",
    "top_n",
    "scorer",
    "model",
    "batch_size",
    "query_prefix",
    "passage_prefix",
    "precision",
    "abstain_below",
}
SCORERS = ("bi-encoder", "cross-encoder")


def rerank_run(request: Request, spec: dict) -> list[RunRow]:
    """Re-score the first stage's top ``top_n`` (default 50) with an encoder.

    The run holds only re-scored chunks, so it is as deep as ``min(top_n, depth)``.
    """
    first = by_case(run_named(request.deeper(spec.get("top_n", 50)), spec["first_stage"]))
    chunk_by_id = request.chunk_by_id()
    items = [(case, [row["chunk_id"] for row in first.get(case.case_id, [])]) for case in request.cases]
    pairs = [(case.question, [chunk_by_id[chunk_id].text for chunk_id in ids]) for case, ids in items]
    batch, precision = spec.get("batch_size", 32), spec.get("precision", dense.PORTABLE)
    if spec.get("scorer", "bi-encoder") == "cross-encoder":
        scored = dense.cross_encoder_scores_many(spec["model"], pairs, batch, precision)
    else:
        with dense.EmbeddingCache() as cache:
            scored = dense.bi_encoder_scores_many(
                spec.get("model", dense.DEFAULT_MODEL),
                pairs,
                query_prefix=spec.get("query_prefix", ""),
                passage_prefix=spec.get("passage_prefix", ""),
                batch_size=batch,
                cache=cache,
                precision=precision,
            )
    rows: list[RunRow] = []
    for (case, ids), scores in zip(items, scored):
        rows.extend(rank_scored(case, dict(zip(ids, map(float, scores))), chunk_by_id, request.depth))
    return rows


def rerank_problems(spec: dict, where: str, retrievers: Mapping[str, Any]) -> list[Problem]:
    problems = _members_problems([spec.get("first_stage")], "first_stage", where, retrievers)
    scorer = spec.get("scorer", "bi-encoder")
    if scorer not in SCORERS:
        problems.append(Problem(where, f"unknown scorer {scorer!r}", f"use one of: {', '.join(SCORERS)}"))
    if scorer == "cross-encoder" and not spec.get("model"):
        problems.append(Problem(where, "a cross-encoder needs `model`", "set model: a local cross-encoder folder"))
    elif scorer in SCORERS:
        problems += dense.encoder_problems(spec, where)
    if "top_n" in spec and not is_positive_int(spec["top_n"]):
        problems.append(Problem(where, "top_n must be an integer > 0", "e.g. top_n: 50"))
    return problems


# --- the user's own system: python plugin and run file -----------------------

PYTHON_KEYS = {"kind", "target", "options", "abstain_below"}
RUN_FILE_KEYS = {"kind", "path", "format", "abstain_below"}
RUN_FILE_FOLDER = "data/external"  # a dependency of every retrieve stage in dvc.yaml
PLUGINS = "plugins"  # the package of python-kind targets, also a dependency of every retrieve stage


def python_run(request: Request, spec: dict) -> list[RunRow]:
    """Call the user's ``package.module:function(cases, chunks, **options)``.

    ``cases`` is a list of ``{"id", "question", "filter"}`` and ``chunks`` a
    pandas DataFrame of the chunk table. It returns ``{case_id: [(chunk_id,
    score), ...]}``. ragvet re-applies the metadata filter, so a plugin that
    ignores it is not rewarded for chunks the case excludes.
    """
    result = call_plugin(spec["target"], request.cases, request.chunks, spec.get("options") or {})
    chunk_by_id = request.chunk_by_id()
    return [
        row
        for case in request.cases
        for row in rank_scored(case, result.get(case.case_id, {}), chunk_by_id, request.depth)
    ]


def run_file_run(request: Request, spec: dict) -> list[RunRow]:
    """Rank a production system's run file, checked against the chunking or, for
    foreign passages, located in the corpus."""
    locator = PassageLocator(request.docs)
    scored, chunk_by_id = external_scores(
        Path(spec["path"]), spec.get("format"), request.cases, request.chunks, locator
    )
    return [
        row
        for case in request.cases
        for row in rank_scored(case, scored.get(case.case_id, {}), chunk_by_id, request.depth)
    ]


def http_run(request: Request, spec: dict) -> list[RunRow]:
    """Ask the team's endpoint (:mod:`ragvet.retrieval.endpoints`) and rank what it
    returned: chunk ids of the chunking, or foreign passages located in the corpus."""
    returned, latency = endpoint_items(spec, request.cases, request.depth)
    request.latency.update(latency)
    locator, lookup = PassageLocator(request.docs), request.chunk_by_id()
    scored: dict[str, dict[str, float]] = {}
    problems: list[Problem] = []
    for case_id, items in returned.items():
        for number, item in enumerate(items, start=1):
            where = f"http retriever {spec['url']} (case {case_id}, hit {number})"
            found = item_id({key: value for key, value in item.items() if key != "score"}, lookup, locator, where)
            problems += found if isinstance(found, list) else add_score(scored, case_id, found, item["score"], where)
    raise_if(problems)
    return [
        row for case in request.cases for row in rank_scored(case, scored.get(case.case_id, {}), lookup, request.depth)
    ]


def pgvector_run(request: Request, spec: dict) -> list[RunRow]:
    """PostgreSQL + pgvector (:mod:`ragvet.retrieval.postgres`): ragvet's own table of
    the chunking's vectors, or the team's existing table of foreign passages."""
    if spec.get("mode", "owned") == "owned":
        return owned_run(request.cases, request.chunks, spec, request.depth, request.latency)
    return existing_run(request.cases, spec, request.depth, request.docs, request.latency)


def python_problems(spec: dict, where: str, _retrievers: Mapping[str, Any]) -> list[Problem]:
    target = spec.get("target")
    if not isinstance(target, str) or target.count(":") != 1:
        return [Problem(where, f"target must be 'package.module:function', got {target!r}", "e.g. plugins.mine:search")]
    module = target.partition(":")[0]
    if not module.startswith(f"{PLUGINS}."):
        return [
            Problem(
                where,
                f"target {target!r} is outside the project's `{PLUGINS}` package: this kind runs the code it names, "
                f"and dvc.yaml tracks only `{PLUGINS}/`, so a change elsewhere would not re-run retrieval",
                f"put the function in a module under {PLUGINS}/ and name it, e.g. {PLUGINS}.mine:search",
            )
        ]
    if not isinstance(spec.get("options", {}), dict):
        return [Problem(where, "options must be a mapping", "pass keyword arguments as options: {top: 5}")]
    source = Path(*module.split("."))
    return [
        problem
        for path in (source.with_suffix(".py"), source / "__init__.py")
        if path.exists() and (problem := link_out_of_project(path, Path(PLUGINS))) is not None
    ]


def run_file_problems(spec: dict, where: str, _retrievers: Mapping[str, Any]) -> list[Problem]:
    problems = []
    if not isinstance(spec.get("path"), str):
        problems.append(Problem(where, "run_file needs `path`", "e.g. path: data/external/production.trec"))
    elif not Path(spec["path"]).is_file():
        problems.append(Problem(where, f"run file {spec['path']!r} not found", "fix `path` (relative to the project)"))
    elif not Path(spec["path"]).resolve().is_relative_to(Path(RUN_FILE_FOLDER).resolve()):
        problems.append(
            Problem(
                where,
                f"run file {spec['path']!r} is outside {RUN_FILE_FOLDER}/, which dvc.yaml tracks",
                f"move it into {RUN_FILE_FOLDER}/ so that editing it re-runs retrieval",
            )
        )
    if spec.get("format") not in (None, "trec", "jsonl"):
        problems.append(Problem(where, f"unknown format {spec['format']!r}", "use format: trec or jsonl"))
    return problems


KINDS: dict[str, Kind] = {
    "bm25": _simple_request(bm25_run, bm25_problems, BM25_KEYS),
    "dense": _simple(dense.dense_run, dense.dense_problems, dense.DENSE_KEYS),
    "hybrid": Kind(hybrid_run, hybrid_problems, frozenset(HYBRID_KEYS)),
    "rerank": Kind(rerank_run, rerank_problems, frozenset(RERANK_KEYS)),
    "python": Kind(python_run, python_problems, frozenset(PYTHON_KEYS)),
    "run_file": Kind(run_file_run, run_file_problems, frozenset(RUN_FILE_KEYS)),
    "http": _simple_request(http_run, http_problems, HTTP_KEYS),
    "pgvector": _simple_request(pgvector_run, pgvector_problems, PGVECTOR_KEYS),
}


def kind_for(spec: dict) -> Kind:
    """The retriever kind a spec names (its run, its checks and its keys)."""
    return KINDS[spec["kind"]]


def _cycle(name: str, retrievers: Mapping[str, Any], path: tuple[str, ...] = ()) -> tuple[str, ...] | None:
    """A chain of member references that comes back to ``name``, if any."""
    spec = retrievers.get(name) if isinstance(name, str) else None  # a member may be any YAML value
    if not isinstance(spec, dict):
        return None
    refs = spec.get("members") if spec.get("kind") == "hybrid" else [spec.get("first_stage")]
    for ref in refs if isinstance(refs, list) and spec.get("kind") in ("hybrid", "rerank") else []:
        if ref in path + (name,):
            return path + (name, ref)
        found = _cycle(ref, retrievers, path + (name,))
        if found:
            return found
    return None


def retriever_problems(name: str, spec: Any, where: str, retrievers: Mapping[str, Any] | None = None) -> list[Problem]:
    """Check one ``params.retrievers`` entry: a known kind, known keys, sane values,
    and for hybrid and rerank, members that exist and never refer back to it."""
    if not isinstance(spec, dict):
        return [Problem(where, f"retriever {name!r} must be a mapping", "give it a kind, e.g. kind: bm25")]
    if not isinstance(spec.get("kind"), str) or spec["kind"] not in KINDS:  # a list or mapping is not hashable
        return [Problem(where, f"unknown retriever kind {spec.get('kind')!r}", f"use one of: {', '.join(KINDS)}")]
    kind = kind_for(spec)
    problems = [
        Problem(
            where,
            f"unknown key {key!r} for kind {spec['kind']}",
            f"remove it; known keys: {', '.join(sorted(kind.keys))}",
        )
        for key in sorted(set(spec) - kind.keys)
    ]
    threshold = spec.get("abstain_below")
    if threshold is not None and not is_number(threshold):
        problems.append(Problem(where, "abstain_below must be a number", "set abstain_below: 2.5, or remove it"))
    retrievers = retrievers if retrievers is not None else {name: spec}
    cycle = _cycle(name, retrievers)
    if cycle:
        problems.append(Problem(where, f"members refer back in a loop: {' -> '.join(cycle)}", "break the loop"))
    return problems + kind.problems(spec, where, retrievers)


def retrieve(
    cases: Sequence[Case],
    chunks: Sequence[Chunk] | ChunkTexts,
    spec: dict,
    depth: int,
    retrievers: Mapping[str, dict] | None = None,
    docs: Mapping[str, Doc] | None = None,
    latency: dict[str, float] | None = None,
) -> list[RunRow]:
    """Run the retriever ``spec`` for every case; rows sorted by (case_id, rank).

    ``retrievers`` holds every named spec, which hybrid and rerank need for
    their members; ``docs`` the corpus, where foreign passages are located. The
    rows rank either the chunking's chunks or foreign passages, never both
    (:func:`ragvet.retrieval.passages.is_foreign`). Kinds that time each query
    (bm25, http) put its seconds in ``latency``. The bm25 kind also takes the chunks as :class:`ChunkTexts`
    (the retrieve stage reads them so, to fit a million chunks in less memory);
    every other kind needs :class:`Chunk` objects.
    """
    cases = sorted(cases, key=lambda c: c.case_id)
    if isinstance(chunks, ChunkTexts):
        if spec["kind"] != "bm25":
            raise ValueError(f"the {spec['kind']} kind needs Chunk objects, not ChunkTexts")
        rows = bm25_columns_run(cases, chunks, spec, depth, latency)
    else:
        chunks = sorted(chunks, key=lambda c: c.chunk_id)
        request = Request(cases, chunks, depth, retrievers or {}, docs or {}, {} if latency is None else latency)
        rows = kind_for(spec).run(request, spec)
        try:
            is_foreign(row["chunk_id"] for row in rows)
        except ValueError as err:
            raise InputError([Problem(f"retriever kind {spec['kind']}", str(err), "rank chunks or passages")]) from None
    return sorted(rows, key=lambda row: (row["case_id"], row["rank"]))
