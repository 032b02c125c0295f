"""``kind: rerank``: its keys and their checks (the run: :mod:`ragvet.retrieval.composite`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragvet.errors import Problem
from ragvet.retrieval.specs.dense import encoder_problems
from ragvet.retrieval.specs.hybrid import members_problems
from ragvet.text.values import is_positive_int

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


def rerank_problems(spec: dict, where: str, retrievers: Mapping[str, Any]) -> list[Problem]:
    problems = members_problems([spec.get("first_stage")], "first_stage", where, retrievers)
    scorer = spec.get("scorer", "bi-encoder")
    if scorer not in SCORERS:
        problems.append(Problem(where, f"unknown scorer {scorer!r}", f"use one of: {', '.join(SCORERS)}"))
    if scorer == "cross-encoder" and not spec.get("model"):
        problems.append(Problem(where, "a cross-encoder needs `model`", "set model: a local cross-encoder folder"))
    elif scorer in SCORERS:
        problems += encoder_problems(spec, where)
    if "top_n" in spec and not is_positive_int(spec["top_n"]):
        problems.append(Problem(where, "top_n must be an integer > 0", "e.g. top_n: 50"))
    return problems
