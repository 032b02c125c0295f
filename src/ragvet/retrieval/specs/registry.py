"""Every retriever kind's spec (its keys and its checks), and the check of one
``params.retrievers`` entry.

Each kind's spec is a module of its own beside this one; none of them imports numpy
or the kind's run code, so checking params (:mod:`ragvet.inputs.params`, which every
stage does) depends on these modules only. :mod:`ragvet.retrieval.kinds` joins each
spec to its run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ragvet.errors import Problem
from ragvet.retrieval.specs.bm25 import BM25_KEYS, bm25_problems
from ragvet.retrieval.specs.dense import DENSE_KEYS, dense_problems
from ragvet.retrieval.specs.http import HTTP_KEYS, http_problems
from ragvet.retrieval.specs.hybrid import HYBRID_KEYS, hybrid_problems
from ragvet.retrieval.specs.pgvector import PGVECTOR_KEYS, pgvector_problems
from ragvet.retrieval.specs.python import PYTHON_KEYS, python_problems
from ragvet.retrieval.specs.rerank import RERANK_KEYS, rerank_problems
from ragvet.retrieval.specs.run_file import RUN_FILE_KEYS, run_file_problems
from ragvet.text.values import is_number


@dataclass(frozen=True)
class Spec:
    """What a kind accepts: its keys, and the check of an entry's values (given every retriever entry)."""

    keys: frozenset[str]
    problems: Callable[[dict, str, Mapping[str, Any]], list[Problem]]


def _alone(keys: set[str], check: Callable[[dict, str], list[Problem]]) -> Spec:
    """The spec of a kind that names no other retriever: its check takes ``(spec, where)``."""
    return Spec(frozenset(keys), lambda spec, where, _retrievers: check(spec, where))


SPECS: dict[str, Spec] = {
    "bm25": _alone(BM25_KEYS, bm25_problems),
    "dense": _alone(DENSE_KEYS, dense_problems),
    "hybrid": Spec(frozenset(HYBRID_KEYS), hybrid_problems),
    "rerank": Spec(frozenset(RERANK_KEYS), rerank_problems),
    "python": Spec(frozenset(PYTHON_KEYS), python_problems),
    "run_file": Spec(frozenset(RUN_FILE_KEYS), run_file_problems),
    "http": _alone(HTTP_KEYS, http_problems),
    "pgvector": _alone(PGVECTOR_KEYS, pgvector_problems),
}


def _cycle(name: str, retrievers: Mapping[str, Any], path: tuple[str, ...] = ()) -> tuple[str, ...] | None:
    """A chain of member references that comes back to ``name``, if any."""
    spec = retrievers.get(name) if isinstance(name, str) else None  # a member may be any YAML value
    if not isinstance(spec, dict):
        return None
    refs = spec.get("members") if spec.get("kind") == "hybrid" else [spec.get("first_stage")]
    for ref in refs if isinstance(refs, list) and spec.get("kind") in ("hybrid", "rerank") else []:
        if ref in path + (name,):
            return path + (name, ref)
        found = _cycle(ref, retrievers, path + (name,))
        if found:
            return found
    return None


def retriever_problems(name: str, spec: Any, where: str, retrievers: Mapping[str, Any] | None = None) -> list[Problem]:
    """Check one ``params.retrievers`` entry: a known kind, known keys, sane values,
    and for hybrid and rerank, members that exist and never refer back to it."""
    if not isinstance(spec, dict):
        return [Problem(where, f"retriever {name!r} must be a mapping", "give it a kind, e.g. kind: bm25")]
    if not isinstance(spec.get("kind"), str) or spec["kind"] not in SPECS:  # a list or mapping is not hashable
        return [Problem(where, f"unknown retriever kind {spec.get('kind')!r}", f"use one of: {', '.join(SPECS)}")]
    kind = SPECS[spec["kind"]]
    problems = [
        Problem(
            where,
            f"unknown key {key!r} for kind {spec['kind']}",
            f"remove it; known keys: {', '.join(sorted(kind.keys))}",
        )
        for key in sorted(set(spec) - kind.keys)
    ]
    threshold = spec.get("abstain_below")
    if threshold is not None and not is_number(threshold):
        problems.append(Problem(where, "abstain_below must be a number", "set abstain_below: 2.5, or remove it"))
    retrievers = retrievers if retrievers is not None else {name: spec}
    cycle = _cycle(name, retrievers)
    if cycle:
        problems.append(Problem(where, f"members refer back in a loop: {' -> '.join(cycle)}", "break the loop"))
    return problems + kind.problems(spec, where, retrievers)
