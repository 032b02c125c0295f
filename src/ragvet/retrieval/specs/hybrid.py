"""``kind: hybrid``: its keys and their checks, and the check of member names that rerank
shares (the run: :mod:`ragvet.retrieval.composite`, the fusion: :mod:`ragvet.retrieval.fusion`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragvet.errors import Problem
from ragvet.text.values import is_number, is_positive_int

HYBRID_KEYS = {"kind", "members", "fusion", "rrf_k", "weights", "normalisation", "candidates", "abstain_below"}
NORMALISATIONS = ("min-max", "z-score")
FUSIONS = ("rrf", "weighted")


def members_problems(names: Any, key: str, where: str, retrievers: Mapping[str, Any]) -> list[Problem]:
    """Problems with the names of a hybrid's members or a rerank's first stage: each a defined retriever."""
    known = ", ".join(sorted(retrievers))
    if not isinstance(names, list) or not names:
        return [Problem(where, f"{key} must be a non-empty list of retriever names", f"e.g. {key}: [bm25, dense]")]
    return [
        Problem(where, f"{key} names unknown retriever {name!r}", f"use one of: {known}")
        for name in names
        if not isinstance(name, str) or name not in retrievers  # a list or mapping is not hashable
    ]


def hybrid_problems(spec: dict, where: str, retrievers: Mapping[str, Any]) -> list[Problem]:
    problems = members_problems(spec.get("members"), "members", where, retrievers)
    fusion = spec.get("fusion", "rrf")
    if fusion not in FUSIONS:
        problems.append(Problem(where, f"unknown fusion {fusion!r}", f"use one of: {', '.join(FUSIONS)}"))
    for key in ("rrf_k", "candidates"):
        if key in spec and not is_positive_int(spec[key]):
            problems.append(Problem(where, f"{key} must be an integer > 0", f"e.g. {key}: 60"))
    weights = spec.get("weights")
    if weights is not None and (
        not isinstance(weights, list)
        or len(weights) != len(spec.get("members") or [])
        or not all(is_number(w) for w in weights)
    ):
        problems.append(Problem(where, "weights must be one number per member", "e.g. weights: [0.3, 0.7]"))
    if spec.get("normalisation", "min-max") not in NORMALISATIONS:
        problems.append(Problem(where, "unknown normalisation", f"use one of: {', '.join(NORMALISATIONS)}"))
    return problems
