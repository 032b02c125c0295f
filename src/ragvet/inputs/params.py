"""Validation of ``params.yaml``: every problem, each at ``params.yaml: <key path>``.

Chunkings, retrievers and metric names are checked by the modules that define
them; this module checks the sections and the cross-references between them.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragvet.chunking import chunking_problems
from ragvet.errors import InputError, Problem, raise_if
from ragvet.gating.corrections import CORRECTIONS
from ragvet.measures.registry import metric_problems
from ragvet.measures.tokens import TOKENIZER_FIX, UNITS, tokenizer_file
from ragvet.retrieval.specs.registry import retriever_problems
from ragvet.settings import CHARS, resolved
from ragvet.storage.files import dumps, read_json, read_params
from ragvet.text.located_yaml import key_path_line
from ragvet.text.values import SAFE_NAME_FIX, did_you_mean, has_text, is_int, is_number, is_safe_name, kind_of

PARAMS_SECTIONS = ("chunking", "retrievers", "configs", "ks", "depth", "split", "evidence", "slices", "gate")
OPTIONAL_SECTIONS = ("budget", "judged")
JUDGED_KEYS = ("metric", "max_drop")  # both optional: ragvet.settings holds their defaults
BUDGET_KEYS = ("values",)
BUDGET_OPTIONAL_KEYS = ("unit", "tokenizer")
SPLIT_KEYS = ("salt", "eval_fraction")
EVIDENCE_KEYS = ("span_coverage",)
GATE_KEYS = (
    "configs",
    "metrics",
    "max_drop",
    "min_slice_cases",
    "slice_max_drop",
    "slice_metric",
    "require_significance",
    "bootstrap",
)
GATE_OPTIONAL_KEYS = ("correction", "permutation", "latency", "rbo_p")
LATENCY_KEYS = ("max_p95_rise",)
BOOTSTRAP_KEYS = ("resamples", "seed", "confidence")
PERMUTATION_KEYS = ("resamples", "seed")
# Caps on knobs whose cost grows with their value, so that a typo cannot stall CI:
# each resample re-averages every case, and each rank of depth is stored per case.
MAX_RESAMPLES = 100_000
MAX_DEPTH = 10_000


class _ParamsChecker:
    def __init__(self, source: str):
        self.source = source
        self.problems: list[Problem] = []

    def add(self, key: str, what: str, fix: str) -> None:
        self.problems.append(Problem(f"{self.source}: {key}", what, fix))

    def mapping(self, value: Any, key: str, example: str, non_empty: bool = True) -> dict | None:
        if not isinstance(value, dict) or (non_empty and not value):
            got = "an empty mapping" if isinstance(value, dict) else f"{kind_of(value)} {value!r}"
            self.add(key, f"`{key}` must be a non-empty mapping, got {got}", f"write it as {example}")
            return None
        return value

    def keys(self, value: dict, key: str, allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> None:
        for name in required:
            if name not in value:
                self.add(f"{key}.{name}", f"`{key}.{name}` is missing", f"add `{name}` under `{key}`")
        for name in value:
            if name not in allowed:
                self.add(
                    f"{key}.{name}",
                    f"unknown key `{name}` in `{key}`",
                    f"{did_you_mean(name, allowed)}`{key}` takes: {', '.join(allowed)}",
                )

    def name(self, key: str, name: Any, kind: str) -> None:
        if not is_safe_name(name):
            self.add(key, f"{kind} name {name!r} cannot be used in stage names and file paths", SAFE_NAME_FIX)

    def number(self, key: str, value: Any, low: float, high: float, low_open: bool, high_open: bool, fix: str) -> None:
        ok = (
            is_number(value)
            and (low < value if low_open else low <= value)
            and (value < high if high_open else value <= high)
        )
        if not ok:
            interval = f"{'(' if low_open else '['}{low:g}, {'∞' if math.isinf(high) else f'{high:g}'}" + (
                ")" if high_open or math.isinf(high) else "]"
            )
            self.add(key, f"`{key}` must be a number in {interval}, got {value!r}", fix)

    def integer(self, key: str, value: Any, low: int, fix: str, high: int | None = None) -> bool:
        if not is_int(value) or value < low:
            self.add(key, f"`{key}` must be an integer ≥ {low}, got {value!r}", fix)
            return False
        if high is not None and value > high:
            self.add(key, f"`{key}` is {value:,}, above ragvet's cap of {high:,}", fix)
            return False
        return True


def _check_configs(check: _ParamsChecker, params: dict) -> None:
    configs = check.mapping(params.get("configs"), "configs", "{my-config: {chunking: fixed-300, retriever: bm25}}")
    if configs is None:
        return
    defined = {
        kind: sorted(map(str, params[kind])) if isinstance(params.get(kind), dict) else []
        for kind in ("chunking", "retrievers")
    }
    for name, config in configs.items():
        key = f"configs.{name}"
        check.name(key, name, "config")
        if not isinstance(config, dict):
            check.add(
                key, f"config {name!r} must be a mapping, got {config!r}", "write it as {chunking: ..., retriever: ...}"
            )
            continue
        check.keys(config, key, ("chunking", "retriever"), ("chunking", "retriever"))
        for field_name, section in (("chunking", "chunking"), ("retriever", "retrievers")):
            if field_name not in config:
                continue
            value = config[field_name]
            if not isinstance(value, str) or value not in defined[section]:
                check.add(
                    f"{key}.{field_name}",
                    f"config {name!r} names unknown {field_name} {value!r}",
                    f"use one defined under `{section}`: {', '.join(defined[section]) or '(none defined)'}",
                )


def _check_ks(check: _ParamsChecker, params: dict) -> list[int] | None:
    """Valid ks, or ``None`` when they are not (so dependent checks stay quiet)."""
    ks = params.get("ks")
    if not isinstance(ks, list) or not ks:
        check.add("ks", f"`ks` must be a non-empty list of integers > 0, got {ks!r}", "write e.g. ks: [1, 3, 5, 10]")
        return None
    ok = True
    for index, k in enumerate(ks):
        if not is_int(k) or k <= 0:
            check.add(
                f"ks[{index}]",
                f"k must be an integer > 0, got {k!r}",
                "use whole numbers of retrieved chunks ≥ 1, e.g. ks: [1, 3, 5, 10]",
            )
            ok = False
    if ok and len(set(ks)) != len(ks):
        check.add("ks", f"`ks` lists a k more than once: {ks}", "list each k once")
    return sorted(set(ks)) if ok else None


def _check_budget(check: _ParamsChecker, params: dict) -> list[int]:
    """The valid budget values (``[]`` when the budget is off or they are not valid).

    ``unit: chars`` (the default) counts characters; ``unit: tokens`` counts the tokens
    of ``tokenizer`` (the packaged MiniLM tokenizer or a local folder), which must be
    found here, never downloaded later. ``budget: null``, ``{}`` and ``values: []`` turn
    the budget metrics off."""
    if params["budget"] is None or params["budget"] == {}:
        return []
    example = "{unit: tokens, values: [256, 512, 1024], tokenizer: ...}, or null for no budget metrics"
    budget = check.mapping(params["budget"], "budget", example)
    if budget is None:
        return []
    check.keys(budget, "budget", BUDGET_KEYS + BUDGET_OPTIONAL_KEYS, BUDGET_KEYS)
    unit, tokenizer = budget.get("unit", CHARS), budget.get("tokenizer", CHARS)
    if "unit" in budget and unit not in UNITS:
        check.add("budget.unit", f"`budget.unit` must be one of {', '.join(UNITS)}, got {unit!r}", "set unit: tokens")
    if unit == "tokens" and tokenizer == CHARS:
        check.add("budget.tokenizer", "`budget.unit` is tokens but no tokenizer is named", TOKENIZER_FIX)
    elif unit == "chars" and tokenizer != CHARS:
        check.add("budget.tokenizer", f"`budget.unit` is chars but names tokenizer {tokenizer!r}", "drop it")
    elif unit == "tokens":
        try:
            tokenizer_file(tokenizer, f"{check.source}: budget.tokenizer")
        except InputError as error:
            check.problems.extend(error.problems)
    values = budget.get("values", [])
    fix = "list budgets in units ≥ 0, e.g. values: [256, 512, 1024], or [] for no budget metrics"
    if not isinstance(values, list) or not all(is_int(v) and v >= 0 for v in values):
        check.add("budget.values", f"`budget.values` must be a list of integers ≥ 0, got {values!r}", fix)
        return []
    if len(set(values)) != len(values):
        check.add("budget.values", f"`budget.values` lists a value more than once: {values}", "list each once")
    return sorted(set(values))


def _check_split_evidence_slices(check: _ParamsChecker, params: dict) -> None:
    split = (
        check.mapping(params["split"], "split", "{salt: my-eval-v1, eval_fraction: 0.7}") if "split" in params else None
    )
    if split is not None:
        check.keys(split, "split", SPLIT_KEYS, SPLIT_KEYS)
        if "salt" in split and not has_text(split["salt"]):
            check.add(
                "split.salt",
                f"`split.salt` must be non-empty text, got {split['salt']!r}",
                "set a salt such as `salt: my-eval-v1` (changing it reshuffles every case)",
            )
        if "eval_fraction" in split:
            check.number(
                "split.eval_fraction",
                split["eval_fraction"],
                0,
                1,
                True,
                False,  # 1.0 puts every case in eval, which small collections want
                "set the share of cases in the eval split, e.g. eval_fraction: 0.7",
            )
    evidence = check.mapping(params["evidence"], "evidence", "{span_coverage: 1.0}") if "evidence" in params else None
    if evidence is not None:
        check.keys(evidence, "evidence", EVIDENCE_KEYS, EVIDENCE_KEYS)
        if "span_coverage" in evidence:
            check.number(
                "evidence.span_coverage",
                evidence["span_coverage"],
                0,
                1,
                False,
                False,
                "set the share of a span's characters the top-k must cover: 1.0 = all, 0 = any overlap",
            )
    if "slices" not in params:
        return
    slices = params["slices"]
    if not isinstance(slices, list) or not all(has_text(s) for s in slices):
        check.add(
            "slices",
            f"`slices` must be a list of tag names, got {slices!r}",
            "list the case tags to slice by, e.g. slices: [phrasing, doc_type], or slices: []",
        )
    elif len(set(slices)) != len(slices):
        check.add("slices", f"`slices` lists a tag more than once: {slices}", "list each tag once")


def _check_judged(check: _ParamsChecker, params: dict, ks: list[int] | None) -> None:
    """``judged``: the report warns when a configuration's ``metric`` (a ``judged@k``)
    is more than ``max_drop`` below its reference's: its recall may then be an
    artefact of missing judgements (imported qrels). ``null`` or ``{}`` (or a key left
    out) takes the defaults of :class:`ragvet.settings.Judged`."""
    if params["judged"] is None:
        return
    example = "{metric: judged@10, max_drop: 0.1}, or null for the defaults"
    judged = check.mapping(params["judged"], "judged", example, non_empty=False)
    if judged is None:
        return
    check.keys(judged, "judged", JUDGED_KEYS)
    if "metric" in judged:
        metric = judged["metric"]
        if not str(metric).startswith("judged@"):
            check.add("judged.metric", f"`judged.metric` must be judged@<k>, got {metric!r}", "write metric: judged@10")
        else:
            check.problems.extend(metric_problems([metric], ks, f"{check.source}: judged.metric"))
    if "max_drop" in judged:
        check.number(
            "judged.max_drop",
            judged["max_drop"],
            0,
            1,
            False,
            False,
            "set how far below its reference's a judged share may fall before the report warns, e.g. 0.1",
        )


def _check_gate(check: _ParamsChecker, params: dict, ks: list[int] | None, budgets: list[int]) -> None:
    gate = check.mapping(params.get("gate"), "gate", "a mapping with configs, metrics, max_drop, ...")
    if gate is None:
        return
    check.keys(gate, "gate", GATE_KEYS + GATE_OPTIONAL_KEYS, GATE_KEYS)
    if "configs" in gate:
        configs = gate["configs"]
        defined = sorted(map(str, params["configs"])) if isinstance(params.get("configs"), dict) else []
        if not isinstance(configs, list) or not configs:
            check.add(
                "gate.configs",
                f"`gate.configs` must be a non-empty list of config names, got {configs!r}",
                f"list the configurations to gate, from: {', '.join(defined) or '(none defined)'}",
            )
        else:
            for name in configs:
                if name not in defined:
                    check.add(
                        "gate.configs",
                        f"gate names unknown config {name!r}",
                        f"use one defined under `configs`: {', '.join(defined) or '(none defined)'}",
                    )
    if "metrics" in gate:
        metrics = gate["metrics"]
        if not isinstance(metrics, list) or not metrics or not all(isinstance(m, str) for m in metrics):
            check.add(
                "gate.metrics",
                f"`gate.metrics` must be a non-empty list of metric names, got {metrics!r}",
                "list the guarded metrics, e.g. [recall@5, evidence_recall@5, mrr]",
            )
        else:
            where = f"{check.source}: gate.metrics"
            check.problems.extend(metric_problems(metrics, ks, where, gated=True, budgets=budgets, movement=True))
    if "slice_metric" in gate:
        if not isinstance(gate["slice_metric"], str):
            check.add(
                "gate.slice_metric",
                f"`gate.slice_metric` must be a metric name, got {gate['slice_metric']!r}",
                "set e.g. slice_metric: evidence_recall@5",
            )
        else:
            check.problems.extend(
                metric_problems(
                    [gate["slice_metric"]], ks, f"{check.source}: gate.slice_metric", gated=True, budgets=budgets
                )
            )
    for key in ("max_drop", "slice_max_drop"):
        if key in gate:
            check.number(
                f"gate.{key}", gate[key], 0, math.inf, False, True, f"set the largest allowed drop, e.g. {key}: 0.02"
            )
    if "min_slice_cases" in gate:
        check.integer("gate.min_slice_cases", gate["min_slice_cases"], 0, "set e.g. min_slice_cases: 8")
    if "require_significance" in gate and not isinstance(gate["require_significance"], bool):
        check.add(
            "gate.require_significance",
            f"must be true or false, got {gate['require_significance']!r}",
            "set require_significance: false (or true to fail only when the interval excludes 0)",
        )
    if "bootstrap" in gate:
        boot = check.mapping(gate["bootstrap"], "gate.bootstrap", "{resamples: 2000, seed: 1, confidence: 0.95}")
        if boot is not None:
            check.keys(boot, "gate.bootstrap", BOOTSTRAP_KEYS, BOOTSTRAP_KEYS)
            _check_resamples_seed(check, boot, "gate.bootstrap")
            if "confidence" in boot:
                check.number(
                    "gate.bootstrap.confidence",
                    boot["confidence"],
                    0,
                    1,
                    True,
                    True,
                    "set e.g. confidence: 0.95",
                )
    _check_significance(check, gate)
    _check_latency(check, gate)
    if "rbo_p" in gate:  # RBO's persistence, for what moved against the baseline's ranking
        check.number("gate.rbo_p", gate["rbo_p"], 0, 1, True, True, "set e.g. rbo_p: 0.9 (the first 10 ranks: 86%)")


def _check_latency(check: _ParamsChecker, gate: dict) -> None:
    """``gate.latency``: optional; ``max_p95_rise`` a relative rise ≥ 0, or null (off)."""
    if "latency" not in gate:
        return
    latency = check.mapping(gate["latency"], "gate.latency", "{max_p95_rise: 0.5} (or null to keep it off)")
    if latency is None:
        return
    check.keys(latency, "gate.latency", LATENCY_KEYS, LATENCY_KEYS)
    if latency.get("max_p95_rise") is not None:
        check.number(
            "gate.latency.max_p95_rise",
            latency["max_p95_rise"],
            0,
            math.inf,
            False,
            True,
            "set the largest allowed relative rise of p95 latency, e.g. max_p95_rise: 0.5 (+50%), or null (off)",
        )


def _check_resamples_seed(check: _ParamsChecker, section: dict, key: str) -> None:
    if "resamples" in section:
        check.integer(
            f"{key}.resamples",
            section["resamples"],
            1,
            f"set e.g. resamples: 2000 (at most {MAX_RESAMPLES:,}; an interval barely narrows past 10,000)",
            MAX_RESAMPLES,
        )
    if "seed" in section:
        check.integer(f"{key}.seed", section["seed"], 0, "set a fixed seed, e.g. seed: 20261129")


def _check_significance(check: _ParamsChecker, gate: dict) -> None:
    """``gate.correction`` and ``gate.permutation``: optional (Holm; the bootstrap's seed and resamples)."""
    if "correction" in gate and gate["correction"] not in CORRECTIONS:
        check.add(
            "gate.correction",
            f"unknown correction {gate['correction']!r}",
            f"{did_you_mean(str(gate['correction']), CORRECTIONS)}use one of: {', '.join(CORRECTIONS)}",
        )
    if "permutation" in gate:
        perm = check.mapping(gate["permutation"], "gate.permutation", "{resamples: 10000, seed: 20261201}")
        if perm is not None:
            check.keys(perm, "gate.permutation", PERMUTATION_KEYS, PERMUTATION_KEYS)
            _check_resamples_seed(check, perm, "gate.permutation")


# DVC's run cache hashes a stage with every key named like these left out, at any
# depth, params included (dvc/stage/cache.py: Meta.PARAM_SIZE, Meta.PARAM_NFILES).
# A change to such a param would let `dvc repro` restore stale outputs.
RUN_CACHE_BLIND_KEYS = ("size", "nfiles")


def run_cache_blind_keys(value: Any, path: str = "") -> list[str]:
    """Dotted paths of every key DVC's run cache would not see, sorted."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            found += [where] if key in RUN_CACHE_BLIND_KEYS else []
            found += run_cache_blind_keys(item, where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += run_cache_blind_keys(item, f"{path}[{index}]")
    return sorted(found)


def validate_params(params: dict, source: str = "params.yaml") -> list[Problem]:
    """Every problem with the params, each at ``params.yaml: <key path>``.

    Chunkings and retrievers are checked by their own modules
    (:func:`ragvet.chunking.chunking_problems`, :func:`ragvet.retrieval.specs.registry.retriever_problems`),
    metric names by :func:`ragvet.measures.registry.metric_problems`. ``depth`` below the
    largest k is a problem: a k beyond the depth would silently repeat the figure at
    ``depth``.
    """
    check = _ParamsChecker(source)
    if not isinstance(params, dict):
        check.add("(top level)", "params must be a YAML mapping", f"write the sections {', '.join(PARAMS_SECTIONS)}")
        return check.problems
    for path in run_cache_blind_keys(params):
        check.add(
            path,
            f"DVC's run cache leaves keys named {' or '.join(RUN_CACHE_BLIND_KEYS)} out of a stage's hash, "
            "so changing this value could bring back stale outputs",
            "rename the key (the fixed chunking's window length is `window`)",
        )
    for key in PARAMS_SECTIONS:
        if key not in params:
            check.add(
                key, f"section `{key}` is missing", "add it; the bundled params.yaml shows every section, with comments"
            )
    known = PARAMS_SECTIONS + OPTIONAL_SECTIONS
    for key in params:
        if key not in known:
            check.add(
                str(key), f"unknown section `{key}`", f"{did_you_mean(key, known)}params.yaml takes: {', '.join(known)}"
            )
    if "chunking" in params:
        chunkings = check.mapping(params["chunking"], "chunking", "{fixed-300: {strategy: fixed, ...}}")
        for name, spec in (chunkings or {}).items():
            check.problems.extend(chunking_problems(name, spec, f"{source}: chunking.{name}"))
    if "retrievers" in params:
        retrievers = check.mapping(params["retrievers"], "retrievers", "{bm25: {kind: bm25}}")
        for name, spec in (retrievers or {}).items():
            check.name(f"retrievers.{name}", name, "retriever")
            check.problems.extend(retriever_problems(name, spec, f"{source}: retrievers.{name}", retrievers))
    if "configs" in params:
        _check_configs(check, params)
    ks = _check_ks(check, params) if "ks" in params else None
    if "depth" in params:
        depth = params["depth"]
        valid = check.integer(
            "depth",
            depth,
            1,
            f"set how many chunks each run keeps per case, e.g. depth: 20 (at most {MAX_DEPTH:,})",
            MAX_DEPTH,
        )
        if valid and ks and depth < ks[-1]:
            check.add(
                "depth",
                f"depth {depth} is below the largest k {ks[-1]}: ranks past {depth} are never "
                f"retrieved, so every @{ks[-1]} figure would silently equal the one at {depth}",
                f"raise depth to at least {ks[-1]}, or drop the larger ks",
            )
    _check_split_evidence_slices(check, params)
    budgets = _check_budget(check, params) if "budget" in params else []
    if "judged" in params:
        _check_judged(check, params, ks)
    if "gate" in params:
        _check_gate(check, params, ks, budgets)
    return [_at_line(problem, params, source) for problem in check.problems]


def _at_line(problem: Problem, params: dict, source: str) -> Problem:
    """``params.yaml: gate.max_drop`` as ``params.yaml:41 (gate.max_drop)`` when the
    params were read with their lines (:func:`ragvet.storage.files.read_params`)."""
    path = problem.where.removeprefix(f"{source}: ")
    line = key_path_line(params, path) if path != problem.where else 0
    return Problem(f"{source}:{line} ({path})", problem.what, problem.fix) if line else problem


def _key_path(where: str, source: str) -> str:
    """The key path of a params problem, at ``params.yaml: ks[0]`` or ``params.yaml:12 (ks[0])``."""
    located = re.fullmatch(rf"{re.escape(source)}:\d+ \((.*)\)", where, re.DOTALL)
    return located[1] if located else where.removeprefix(f"{source}: ")


def _bears_on(key: str, reads: Sequence[str]) -> bool:
    """Whether a problem at ``key`` (``chunking.a.window``, ``ks[0]``, ``configs``)
    is about a params key a stage reads, or one that holds it."""
    return any(key == read or key.startswith((f"{read}.", f"{read}[")) or read.startswith(f"{key}.") for read in reads)


def stage_params(path: Path, reads: Sequence[str]) -> dict[str, Any]:
    """The params file, re-checked at a stage's own start for the keys it reads
    (its ``params:`` in dvc.yaml), with the same rules validate applies.

    DVC runs validate only when it sees a change, and it cannot see some: keys named
    ``size`` are out of its hashes, and ``true`` compares equal to ``1``. Nor does
    ``dvc repro -s chunk@a`` run validate at all. A stage therefore never trusts that
    validate saw the params it is given. A dotted key that names an entry (``chunking.a``)
    must exist.
    """
    params = read_params(path)
    source = str(path)
    problems = [p for p in validate_params(params, source) if _bears_on(_key_path(p.where, source), reads)]
    for read in reads:
        section, _, name = read.partition(".")
        entries = params.get(section)
        if name and isinstance(entries, dict) and name not in entries:
            problems.append(
                Problem(
                    f"{source}: {section}",
                    f"no {section} entry named {name!r}",
                    f"run a stage defined by dvc.yaml; {section} holds: {', '.join(sorted(map(str, entries)))}",
                )
            )
    raise_if(problems)
    return params


def stage_key(stage: str, given: str | None) -> str:
    """The foreach key a stage runs for: ``given`` on the command line, or else the
    key of ``DVC_STAGE`` (``chunk@fixed-300``, ``sub/dvc.yaml:chunk@fixed-300``), which DVC
    sets for every command it runs.

    dvc.yaml keeps ``${key}`` out of its ``cmd`` lines: DVC pastes it into a shell
    command unquoted, so a hostile name in params.yaml would run as shell code
    (``dvc repro -s 'chunk@a;touch x;true'``) before any check of ours could start.
    """
    if given is None:
        addressing = os.environ.get("DVC_STAGE", "")
        prefix, _, given = addressing.partition("@")
        if prefix != stage and not prefix.endswith(f":{stage}"):
            raise InputError(
                [
                    Problem(
                        f"{stage} (DVC_STAGE={addressing!r})",
                        f"no {stage} name given, and DVC is not running a {stage}@<name> stage",
                        f"name it: ragvet {stage} <name> ...",
                    )
                ]
            )
    if not is_safe_name(given):
        what = f"{stage} name {given!r} cannot be used in stage names and file paths"
        raise InputError([Problem(f"{stage}@{given!r}", what, SAFE_NAME_FIX)])
    return given


def fill_path(path: Path, **names: str) -> Path:
    """A dvc.yaml path with its ``{key}``-style placeholders filled with checked names
    (``'data/chunks/{key}.jsonl'``: quoted in the ``cmd``, so no shell ever reads the name)."""
    text = str(path)
    for placeholder, value in names.items():
        text = text.replace(f"{{{placeholder}}}", value)
    return Path(text)


def settled(path: Path, key: str, params: dict) -> None:
    """Refuse the settings file at ``path`` unless it holds what ``key`` of the params
    a stage just checked resolves to (:func:`ragvet.settings.resolved`).

    A stage that reads an optional section depends on its settings file, not on the
    params key, which DVC would require. ``dvc repro -s <stage>`` does not run the
    settings stage, so a file older than the params is refused rather than read."""
    expected = json.loads(dumps({key: resolved(params)[key]}))
    found = read_json(path)
    if found != expected:
        what = f"out of date: params.yaml's {key} now resolves to {json.dumps(expected[key], sort_keys=True)}"
        raise InputError([Problem(str(path), what, "run `dvc repro` (the settings stage writes it)")])
