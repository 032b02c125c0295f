"""``kind: dense``: its keys, their defaults and their checks, and those of any encoder
(rerank and pgvector embed as dense does). The keys are documented, with the run, in
:mod:`ragvet.retrieval.dense`. Nothing here loads a model or imports numpy.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any

from ragvet.errors import InputError, Problem
from ragvet.retrieval.models import DEFAULT_MODEL, DENSE_INSTALL_FIX, PORTABLE, PRECISIONS, resolve_model
from ragvet.text.values import is_positive_int

# engine: ray's keys: where the passage vectors are computed and kept (dense, and pgvector's owned table)
ENGINE_KEYS = ("engine", "vectors", "shard_rows", "ray_actors", "ray_num_cpus", "ray_num_gpus", "trusted_cluster")
DENSE_KEYS = {
    "kind",
    "model",
    "index",
    "hnsw_m",
    "ef_search",
    "ef_construction",
    "query_prefix",
    "passage_prefix",
    "batch_size",
    "precision",
    "abstain_below",
    *ENGINE_KEYS,
}
DENSE_DEFAULTS: dict[str, Any] = {
    "model": DEFAULT_MODEL,
    "index": "flat",
    "hnsw_m": 32,
    "ef_search": 64,
    "ef_construction": 200,
    "query_prefix": "",
    "passage_prefix": "",
    "batch_size": 32,
    "precision": PORTABLE,
    # engine: ray (ragvet.retrieval.cluster_embedding): where the passage vectors are computed and kept
    "engine": "local",
    "vectors": ".ragvet/vectors",  # a folder, or a URL fsspec opens (s3://bucket/prefix)
    "shard_rows": 4096,  # chunks per shard: the unit of work, of storage and of resumption
    "ray_actors": 2,  # model actors (and vector holders of the exact search)
    "ray_num_cpus": 1,  # per actor
    "ray_num_gpus": 0,  # per actor
    "trusted_cluster": False,  # true: accept a cluster on another host without Ray's token authentication
}
INDEX_KINDS = ("flat", "hnsw")
ENGINES = ("local", "ray")


def _positive_int_problems(spec: dict, keys: Sequence[str], where: str) -> list[Problem]:
    return [
        Problem(
            where,
            f"{key} must be a positive integer, got {spec[key]!r}",
            f"set {key}: {DENSE_DEFAULTS[key]}, or remove it",
        )
        for key in keys
        if key in spec and not is_positive_int(spec[key])
    ]


def encoder_problems(
    spec: dict, where: str, modules: Sequence[str] = ("sentence_transformers", "torch")
) -> list[Problem]:
    """Cheap checks of an encoder's settings (dense retrieval, or a rerank scorer):
    batch size, prefixes, a model that resolves locally, the extra installed.
    No model is loaded, nothing is imported."""
    problems = _positive_int_problems(spec, ["batch_size"], where)
    if spec.get("precision", PORTABLE) not in PRECISIONS:
        problems.append(
            Problem(
                where,
                f"unknown precision {spec['precision']!r}",
                "use precision: portable (the same bits on every machine) or precision: fast (float32)",
            )
        )
    for key in ("query_prefix", "passage_prefix"):
        if not isinstance(spec.get(key, ""), str):
            problems.append(
                Problem(
                    where,
                    f"{key} must be a string, got {spec[key]!r}",
                    f'quote it, e.g. {key}: "query: ", or remove it',
                )
            )
    try:
        resolve_model(spec.get("model", DENSE_DEFAULTS["model"]), where)
    except InputError as err:
        problems.extend(err.problems)
    for module in modules:
        if importlib.util.find_spec(module) is None:
            problems.append(
                Problem(
                    where,
                    f"kind {spec['kind']} needs the Python module {module}, which is not installed",
                    DENSE_INSTALL_FIX,
                )
            )
    return problems


def dense_problems(spec: dict, where: str) -> list[Problem]:
    """Cheap checks of a dense entry: the index settings and the encoder's."""
    problems = []
    index = spec.get("index", DENSE_DEFAULTS["index"])
    if index not in INDEX_KINDS:
        problems.append(Problem(where, f"unknown index {index!r}", "use index: flat (exact) or index: hnsw"))
    problems += _positive_int_problems(spec, ["hnsw_m", "ef_search", "ef_construction"], where)
    return (
        problems
        + engine_problems(spec, where)
        + encoder_problems(spec, where, ("sentence_transformers", "torch", "faiss"))
    )


def engine_problems(spec: dict, where: str) -> list[Problem]:
    """Cheap checks of the engine keys: a known engine, counts and resources, a string location, the extra."""
    engine = spec.get("engine", DENSE_DEFAULTS["engine"])
    if engine not in ENGINES:
        return [Problem(where, f"unknown engine {engine!r}", "use engine: local (this process) or engine: ray")]
    problems = _positive_int_problems(spec, ["shard_rows", "ray_actors"], where)
    for key in ("ray_num_cpus", "ray_num_gpus"):
        value = spec.get(key, DENSE_DEFAULTS[key])
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            problems.append(
                Problem(where, f"{key} must be a number >= 0, got {value!r}", f"set {key}: {DENSE_DEFAULTS[key]}")
            )
    if not isinstance(spec.get("vectors", ""), str) or not spec.get("vectors", "x"):
        problems.append(
            Problem(
                where, "vectors must be a folder or a URL", 'e.g. vectors: .ragvet/vectors or "s3://bucket/vectors"'
            )
        )
    if "@" in str(spec.get("vectors", "")):
        problems.append(
            Problem(
                where,
                "vectors must not carry credentials",
                "give them through the environment (AWS_ACCESS_KEY_ID, ...)",
            )
        )
    if not isinstance(spec.get("trusted_cluster", False), bool):
        problems.append(
            Problem(where, "trusted_cluster must be true or false", "set trusted_cluster: false, or remove it")
        )
    if engine == "ray" and importlib.util.find_spec("ray") is None:
        problems.append(
            Problem(
                where, "engine: ray needs the Python module ray, which is not installed", "pip install 'ragvet[ray]'"
            )
        )
    return problems


def dense_settings(spec: dict) -> dict[str, Any]:
    """An encoder spec with the dense defaults filled in: every kind that embeds reads these."""
    return {**DENSE_DEFAULTS, **spec}
