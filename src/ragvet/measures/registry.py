"""The metrics ragvet reports, each described once: its name, what it means and how it behaves.

The registry is the one list the rest reads. The reference definitions
(:mod:`ragvet.measures.reference`) and the vectorised engine
(:mod:`ragvet.measures.engine`) each implement every entry by name, the gate and
the report read each metric's direction and comparability from here, and
``docs/metrics.md`` is generated from it (``ragvet metrics-doc``), so adding a
metric is one entry here plus its reference function and its engine kernel.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from ragvet.errors import InputError, Problem
from ragvet.measures.answers import REVIEW_METRICS, ReviewMetric


@dataclass(frozen=True)
class Metric:
    """A named per-case metric.

    ``at_k``: the name takes ``@k`` (``mrr`` does not: it uses the run's depth).
    ``definition``: the formula, as the metrics documentation and reviewers read it.
    ``comparable_across_chunkings``: its denominator does not depend on the chunking.
    ``higher_is_better``: the direction of an improvement (``context_chars`` is a cost).
    ``abstention``: whether it has a value for abstention cases.
    ``share``: a value in [0, 1], so that a gate tolerance (``max_drop``) means something;
    a metric that is not a share is a count, written as an integer.
    ``budget``: it spends a context budget (``budget.unit``) rather than cutting at k;
    with ``at_k`` its cutoffs are ``budget.values``. Computed only when params have a budget.
    ``judgements``: it reads the judged sets of imported qrels (``Case.judged``), not the
    evidence. Computed only when some case has one; a diagnostic of the labels, not a
    quality figure: the report shows it apart, and the gate cannot guard it.
    """

    name: str
    definition: str
    at_k: bool = True
    comparable_across_chunkings: bool = False
    higher_is_better: bool = True
    abstention: bool = False
    share: bool = True
    budget: bool = False
    judgements: bool = False

    def key(self, k: int | None) -> str:
        return f"{self.name}@{k}" if self.at_k else self.name

    def cutoffs(self, ks: Sequence[int], budgets: Sequence[int], judged: bool = False) -> list[int | None]:
        """What it is computed at: each k, each budget value, or once (``[None]``);
        nothing for a budget metric without a budget, nor for a judgements metric
        when no case has a judged set (``judged``)."""
        if (self.budget and not budgets) or (self.judgements and not judged):
            return []
        if not self.at_k:
            return [None]
        return list(budgets if self.budget else ks)


METRICS: dict[str, Metric] = {
    metric.name: metric
    for metric in (
        Metric("recall", "|top-k ∩ relevant chunks| / |relevant chunks|"),
        Metric("hit", "1 if any relevant chunk is in the top-k, else 0"),
        Metric("mrr", "1 / rank of the first relevant chunk within depth, 0 if none", at_k=False),
        Metric("precision", "|top-k ∩ relevant chunks| / k (trec_eval P_k)"),
        Metric("ndcg", "binary-relevance nDCG of the top-k (trec_eval ndcg_cut_k)"),
        Metric("evidence_recall", "share of evidence units available in the top-k", comparable_across_chunkings=True),
        Metric(
            "claim_availability",
            "share of claims with an evidence unit available in the top-k",
            comparable_across_chunkings=True,
        ),
        Metric(
            "context_chars",
            "characters in the top-k chunks (the context budget)",
            comparable_across_chunkings=True,
            higher_is_better=False,
            abstention=True,
            share=False,
        ),
        Metric(
            "evidence_recall_budget",
            "share of evidence units available in the chunks a budget of B units sends, in rank order; "
            "the chunk that crosses B sends only its first B - spent units, and characters already "
            "sent cost nothing",
            comparable_across_chunkings=True,
            budget=True,
        ),
        Metric(
            "tokens_to_evidence",
            "the smallest budget (in budget.unit) at which every evidence unit is available; "
            "None when the whole retrieved list (depth) is not enough",
            at_k=False,
            comparable_across_chunkings=True,
            higher_is_better=False,
            share=False,
            budget=True,
        ),
        Metric(
            "span_precision",
            "|E ∩ R| / Σ|R_i| in characters: E the union of the evidence spans, R_i the top-k chunks "
            "(shared characters count twice; 0 when nothing is sent; no value without span evidence)",
            comparable_across_chunkings=True,
        ),
        Metric(
            "span_iou",
            "|E ∩ R| / (|E| + Σ|R_i| - |E ∩ R|) in characters, over the top-k chunks "
            "(0 when the denominator is 0; no value without span evidence)",
            comparable_across_chunkings=True,
        ),
        Metric(
            "judged",
            "share of the top-k results whose doc has a judgement of any grade (as ir_measures' Judged): "
            "judged chunks in the top k / min(k, chunks retrieved), each chunk counted; 0 when nothing "
            "is retrieved; no value for a case without a judged set (native cases)",
            comparable_across_chunkings=True,
            abstention=True,
            judgements=True,
        ),
    )
}
# How far a gated configuration's top k moved from the ranking its baseline kept, on every case,
# labelled or not (ragvet.measures.overlap): the verdict measures it, evaluate does not, and the
# gate guards the share of cases that moved. Listed apart, since the engine computes METRICS.
MOVEMENT: dict[str, Metric] = {
    metric.name: metric
    for metric in (
        Metric(
            "topk_changed",
            "share of all cases, labelled or not, whose set of top-k chunks differs from the top k of the "
            "ranking the baseline kept (the baseline's own share is 0)",
            higher_is_better=False,
            abstention=True,
        ),
    )
}


FOREIGN = "foreign"  # the ``passages`` value of per-case rows and summaries of a run of foreign passages
# The figures an abstention threshold (``abstain_below``, or abstention.yaml) moves: a configuration
# summary's abstain and false-abstain rates. No per-case metric above nor any human review figure
# reads the threshold, so a stale one leaves every figure the gate can guard as it is.
THRESHOLD_FIGURES = frozenset({"abstain_rate", "false_abstain_rate"})


def is_chunk_level(key: str) -> bool:
    """Whether a metric key (``recall@5``, ``mrr``) counts relevant *chunks*: it has
    a value only for a run of the chunking's own chunks, never for foreign passages,
    whose relevant set would be only what the system returned. Exactly the metrics
    not comparable across chunkings."""
    metric = METRICS.get(key.partition("@")[0])
    return metric is not None and not metric.comparable_across_chunkings


def comparable_across_chunkings(name: str) -> bool:
    """Whether a metric or human review figure named ``base`` or ``base@k`` means the same
    over another chunking: what the gate still compares when a gated configuration's
    chunking differs from its baseline's. An unknown name is not."""
    metric = _lookup(name.partition("@")[0])
    return metric is not None and metric.comparable_across_chunkings


def reads_threshold(name: str) -> bool:
    """Whether the figure ``name`` (``base`` or ``base@k``) depends on the abstention
    threshold: what a stale threshold (:func:`ragvet.measures.abstention.stale_mark`)
    makes untrustworthy, and the gate refuses to guard."""
    return name.partition("@")[0] in THRESHOLD_FIGURES


def _lookup(base: str) -> Metric | ReviewMetric | None:
    """A retrieval metric, a human review figure (ragvet.measures.answers) or a movement metric by name."""
    return METRICS.get(base) or REVIEW_METRICS.get(base) or MOVEMENT.get(base)


def _spends(metric: Metric | ReviewMetric) -> bool:
    """Whether a metric is computed at ``budget.values`` rather than at ``ks``."""
    return isinstance(metric, Metric) and metric.budget


def _supported() -> str:
    every = [*METRICS.values(), *REVIEW_METRICS.values(), *MOVEMENT.values()]
    return ", ".join(f"{m.name}@<k>" if m.at_k else m.name for m in every)


def higher_is_better(name: str) -> bool:
    """The direction of an improvement of a metric named ``base`` or ``base@k``:
    the gate fails a move the other way (a rise of an unsupported-answer share)."""
    metric = _lookup(name.partition("@")[0])
    if metric is None:
        raise InputError([Problem("params.yaml", f"unknown metric {name!r}", f"use one of: {_supported()}")])
    return metric.higher_is_better


def metric_problems(
    names: Iterable[str],
    ks: Collection[int] | None = None,
    where: str = "params.yaml",
    gated: bool = False,
    budgets: Collection[int] = (),
    movement: bool = False,
) -> list[Problem]:
    """Every problem with a list of metric names, for the validate stage to collect.

    A name is ``<base>@<k>`` with ``k`` a positive integer, or ``mrr``. When ``ks``
    is given, ``k`` must be one of them (only those are computed). A ``gated``
    metric must be a share, listed once: the gate fails on a move of ``max_drop``
    in its bad direction, which means nothing for a character count. Human review
    figures (:data:`ragvet.measures.answers.REVIEW_METRICS`) are names like any other.
    A budget metric's cutoff must be one of ``budgets`` (``budget.values``). A movement
    metric (:data:`MOVEMENT`) is a name only where ``movement`` allows it (``gate.metrics``).
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
        elif base in MOVEMENT and not movement:
            what = f"{name!r} is measured on every case against the baseline's ranking, not per configuration"
            problems.append(Problem(where, what, "guard it in gate.metrics; use a retrieval metric here"))
        elif gated and not metric.share:
            problems.append(
                Problem(where, f"{name!r} cannot be gated: more context is not a drop", "gate on a recall-like metric")
            )
        elif gated and isinstance(metric, Metric) and metric.judgements:
            problems.append(
                Problem(
                    where,
                    f"{name!r} cannot be gated: it describes the judgements, not the retrieval",
                    "gate on a recall-like metric; the report warns when judged@k falls (judged.max_drop)",
                )
            )
        elif metric.at_k and not sep:
            problems.append(Problem(where, f"metric {name!r} needs a cutoff", f"write it as {base}@<k>, e.g. {base}@5"))
        elif not metric.at_k and sep:
            problems.append(Problem(where, f"metric {name!r} takes no cutoff", f"write it as {base}"))
        elif metric.at_k and not (tail.isascii() and tail.isdigit() and int(tail) > 0):
            problems.append(Problem(where, f"metric {name!r} has a bad cutoff {tail!r}", "use a positive integer k"))
        elif _spends(metric) and not (int(tail) in budgets if metric.at_k else budgets):
            problems.append(
                Problem(
                    where,
                    f"metric {name!r} needs a context budget that is not computed",
                    f"add {tail or 'a value'} to budget.values (now {sorted(set(budgets))})",
                )
            )
        elif metric.at_k and ks is not None and int(tail) not in ks and not _spends(metric):
            problems.append(
                Problem(
                    where,
                    f"metric {name!r} uses k={int(tail)}, which is not computed",
                    f"add {int(tail)} to ks or use one of k = {sorted(set(ks))}",
                )
            )
    return problems


def sorted_ks(ks: Iterable[int]) -> list[int]:
    """Distinct ks ascending; shared by the reference functions and the engine."""
    unique = sorted(set(ks))
    if not unique or unique[0] <= 0:
        raise ValueError(f"ks must be a non-empty list of positive integers, got {list(ks)!r}")
    return unique


def metric_names(ks: Iterable[int], budgets: Iterable[int] = (), judged: bool = False) -> list[str]:
    """All per-case metric names for ``ks`` and ``budgets``: registry order, then cutoff ascending.
    ``judged``: some case has a judged set, so the judgements metrics are computed too.

    ``[recall@1, recall@5, hit@1, hit@5, mrr, precision@1, ...]``.
    """
    unique, spends = sorted_ks(ks), sorted(set(budgets))
    return [metric.key(cutoff) for metric in METRICS.values() for cutoff in metric.cutoffs(unique, spends, judged)]
