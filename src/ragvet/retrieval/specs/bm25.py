"""``kind: bm25``: its keys and their checks (the run: :mod:`ragvet.retrieval.bm25`)."""

from __future__ import annotations

from ragvet.errors import Problem
from ragvet.text.values import is_number

BM25_KEYS = {"kind", "k1", "b", "lowercase", "stopwords", "stemmer", "abstain_below"}


def bm25_problems(spec: dict, where: str) -> list[Problem]:
    problems = []
    for key in ("k1", "b"):
        value = spec.get(key, 0)
        if not is_number(value) or value < 0:
            problems.append(
                Problem(where, f"{key} must be a number ≥ 0, got {value!r}", f"set {key}, e.g. k1: 1.5, b: 0.75")
            )
    if spec.get("stopwords", "en") not in ("en", "english", "none", None):
        problems.append(Problem(where, f"unknown stopwords {spec['stopwords']!r}", "use stopwords: en or none"))
    stemmer = spec.get("stemmer", "none")
    if stemmer not in (None, "none"):
        import Stemmer  # deferred: BM25's stemmers only

        if stemmer not in Stemmer.algorithms():
            problems.append(
                Problem(where, f"unknown stemmer {stemmer!r}", f"use none or one of {', '.join(Stemmer.algorithms())}")
            )
    if not isinstance(spec.get("lowercase", True), bool):
        problems.append(Problem(where, "lowercase must be true or false", "set lowercase: true"))
    return problems
