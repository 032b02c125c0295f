"""Retrieval and evidence-availability metrics: one case at a time, then macro means.

These are the reference definitions of ragvet's figures (DESIGN.md, "Metric
definitions"). Every function takes a ranked list of chunk ids, best first, and
treats it the same way:

* The list is deduplicated first, keeping the first occurrence of each id; ranks
  are positions in the deduplicated list, starting at 1.
* ``k <= 0`` selects no chunk, which gives ``0.0``.
* A ``k`` beyond the list counts the missing ranks as non-relevant, as trec_eval
  does (so ``precision@k`` still divides by ``k``).
* A case with nothing to find (no relevant chunk, no evidence unit, no claim) has
  no value for the metric that needs it: the function returns ``None`` and the
  case is reported apart, never averaged in as ``0``.

Chunk-level ``recall``, ``hit``, ``mrr``, ``precision`` and ``ndcg`` agree with
trec_eval (``recall_k``, ``success_k``, ``recip_rank``, ``P_k``, ``ndcg_cut_k``)
under binary relevance; the test suite checks this against pytrec_eval and ranx.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stages.answers import REVIEW_METRICS, ReviewMetric
from stages.errors import InputError, Problem
from stages.schema import ProjectedUnit

SPLITS = ("eval", "dev")


# ---------------------------------------------------------------------------
# Reference functions (one case)
# ---------------------------------------------------------------------------


def dedupe(retrieved: Sequence[str]) -> tuple[list[str], int]:
    """Drop repeated ids, keeping the first occurrence of each.

    Returns ``(deduplicated list, number of entries removed)``; an empty input
    gives ``([], 0)``.
    """
    seen: set[str] = set()
    kept: list[str] = []
    for chunk_id in retrieved:
        if chunk_id not in seen:
            seen.add(chunk_id)
            kept.append(chunk_id)
    return kept, len(retrieved) - len(kept)


def _top(retrieved: Sequence[str], k: int | None) -> list[str]:
    """The deduplicated top-``k`` (all of it when ``k`` is None, nothing when ``k <= 0``)."""
    ranked, _ = dedupe(retrieved)
    if k is None:
        return ranked
    return ranked[: max(k, 0)]


def recall_at_k(retrieved: Sequence[str], relevant: Collection[str], k: int) -> float | None:
    """Chunk-level recall: ``|top-k ∩ relevant| / |relevant|``.

    ``None`` when ``relevant`` is empty; ``0.0`` when ``k <= 0``.
    """
    rel = set(relevant)
    if not rel:
        return None
    return len(rel.intersection(_top(retrieved, k))) / len(rel)


def hit_at_k(retrieved: Sequence[str], relevant: Collection[str], k: int) -> float | None:
    """``1.0`` if any relevant chunk is in the top-k, else ``0.0`` (trec_eval ``success_k``).

    ``None`` when ``relevant`` is empty; ``0.0`` when ``k <= 0``.
    """
    rel = set(relevant)
    if not rel:
        return None
    return 1.0 if rel.intersection(_top(retrieved, k)) else 0.0


def first_relevant_rank(retrieved: Sequence[str], relevant: Collection[str]) -> int | None:
    """1-based rank of the first relevant chunk in the deduplicated list, or ``None``."""
    rel = set(relevant)
    for rank, chunk_id in enumerate(_top(retrieved, None), start=1):
        if chunk_id in rel:
            return rank
    return None


def reciprocal_rank(retrieved: Sequence[str], relevant: Collection[str], depth: int | None = None) -> float | None:
    """``1 / rank`` of the first relevant chunk within ``depth``, ``0.0`` if none (trec_eval ``recip_rank``).

    ``depth=None`` looks at the whole list (which the retrieve stage already cut at
    ``params.depth``). ``None`` when ``relevant`` is empty; ``0.0`` when ``depth <= 0``.
    """
    if not set(relevant):
        return None
    rank = first_relevant_rank(_top(retrieved, depth), relevant)
    return 0.0 if rank is None else 1.0 / rank


def precision_at_k(retrieved: Sequence[str], relevant: Collection[str], k: int) -> float | None:
    """trec_eval ``P_k``: ``|top-k ∩ relevant| / k``; ranks past the list count as non-relevant.

    ``None`` when ``relevant`` is empty; ``0.0`` when ``k <= 0``.
    """
    rel = set(relevant)
    if not rel:
        return None
    if k <= 0:
        return 0.0
    return len(rel.intersection(_top(retrieved, k))) / k


def _discount(rank: int) -> float:
    return 1.0 / math.log2(rank + 1)


def ndcg_at_k(retrieved: Sequence[str], relevant: Collection[str], k: int) -> float | None:
    """trec_eval ``ndcg_cut_k`` with binary relevance: ``DCG@k / IDCG@k``.

    ``DCG@k = Σ_{i ≤ k, doc_i relevant} 1 / log2(i + 1)`` over the deduplicated list;
    ``IDCG@k = Σ_{i ≤ min(k, |relevant|)} 1 / log2(i + 1)``, the DCG of a perfect ranking.
    ``None`` when ``relevant`` is empty; ``0.0`` when ``k <= 0``.
    """
    rel = set(relevant)
    if not rel:
        return None
    if k <= 0:
        return 0.0
    dcg = math.fsum(_discount(rank) for rank, chunk_id in enumerate(_top(retrieved, k), start=1) if chunk_id in rel)
    idcg = math.fsum(_discount(rank) for rank in range(1, min(k, len(rel)) + 1))
    return dcg / idcg


def _union_length(intervals: Iterable[tuple[int, int]]) -> int:
    """Characters covered by the union of half-open intervals ``[start, end)``."""
    covered = 0
    reach: int | None = None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            covered += max(end - start, 0)
            reach = end
        elif end > reach:
            covered += end - reach
            reach = end
    return covered


def check_coverage(span_coverage: float) -> None:
    """Refuse a share outside [0, 1]: a programming error, since validate checks params."""
    if not 0.0 <= span_coverage <= 1.0:
        raise ValueError(f"span_coverage must be between 0 and 1, got {span_coverage!r}")


def unit_available(unit: ProjectedUnit, top_k: Collection[str], span_coverage: float = 1.0) -> bool:
    """Whether one evidence unit is available in a set of chunks.

    A ``{doc}`` unit is available when any of its chunks (``unit.pieces`` keys) is in
    ``top_k``. A span is available when at least one of its chunks is in ``top_k``
    and the *union* of their pieces covers at least ``span_coverage * length``
    characters (overlapping chunks are not counted twice). A zero-length span is
    available when any of its chunks is in ``top_k``. ``span_coverage`` must be in
    ``[0, 1]``; ``0`` means "any overlap". A unit with alternatives is available
    when any one of them is (each judged on its own, never pooled).
    """
    check_coverage(span_coverage)
    if unit.alternatives:
        return any(unit_available(alternative, top_k, span_coverage) for alternative in unit.alternatives)
    chosen = set(top_k)
    present = [piece for chunk_id, piece in unit.pieces.items() if chunk_id in chosen]
    if not present:
        return False
    if unit.doc_level or unit.length <= 0:
        return True
    # A ratio, not ``covered >= coverage * length``: 3/10 and 0.3 round to the same double.
    return _union_length(present) / unit.length >= span_coverage


def evidence_recall_at_k(
    retrieved: Sequence[str], units: Sequence[ProjectedUnit], k: int, span_coverage: float = 1.0
) -> float | None:
    """Share of evidence units available in the top-k (see :func:`unit_available`).

    ``available units / units``. ``None`` when there are no units; ``0.0`` when ``k <= 0``.
    """
    check_coverage(span_coverage)
    if not units:
        return None
    top = set(_top(retrieved, k))
    return sum(unit_available(unit, top, span_coverage) for unit in units) / len(units)


def _claim_available(claim: Sequence[ProjectedUnit], top: Collection[str], span_coverage: float) -> bool:
    return any(unit_available(unit, top, span_coverage) for unit in claim)


def claim_evidence_availability(
    retrieved: Sequence[str], claims: Sequence[Sequence[ProjectedUnit]], k: int, span_coverage: float = 1.0
) -> float | None:
    """Share of claims with at least one evidence unit available in the top-k.

    ``available claims / claims``; a claim with no units is never available. This
    is annotated evidence availability, not a judgement of any answer. ``None``
    when there are no claims; ``0.0`` when ``k <= 0``.
    """
    check_coverage(span_coverage)
    if not claims:
        return None
    top = set(_top(retrieved, k))
    return sum(_claim_available(claim, top, span_coverage) for claim in claims) / len(claims)


def context_chars_at_k(retrieved: Sequence[str], chunk_lengths: Mapping[str, int], k: int) -> int:
    """Characters in the deduplicated top-k chunks: ``Σ len(chunk)``, the context budget.

    Overlapping chunks are counted in full, as they would be sent to a model.
    Defined for every case, abstention cases included; ``0`` when ``k <= 0`` or the
    list is empty. An id missing from ``chunk_lengths`` raises ``KeyError``.
    """
    total = 0
    for chunk_id in _top(retrieved, k):
        if chunk_id not in chunk_lengths:
            raise KeyError(f"retrieved chunk {chunk_id!r} is not in the chunking")
        total += chunk_lengths[chunk_id]
    return total


# ---------------------------------------------------------------------------
# Registry of named per-case metrics
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CaseInput:
    """Everything a per-case metric may read. ``retrieved`` is already deduplicated."""

    retrieved: list[str]
    relevant: frozenset[str]
    units: Sequence[ProjectedUnit]
    claims: Sequence[Sequence[ProjectedUnit]]
    chunk_lengths: Mapping[str, int]
    span_coverage: float


@dataclass(frozen=True)
class Metric:
    """A named per-case metric.

    ``at_k``: the name takes ``@k`` (``mrr`` does not: it uses the run's depth).
    ``comparable_across_chunkings``: its denominator does not depend on the chunking.
    ``higher_is_better``: the direction of an improvement (``context_chars`` is a cost).
    ``abstention``: whether it has a value for abstention cases.
    ``share``: a value in [0, 1], so that a gate tolerance (``max_drop``) means something.
    """

    name: str
    at_k: bool
    definition: str
    comparable_across_chunkings: bool
    higher_is_better: bool
    abstention: bool
    compute: Callable[[CaseInput, int | None], float | int | None]
    share: bool = True

    def key(self, k: int | None) -> str:
        return f"{self.name}@{k}" if self.at_k else self.name


def _k(k: int | None) -> int:
    if k is None:
        raise ValueError("this metric needs a cutoff k")
    return k


def _metric(
    name: str,
    definition: str,
    compute: Callable[[CaseInput, int | None], float | int | None],
    *,
    at_k: bool = True,
    comparable: bool = False,
    higher_is_better: bool = True,
    abstention: bool = False,
    share: bool = True,
) -> Metric:
    return Metric(name, at_k, definition, comparable, higher_is_better, abstention, compute, share)


METRICS: dict[str, Metric] = {
    metric.name: metric
    for metric in (
        _metric(
            "recall",
            "|top-k ∩ relevant chunks| / |relevant chunks|",
            lambda c, k: recall_at_k(c.retrieved, c.relevant, _k(k)),
        ),
        _metric(
            "hit",
            "1 if any relevant chunk is in the top-k, else 0",
            lambda c, k: hit_at_k(c.retrieved, c.relevant, _k(k)),
        ),
        _metric(
            "mrr",
            "1 / rank of the first relevant chunk within depth, 0 if none",
            lambda c, k: reciprocal_rank(c.retrieved, c.relevant),
            at_k=False,
        ),
        _metric(
            "precision",
            "|top-k ∩ relevant chunks| / k (trec_eval P_k)",
            lambda c, k: precision_at_k(c.retrieved, c.relevant, _k(k)),
        ),
        _metric(
            "ndcg",
            "binary-relevance nDCG of the top-k (trec_eval ndcg_cut_k)",
            lambda c, k: ndcg_at_k(c.retrieved, c.relevant, _k(k)),
        ),
        _metric(
            "evidence_recall",
            "share of evidence units available in the top-k",
            lambda c, k: evidence_recall_at_k(c.retrieved, c.units, _k(k), c.span_coverage),
            comparable=True,
        ),
        _metric(
            "claim_availability",
            "share of claims with an evidence unit available in the top-k",
            lambda c, k: claim_evidence_availability(c.retrieved, c.claims, _k(k), c.span_coverage),
            comparable=True,
        ),
        _metric(
            "context_chars",
            "characters in the top-k chunks (the context budget)",
            lambda c, k: context_chars_at_k(c.retrieved, c.chunk_lengths, _k(k)),
            comparable=True,
            higher_is_better=False,
            abstention=True,
            share=False,
        ),
    )
}


def _lookup(base: str) -> Metric | ReviewMetric | None:
    """A retrieval metric, or a human review figure (stages.answers) by name."""
    return METRICS.get(base) or REVIEW_METRICS.get(base)


def _supported() -> str:
    return ", ".join(f"{m.name}@<k>" if m.at_k else m.name for m in [*METRICS.values(), *REVIEW_METRICS.values()])


def higher_is_better(name: str) -> bool:
    """The direction of an improvement of a metric named ``base`` or ``base@k``:
    the gate fails a move the other way (a rise of an unsupported-answer share)."""
    metric = _lookup(name.partition("@")[0])
    if metric is None:
        raise InputError([Problem("params.yaml", f"unknown metric {name!r}", f"use one of: {_supported()}")])
    return metric.higher_is_better


def metric_problems(
    names: Iterable[str], ks: Collection[int] | None = None, where: str = "params.yaml", gated: bool = False
) -> list[Problem]:
    """Every problem with a list of metric names, for the validate stage to collect.

    A name is ``<base>@<k>`` with ``k`` a positive integer, or ``mrr``. When ``ks``
    is given, ``k`` must be one of them (only those are computed). A ``gated``
    metric must be a share, listed once: the gate fails on a move of ``max_drop``
    in its bad direction, which means nothing for a character count. Human review
    figures (:data:`stages.answers.REVIEW_METRICS`) are names like any other.
    """
    problems: list[Problem] = []
    fix = f"use one of: {_supported()}"
    names = list(names)
    for name in names:
        base, sep, tail = str(name).partition("@")
        metric = _lookup(base)
        if gated and names.count(name) > 1:
            problems.append(Problem(where, f"metric {name!r} is listed twice", "list each guarded metric once"))
        if metric is None:
            problems.append(Problem(where, f"unknown metric {name!r}", fix))
        elif gated and not metric.share:
            problems.append(
                Problem(where, f"{name!r} cannot be gated: more context is not a drop", "gate on a recall-like metric")
            )
        elif metric.at_k and not sep:
            problems.append(Problem(where, f"metric {name!r} needs a cutoff", f"write it as {base}@<k>, e.g. {base}@5"))
        elif not metric.at_k and sep:
            problems.append(Problem(where, f"metric {name!r} takes no cutoff", f"write it as {base}"))
        elif metric.at_k and not (tail.isascii() and tail.isdigit() and int(tail) > 0):
            problems.append(Problem(where, f"metric {name!r} has a bad cutoff {tail!r}", "use a positive integer k"))
        elif metric.at_k and ks is not None and int(tail) not in ks:
            problems.append(
                Problem(
                    where,
                    f"metric {name!r} uses k={int(tail)}, which is not computed",
                    f"add {int(tail)} to ks or use one of k = {sorted(set(ks))}",
                )
            )
    return problems


def parse_metric_name(
    name: str, ks: Collection[int] | None = None, where: str = "params.yaml"
) -> tuple[str, int | None]:
    """``"recall@5" -> ("recall", 5)``, ``"mrr" -> ("mrr", None)``.

    Raises :class:`InputError` listing the supported names for an unknown name, a
    missing, extra or non-positive cutoff, or (with ``ks``) a k that is not computed.
    """
    problems = metric_problems([name], ks, where)
    if problems:
        raise InputError(problems)
    base, sep, tail = name.partition("@")
    return base, int(tail) if sep else None


def sorted_ks(ks: Iterable[int]) -> list[int]:
    """Distinct ks ascending; shared by the reference functions and the engine."""
    unique = sorted(set(ks))
    if not unique or unique[0] <= 0:
        raise ValueError(f"ks must be a non-empty list of positive integers, got {list(ks)!r}")
    return unique


def metric_names(ks: Iterable[int]) -> list[str]:
    """All per-case metric names for ``ks``: registry order, then k ascending.

    ``[recall@1, recall@5, hit@1, hit@5, mrr, precision@1, ...]``.
    """
    unique = sorted_ks(ks)
    names: list[str] = []
    for metric in METRICS.values():
        names.extend([metric.key(k) for k in unique] if metric.at_k else [metric.name])
    return names


# ---------------------------------------------------------------------------
# One case
# ---------------------------------------------------------------------------


def case_metrics(
    retrieved: Sequence[str],
    relevant: Collection[str],
    units: Sequence[ProjectedUnit],
    claims: Sequence[Sequence[ProjectedUnit]],
    chunk_lengths: Mapping[str, int],
    ks: Sequence[int],
    span_coverage: float,
) -> dict[str, Any]:
    """Every per-case metric and count of one case.

    ``retrieved`` is the run for the case, best first, already cut at the depth.
    For an abstention case (no relevant chunk, no unit, no claim) every metric is
    ``None`` except ``context_chars@k``. ``missed_evidence`` lists the labels of the
    units not available at ``max(ks)`` (given as ``missed_evidence_at``), in the
    order given.
    """
    unique_ks = sorted_ks(ks)
    check_coverage(span_coverage)
    ranked, removed = dedupe(retrieved)
    case = CaseInput(ranked, frozenset(relevant), units, claims, chunk_lengths, span_coverage)
    values: dict[str, float | int | None] = {}
    for metric in METRICS.values():
        for k in unique_ks if metric.at_k else [None]:
            values[metric.key(k)] = metric.compute(case, k)

    counts: dict[str, int] = {
        "relevant": len(case.relevant),
        "evidence": len(units),
        "claims": len(claims),
        "duplicates_removed": removed,
        "retrieved": len(ranked),
    }
    for k in unique_ks:
        top = set(ranked[:k])
        counts[f"claims_available@{k}"] = sum(_claim_available(claim, top, span_coverage) for claim in claims)

    deepest = set(ranked[: unique_ks[-1]])
    missed: list[str] = []
    for unit in units:
        if not unit_available(unit, deepest, span_coverage) and unit.label not in missed:
            missed.append(unit.label)

    return {
        "metrics": values,
        "counts": counts,
        "missed_evidence": missed,
        "missed_evidence_at": unique_ks[-1],
        "first_relevant_rank": first_relevant_rank(ranked, case.relevant),
    }


# ---------------------------------------------------------------------------
# Means over cases
# ---------------------------------------------------------------------------


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _aggregate(rows: Sequence[dict], ks: Sequence[int]) -> dict[str, Any]:
    """Macro means and their denominators over the answerable cases among ``rows``.

    The one aggregation behind :func:`summarise` and :func:`slice_table`. A metric's
    mean is over the cases where it is not None (``counted`` gives how many), or
    None when there are none. Abstention cases are counted but not averaged.
    """
    unique_ks = sorted_ks(ks)
    answerable = [row for row in rows if row.get("answerable", True)]
    names = metric_names(unique_ks)
    means: dict[str, float | None] = {}
    counted: dict[str, int] = {}
    for name in names:
        present = [row["metrics"][name] for row in answerable if row["metrics"].get(name) is not None]
        means[name] = _mean(present)
        counted[name] = len(present)

    claims = sum(row["counts"].get("claims", 0) for row in answerable)
    pooled: dict[str, float | None] = {}
    for k in unique_ks:
        available = sum(row["counts"].get(f"claims_available@{k}", 0) for row in answerable)
        pooled[f"claim_availability_pooled@{k}"] = available / claims if claims else None

    with_claims = sum(1 for row in answerable if row["counts"].get("claims", 0) > 0)
    return {
        "metrics": {**means, **pooled},
        "counted": counted,
        "denominators": {
            "cases": len(answerable),
            "abstention_cases": len(rows) - len(answerable),
            "cases_with_claims": with_claims,
            "cases_without_claims": len(answerable) - with_claims,
            "claims": claims,
            "duplicates_removed": sum(row["counts"].get("duplicates_removed", 0) for row in rows),
        },
    }


def _by_split(rows: Sequence[dict]) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {split: [] for split in SPLITS}
    for row in rows:
        split = row.get("split")
        if split not in grouped:
            raise ValueError(f"case {row.get('case_id')!r} has split {split!r}; expected one of {SPLITS}")
        grouped[split].append(row)
    return grouped


def _abstention(rows: Sequence[dict], abstain_below: float | None) -> dict[str, Any]:
    """Abstention cases apart: their count, top-1 score distribution and abstain rates.

    A case with no retrieved chunk (``top1_score`` None) counts as abstaining.
    A rate is None when ``abstain_below`` is None or its denominator is 0.
    """
    abstention = [row for row in rows if not row.get("answerable", True)]
    answerable = [row for row in rows if row.get("answerable", True)]
    scores = sorted(row["top1_score"] for row in abstention if row.get("top1_score") is not None)
    distribution = None
    if scores:
        distribution = {
            "min": scores[0],
            "median": statistics.median(scores),
            "max": scores[-1],
            "mean": math.fsum(scores) / len(scores),
        }

    def rate(group: list[dict]) -> float | None:
        if abstain_below is None or not group:
            return None
        abstains = sum(1 for row in group if row.get("top1_score") is None or row["top1_score"] < abstain_below)
        return abstains / len(group)

    return {
        "cases": len(abstention),
        "top1_score": distribution,
        "abstain_rate": rate(abstention),
        "false_abstain_rate": rate(answerable),
    }


def summarise(rows: Sequence[dict], ks: Sequence[int], abstain_below: float | None) -> dict[str, Any]:
    """Per split: macro means with denominators, claim-pooled availability, and abstention apart.

    ``claim_availability_pooled@k`` is ``Σ claims_available@k / Σ claims`` over the
    answerable cases (None with no claims); it weighs each claim equally, where the
    macro ``claim_availability@k`` weighs each case with claims equally.
    """
    grouped = _by_split(rows)
    summary: dict[str, Any] = {split: _aggregate(grouped[split], ks) for split in SPLITS}
    summary["abstention"] = {split: _abstention(grouped[split], abstain_below) for split in SPLITS}
    return summary


def slice_table(rows: Sequence[dict], slice_keys: Sequence[str], ks: Sequence[int]) -> dict[str, Any]:
    """Per split, per tag key, per tag value: ``{"cases", "metrics", "counted"}`` over answerable cases.

    A case without the tag is left out of that key's slices; a slice with only
    abstention cases is left out.
    """
    table: dict[str, Any] = {}
    for split, split_rows in _by_split(rows).items():
        per_key: dict[str, Any] = {}
        for key in slice_keys:
            groups: dict[str, list[dict]] = {}
            for row in split_rows:
                tags = row.get("tags") or {}
                if row.get("answerable", True) and key in tags:
                    groups.setdefault(str(tags[key]), []).append(row)
            per_key[key] = {}
            for value in sorted(groups):
                aggregate = _aggregate(groups[value], ks)
                per_key[key][value] = {
                    "cases": aggregate["denominators"]["cases"],
                    "metrics": aggregate["metrics"],
                    "counted": aggregate["counted"],
                }
        table[split] = per_key
    return table
