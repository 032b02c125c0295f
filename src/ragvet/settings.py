"""The knobs of params.yaml as values: frozen dataclasses built from checked params,
and every default of an optional key in this one file.

:func:`ragvet.inputs.params.validate_params` checks the params first; the constructors
here only read them, so a value of this module is always a valid one. The sections
that stay plain mappings are the specs a kind interprets (``chunking``, ``retrievers``,
``configs``): their own modules read them, and fingerprints hash them as written.

An optional section is off, or at its defaults, when it is absent, ``null`` or empty:

* ``budget``: no budget metrics without ``values`` (``unit`` defaults to ``chars``);
* ``judged``: ``judged@10`` (or the largest k below 10, else the smallest k) and a
  ``max_drop`` of 0.10;
* ``gate.correction``: Holm; ``gate.permutation``: the bootstrap's resamples and seed;
  ``gate.latency.max_p95_rise``: off.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

DEFAULT_CORRECTION = "holm"
CHARS = "chars"  # the budget's default unit, and its tokenizer's name when it counts characters
JUDGED_MAX_DROP = 0.10
JUDGED_K = 10
RBO_PERSISTENCE = 0.9  # gate.rbo_p, rank-biased overlap's p: the first 10 ranks carry 86% of its weight
MOST_MOVED = 10  # the cases the verdict and the report name as moved most
# Guarded metrics measured on every case against the ranking the baseline kept, not by evaluate
# (ragvet.measures.registry.MOVEMENT defines them): Gate.movement, apart from Gate.metrics.
MOVEMENT_METRICS = ("topk_changed",)


@dataclass(frozen=True)
class Resampling:
    """Seeded resampling: the bootstrap's or the permutation test's."""

    resamples: int
    seed: int


@dataclass(frozen=True)
class Gate:
    """``gate`` with the ``slices`` it breaks each comparison down by.

    ``confidence`` is the bootstrap interval's; :attr:`alpha` is one minus it, so the
    interval and the test speak of the same error rate."""

    configs: tuple[str, ...]
    metrics: tuple[str, ...]
    max_drop: float
    min_slice_cases: int
    slice_max_drop: float
    slice_metric: str
    require_significance: bool
    bootstrap: Resampling
    confidence: float
    permutation: Resampling
    slices: tuple[str, ...] = ()
    correction: str = DEFAULT_CORRECTION
    max_p95_rise: float | None = None
    movement: tuple[str, ...] = ()
    rbo_p: float = RBO_PERSISTENCE

    @property
    def alpha(self) -> float:
        return round(1.0 - self.confidence, 12)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Gate:
        """From checked params: their ``gate`` and ``slices`` sections. ``gate.metrics`` is
        split: the movement metrics (:data:`MOVEMENT_METRICS`) go to ``movement``, the
        paired ones, compared case by case with the baseline's tables, stay in ``metrics``."""
        gate = params["gate"]
        moving = [name for name in gate["metrics"] if name.partition("@")[0] in MOVEMENT_METRICS]
        boot = gate["bootstrap"]
        perm = gate.get("permutation") or boot
        latency = gate.get("latency") or {}
        return cls(
            configs=tuple(gate["configs"]),
            metrics=tuple(name for name in gate["metrics"] if name not in moving),
            max_drop=gate["max_drop"],
            min_slice_cases=int(gate["min_slice_cases"]),
            slice_max_drop=gate["slice_max_drop"],
            slice_metric=gate["slice_metric"],
            require_significance=bool(gate["require_significance"]),
            bootstrap=Resampling(int(boot["resamples"]), int(boot["seed"])),
            confidence=float(boot["confidence"]),
            permutation=Resampling(int(perm["resamples"]), int(perm["seed"])),
            slices=tuple(params.get("slices") or ()),
            correction=str(gate.get("correction", DEFAULT_CORRECTION)),
            max_p95_rise=None if latency.get("max_p95_rise") is None else float(latency["max_p95_rise"]),
            movement=tuple(moving),
            rbo_p=float(gate.get("rbo_p", RBO_PERSISTENCE)),
        )


@dataclass(frozen=True)
class Budget:
    """``budget``: the context budgets evidence recall is measured at, in ``unit``.

    ``values`` ascending and distinct; empty (the section absent, null, empty, or
    ``values: []``) means no budget metrics."""

    unit: str = CHARS
    tokenizer: str = CHARS
    values: tuple[int, ...] = ()

    @property
    def counts_tokens(self) -> bool:
        """Whether chunks need token starts: the budget is on and counts tokens."""
        return bool(self.values) and self.unit != CHARS

    @property
    def label(self) -> str:
        """What the budget counts, as the report names it: ``chars``, or ``tokens of <tokenizer>``."""
        return CHARS if self.unit == CHARS else f"tokens of {self.tokenizer}"

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Budget:
        budget = params.get("budget") or {}
        unit = budget.get("unit", CHARS)
        return cls(unit, budget.get("tokenizer", CHARS), tuple(sorted(set(budget.get("values") or ()))))


@dataclass(frozen=True)
class Judged:
    """``judged``: the report warns when a configuration's ``metric`` is more than
    ``max_drop`` below its reference's."""

    metric: str
    max_drop: float = JUDGED_MAX_DROP

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Judged:
        """The section's values; without them, ``judged@10`` (or the largest k below 10,
        else the smallest k) and 0.10."""
        ks = sorted(params["ks"])
        default = JUDGED_K if JUDGED_K in ks else max([k for k in ks if k < JUDGED_K], default=ks[0])
        judged = params.get("judged") or {}
        return cls(judged.get("metric", f"judged@{default}"), float(judged.get("max_drop", JUDGED_MAX_DROP)))


@dataclass(frozen=True)
class Measuring:
    """What evaluate measures each case by: the cutoffs ``ks``, the share of a span's
    characters the top k must cover, and the context budget."""

    ks: tuple[int, ...]
    span_coverage: float
    budget: Budget = Budget()

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Measuring:
        return cls(tuple(params["ks"]), params["evidence"]["span_coverage"], Budget.from_params(params))


def resolved(params: Mapping[str, Any]) -> dict[str, Any]:
    """What the optional sections of checked params resolve to, one entry per file the
    ``settings`` stage writes (``<key>.json`` holding ``{key: value}``):

    * ``budget``: :class:`Budget`, read by evaluate and the report;
    * ``tokenizer``: the tokenizer whose token starts the chunks carry, None when the
      budget is off or counts characters (read by chunk, which a change to the budget's
      values alone must not re-run);
    * ``judged``: :class:`Judged`, read by the report.
    """
    budget = Budget.from_params(params)
    return {
        "budget": asdict(budget),
        "tokenizer": budget.tokenizer if budget.counts_tokens else None,
        "judged": asdict(Judged.from_params(params)),
    }
