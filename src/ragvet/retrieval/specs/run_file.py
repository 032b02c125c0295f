"""``kind: run_file``: its keys and their checks (the run: :mod:`ragvet.retrieval.plugins`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragvet.errors import Problem

RUN_FILE_KEYS = {"kind", "path", "format", "abstain_below"}
RUN_FILE_FOLDER = "data/external"  # a dependency of every retrieve stage in dvc.yaml


def run_file_problems(spec: dict, where: str, _retrievers: Mapping[str, Any]) -> list[Problem]:
    problems = []
    if not isinstance(spec.get("path"), str):
        problems.append(Problem(where, "run_file needs `path`", "e.g. path: data/external/production.trec"))
    elif not Path(spec["path"]).is_file():
        problems.append(Problem(where, f"run file {spec['path']!r} not found", "fix `path` (relative to the project)"))
    elif not Path(spec["path"]).resolve().is_relative_to(Path(RUN_FILE_FOLDER).resolve()):
        problems.append(
            Problem(
                where,
                f"run file {spec['path']!r} is outside {RUN_FILE_FOLDER}/, which dvc.yaml tracks",
                f"move it into {RUN_FILE_FOLDER}/ so that editing it re-runs retrieval",
            )
        )
    if spec.get("format") not in (None, "trec", "jsonl"):
        problems.append(Problem(where, f"unknown format {spec['format']!r}", "use format: trec or jsonl"))
    return problems
