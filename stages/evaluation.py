"""Per-case evaluation: joins a run, the evidence projected onto the run's
chunking, and the metric functions. Shared by the evaluate, report and gate
stages, so every figure is computed one way only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from stages.answers import review_summary
from stages.evidence import chunks_by_doc, project_unit, relevant_chunks
from stages.metrics import SPLITS, case_metrics, summarise
from stages.schema import Case, Chunk


def case_row(
    case: Case,
    split: str,
    ranked: Sequence[dict],
    by_doc: Mapping[str, Sequence[Chunk]],
    chunk_lengths: Mapping[str, int],
    ks: Sequence[int],
    span_coverage: float,
) -> dict:
    """One row of the per-case table: metrics, counts, missed evidence, top-1 score."""

    def project(units):
        return [project_unit(unit, [c for doc_id in unit.doc_ids for c in by_doc.get(doc_id, ())]) for unit in units]

    result = case_metrics(
        [row["chunk_id"] for row in ranked],
        relevant_chunks(case.evidence, by_doc),
        project(case.evidence),
        [project(claim.evidence) for claim in case.claims],
        chunk_lengths,
        ks,
        span_coverage,
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
    cases: Sequence[Case],
    chunks: Sequence[Chunk],
    run: Mapping[str, Sequence[dict]],
    split: Mapping[str, str],
    ks: Sequence[int],
    span_coverage: float,
) -> list[dict]:
    """Per-case rows for every case, sorted by case_id. A case absent from the
    run is an empty retrieval, never a dropped case."""
    by_doc = chunks_by_doc(chunks)
    lengths = {chunk.chunk_id: chunk.end - chunk.start for chunk in chunks}
    return [
        case_row(case, split[case.case_id], run.get(case.case_id, ()), by_doc, lengths, ks, span_coverage)
        for case in sorted(cases, key=lambda c: c.case_id)
    ]


def config_summary(
    config: str,
    spec: Mapping[str, str],
    rows: Sequence[dict],
    ks: Sequence[int],
    abstain_below: float | None,
    fingerprints: Mapping[str, str],
    abstain_source: str | None = None,
) -> dict:
    """The ``metrics/<config>.json`` content: means with denominators per split,
    abstention figures, and the fingerprints a later gate must match.

    Where rows carry recorded answers, a ``human_review`` section is added; with
    none, the section is absent rather than zero. The abstention threshold and
    where it comes from (``abstain_source``) sit beside the rates it produced.
    """
    summary = {
        "config": config,
        "chunking": spec["chunking"],
        "retriever": spec["retriever"],
        **summarise(rows, ks, abstain_below),
        "fingerprints": {"eval_split": fingerprints["eval_split"], "corpus": fingerprints["corpus"]},
    }
    if abstain_below is not None:
        summary["abstention"] |= {"abstain_below": abstain_below, "abstain_below_source": abstain_source}
    review = review_summary(rows, ks, SPLITS)
    if review is not None:
        summary["human_review"] = review
    return summary
