"""``kind: pgvector``: its keys and their checks (the run: :mod:`ragvet.retrieval.postgres`)."""

from __future__ import annotations

import re

from ragvet.errors import Problem
from ragvet.retrieval.specs.dense import ENGINE_KEYS, encoder_problems, engine_problems
from ragvet.text.values import is_positive_int

PGVECTOR_KEYS = {
    "kind",
    "mode",
    "dsn_env",
    "table",
    "columns",
    "distance",
    "index",
    "hnsw_m",
    "ef_construction",
    "ef_search",
    "model",
    "query_prefix",
    "passage_prefix",
    "batch_size",
    "precision",
    "abstain_below",
    *ENGINE_KEYS,
}
MODES = ("owned", "existing")
# Keys only one mode reads. One of the other mode's is a mistake that can cost a table: the
# docs' existing-table example without `mode: existing` runs in owned mode.
MODE_KEYS = {
    "owned": ("index", "hnsw_m", "ef_construction", "ef_search", "passage_prefix", *ENGINE_KEYS),
    "existing": ("columns", "distance"),
}
INDEXES = ("exact", "hnsw")
DISTANCES = {"cosine": ("<=>", "1 - {d}"), "ip": ("<#>", "-{d}"), "l2": ("<->", "-{d}")}  # operator, score of d
COLUMN_ROLES = ("doc_id", "text", "start", "end", "embedding", "metadata")
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def _other_mode_problems(spec: dict, mode: str, where: str) -> list[Problem]:
    """A problem per key of the other mode: owned mode drops and rebuilds ``table``, so a
    spec written for the team's table must not run in it by a missing ``mode: existing``."""
    problems = []
    for other, keys in MODE_KEYS.items():
        if other == mode or mode not in MODES:
            continue
        default = " (the default)" if "mode" not in spec else ""
        for key in (key for key in keys if key in spec):
            what = f"`{key}` is a key of mode: {other}, and this retriever is in mode: {mode}{default}"
            if other == "existing":
                fix = "to query your own table, add mode: existing; for a table ragvet fills, remove the key"
            else:
                fix = "remove the key: mode: existing queries your table as it is (or use mode: owned)"
            problems.append(Problem(where, what, fix))
    return problems


def pgvector_problems(spec: dict, where: str) -> list[Problem]:
    """Cheap checks: the mode, the DSN variable's name, identifiers, index settings and the encoder."""
    problems = []
    mode = spec.get("mode", "owned")
    if mode not in MODES:
        problems.append(Problem(where, f"unknown mode {mode!r}", "use mode: owned or mode: existing"))
    problems += _other_mode_problems(spec, mode, where)
    if not isinstance(spec.get("dsn_env"), str) or not spec["dsn_env"]:
        problems.append(
            Problem(where, "pgvector needs `dsn_env`", "name an environment variable: dsn_env: RAGVET_PG_DSN")
        )
    names = {"table": spec.get("table")}
    if mode == "existing":
        columns = spec.get("columns")
        if not isinstance(columns, dict) or not {"doc_id", "embedding"} <= set(columns):
            problems.append(
                Problem(where, "existing mode needs `columns` with doc_id and embedding", "see docs/retrievers.md")
            )
            columns = {}
        elif "text" not in columns and not {"start", "end"} <= set(columns):
            problems.append(Problem(where, "columns need `text`, or `start` and `end`", "map how a row is located"))
        unknown = sorted(set(columns) - set(COLUMN_ROLES))
        if unknown:
            problems.append(Problem(where, f"unknown column roles {unknown}", f"use {', '.join(COLUMN_ROLES)}"))
        names |= {f"columns.{role}": name for role, name in columns.items()}
        if spec.get("distance", "cosine") not in DISTANCES:
            problems.append(Problem(where, f"unknown distance {spec['distance']!r}", "use cosine, ip or l2"))
    for key, name in names.items():
        if not isinstance(name, str) or not IDENTIFIER.fullmatch(name):
            problems.append(
                Problem(where, f"{key} {name!r} is not a plain SQL identifier", "use letters, digits and _ only")
            )
    if spec.get("index", "exact") not in INDEXES:
        problems.append(Problem(where, f"unknown index {spec['index']!r}", "use index: exact or index: hnsw"))
    for key in ("hnsw_m", "ef_construction", "ef_search"):
        if key in spec and not is_positive_int(spec[key]):
            problems.append(Problem(where, f"{key} must be an integer > 0", f"e.g. {key}: 40"))
    problems += engine_problems(spec, where)
    return problems + encoder_problems(spec, where, ("sentence_transformers", "torch", "psycopg", "pgvector"))
