"""Abstention thresholds: sweep the top-1 score on the dev split, choose by a
stated rule, and judge the choice on eval.

A system that abstains when its best retrieved score is under a threshold trades
abstaining on questions its corpus cannot answer against wrongly abstaining on
questions it can. Choosing that threshold on the cases it is judged on would
flatter it, so the chooser only ever sees dev cases: :func:`choose_threshold`
takes dev rows and nothing else, and the eval figures are computed afterwards,
for the chosen threshold only.

The choice lives in its own DVC params file (``abstention.yaml``), written by
``ragvet tune-abstain`` and read by the evaluate stage, one entry per
configuration (a threshold depends on the chunking as well as the retriever).
Each entry records what it was tuned on: the configuration's spec and the dev
split, by fingerprint. A threshold whose fingerprints differ from the current
ones is stale: evaluate still applies it, but marks that configuration's abstention
figures stale in its metrics JSON (:func:`stale_mark`), and the report shows the
mark with the fix, since a sample's threshold kept under a configuration name the
user reused would otherwise score their data silently. Only those figures depend
on it, so nothing else stops: the retrieval metrics, and every other configuration,
are computed as usual, and the gate guards no figure the threshold moves
(:func:`ragvet.measures.registry.reads_threshold`).
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate
from pathlib import Path
from typing import Any

import yaml

from ragvet.errors import InputError, Problem, raise_if
from ragvet.schema import SPLITS, config_fingerprint
from ragvet.storage.files import FLOAT_PLACES, read_yaml, write_text
from ragvet.text.located_yaml import line_of
from ragvet.text.values import is_number

RULES = ("f1", "false-abstention")
MAX_FALSE_ABSTAIN = 0.5  # above this share of answerable dev cases abstained on, tune-abstain warns
ENTRY_KEYS = ("abstain_below", "config_fingerprint", "dev_split_fingerprint", "rule", "target", "tuned_on")
RECORDED = ("config_fingerprint", "dev_split_fingerprint")  # what a threshold was tuned on
HEADER = (
    "# Abstention thresholds, one per configuration: the system abstains when its top-1\n"
    "# score is below abstain_below. Written by `ragvet tune-abstain` from the dev split\n"
    "# only; the evaluate stage reads it (a DVC params file) and reports the effect on eval.\n"
)


def abstains(top1: float | None, threshold: float) -> bool:
    """A case with nothing retrieved abstains whatever the threshold."""
    return top1 is None or top1 < threshold


def candidate_thresholds(scores: Sequence[float | None]) -> list[float]:
    """Midpoints between consecutive distinct top-1 scores, plus one under the
    lowest (abstain on nothing) and one over the highest (abstain on everything).

    Midpoints rather than the scores themselves, so a case scoring exactly at a
    neighbouring dev score is not decided by float noise on eval.
    """
    distinct = sorted({round(s, FLOAT_PLACES) for s in scores if s is not None})
    if not distinct:
        return [0.0]
    mids = [round((a + b) / 2, FLOAT_PLACES) for a, b in zip(distinct, distinct[1:])]
    return [round(distinct[0] - 1.0, FLOAT_PLACES), *mids, round(distinct[-1] + 1.0, FLOAT_PLACES)]


def _figures(threshold: float, hits: int, false: int, positives: int, negatives: int) -> dict[str, Any]:
    """The figures of :func:`rates` from its four counts."""
    recall = hits / positives if positives else None
    precision = hits / (hits + false) if hits + false else None
    if recall is None or precision is None:
        f1 = None
    else:
        f1 = 0.0 if recall + precision == 0 else 2 * precision * recall / (precision + recall)
    return {
        "threshold": threshold,
        "abstain_rate": recall,
        "false_abstain_rate": false / negatives if negatives else None,
        "precision": precision,
        "f1": f1,
        "abstention_cases": positives,
        "answerable_cases": negatives,
    }


def rates(rows: Sequence[Mapping[str, Any]], threshold: float) -> dict[str, Any]:
    """Abstention figures of one threshold over ``rows`` (``answerable``, ``top1_score``).

    ``abstain_rate``: abstention cases it abstains on / abstention cases (the
    recall of abstaining). ``false_abstain_rate``: answerable cases it abstains on
    / answerable cases. ``precision``: abstention cases among all abstentions.
    ``f1``: their harmonic mean. Each is None when its denominator is 0 (F1 is 0
    when precision and recall are both 0).
    """
    positives = [row for row in rows if not row["answerable"]]
    negatives = [row for row in rows if row["answerable"]]
    hits = sum(abstains(row["top1_score"], threshold) for row in positives)
    false = sum(abstains(row["top1_score"], threshold) for row in negatives)
    return _figures(threshold, hits, false, len(positives), len(negatives))


def sweep(dev_rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Figures at every candidate threshold, ascending: :func:`rates` at each (see :func:`sweep_counted`)."""
    return sweep_counted(Counter((bool(row["answerable"]), row["top1_score"]) for row in dev_rows))


def sweep_counted(counts: Mapping[tuple[bool, float | None], int]) -> list[dict[str, Any]]:
    """:func:`sweep` of the dev cases given as how many have each ``(answerable, top1_score)``,
    so that millions of cases cost one entry per distinct score. The cases abstained on
    are counted by a binary search of the sorted distinct scores (a case abstains below
    ``t`` when its score is under ``t``, or it has none): n log n, not n squared."""
    scores: dict[bool, list[float]] = {False: [], True: []}  # distinct, by answerable
    unscored = {False: 0, True: 0}
    for (answerable, score), count in counts.items():
        if score is None:
            unscored[answerable] += count
        else:
            scores[answerable].append(score)
    below_each: dict[bool, list[int]] = {}  # cases under each distinct score, and all of them last
    for answerable, distinct in scores.items():
        distinct.sort()
        below_each[answerable] = list(accumulate((counts[answerable, s] for s in distinct), initial=0))
    sizes = {answerable: below_each[answerable][-1] + unscored[answerable] for answerable in (False, True)}

    def below(answerable: bool, threshold: float) -> int:
        return unscored[answerable] + below_each[answerable][bisect.bisect_left(scores[answerable], threshold)]

    return [
        _figures(t, below(False, t), below(True, t), sizes[False], sizes[True])
        for t in candidate_thresholds([*scores[False], *scores[True]])
    ]


def choose_threshold(dev_rows: Sequence[Mapping[str, Any]], rule: str, target: float | None = None) -> dict[str, Any]:
    """The sweep point chosen by ``rule`` over dev rows only.

    * ``f1``: the best F1 of abstaining (abstention cases are the positives);
      ties go to the fewer false abstentions, then the lower threshold.
    * ``false-abstention``: the highest threshold whose false-abstention rate is
      at most ``target``, i.e. the most abstention the target allows.

    Raises ValueError when the dev split cannot support the rule (no abstention
    case, no answerable case, or top-1 scores that do not vary), since any
    threshold would then be arbitrary.
    """
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; use one of {', '.join(RULES)}")
    if not any(not row["answerable"] for row in dev_rows) or not any(row["answerable"] for row in dev_rows):
        raise ValueError("the dev split needs abstention cases and answerable cases to tune a threshold")
    if len({row["top1_score"] for row in dev_rows if row["top1_score"] is not None}) < 2:
        raise ValueError(
            "the dev cases' top-1 scores do not vary, so no threshold separates them "
            "(a run file of ranks only has no scores)"
        )
    points = sweep(dev_rows)
    if rule == "f1":
        return min(points, key=lambda p: (-(p["f1"] or 0.0), p["false_abstain_rate"], p["threshold"]))
    if target is None or not 0 <= target <= 1:
        raise ValueError(f"the false-abstention rule needs a target in [0, 1], got {target!r}")
    allowed = [p for p in points if p["false_abstain_rate"] <= target]
    return max(allowed, key=lambda p: p["threshold"])  # the lowest candidate abstains on nothing: never empty


def overcautious(point: Mapping[str, Any]) -> str | None:
    """A warning when the chosen threshold abstains on more than half of the
    answerable dev cases, else None.

    A rule can pick such a threshold legitimately (F1 on a dev split where the
    top-1 score hardly separates the two kinds of case, or a generous target), yet
    a system that refuses most questions it could answer is rarely what was meant:
    on SQuAD 2.0, ``--rule f1`` chose one that abstained on 99.4% of them.
    """
    rate = point["false_abstain_rate"]
    if rate is None or rate <= MAX_FALSE_ABSTAIN:
        return None
    wrongly = round(rate * point["answerable_cases"])
    return (
        f"the threshold {point['threshold']:g} abstains on {wrongly} of the {point['answerable_cases']} answerable "
        f"dev cases ({rate:.1%}), more than half: the top-1 score barely tells answerable cases from the others "
        "under this configuration. Check the figures above before committing it; "
        "`--rule false-abstention --target 0.1` caps that rate instead"
    )


def score_rows(cases: Sequence[Any], run: Mapping[str, Sequence[Mapping[str, Any]]], split: Mapping[str, str]) -> dict:
    """``{split: [{case_id, answerable, top1_score}, ...]}`` from cases, a run and the split."""
    grouped: dict[str, list[dict]] = {split: [] for split in SPLITS}
    for case in sorted(cases, key=lambda c: c.case_id):
        ranked = run.get(case.case_id) or ()
        top1 = ranked[0]["score"] if ranked else None
        grouped[split[case.case_id]].append(
            {"case_id": case.case_id, "answerable": case.answerable, "top1_score": top1}
        )
    return grouped


# ---------------------------------------------------------------------- params file


def read_thresholds(path: Path, configs: Mapping[str, Any], retuning: str | None = None) -> dict[str, dict]:
    """The tuned entries by configuration, or InputError with every entry's problem.

    A missing file means nothing is tuned. An entry for an unknown configuration
    is an error, as is a threshold that is not a number, or an entry of the old
    format that does not record what it was tuned on. The entry of ``retuning``
    is not checked: ``tune-abstain`` is about to replace it, and is the fix.
    """
    data = _read_entries(path)
    raise_if([problem for name in data if name != retuning for problem in _entry_problems(path, data, name, configs)])
    return data


def _read_entries(path: Path) -> dict[str, Any]:
    """The file's mapping as written ({} when there is no file)."""
    if not path.exists():
        return {}
    data = read_yaml(path) or {}
    if not isinstance(data, dict):
        raise_if([Problem(str(path), "must be a mapping of configuration names", "re-run ragvet tune-abstain")])
    return data  # a LocatedDict, whose key lines the problems name


def _where(path: Path, entries: Mapping[str, Any], name: str) -> str:
    """``abstention.yaml:7 (name)`` when the file was read with its lines, else ``abstention.yaml: name``."""
    line = line_of(entries, name)
    return f"{path}:{line} ({name})" if line else f"{path}: {name}"


def _entry_problems(path: Path, entries: Mapping[str, Any], name: str, configs: Mapping[str, Any]) -> list[Problem]:
    """What is wrong with one entry's shape, at most one problem."""
    entry = entries[name]
    where = _where(path, entries, name)
    retune = f"run `ragvet tune-abstain --config {name}` again, or delete the entry"
    if name not in configs:
        return [Problem(where, f"threshold for configuration {name!r}, which does not exist", "remove the entry")]
    if not isinstance(entry, dict) or not is_number(entry.get("abstain_below")):
        return [Problem(where, "needs a mapping with a numeric abstain_below (an old format?)", retune)]
    if set(entry) - set(ENTRY_KEYS):
        return [Problem(where, f"unknown keys {sorted(set(entry) - set(ENTRY_KEYS))}", f"use {', '.join(ENTRY_KEYS)}")]
    missing = [key for key in RECORDED if not isinstance(entry.get(key), str)]
    if missing:
        return [Problem(where, f"does not record what it was tuned on ({', '.join(missing)}): an old format", retune)]
    return []


def spec_fingerprint(settings: Mapping[str, Any], config: str) -> str:
    """The fingerprint of ``config``'s chunking params and retriever spec in ``settings``."""
    spec = settings["configs"][config]
    return config_fingerprint(settings["chunking"][spec["chunking"]], settings["retrievers"][spec["retriever"]])


def _stale(
    path: Path, thresholds: Mapping[str, dict], settings: Mapping[str, Any], dev_split: str | None, name: str
) -> Problem | None:
    """The problem of one entry tuned on what has changed since, else None."""
    entry, spec = thresholds[name], settings["configs"][name]
    changed = []
    if entry["config_fingerprint"] != spec_fingerprint(settings, name):
        changed.append(f"the configuration spec (chunking {spec['chunking']!r} or retriever {spec['retriever']!r})")
    if dev_split is not None and entry["dev_split_fingerprint"] != dev_split:
        changed.append("the dev split (its cases or labels)")
    if not changed:
        return None
    return Problem(
        _where(path, thresholds, name),
        f"threshold stale: {' and '.join(changed)} changed since it was tuned, "
        "so its abstention figures are marked stale",
        f"run `ragvet tune-abstain --config {name}` again, then `dvc repro` (or delete the entry)",
    )


def threshold_problems(path: Path, settings: Mapping[str, Any]) -> list[Problem]:
    """Every malformed entry's problem (an error: it cannot be applied at all)."""
    try:
        data = _read_entries(path)
    except InputError as err:
        return err.problems
    return [problem for name in data for problem in _entry_problems(path, data, name, settings["configs"])]


def threshold_warnings(path: Path, settings: Mapping[str, Any], dev_split: str | None) -> list[Problem]:
    """The stale thresholds among the well-formed entries (``dev_split`` None: not checked)."""
    try:
        data = _read_entries(path)
    except InputError:
        return []  # threshold_problems reports it
    sound = [name for name in sorted(data) if not _entry_problems(path, data, name, settings["configs"])]
    found = (_stale(path, data, settings, dev_split, name) for name in sound)  # data keeps the lines
    return [problem for problem in found if problem is not None]


def current_thresholds(
    path: Path, settings: Mapping[str, Any], dev_split: str | None
) -> tuple[dict[str, dict], dict[str, Problem]]:
    """The tuned entries (InputError on a malformed one), and the stale ones' problems by
    configuration: applied, but with their figures marked (:func:`stale_mark`)."""
    raise_if(threshold_problems(path, settings))
    entries = _read_entries(path)
    found = {name: _stale(path, entries, settings, dev_split, name) for name in entries}
    return entries, {name: problem for name, problem in found.items() if problem is not None}


def stale_mark(problem: Problem, config: str) -> dict[str, str]:
    """What a configuration's metrics JSON records beside abstention figures of a stale
    threshold (``abstention.stale``): why, and the command that fixes it."""
    return {"reason": problem.what, "fix": f"ragvet tune-abstain --config {config}"}


def threshold_for(
    config: str, thresholds: Mapping[str, dict], retriever_name: str, retriever: Mapping[str, Any], path: Path
) -> tuple[float | None, str | None]:
    """``(abstain_below, where it comes from)`` for one configuration.

    Set in both places is an error rather than a silent precedence: the user
    would not know which of two thresholds the figures used.
    """
    tuned = thresholds.get(config)
    fixed = retriever.get("abstain_below")
    if tuned is not None and fixed is not None:
        raise_if(
            [
                Problem(
                    f"{path}: {config}",
                    f"abstain_below is set here and in retrievers.{retriever_name}.abstain_below",
                    "keep one: remove the retriever's abstain_below, or this entry",
                )
            ]
        )
    if tuned is not None:
        rule = tuned.get("rule", "?")
        return float(tuned["abstain_below"]), f"{path.name} (tuned on dev, rule {rule})"
    if fixed is not None:
        return float(fixed), f"retrievers.{retriever_name}.abstain_below"
    return None, None


def write_thresholds(path: Path, thresholds: Mapping[str, dict]) -> None:
    """The params file, configurations sorted, with its header."""
    body = (
        yaml.safe_dump({name: thresholds[name] for name in sorted(thresholds)}, sort_keys=True)
        if thresholds
        else "{}\n"
    )
    write_text(path, HEADER + body)
