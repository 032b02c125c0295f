"""``ann_recall@k``: how much of the exact top k an approximate index returns, per case.

An approximate index (ragvet's HNSW, pgvector's HNSW or IVF) trades results for speed;
the exact search of the same vectors (``index: flat``, on one machine or sharded on a
cluster) is its ground truth. For one case::

    ann_recall@k = |exact top k  ∩  approximate top k| / |exact top k|

where "top k" is the first ``min(k, rows)`` rows of each run. A case whose exact run is
empty has nothing to miss and nothing measured: its value is None, never 1.0, so a gate
cannot pass on it. The relevance labels play no part: this measures the index, not the
retriever.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ragvet.retrieval.ranking import RunRow, by_case


def ann_recall_at(exact: Sequence[str], approximate: Sequence[str], k: int) -> float | None:
    """The share of ``exact[:k]`` found in ``approximate[:k]`` (chunk ids, rank order); None when ``exact`` is empty."""
    truth = set(exact[:k])
    if not truth:
        return None
    return len(truth & set(approximate[:k])) / len(truth)


def ann_recall_by_case(
    exact: Sequence[RunRow], approximate: Sequence[RunRow], ks: Sequence[int]
) -> dict[str, dict[str, float | None]]:
    """``{case_id: {"ann_recall@k": value}}`` for every case of the exact run (a case the
    approximate run lacks returned nothing: 0.0 where the exact run has rows)."""
    truth, found = _ranked_ids(exact), _ranked_ids(approximate)
    return {
        case_id: {f"ann_recall@{k}": ann_recall_at(ids, found.get(case_id, []), k) for k in ks}
        for case_id, ids in sorted(truth.items())
    }


def mean_ann_recall(per_case: Mapping[str, Mapping[str, float | None]], k: int) -> tuple[float | None, int]:
    """``(mean, cases)`` of ``ann_recall@k`` over the cases it measured (an exact run with
    rows): Σ valueᵢ / n over those n cases; ``(None, 0)`` when there is none."""
    values = [value for row in per_case.values() if (value := row[f"ann_recall@{k}"]) is not None]
    return (sum(values) / len(values) if values else None), len(values)


def _ranked_ids(rows: Sequence[RunRow]) -> Mapping[str, list[str]]:
    return {
        case_id: [row["chunk_id"] for row in sorted(group, key=lambda row: row["rank"])]
        for case_id, group in by_case(rows).items()
    }
