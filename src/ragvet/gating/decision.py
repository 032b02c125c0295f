"""The gate's verdict, decided once and kept in two files.

The ``verdict`` stage decides it (:func:`decide_gate`) and writes it (:func:`write_verdict`);
the ``report`` stage renders it and the ``gate`` stage prints it and exits by it, both
reading it back (:func:`read_verdict`) rather than deciding again, so the report, the
terminal and the exit code say the same thing. ``ragvet gate`` and ``ragvet report`` run
by hand (``--against REV`` in CI) decide in their own process through the same
:func:`decide`.

The verdict is written twice, at once:

* ``metrics/gate.json``: every float rounded to 6 places, as every committed output
  (:func:`ragvet.storage.files.write_json`): the record reviewers and ``dvc metrics``
  read;
* ``data/verdict.json``: every float as computed (JSON keeps a float's shortest exact
  repr), which the report and the gate render. The report prints 3 decimals or 3
  significant digits, and printing a figure already rounded to 6 places can move its
  last digit (a corrected p of 0.0016353 prints 0.00164; rounded first, 0.001635 prints
  0.00163): only the unrounded verdict renders the document a verdict decided in the
  same process renders.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragvet.errors import InputError, Problem, raise_if
from ragvet.gating.baselines import (
    baselines_for,
    current_chunkings,
    current_path,
    fetched,
    integrity_problems,
    latency_pairs,
    missing_latency,
    rebaselined,
)
from ragvet.gating.compare import Pairing, chunking_reason, gate_all, gate_metrics, split_fingerprints
from ragvet.gating.freshness import refuse_stale, stale_guards
from ragvet.gating.movement import (
    Measured,
    Sides,
    Sink,
    guard_movement,
    guarded_ks,
    measure_movement,
    moved_by_config,
    ranked_sides,
)
from ragvet.gating.retrieved import RUNS
from ragvet.settings import Gate
from ragvet.storage.atomic import outputs_together, write_text
from ragvet.storage.files import read_json, write_json
from ragvet.storage.records import split_outline

Latency = Mapping[str, tuple[dict | None, dict | None]]


def decide(
    gate: Gate,
    cases_dir: Path,
    split: Path,
    baseline: Path,
    against: str | None,
    latency: Latency | None,
    current: Mapping[str, Any] | None = None,
    baselines: Mapping[str, tuple] | None = None,
    summaries_dir: Path | None = None,
    runs: Path = RUNS,
    depth: int | None = None,
    moves: Sink | None = None,
    pairings: Mapping[str, Pairing] | None = None,
) -> dict:
    """The verdict over the gated configurations: their per-case tables in
    ``cases_dir`` against the committed ``baseline`` folder, or against ``against``'s
    results, with the eval split's fingerprints from ``split``. ``latency`` is :func:`latency_pairs` (None with the p95
    check off). A caller that has found the tables already passes them (``current``,
    ``baselines``: the report's checks cover more columns); else both tables are read a
    batch of cases at a time, so neither is held whole (a revision's fetched into a
    temporary folder first, :func:`ragvet.gating.baselines.fetched`). The current chunking
    fingerprints are read from the summaries in ``summaries_dir`` (by default the folder
    that holds ``cases_dir``: evaluate writes ``metrics/<config>.json`` beside ``metrics/cases``).
    Guarded movement metrics (``gate.movement``) are measured between the runs in ``runs``
    and the baseline's rankings (:func:`ragvet.gating.movement.guard_movement`); with a
    ``depth`` (the largest k), the verdict also holds what moved at that depth, per slice
    (``moved``: :func:`ragvet.gating.movement.moved_by_config`), and ``moves``, when
    given, receives the per-case figures a batch at a time (:func:`ragvet.gating.movement.table_rows`).
    Both come from one pass over each configuration's two rankings
    (:func:`ragvet.gating.movement.measure_movement`). ``pairings`` are a caller's pairings
    of the same tables (:func:`ragvet.gating.compare.gate_all`'s)."""
    configs, metrics = list(gate.configs), gate_metrics(gate)
    with fetched(against) as revision:  # a revision's tables and runs, removed when decided
        if current is None:
            current = {config: current_path(cases_dir, config, metrics) for config in configs}
        if baselines is None:
            baselines = baselines_for(configs, baseline, revision, metrics)
        split_record = split_outline(split)
        if against is None:  # the committed baseline, which the pull request itself may have edited
            raise_if(integrity_problems(baselines, baseline, split_record))
        chunkings = current_chunkings(Path(cases_dir).parent if summaries_dir is None else summaries_dir, configs)
        verdict = gate_all(
            gate,
            dict(baselines),
            dict(current),
            split_fingerprints(split_record.record),
            against,
            rebaselined(configs, baseline, cases_dir, against),
            latency,
            chunkings,
            pairings,
        )
        # chunk ids name other passages under another chunking: movement by id would mean nothing
        other_chunking = {
            config: chunking_reason((baselines[config][0] or {}).get("fingerprints"), {"chunking": chunkings[config]})
            for config in configs
        }
        guarded = guarded_ks(gate)
        measured: dict[str, Measured | str] = {}
        if guarded or depth is not None:

            def sides(config: str) -> Sides | str:  # chunk ids name other passages under another chunking
                return other_chunking[config] or ranked_sides(config, baseline, revision, runs)

            measured = measure_movement(configs, sides, guarded, depth, gate.rbo_p, cases_dir, gate.slices, moves)
    verdict = guard_movement(verdict, gate, measured, other_chunking)
    if depth is None:
        return verdict
    return {**verdict, "moved": moved_by_config(measured)}


def decide_gate(
    gate: Gate,
    cases_dir: Path,
    split: Path,
    baseline: Path,
    summaries_dir: Path,
    latency_dir: Path,
    against: str | None,
    runs: Path = RUNS,
    depth: int | None = None,
    moves: Sink | None = None,
) -> dict:
    """The verdict as the gate decides it. First what would make it mean nothing is
    refused (exit 2): results the current params, inputs and code did not produce, a
    stale abstention threshold under a guarded figure, and, with ``gate.latency`` on, a
    latency record missing on either side; then :func:`decide`."""
    refuse_stale([cases_dir, split], "the gate")  # never compare results the current params did not produce
    raise_if(stale_guards(gate, summaries_dir))
    latency = latency_pairs(gate.max_p95_rise, list(gate.configs), baseline, latency_dir, against)
    raise_if(missing_latency(latency or {}, latency_dir, baseline, against))
    return decide(
        gate,
        cases_dir,
        split,
        baseline,
        against,
        latency,
        summaries_dir=summaries_dir,
        runs=runs,
        depth=depth,
        moves=moves,
    )


def exact_text(verdict: dict) -> str:
    """The verdict as JSON with every float's bits (sorted keys, two-space indent)."""
    return json.dumps(verdict, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def write_verdict(verdict: dict, rounded: Path | None, exact: Path | None = None) -> None:
    """Write the verdict to ``rounded`` (``metrics/gate.json``) and ``exact``
    (``data/verdict.json``), either left out when None; both or neither."""
    with outputs_together(rounded, exact):
        if rounded is not None:
            write_json(rounded, verdict)
        if exact is not None:
            write_text(exact, exact_text(verdict))


def read_verdict(path: Path) -> dict:
    """The verdict the verdict stage wrote to ``path`` (``data/verdict.json``)."""
    verdict = read_json(path)
    if not (isinstance(verdict, dict) and isinstance(verdict.get("passed"), bool) and "configs" in verdict):
        fix = "run `dvc repro` (the verdict stage writes it)"
        raise InputError([Problem(str(path), "not a verdict: no `passed` and `configs`", fix)])
    return verdict
