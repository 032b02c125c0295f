"""Per-case evaluation: joins a run, the evidence projected onto the run's
chunking, and the metric functions. Shared by the evaluate, report and gate
stages, so every figure is computed one way only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from stages.evidence import project_unit, relevant_chunks
from stages.measures.reference import case_metrics, check_coverage, sent_chunk
from stages.measures.registry import sorted_ks
from stages.schema import Case, Chunk

if TYPE_CHECKING:
    from stages.storage.columns import CaseTable, ChunkTable, RunTable


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
) -> dict:
    """One row of the per-case table: metrics, counts, missed evidence, top-1 score.
    ``texts`` are the docs' texts: span coverage counts non-whitespace characters.
    The budget metrics spend the chunks' stored token starts, else their characters."""

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
    )
    return {
        "case_id": case.case_id,
        "split": split,
        "answerable": case.answerable,
        "tags": case.tags,
        "top1_score": ranked[0]["score"] if ranked else None,
        **result,
    }


def evaluate_run(
    cases: Sequence[Case] | CaseTable,
    chunks: Sequence[Chunk] | ChunkTable,
    run: Mapping[str, Sequence[dict]] | RunTable,
    split: Mapping[str, str],
    ks: Sequence[int],
    span_coverage: float,
    texts: Mapping[str, str],
    budgets: Sequence[int] = (),
) -> list[dict]:
    """Per-case rows for every case, sorted by case_id. A case absent from the
    run is an empty retrieval, never a dropped case. ``texts`` maps each doc id
    the evidence points into to its text (span coverage counts its non-whitespace
    characters).

    Computed by the vectorised engine (:mod:`stages.measures.engine`); each row equals
    :func:`case_row` of the same case, which stays the readable definition. The
    budget metrics are computed at each of ``budgets`` (``budget.values``; none without).
    """
    from stages.measures.engine import case_results, score  # numpy: not for --help
    from stages.storage.columns import CaseTable, ChunkTable, RunTable  # numpy: not for --help

    check_coverage(span_coverage)
    unique_ks = sorted_ks(ks)
    table = chunks if isinstance(chunks, ChunkTable) else ChunkTable.from_chunks(chunks)
    if not isinstance(run, RunTable):
        run = RunTable.from_mapping(run, table.index())
    if not isinstance(cases, CaseTable):
        cases = CaseTable.from_cases(cases)
    spends = sorted(set(budgets))
    scores, evidence = score(cases.case_ids, cases.evidence, table, run, unique_ks, span_coverage, texts, spends)
    top1 = scores.top1_score.tolist()
    return [
        {
            "case_id": case_id,
            "split": split[case_id],
            "answerable": answerable,
            "tags": tags,
            "top1_score": None if top1[row] != top1[row] else top1[row],
            **result,
        }
        for row, (case_id, answerable, tags, result) in enumerate(
            zip(cases.case_ids, cases.answerable, cases.tags, case_results(scores, evidence, unique_ks))
        )
    ]
