"""Means over cases: per split, per slice, and the abstention cases apart.

Every mean is macro over the cases that have a value and is written beside its
denominators (DESIGN.md, "Metric definitions"), so a figure never hides how many
cases it stands for.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from ragvet.measures.answers import review_summary
from ragvet.measures.registry import FOREIGN
from ragvet.measures.tally import Tally, TallyRows
from ragvet.schema import DEV, EVAL, SPLITS
from ragvet.storage.results import column, group_keys, result_rows


def _split_rows(frame: pl.DataFrame) -> dict[str, np.ndarray]:
    """The row numbers of each split's cases; a row of another split is an error."""
    stray = frame.filter(~pl.col("split").is_in(SPLITS) | pl.col("split").is_null())
    if stray.height:
        case_id, split = stray.row(0, named=True)["case_id"], stray.row(0, named=True)["split"]
        raise ValueError(f"case {case_id!r} has split {split!r}; expected one of {SPLITS}")
    return {split: np.flatnonzero((frame["split"] == split).to_numpy()) for split in SPLITS}


def _slice_rows(tags: pl.Series, rows: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """Each tag value among ``rows`` (a row without the tag is in no slice), with its rows."""
    found = pl.DataFrame({"value": tags.gather(rows), "row": rows}).drop_nulls("value")
    grouped = found.group_by("value", maintain_order=True).agg("row")
    return [(value, np.asarray(part, np.int64)) for value, part in grouped.iter_rows()]


@dataclass
class Abstaining:
    """Abstention cases apart, one batch at a time: their top-1 scores (kept: the
    median needs them, one float per abstention case), and per side the cases that
    would abstain below ``abstain_below`` (a case with no retrieved chunk, ``top1_score``
    None, counts as abstaining)."""

    abstain_below: float | None
    scores: list[float] = field(default_factory=list)
    cases: Counter = field(default_factory=Counter)  # by answerable
    abstains: Counter = field(default_factory=Counter)

    def add(self, scores: pl.Series, answers: np.ndarray) -> None:
        """Count a batch's cases: their top-1 ``scores`` and whether each is answerable."""
        null, values = scores.is_null().to_numpy(), scores.fill_null(0.0).to_numpy()
        for side in (False, True):
            mine = answers == side
            self.cases[side] += int(mine.sum())
            if not side:
                self.scores += values[mine & ~null].tolist()
            if self.abstain_below is not None:
                self.abstains[side] += int((mine & (null | (values < self.abstain_below))).sum())

    def result(self) -> dict[str, Any]:
        """Their count, top-1 score distribution and abstain rates; a rate is None when
        ``abstain_below`` is None or its denominator is 0."""
        scores = sorted(self.scores)
        distribution = None
        if scores:
            distribution = {
                "min": scores[0],
                "median": statistics.median(scores),
                "max": scores[-1],
                "mean": math.fsum(scores) / len(scores),
            }

        def rate(side: bool) -> float | None:
            if self.abstain_below is None or not self.cases[side]:
                return None
            return self.abstains[side] / self.cases[side]

        return {
            "cases": self.cases[False],
            "top1_score": distribution,
            "abstain_rate": rate(False),
            "false_abstain_rate": rate(True),
        }


@dataclass
class Summaries:
    """Every figure of a configuration's summary and slice tables, added up one batch
    of per-case rows at a time (:meth:`add`) to the same figures whatever the batches:
    a :class:`ragvet.measures.tally.Tally` per split and per slice value, and the
    abstention cases apart.
    Memory: a tally per slice value, and a float per abstention case."""

    ks: Sequence[int]
    abstain_below: float | None = None
    budgets: Sequence[int] = ()
    slice_keys: Sequence[str] = ()
    splits: dict[str, Tally] = field(default_factory=dict)
    abstention: dict[str, Abstaining] = field(default_factory=dict)
    slices: dict[tuple[str, str, str], Tally] = field(default_factory=dict)
    foreign: bool = False  # a run of foreign passages (the table has their column)

    def __post_init__(self) -> None:
        self.splits = {split: Tally(self.ks, self.budgets) for split in SPLITS}
        self.abstention = {split: Abstaining(self.abstain_below) for split in SPLITS}

    def add(self, frame: pl.DataFrame) -> Summaries:
        self.foreign = self.foreign or "passages" in frame.columns
        rows = TallyRows.of(frame, self.ks, self.budgets, any(tally.judged for tally in self.splits.values()))
        scores = pl.repeat(None, frame.height, dtype=pl.Float64, eager=True)  # rows without a run: all abstain
        scores = frame["top1_score"] if "top1_score" in frame.columns else scores
        for split, index in _split_rows(frame).items():
            self.splits[split].add_rows(rows, index)
            self.abstention[split].add(scores.gather(index), rows.answerable[index])
            kept = index[rows.answerable[index]]
            for key in (key for key in self.slice_keys if column("tags", key) in frame.columns):
                for value, part in _slice_rows(frame[column("tags", key)], kept):
                    self.slices.setdefault((split, key, value), Tally(self.ks, self.budgets)).add_rows(rows, part)
        return self

    def rows(self) -> int:
        """The per-case rows added."""
        return sum(tally.totals["rows"] for tally in self.splits.values())

    def summary(self) -> dict[str, Any]:
        """Per split: macro means with denominators, claim-pooled availability, and abstention apart."""
        summary: dict[str, Any] = {split: self.splits[split].result() for split in SPLITS}
        summary["abstention"] = {split: self.abstention[split].result() for split in SPLITS}
        return summary

    def slice_table(self) -> dict[str, Any]:
        """Per split, per tag key, per tag value: ``{"cases", "metrics", "counted"}``."""
        table: dict[str, Any] = {split: {key: {} for key in self.slice_keys} for split in SPLITS}
        for split, key, value in sorted(self.slices):
            aggregate = self.slices[split, key, value].result()
            table[split][key][str(value)] = {
                "cases": aggregate["denominators"]["cases"],
                "metrics": aggregate["metrics"],
                "counted": aggregate["counted"],
            }
        return table


def summaries(
    frame: pl.DataFrame,
    ks: Sequence[int],
    abstain_below: float | None = None,
    budgets: Sequence[int] = (),
    slice_keys: Sequence[str] = (),
) -> Summaries:
    """:class:`Summaries` of a whole per-case table."""
    return Summaries(ks, abstain_below, budgets, slice_keys).add(frame)


def summarise(
    frame: pl.DataFrame, ks: Sequence[int], abstain_below: float | None, budgets: Sequence[int] = ()
) -> dict[str, Any]:
    """Per split: macro means with denominators, claim-pooled availability, and abstention apart.

    ``frame`` is the per-case table (:mod:`ragvet.storage.results`).
    ``claim_availability_pooled@k`` is ``Σ claims_available@k / Σ claims`` over the
    answerable cases (None with no claims); it weighs each claim equally, where the
    macro ``claim_availability@k`` weighs each case with claims equally.
    """
    return summaries(frame, ks, abstain_below, budgets).summary()


def slice_table(
    frame: pl.DataFrame, slice_keys: Sequence[str], ks: Sequence[int], budgets: Sequence[int] = ()
) -> dict[str, Any]:
    """Per split, per tag key, per tag value: ``{"cases", "metrics", "counted"}`` over answerable cases.

    A case without the tag is left out of that key's slices; a slice with only
    abstention cases is left out.
    """
    return summaries(frame, ks, budgets=budgets, slice_keys=slice_keys).slice_table()


def dev_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """The dev split's ``answerable`` and ``top1_score``, one row per case: what
    :func:`ragvet.measures.abstention.sweep` reads, without the rest of each row."""
    return frame.filter(pl.col("split") == DEV).select("answerable", "top1_score")


def config_summary(
    config: str,
    spec: Mapping[str, str],
    frame: pl.DataFrame | Summaries,
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

    ``frame`` is the per-case table, rounded as written, or its :class:`Summaries`
    added up batch by batch (with the same ``ks``, ``budgets`` and ``abstain_below``;
    a table read in batches carries no recorded answers). Where rows carry recorded
    answers, a ``human_review`` section is added; with none, the section is absent
    rather than zero. The abstention threshold and
    where it comes from (``abstain_source``) sit beside the rates it produced.
    A run of foreign passages says so (``"passages": "foreign"``); a run of the
    chunking's own chunks has no such key.
    """
    tallied = frame if isinstance(frame, Summaries) else summaries(frame, ks, abstain_below, budgets)
    summary = {
        "config": config,
        "chunking": spec["chunking"],
        "retriever": spec["retriever"],
        **tallied.summary(),
        "fingerprints": {
            "eval_split": fingerprints["eval_split"],
            "corpus": fingerprints["corpus"],
            **({"chunking": fingerprints["chunking"]} if "chunking" in fingerprints else {}),
        },
    }
    if abstain_below is not None:
        summary["abstention"] |= {"abstain_below": abstain_below, "abstain_below_source": abstain_source}
    reviewed = isinstance(frame, pl.DataFrame) and group_keys(frame, "human_review")
    review = review_summary(result_rows(frame), ks, SPLITS) if reviewed else None
    if review is not None:
        summary["human_review"] = review
    if tallied.foreign:  # only a run of foreign passages has the column
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
