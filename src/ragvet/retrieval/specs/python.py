"""``kind: python``: its keys and their checks (the run: :mod:`ragvet.retrieval.plugins`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragvet.errors import Problem
from ragvet.storage.files import link_out_of_project

PYTHON_KEYS = {"kind", "target", "options", "abstain_below"}
PLUGINS = "plugins"  # the package of python-kind targets, also a dependency of every retrieve stage


def python_problems(spec: dict, where: str, _retrievers: Mapping[str, Any]) -> list[Problem]:
    target = spec.get("target")
    if not isinstance(target, str) or target.count(":") != 1:
        return [Problem(where, f"target must be 'package.module:function', got {target!r}", "e.g. plugins.mine:search")]
    module = target.partition(":")[0]
    if not module.startswith(f"{PLUGINS}."):
        return [
            Problem(
                where,
                f"target {target!r} is outside the project's `{PLUGINS}` package: this kind runs the code it names, "
                f"and dvc.yaml tracks only `{PLUGINS}/`, so a change elsewhere would not re-run retrieval",
                f"put the function in a module under {PLUGINS}/ and name it, e.g. {PLUGINS}.mine:search",
            )
        ]
    if not isinstance(spec.get("options", {}), dict):
        return [Problem(where, "options must be a mapping", "pass keyword arguments as options: {top: 5}")]
    source = Path(*module.split("."))
    return [
        problem
        for path in (source.with_suffix(".py"), source / "__init__.py")
        if path.exists() and (problem := link_out_of_project(path, Path(PLUGINS))) is not None
    ]
