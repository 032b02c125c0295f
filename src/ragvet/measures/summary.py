"""Means over cases: per split, per slice, and the abstention cases apart.

Every mean is macro over the cases that have a value and is written beside its
denominators (DESIGN.md, "Metric definitions"), so a figure never hides how many
cases it stands for.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from ragvet.measures.answers import review_summary
from ragvet.measures.registry import FOREIGN, METRICS, metric_names, sorted_ks
from ragvet.schema import DEV, EVAL, SPLITS
from ragvet.storage.results import column, group_keys, result_rows


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def nearest_rank(values: Sequence[float], share: float) -> float | None:
    """The nearest-rank percentile: the smallest value with at least ``share`` of the
    values at or below it (a value that occurs, never an interpolation); None when empty."""
    ordered = sorted(values)
    return ordered[max(math.ceil(share * len(ordered)), 1) - 1] if ordered else None


# Budgets needed are skewed (a few cases need the whole list): their median and 90th
# percentile are reported beside the mean, and ``counted`` says how many cases reached one.
SPREAD = [metric.name for metric in METRICS.values() if metric.budget and not metric.share]


def _values(frame: pl.DataFrame, group: str, key: str) -> list:
    """The non-null values of ``row[group][key]``, in case order; none if no row has the key."""
    name = column(group, key)
    return frame[name].drop_nulls().to_list() if name in frame.columns else []


def _total(frame: pl.DataFrame, count: str) -> int:
    """``Σ counts[count]`` over the rows, a missing count being 0."""
    values = _values(frame, "counts", count)
    return int(sum(values))


def has_judged(frame: pl.DataFrame, ks: Sequence[int]) -> bool:
    """Whether the per-case table holds the judgements metrics: some case had a
    judged set (imported qrels), so ``judged@k`` was computed."""
    judgements = [metric for metric in METRICS.values() if metric.judgements]
    return any(column("metrics", metric.key(k)) in frame.columns for metric in judgements for k in ks)


def _answerable() -> pl.Expr:
    """Rows of answerable cases: a row without ``answerable`` is one, as in the case file."""
    return pl.col("answerable").fill_null(True)


def _aggregate(frame: pl.DataFrame, ks: Sequence[int], budgets: Sequence[int] = ()) -> dict[str, Any]:
    """Macro means and their denominators over the answerable cases of ``frame``.

    The one aggregation behind :func:`summarise` and :func:`slice_table`. A metric's
    mean is over the cases where it is not None (``counted`` gives how many), or
    None when there are none: ``math.fsum`` of the values over their number, the
    exact sum of what the per-case table holds. Abstention cases are counted but
    not averaged.
    """
    unique_ks = sorted_ks(ks)
    answerable = frame.filter(_answerable())
    means: dict[str, float | None] = {}
    counted: dict[str, int] = {}
    for name in metric_names(unique_ks, budgets, has_judged(frame, unique_ks)):
        present = _values(answerable, "metrics", name)
        means[name] = _mean(present)
        counted[name] = len(present)
        if name in SPREAD:
            means[f"{name}_p50"], means[f"{name}_p90"] = nearest_rank(present, 0.5), nearest_rank(present, 0.9)

    claims = _total(answerable, "claims")
    pooled: dict[str, float | None] = {}
    for k in unique_ks:
        available = _total(answerable, f"claims_available@{k}")
        pooled[f"claim_availability_pooled@{k}"] = available / claims if claims else None

    claim_column = column("counts", "claims")
    with_claims = answerable.filter(pl.col(claim_column) > 0).height if claim_column in frame.columns else 0
    return {
        "metrics": {**means, **pooled},
        "counted": counted,
        "denominators": {
            "cases": answerable.height,
            "abstention_cases": frame.height - answerable.height,
            "cases_with_claims": with_claims,
            "cases_without_claims": answerable.height - with_claims,
            "claims": claims,
            "duplicates_removed": _total(frame, "duplicates_removed"),
        },
    }


def _by_split(frame: pl.DataFrame) -> dict[str, pl.DataFrame]:

    stray = frame.filter(~pl.col("split").is_in(SPLITS) | pl.col("split").is_null())
    if stray.height:
        case_id, split = stray.row(0, named=True)["case_id"], stray.row(0, named=True)["split"]
        raise ValueError(f"case {case_id!r} has split {split!r}; expected one of {SPLITS}")
    return {split: frame.filter(pl.col("split") == split) for split in SPLITS}


def _abstention(frame: pl.DataFrame, abstain_below: float | None) -> dict[str, Any]:
    """Abstention cases apart: their count, top-1 score distribution and abstain rates.

    A case with no retrieved chunk (``top1_score`` None) counts as abstaining.
    A rate is None when ``abstain_below`` is None or its denominator is 0.
    """
    if "top1_score" not in frame.columns:  # rows without a run: every case abstains
        frame = frame.with_columns(top1_score=pl.lit(None, dtype=pl.Float64))
    abstention = frame.filter(~_answerable())
    answerable = frame.filter(_answerable())
    scores = sorted(abstention["top1_score"].drop_nulls().to_list())
    distribution = None
    if scores:
        distribution = {
            "min": scores[0],
            "median": statistics.median(scores),
            "max": scores[-1],
            "mean": math.fsum(scores) / len(scores),
        }

    def rate(group: pl.DataFrame) -> float | None:
        if abstain_below is None or not group.height:
            return None
        abstains = group.filter(pl.col("top1_score").is_null() | (pl.col("top1_score") < abstain_below)).height
        return abstains / group.height

    return {
        "cases": abstention.height,
        "top1_score": distribution,
        "abstain_rate": rate(abstention),
        "false_abstain_rate": rate(answerable),
    }


def summarise(
    frame: pl.DataFrame, ks: Sequence[int], abstain_below: float | None, budgets: Sequence[int] = ()
) -> dict[str, Any]:
    """Per split: macro means with denominators, claim-pooled availability, and abstention apart.

    ``frame`` is the per-case table (:mod:`ragvet.storage.results`).
    ``claim_availability_pooled@k`` is ``Σ claims_available@k / Σ claims`` over the
    answerable cases (None with no claims); it weighs each claim equally, where the
    macro ``claim_availability@k`` weighs each case with claims equally.
    """
    grouped = _by_split(frame)
    summary: dict[str, Any] = {split: _aggregate(grouped[split], ks, budgets) for split in SPLITS}
    summary["abstention"] = {split: _abstention(grouped[split], abstain_below) for split in SPLITS}
    return summary


def slice_table(
    frame: pl.DataFrame, slice_keys: Sequence[str], ks: Sequence[int], budgets: Sequence[int] = ()
) -> dict[str, Any]:
    """Per split, per tag key, per tag value: ``{"cases", "metrics", "counted"}`` over answerable cases.

    A case without the tag is left out of that key's slices; a slice with only
    abstention cases is left out.
    """
    table: dict[str, Any] = {}
    for split, split_frame in _by_split(frame).items():
        per_key: dict[str, Any] = {}
        answerable = split_frame.filter(_answerable())
        for key in slice_keys:
            per_key[key] = {}
            tag = column("tags", key)
            if tag not in frame.columns:
                continue
            tagged = answerable.filter(pl.col(tag).is_not_null())
            for value, group in sorted(tagged.partition_by(tag, as_dict=True, maintain_order=True).items()):
                aggregate = _aggregate(group, ks, budgets)
                per_key[key][str(value[0])] = {
                    "cases": aggregate["denominators"]["cases"],
                    "metrics": aggregate["metrics"],
                    "counted": aggregate["counted"],
                }
        table[split] = per_key
    return table


def dev_rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
    """The dev split's ``answerable`` and ``top1_score``, one mapping per case: what
    :func:`ragvet.measures.abstention.sweep` reads, without the rest of each row."""
    return frame.filter(pl.col("split") == DEV).select("case_id", "answerable", "top1_score").to_dicts()


def config_summary(
    config: str,
    spec: Mapping[str, str],
    frame: pl.DataFrame,
    ks: Sequence[int],
    abstain_below: float | None,
    fingerprints: Mapping[str, str],
    abstain_source: str | None = None,
    budgets: Sequence[int] = (),
) -> dict:
    """The ``metrics/<config>.json`` content: means with denominators per split,
    abstention figures, and the fingerprints a later gate must match: the eval split's
    and the corpus's, and the chunking's (:func:`ragvet.schema.chunking_fingerprint`)
    where ``fingerprints`` has it, which decides the metrics a gate may compare.

    ``frame`` is the per-case table, rounded as written. Where rows carry recorded
    answers, a ``human_review`` section is added; with none, the section is absent
    rather than zero. The abstention threshold and
    where it comes from (``abstain_source``) sit beside the rates it produced.
    A run of foreign passages says so (``"passages": "foreign"``); a run of the
    chunking's own chunks has no such key.
    """
    summary = {
        "config": config,
        "chunking": spec["chunking"],
        "retriever": spec["retriever"],
        **summarise(frame, ks, abstain_below, budgets),
        "fingerprints": {
            "eval_split": fingerprints["eval_split"],
            "corpus": fingerprints["corpus"],
            **({"chunking": fingerprints["chunking"]} if "chunking" in fingerprints else {}),
        },
    }
    if abstain_below is not None:
        summary["abstention"] |= {"abstain_below": abstain_below, "abstain_below_source": abstain_source}
    review = review_summary(result_rows(frame), ks, SPLITS) if group_keys(frame, "human_review") else None
    if review is not None:
        summary["human_review"] = review
    if "passages" in frame.columns:  # only a run of foreign passages has the column
        summary["passages"] = FOREIGN
    return summary


def headline(summary: Mapping[str, Any], metrics: Sequence[str]) -> dict:
    """The ``metrics/headline/<config>.json`` content, the few figures DVC's own views
    show (``dvc metrics diff``, ``dvc exp show``): the eval split's case counts and the
    mean of each of ``metrics`` (the gate's guarded ones) exactly as the summary has it,
    so both print the same figure.

    A mean is the summary's eval figure, or its human review figure (recorded answers:
    ``unsupported_answer`` is over the abstention cases, ``false_abstention`` over the
    answerable ones). A metric without a value for this configuration (no recorded
    answers; a chunk-level metric of foreign passages) is left out rather than zero.
    """
    part = summary.get(EVAL) or {}
    reviews = ((summary.get("human_review") or {}).get(EVAL)) or {}
    sections = [section for section in reviews.values() if isinstance(section, dict)]
    figures = {name: value for section in sections for name, value in (section.get("figures") or {}).items()}
    figures |= part.get("metrics") or {}
    counts = {key: (part.get("denominators") or {}).get(key) for key in ("cases", "abstention_cases")}
    means = {name: figures[name] for name in metrics if figures.get(name) is not None}
    return {EVAL: {**{key: value for key, value in counts.items() if value is not None}, **means}}
