"""Per-case evaluation: joins a run, the evidence projected onto the run's
chunking, and the metric functions. Shared by the evaluate, report and gate
stages, so every figure is computed one way only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from ragvet.evidence import project_unit, relevant_chunks
from ragvet.measures.engine import NONE, case_columns, score
from ragvet.measures.reference import case_metrics, check_coverage, sent_chunk
from ragvet.measures.registry import FOREIGN, METRICS, is_chunk_level, sorted_ks
from ragvet.schema import Case, Chunk
from ragvet.settings import Measuring
from ragvet.storage.columns import CaseTable, ChunkTable, RunTable
from ragvet.storage.results import column, list_column


def case_row(
    case: Case,
    split: str,
    ranked: Sequence[dict],
    by_doc: Mapping[str, Sequence[Chunk]],
    chunk_lengths: Mapping[str, int],
    ks: Sequence[int],
    span_coverage: float,
    texts: Mapping[str, str],
    budgets: Sequence[int] = (),
    judgements: bool = False,
) -> dict:
    """One row of the per-case table: metrics, counts, missed evidence, top-1 score.
    ``texts`` are the docs' texts: span coverage counts non-whitespace characters.
    The budget metrics spend the chunks' stored token starts, else their characters.
    ``judgements``: some case of the run has a judged set, so ``judged@k`` is computed
    (None for this case if it has none)."""

    def project(units):
        return [
            project_unit(unit, [c for doc_id in unit.doc_ids for c in by_doc.get(doc_id, ())], texts) for unit in units
        ]

    result = case_metrics(
        [row["chunk_id"] for row in ranked],
        relevant_chunks(case.evidence, by_doc),
        project(case.evidence),
        [project(claim.evidence) for claim in case.claims],
        chunk_lengths,
        ks,
        span_coverage,
        budgets,
        {c.chunk_id: sent_chunk(c) for chunks in by_doc.values() for c in chunks},
        texts,
        [(u.doc_id, u.start, u.end) for u in case.evidence if not u.alternatives and u.start is not None],
        case.judged,
        judgements,
    )
    return {
        "case_id": case.case_id,
        "split": split,
        "answerable": case.answerable,
        "tags": case.tags,
        "top1_score": ranked[0]["score"] if ranked else None,
        **result,
    }


def evaluate_table(
    cases: Sequence[Case] | CaseTable,
    chunks: Sequence[Chunk] | ChunkTable,
    run: Mapping[str, Sequence[dict]] | RunTable,
    split: Mapping[str, str],
    texts: Mapping[str, str],
    measuring: Measuring,
    chunk_level: bool = True,
) -> pl.DataFrame:
    """The per-case table (:mod:`ragvet.storage.results`) of every case, sorted by
    case_id, built from the engine's arrays with no per-case Python row. A case
    absent from the run is an empty retrieval, never a dropped case. ``texts`` maps
    each doc id the evidence points into to its text (span coverage counts its
    non-whitespace characters). Values are not rounded yet.

    ``chunk_level`` is False for a run of foreign passages (``chunks`` are then
    the run's own passages): the chunk-level metrics are None, since their
    relevant set would be only the passages the system happened to return. Foreign
    passages carry no token starts either (the chunk stage never saw them), so when
    the budget counts tokens their budget metrics are None rather than figures in
    characters under a token unit.

    Computed by the vectorised engine (:mod:`ragvet.measures.engine`); each row equals
    :func:`case_row` of the same case, which stays the readable definition. The
    budget metrics are computed at each of ``measuring.budget.values`` (none when off).
    """
    span_coverage = measuring.span_coverage
    check_coverage(span_coverage)
    unique_ks = sorted_ks(measuring.ks)
    table = chunks if isinstance(chunks, ChunkTable) else ChunkTable.from_chunks(chunks)
    if not isinstance(run, RunTable):
        run = RunTable.from_mapping(run, table.index())
    if not isinstance(cases, CaseTable):
        cases = CaseTable.from_cases(cases)
    spends = list(measuring.budget.values)
    scores, evidence = score(
        cases.case_ids, cases.evidence, table, run, unique_ks, span_coverage, texts, spends, cases.judged
    )
    if not chunk_level:
        for name, values in scores.metrics.items():
            if is_chunk_level(name):
                values[:] = NONE
        scores.first_relevant_rank[:] = 0  # none: no chunk of a chunking is relevant here
    if not chunk_level and measuring.budget.counts_tokens:
        for name, values in scores.metrics.items():
            if METRICS[name.partition("@")[0]].budget:
                values[:] = NONE
    columns = case_columns(scores, evidence, unique_ks)
    integers = {"first_relevant_rank"} | {
        column("metrics", name) for name in scores.metrics if not METRICS[name.partition("@")[0]].share
    }
    missed = list_column(
        "missed_evidence", columns.pop("missed_case"), columns.pop("missed_label"), len(cases.case_ids)
    )
    series = [pl.Series(name, values, nan_to_null=True) for name, values in columns.items()]
    marker = [] if chunk_level else [pl.Series("passages", [FOREIGN] * len(cases.case_ids), dtype=pl.String)]
    return pl.DataFrame(
        [
            pl.Series("case_id", cases.case_ids, dtype=pl.String),
            pl.Series("split", [split[case_id] for case_id in cases.case_ids], dtype=pl.String),
            pl.Series("answerable", cases.answerable, dtype=pl.Boolean),
            *marker,
            missed,
            *(s.cast(pl.Int64) if s.name in integers else s for s in series),
            *(tag.alias(column("tags", tag.name)) for tag in cases.tags.iter_columns()),
        ]
    ).sort("case_id")
