"""Whether the results a command reads were produced from the current params, inputs
and code: the gate and the report refuse stale results rather than compare them.

After ``params.yaml`` changed and ``dvc repro`` failed (or was not run), the per-case
tables on disk still hold the old results; a gate comparing them would pass with
every delta 0.000. DVC records, in ``dvc.lock``, the params values and the hashes of
every dependency and output each stage ran with, so the stages that produced what a
command reads, and every stage upstream of them, are checked against the work tree
as ``dvc status`` checks them (:func:`stage_changes`).

``dvc status`` itself takes the repository lock, and its per-stage check
(``Stage.status``) asserts that lock is held. A stage command that ``dvc repro``
runs must not contend with its parent's locks, so the check asks each dependency and
output for its work-tree status directly (``Output.workspace_status``, which
``Stage.status`` calls) and reads nothing else: it takes no lock and writes nothing
but DVC's hash cache.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ragvet.errors import InputError, Problem
from ragvet.measures.registry import reads_threshold
from ragvet.settings import Gate
from ragvet.storage.files import read_json

if TYPE_CHECKING:  # DVC's API costs a second: it loads only when a command checks
    from dvc.repo import Repo
    from dvc.stage import Stage

SHOWN_CHANGES = 3  # changes named per stale stage; `dvc status` lists them all


def _relative(path: str, root: str) -> str:
    return os.path.relpath(os.path.abspath(path), root)


def _overlaps(read: str, out: str) -> bool:
    """``read`` is ``out``, inside it (an output folder) or holds it (a folder of outputs)."""
    return read == out or read.startswith(out + os.sep) or out.startswith(read + os.sep)


def _producers(repo: Repo, reads: Iterable[str]) -> list[Stage]:
    """The stages with an output that is, holds or lies inside one of ``reads``."""
    root = repo.root_dir
    wanted = [_relative(path, root) for path in reads]
    return [
        stage
        for stage in repo.index.stages
        if any(_overlaps(read, _relative(out.fs_path, root)) for out in stage.outs for read in wanted)
    ]


def _described(kind: str, status: dict) -> list[str]:
    """``dvc status``'s entries of one dependency or output as phrases: ``params.yaml:
    chunking modified``, ``output data/validated/cases.jsonl deleted``."""
    found = []
    for path, state in sorted(status.items()):
        if isinstance(state, dict):  # a params file: {key: state}
            found += [f"{path}: {key} {what}" for key, what in sorted(state.items())]
        else:
            found.append(f"{kind}{path} {state}")
    return found


def stage_changes(stage: Stage) -> list[str]:
    """What ``dvc status`` lists for ``stage`` (``Stage.status``: its dependencies,
    its outputs, its definition), computed without the repository lock.

    Each entry is compared with the work tree only (``workspace_status``): ``dvc status``
    also calls an output whose object this DVC cache lacks "not in cache", which says
    nothing about whether the file on disk is what the stage produced (a clone with an
    empty cache, or after ``dvc gc``), and checking the cache costs a read per object."""
    changes = [change for dep in stage.deps for change in _described("", dep.workspace_status())]
    changes += [change for out in stage.outs for change in _described("output ", out.workspace_status())]
    if stage.changed_stage():
        changes.append("its command or definition in dvc.yaml changed (or it never ran)")
    return changes


def stale_stages(reads: Sequence[str | Path], project: Path = Path(".")) -> dict[str, list[str]]:
    """``{stage: changes}`` for each out-of-date stage among those that produced
    ``reads`` and every stage upstream of them; empty when all are current, or when
    ``project`` is no DVC project (nothing records how its files were made)."""
    import networkx as nx  # deferred with DVC, which brings it
    from dvc.exceptions import DvcException, NotDvcRepoError  # deferred: DVC's import costs a second
    from dvc.repo import Repo  # deferred, as above

    try:
        repo = Repo(str(project), uninitialized=False)
    except NotDvcRepoError:
        return {}
    try:
        with repo:
            producers = _producers(repo, [str(path) for path in reads])
            graph = repo.index.graph
            checked = {up for stage in producers for up in (stage, *nx.descendants(graph, stage))}
            found = {stage.addressing: stage_changes(stage) for stage in checked}
    except DvcException as err:
        raise InputError([_unreadable_pipeline(project, err)]) from None
    return {name: changes for name, changes in sorted(found.items()) if changes}


def _unreadable_pipeline(project: Path, err: Exception) -> Problem:
    """Why DVC could not read the pipeline, and the fix. A ``dvc.lock`` DVC cannot parse or
    validate is almost always one cut short: DVC rewrites it in place, so a ``dvc repro``
    killed while writing it leaves part of it, and every later ``dvc repro`` refuses until
    the committed one is restored. The stages the restored lock does not match re-run."""
    if os.path.basename(str(getattr(err, "path", "") or "")) == "dvc.lock":
        return Problem(
            str(project / "dvc.lock"),
            f"DVC cannot read it ({err}): it is most likely cut short, by a `dvc repro` or "
            "`dvc exp run` killed while DVC rewrote it",
            "restore the committed one with `git checkout dvc.lock`, then run `dvc repro` "
            "(it re-runs only the stages the restored lock does not match)",
        )
    fix = "fix what DVC names (`dvc status` shows it), then run this command again"
    return Problem(str(project / "dvc.yaml"), f"DVC cannot check the pipeline: {err}", fix)


def _fix(changes: Sequence[str]) -> str:
    """``dvc repro``; where an output is only missing (a clone that has not pulled), ``dvc pull`` too."""
    if any(change.startswith("output ") and change.endswith(" deleted") for change in changes):
        return "run `dvc repro` (or `dvc pull`, where its outputs are only missing here; `dvc status` lists all)"
    return "run `dvc repro` (`dvc status` lists every change)"


def refuse_stale(reads: Sequence[str | Path], command: str, project: Path = Path(".")) -> None:
    """Raise :class:`InputError` (exit 2) naming every out-of-date stage upstream of
    ``reads``, what changed in each, and the fix, before ``command`` compares anything."""
    stale = stale_stages(reads, project)
    if not stale:
        return
    summary = Problem(
        "dvc.lock",
        f"{len(stale)} stage{'s are' if len(stale) != 1 else ' is'} out of date ({', '.join(stale)}): "
        f"the results {command} reads were not produced from the current params, inputs and code",
        f"run `dvc repro`, then {command} again",
    )
    details = [
        Problem(
            f"dvc.lock: {name}",
            "out of date: " + "; ".join(changes[:SHOWN_CHANGES]) + (" …" if len(changes) > SHOWN_CHANGES else ""),
            _fix(changes),
        )
        for name, changes in stale.items()
    ]
    raise InputError(details, [summary])


def stale_guards(gate: Gate, summaries_dir: Path) -> list[Problem]:
    """A problem for each gated configuration whose abstention threshold is stale (its
    metrics JSON marks it) while the gate guards a figure that threshold moves
    (:func:`ragvet.measures.registry.reads_threshold`): only then does a stale threshold
    stop the gate. Nothing is read when no guarded figure reads a threshold."""
    guarded = [metric for metric in gate.metrics if reads_threshold(metric)]
    problems = []
    for config in gate.configs if guarded else []:
        path = summaries_dir / f"{config}.json"
        stale = (read_json(path).get("abstention") or {}).get("stale") if path.is_file() else None
        if stale:
            problems.append(
                Problem(
                    str(path),
                    f"the gate guards {', '.join(guarded)} of {config}, which its stale threshold moves: "
                    f"{stale['reason']}",
                    f"run `{stale['fix']}`, then `dvc repro`",
                )
            )
    return problems
