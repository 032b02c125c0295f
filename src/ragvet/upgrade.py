"""Bring a project to the installed ragvet: the pin, the pipeline, the knobs it reads.

Made by any earlier release (one whose project held a copy of ragvet's source in
``stages/`` included), a project gets: ``requirements.txt`` pinned to the installed
release (its extras kept); the template's dvc.yaml stages, with any stage of the
user's own kept; each params section or declared key the pipeline reads and the
project lacks, with its default; the plot templates, ignore patterns and folders the
pipeline needs; git stops tracking the outputs the pipeline now keeps in the DVC cache.
Nothing else is touched. It refuses a dirty work tree, so that its
changes are one reviewable diff, and says what it changed.
"""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from ragvet.errors import Problem, raise_if
from ragvet.pinning import REQUIREMENTS, installed_version, pin_line, pinned_requirement, repinned
from ragvet.project import PLOTS, PROJECT_FILES, keep_folders, plot_templates, template_text
from ragvet.storage.atomic import write_text
from ragvet.storage.placement import cache_flags_on, tables_in_dvc, untrack

MERGED = ("dvc.yaml", "params.yaml")  # brought up to date; the other PROJECT_FILES are made when missing
OLD_SOURCE = "stages"  # where releases before 0.2 copied ragvet's source into a project
DENSE_KINDS = {"dense", "rerank", "pgvector"}


def _git(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=project, capture_output=True, text=True)


def _check(project: Path) -> None:
    """A ragvet project in a clean git work tree, or every reason why not."""
    missing = [name for name in MERGED if not (project / name).is_file()]
    if missing:
        raise_if([Problem(str(project), f"no {' or '.join(missing)}: not a ragvet project", "make one: ragvet init")])
    status = _git(project, "status", "--porcelain")
    if status.returncode != 0:
        raise_if([Problem(str(project), "is not in a git work tree", "run ragvet upgrade inside the project's clone")])
    dirty = status.stdout.splitlines()
    if dirty:
        shown = ", ".join(line[3:] for line in dirty[:3]) + (f" and {len(dirty) - 3} more" if len(dirty) > 3 else "")
        raise_if(
            [
                Problem(
                    str(project),
                    f"the work tree has uncommitted changes ({shown})",
                    "commit or stash them first: the upgrade's changes must be a diff of their own",
                )
            ]
        )


def _round_trip():
    """A ruamel.yaml that keeps comments, quoting and layout, in dvc.yaml's indentation."""
    from ruamel.yaml import YAML  # deferred: loads ruamel, only for an upgrade

    handler = YAML()
    handler.preserve_quotes = True
    handler.width = 4096
    handler.indent(mapping=2, sequence=4, offset=2)
    return handler


def _dump(handler, document: Any) -> str:
    out = io.StringIO()
    handler.dump(document, out)
    return out.getvalue()


def upgraded_pipeline(current: str, template: str, tables_in_dvc: bool = False) -> tuple[str, list[str]]:
    """The template's dvc.yaml with the user's own stages and top-level keys kept, and the
    per-case tables still in DVC where ``ragvet migrate-storage`` put them; what changed."""
    if tables_in_dvc:
        template = cache_flags_on(template)[0]
    old = yaml.safe_load(current) or {}
    new = yaml.safe_load(template)
    old_stages, new_stages = old.get("stages") or {}, new["stages"]
    changes = [f"dvc.yaml: added stage {name}" for name in new_stages if name not in old_stages]
    changes += [
        f"dvc.yaml: changed stage {name}"
        for name in new_stages
        if name in old_stages and old_stages[name] != new_stages[name]
    ]
    own = [name for name in old_stages if name not in new_stages]
    extra_keys = [key for key in old if key not in new]
    if not own and not extra_keys:
        text = template
    else:
        handler = _round_trip()
        mine, merged = handler.load(current), handler.load(template)
        for name in own:
            merged["stages"][name] = mine["stages"][name]
        for key in extra_keys:
            merged[key] = mine[key]
        text = _dump(handler, merged)
        changes += [f"dvc.yaml: kept your stage {name}" for name in own]
    if old.get("plots") != new.get("plots"):
        changes.append("dvc.yaml: changed the plots")
    return text, changes


def declared_keys(pipeline: dict) -> list[str]:
    """The params.yaml keys (dotted) a dvc.yaml's stages declare, in order, without repeats."""
    keys: list[str] = []
    for stage in pipeline["stages"].values():
        for entry in stage.get("do", stage).get("params", []):
            if isinstance(entry, str) and "${" not in entry and entry not in keys:
                keys.append(entry)
    return keys


def upgraded_params(current: str, template: str, declared: list[str]) -> tuple[str, list[str]]:
    """``current`` with every declared key it lacks added from the template, comments kept."""
    handler = _round_trip()
    mine, defaults = handler.load(current) or {}, handler.load(template)
    changes = []
    for key in declared:
        section, _, child = key.partition(".")
        if section not in mine:
            mine[section] = defaults[section]
            changes.append(f"params.yaml: added section {section} with its defaults")
        elif child and isinstance(mine[section], dict) and child not in mine[section]:
            mine[section][child] = defaults[section][child]
            changes.append(f"params.yaml: added {key}: {defaults[section][child]}")
    return (_dump(handler, mine) if changes else current), changes


def _old_source(project: Path, pipeline_text: str) -> Path | None:
    """The copy of ragvet's own source an earlier release made, when dvc.yaml runs it."""
    folder = project / OLD_SOURCE
    copied = (folder / "__init__.py").is_file() and (folder / "cli.py").is_file()
    return folder if copied and f"python -m {OLD_SOURCE}." in pipeline_text else None


def _extras(project: Path, params: dict) -> list[str]:
    """The extras to pin: those of the project's ragvet requirement, or (with none) those its
    retrievers need."""
    found = pinned_requirement(project / REQUIREMENTS)
    if found is not None:
        return sorted(found[1].extras)
    kinds = {spec.get("kind") for spec in (params.get("retrievers") or {}).values() if isinstance(spec, dict)}
    return (["dense"] if kinds & DENSE_KINDS else []) + (["pgvector"] if "pgvector" in kinds else [])


def _template_patterns() -> list[str]:
    """The template's ignore patterns: the outputs the pipeline keeps in the DVC cache, and its scratch files."""
    return [line for line in template_text("gitignore").splitlines() if line and not line.startswith("#")]


def _ignore_patterns(project: Path) -> list[str]:
    """Append the template's ignore patterns the project's .gitignore lacks."""
    path = project / ".gitignore"
    have = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    missing = [line for line in _template_patterns() if line not in have]
    if missing:
        text = "\n".join(have) + ("\n" if have else "") + "\n".join(missing) + "\n"
        write_text(path, text)
    return [f".gitignore: added {line}" for line in missing]


def _untrack_cached(project: Path) -> list[str]:
    """Stop git tracking what the pipeline now keeps in the DVC cache: the committed files
    that the template's ignore patterns match. DVC refuses an output git tracks, and the
    history keeps the old copies (``git rm --cached``)."""
    patterns = (f"--exclude={pattern}" for pattern in _template_patterns())
    listed = _git(project, "ls-files", "-z", "--cached", "--ignored", *patterns)
    paths = [path for path in listed.stdout.split("\0") if path]
    removed = untrack(project, paths, "fix what git says, then run `ragvet upgrade` again") if paths else []
    return [f"git: stopped tracking {path} (the DVC cache keeps it now)" for path in removed]


def _written(path: Path, text: str) -> bool:
    """Write ``text`` to ``path`` unless it holds it already; whether it wrote."""
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    write_text(path, text)
    return True


def _repin(project: Path, params_text: str) -> list[str]:
    """Pin the installed release in requirements.txt, keeping its other lines."""
    path = project / REQUIREMENTS
    pin = pin_line(installed_version(), _extras(project, yaml.safe_load(params_text) or {}))
    before = path.read_text(encoding="utf-8") if path.is_file() else ""
    return [f"{REQUIREMENTS}: pinned {pin}"] if _written(path, repinned(before, pin)) else []


def _remove_old_source(project: Path, pipeline_text: str) -> list[str]:
    folder = _old_source(project, pipeline_text)
    if folder is None:
        return []
    count = sum(1 for _ in folder.rglob("*.py"))
    shutil.rmtree(folder)
    return [f"{OLD_SOURCE}/: removed ({count} .py files of an earlier ragvet's source; the pin runs it now)"]


def upgrade_project(project: Path) -> list[str]:
    """Bring ``project`` to the installed release; every change it made, one line each."""
    _check(project)
    pipeline_text = (project / "dvc.yaml").read_text(encoding="utf-8")
    params_text = (project / "params.yaml").read_text(encoding="utf-8")
    template = template_text("dvc.yaml")
    changes = _remove_old_source(project, pipeline_text) + _repin(project, params_text)
    text, moved = upgraded_pipeline(pipeline_text, template, tables_in_dvc(project))
    changes += moved if _written(project / "dvc.yaml", text) else []
    text, moved = upgraded_params(params_text, template_text("params.yaml"), declared_keys(yaml.safe_load(template)))
    changes += moved if _written(project / "params.yaml", text) else []
    for name, path in PROJECT_FILES.items():
        if name not in MERGED and name != "gitignore" and not (project / path).exists():
            write_text(project / path, template_text(name))
            changes.append(f"{path}: added")
    changes += [
        f"{PLOTS}/{name}: written" for name, text in plot_templates().items() if _written(project / PLOTS / name, text)
    ]
    changes += _ignore_patterns(project)
    changes += _untrack_cached(project)
    changes += [f"{folder}/: added" for folder in keep_folders(project)]
    return changes
