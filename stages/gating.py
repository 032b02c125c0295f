"""The regression gate: paired comparison of gated configurations with a baseline.

A gate is only useful if its failures are real and its passes are meaningful, so:

* the comparison is *paired* over the same eval-split cases (case-to-case noise
  cancels, and a case missing on one side cannot move a mean);
* every delta carries a paired bootstrap confidence interval, seeded from params,
  so the same inputs always give the same verdict;
* when no valid comparison is possible (no baseline, relabelled eval split,
  changed corpus, undefined metric) the gate *fails and says why*, instead of
  silently passing on numbers that mean nothing.

Everything here is pure except :func:`accept_baseline` and :func:`read_results_at`,
which are the two ways a baseline gets into the comparison.
"""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stages.answers import REVIEW_METRICS
from stages.errors import InputError, Problem
from stages.files import FLOAT_PLACES, write_text
from stages.formatting import is_missing
from stages.metrics import higher_is_better

if TYPE_CHECKING:  # numpy loads with the first comparison, not for `ragvet --help`
    import numpy as np

Row = dict[str, Any]
Summary = dict[str, Any]

EVAL = "eval"
RELABEL_FIX = "labels changed: re-baseline deliberately with `ragvet baseline accept`"
CORPUS_FIX = "corpus changed: re-baseline deliberately with `ragvet baseline accept`"
# Bound the (resamples x cases) index matrix so large eval sets do not exhaust memory.
_BOOTSTRAP_CELLS = 4_000_000


# --------------------------------------------------------------------------- pairing


def _eval_rows(rows: Iterable[Row]) -> dict[str, Row]:
    return {row["case_id"]: row for row in rows if row.get("split") == EVAL}


def paired_values(
    baseline_rows: Iterable[Row], current_rows: Iterable[Row], metric: str
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Values of ``metric`` for eval-split cases present, with a value, on both sides.

    Sorted by case_id, so that the bootstrap (which indexes into these arrays)
    sees the same order whatever order the rows were written in. Abstention cases
    (metric None) drop out on their own.
    """
    import numpy as np

    base_by_id = _eval_rows(baseline_rows)
    cur_by_id = _eval_rows(current_rows)
    ids: list[str] = []
    base: list[float] = []
    cur: list[float] = []
    for case_id in sorted(base_by_id.keys() & cur_by_id.keys()):
        b = base_by_id[case_id].get("metrics", {}).get(metric)
        c = cur_by_id[case_id].get("metrics", {}).get(metric)
        if is_missing(b) or is_missing(c):
            continue
        ids.append(case_id)
        base.append(float(b))
        cur.append(float(c))
    return ids, np.asarray(base, dtype=np.float64), np.asarray(cur, dtype=np.float64)


def bootstrap_ci(
    base: np.ndarray, cur: np.ndarray, resamples: int, seed: int, confidence: float
) -> tuple[float | None, float | None]:
    """Percentile interval of the mean paired delta ``cur - base``.

    Resampling *cases* (not the two sides independently) keeps the pairing, which
    is what makes small real regressions visible above per-case variance. The
    generator is ``numpy.random.default_rng(seed)`` and indices are drawn in
    batches whose sizes depend only on the number of cases and resamples, so the
    interval is a pure function of its arguments.
    """
    import numpy as np

    deltas = np.asarray(cur, dtype=np.float64) - np.asarray(base, dtype=np.float64)
    n = len(deltas)
    if n == 0 or resamples <= 0:
        return None, None
    rng = np.random.default_rng(seed)
    batch = max(1, min(resamples, _BOOTSTRAP_CELLS // n))
    means = np.empty(resamples, dtype=np.float64)
    for start in range(0, resamples, batch):
        stop = min(resamples, start + batch)
        idx = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = deltas[idx].mean(axis=1)
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(means, [tail, 100.0 - tail])
    return float(low), float(high)


# ------------------------------------------------------------------------ comparison


def _k_of(metric: str) -> int | None:
    """``recall@5`` -> 5; ``mrr`` -> None."""
    _, at, k = metric.rpartition("@")
    return int(k) if at and k.isdigit() else None


def _failed(
    delta: float | None,
    ci: tuple[float | None, float | None],
    max_drop: float,
    require_significance: bool,
    higher: bool = True,
) -> bool:
    """A move beyond tolerance in the metric's bad direction fails: a drop, or a
    rise where lower is better (an unsupported-answer share). With significance
    required, only if the CI excludes 0 on that side."""
    if delta is None or (-delta if higher else delta) <= max_drop:
        return False
    low, high = ci
    if not require_significance:
        return True
    return (high is not None and high < 0) if higher else (low is not None and low > 0)


def _compare(
    base: np.ndarray, cur: np.ndarray, boot: dict, max_drop: float, significance: bool, higher: bool = True
) -> dict:
    """Means, delta and CI of one paired sample, and whether it fails.

    The delta is rounded to the places the verdict file keeps, so a drop of
    exactly ``max_drop`` passes rather than failing on float noise, and the
    decision always agrees with the numbers written next to it.
    """
    if len(base) == 0:
        return {
            "baseline": None,
            "current": None,
            "delta": None,
            "ci_low": None,
            "ci_high": None,
            "cases": 0,
            "failed": False,
        }
    b, c = float(base.mean()), float(cur.mean())
    delta = round(c - b, FLOAT_PLACES)
    low, high = bootstrap_ci(base, cur, int(boot["resamples"]), int(boot["seed"]), float(boot["confidence"]))
    return {
        "baseline": b,
        "current": c,
        "delta": delta,
        "ci_low": low,
        "ci_high": high,
        "cases": len(base),
        "failed": _failed(delta, (low, high), max_drop, significance, higher),
    }


def slice_comparisons(
    baseline_rows: Sequence[Row], current_rows: Sequence[Row], gate: dict, slice_keys: Sequence[str]
) -> list[dict]:
    """One entry per (tag key, value) with at least ``min_slice_cases`` paired cases.

    Slice membership comes from the current rows' tags: with an unchanged eval
    fingerprint they match the baseline's anyway. Smaller slices are left out:
    their deltas are too noisy to gate on.
    """
    import numpy as np

    metric = gate["slice_metric"]
    ids, base, cur = paired_values(baseline_rows, current_rows, metric)
    tags = {cid: row.get("tags") or {} for cid, row in _eval_rows(current_rows).items()}
    out = []
    for key in slice_keys:
        groups: dict[str, list[int]] = {}
        for i, cid in enumerate(ids):
            value = tags.get(cid, {}).get(key)
            if value is not None:
                groups.setdefault(str(value), []).append(i)
        for value in sorted(groups):
            members = np.asarray(groups[value])
            if len(members) < int(gate["min_slice_cases"]):
                continue
            result = _compare(
                base[members],
                cur[members],
                gate["bootstrap"],
                float(gate["slice_max_drop"]),
                bool(gate["require_significance"]),
                higher_is_better(metric),
            )
            out.append({"key": key, "value": value, "metric": metric, **result})
    return out


def compare_metric(baseline_rows: Sequence[Row], current_rows: Sequence[Row], metric: str, bootstrap: dict) -> dict:
    """Paired means, delta and CI of any metric, with no pass/fail decision: the
    report shows every metric this way, the gate decides only on guarded ones."""
    _, base, cur = paired_values(baseline_rows, current_rows, metric)
    entry = _compare(base, cur, bootstrap, math.inf, False)
    del entry["failed"]
    return {"metric": metric, **entry}


def newly_missed(baseline_rows: Iterable[Row], current_rows: Iterable[Row], k: int) -> list[str]:
    """Eval cases hit in the baseline (``hit@k == 1``) and missed now (``hit@k == 0``)."""
    ids, base, cur = paired_values(baseline_rows, current_rows, f"hit@{k}")
    return [cid for cid, b, c in zip(ids, base, cur) if b >= 1 and c <= 0]


def newly_found(baseline_rows: Iterable[Row], current_rows: Iterable[Row], k: int) -> list[str]:
    """Eval cases missed in the baseline (``hit@k == 0``) and hit now: the mirror of :func:`newly_missed`."""
    return newly_missed(current_rows, baseline_rows, k)


def newly_missed_k(metrics: Sequence[str]) -> int | None:
    ks = [k for k in map(_k_of, metrics) if k is not None]
    return max(ks) if ks else None


def compare_config(
    config: str,
    baseline_rows: Sequence[Row] | None,
    current_rows: Sequence[Row] | None,
    baseline_fp: dict | None,
    current_fp: dict | None,
    gate_params: dict,
    slice_keys: Sequence[str],
    against: str | None = None,
) -> dict:
    """Compare one gated configuration with its baseline.

    ``baseline_fp`` / ``current_fp`` are the ``fingerprints`` dicts (eval split,
    corpus). ``baseline_rows=None`` or ``baseline_fp=None`` means there is no
    baseline; ``current_rows=None`` means the configuration has no results. A
    guarded metric with no value (None or NaN) on any paired case is refused.

    ``valid`` is False, with ``reasons``, when no meaningful comparison exists;
    an invalid comparison never passes. ``against`` names the git revision the
    baseline was read from, when it is not the committed baseline folder.
    """
    metrics: list[str] = list(gate_params["metrics"])
    k_missed = newly_missed_k(metrics)
    result: dict[str, Any] = {
        "config": config,
        "valid": False,
        "reasons": [],
        "metrics": [],
        "slices": [],
        "newly_missed": [],
        "newly_missed_k": k_missed,
        "max_drop": float(gate_params["max_drop"]),
        "slice_max_drop": float(gate_params["slice_max_drop"]),
        "confidence": float(gate_params["bootstrap"]["confidence"]),
        "passed": False,
    }
    reasons: list[str] = result["reasons"]
    if (baseline_rows is None or baseline_fp is None) and against is not None:
        reasons.append(
            f"no results for {config} at {against} (metrics/{config}.json and metrics/cases/{config}.jsonl): "
            f"a new configuration has nothing to compare with there; gate it once it has landed on {against}"
        )
    elif baseline_rows is None or baseline_fp is None:
        reasons.append(
            f"no baseline for {config} (metrics/baseline/{config}.json and "
            f"metrics/baseline/cases/{config}.jsonl): create it deliberately with `ragvet baseline accept`"
        )
    if current_rows is None or current_fp is None:
        reasons.append(
            f"no current results for {config} (metrics/{config}.json and "
            f"metrics/cases/{config}.jsonl): run `dvc repro` first"
        )
    if reasons:
        return result

    base_fp, cur_fp = baseline_fp or {}, current_fp or {}
    if base_fp.get("eval_split") is None or base_fp.get("eval_split") != cur_fp.get("eval_split"):
        reasons.append(
            f"eval-split fingerprint differs (baseline {base_fp.get('eval_split')}, current "
            f"{cur_fp.get('eval_split')}): {RELABEL_FIX}"
        )
    if base_fp.get("corpus") is None or base_fp.get("corpus") != cur_fp.get("corpus"):
        reasons.append(
            f"corpus fingerprint differs (baseline {base_fp.get('corpus')}, current "
            f"{cur_fp.get('corpus')}): {CORPUS_FIX}"
        )
    if reasons:
        result["fingerprints_differ"] = True
        return result

    if not (_eval_rows(baseline_rows).keys() & _eval_rows(current_rows).keys()):
        reasons.append(
            "no paired cases: no eval-split case is in both the baseline and the current results; "
            "re-baseline deliberately with `ragvet baseline accept`"
        )
        return result

    boot = gate_params["bootstrap"]
    significance = bool(gate_params["require_significance"])
    for metric in metrics:
        _, base, cur = paired_values(baseline_rows, current_rows, metric)
        higher = higher_is_better(metric)
        entry = {
            "metric": metric,
            "higher_is_better": higher,
            **_compare(base, cur, boot, result["max_drop"], significance, higher),
        }
        if entry["cases"] == 0:
            fix = (
                f"it is a human review figure: record answers in data/answers/{config}.jsonl, then re-baseline "
                "deliberately with `ragvet baseline accept`"
                if metric.partition("@")[0] in REVIEW_METRICS
                else "fix the cases so it has a value"
            )
            reasons.append(
                f"guarded metric {metric} has no paired eval-split cases with a value on both sides: "
                f"{fix}, or stop gating on it"
            )
        result["metrics"].append(entry)

    result["slices"] = slice_comparisons(baseline_rows, current_rows, gate_params, slice_keys)
    if k_missed is not None:
        result["newly_missed"] = newly_missed(baseline_rows, current_rows, k_missed)
    result["reasons"] = sorted(set(reasons), key=reasons.index)
    result["valid"] = not result["reasons"]
    result["passed"] = (
        result["valid"]
        and not any(m["failed"] for m in result["metrics"])
        and not any(s["failed"] for s in result["slices"])
    )
    return result


def gate_verdict(per_config: list[dict]) -> dict:
    """The overall verdict, configurations sorted by name.

    An empty gate fails: "nothing was compared" is not evidence of no regression.
    """
    configs = sorted(per_config, key=lambda c: c["config"])
    return {"passed": bool(configs) and all(c["passed"] for c in configs), "configs": configs}


def gate_all(
    gate_params: dict,
    slice_keys: Sequence[str],
    baselines: dict[str, tuple[Summary | None, Sequence[Row] | None]],
    current: dict[str, Sequence[Row] | None],
    fingerprints: dict,
    against: str | None = None,
    rebaselined: Collection[str] = (),
) -> dict:
    """The verdict over every gated configuration: ``baselines`` maps a config to
    its ``(summary, rows)`` (``(None, None)`` when absent), ``current`` to its
    per-case rows (None when absent). Shared by the gate and the report, so both
    say the same thing. ``rebaselined`` names the configurations whose committed
    baseline this change re-accepted (see :func:`accept_deliberate`)."""
    results = []
    for config in gate_params["configs"]:
        base_summary, base_rows = baselines.get(config, (None, None))
        rows = current.get(config)
        result = compare_config(
            config,
            base_rows,
            rows,
            (base_summary or {}).get("fingerprints"),
            fingerprints if rows is not None else None,
            gate_params,
            slice_keys,
            against,
        )
        results.append(accept_deliberate(result, against) if config in rebaselined else result)
    return gate_verdict(results)


def accept_deliberate(result: dict, against: str | None) -> dict:
    """Let a change that re-accepted its baseline pass against a revision.

    ``ragvet baseline accept`` is how a drop or a relabelling is accepted on
    purpose, in the same pull request. Compared with the base branch's results,
    that change still shows the drop, and the job would fail forever. So when the
    workspace's committed baseline equals its current results, a failing or
    relabelled comparison against ``against`` passes as *accepted*: the drop stays
    in the verdict for reviewers to read. Missing results or NaN still fail.
    """
    if against is None or result["passed"] or (result["reasons"] and not result.get("fingerprints_differ")):
        return result
    note = (
        f"this change re-accepted metrics/baseline/ (`ragvet baseline accept`) at its current results, "
        f"so the moves against {against} are accepted deliberately: reviewers, check them"
    )
    return {**result, "passed": True, "accepted": note}


# ------------------------------------------------------------------------- rendering


def _num(value: float | None, signed: bool = False) -> str:
    if is_missing(value):
        return "n/a"
    text = f"{value:+.3f}" if signed else f"{value:.3f}"
    return text.replace("-0.000", "0.000").replace("+0.000", "0.000")


def _comparison_text(entry: dict, confidence: float) -> str:
    return (
        f"{_num(entry['baseline'])} -> {_num(entry['current'])} (delta {_num(entry['delta'], signed=True)}, "
        f"{confidence * 100:g}% CI [{_num(entry['ci_low'], signed=True)}, {_num(entry['ci_high'], signed=True)}]"
        f", {entry['cases']} cases)"
    )


def render_verdict(verdict: dict) -> str:
    """Plain text for the terminal: every guarded delta with its CI, failing slices,
    newly missed cases and the reasons a comparison is invalid, then the verdict."""
    lines: list[str] = []
    if not verdict["configs"]:
        lines.append("no configurations are gated: list them under gate.configs in params.yaml")
    for cfg in verdict["configs"]:
        name, confidence = cfg["config"], cfg.get("confidence", 0.95)
        if cfg.get("accepted"):
            lines.append(f"ACCEPTED {name}: {cfg['accepted']}")
        for reason in cfg["reasons"]:
            lines.append(f"INVALID {name}: {reason}")
        for m in cfg["metrics"]:
            status = "FAIL" if m["failed"] else "ok  "
            lines.append(f"{status} {name} {m['metric']}: {_comparison_text(m, confidence)}")
        failing = [s for s in cfg["slices"] if s["failed"]]
        for s in failing:
            lines.append(f"FAIL {name} slice {s['key']}={s['value']} {s['metric']}: {_comparison_text(s, confidence)}")
        if cfg["slices"]:
            lines.append(
                f"     {name}: {len(failing)} of {len(cfg['slices'])} slices dropped more than "
                f"{_num(cfg.get('slice_max_drop'))}"
            )
        if cfg["newly_missed"]:
            k = cfg.get("newly_missed_k")
            lines.append(
                f"     {name}: {len(cfg['newly_missed'])} newly missed at hit@{k} "
                f"(hit in baseline, missed now): {', '.join(cfg['newly_missed'])}"
            )
    lines.append(f"gate: {'PASSED' if verdict['passed'] else 'FAILED'}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------- baselines


def accept_baseline(metrics_dir: Path, configs: list[str]) -> list[Path]:
    """Copy the current results of the gated configs into ``metrics/baseline/``.

    Every source is checked before anything is written, so a missing result never
    leaves a half-updated baseline. Baseline files of configurations that are no
    longer gated are removed, so a stale baseline cannot linger in the PR. Files
    are copied byte for byte: they are already canonical JSON.
    """
    metrics_dir = Path(metrics_dir)
    baseline_dir = metrics_dir / "baseline"
    pairs: list[tuple[Path, Path]] = []
    problems: list[Problem] = []
    for config in sorted(set(configs)):
        for src, dst in (
            (metrics_dir / f"{config}.json", baseline_dir / f"{config}.json"),
            (metrics_dir / "cases" / f"{config}.jsonl", baseline_dir / "cases" / f"{config}.jsonl"),
        ):
            if src.is_file():
                pairs.append((src, dst))
            else:
                problems.append(
                    Problem(str(src), f"results of gated configuration {config} not found", "run dvc repro first")
                )
    if problems:
        raise InputError(problems)
    written = []
    for src, dst in pairs:
        write_text(dst, src.read_text(encoding="utf-8"))
        written.append(dst)
    keep = set(configs)
    for folder, suffix in ((baseline_dir, ".json"), (baseline_dir / "cases", ".jsonl")):
        if folder.is_dir():
            for stale in sorted(folder.glob(f"*{suffix}")):
                if stale.is_file() and stale.name[: -len(suffix)] not in keep:
                    stale.unlink()
    return written


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, encoding="utf-8", check=False)
    except FileNotFoundError:
        raise InputError(
            [Problem(str(repo), "git is not installed", "install git to compare with a revision")]
        ) from None


def _check_revision(rev: str, repo: Path) -> None:
    """Fail clearly when ``rev`` is not a commit here; a shallow clone is named as
    the likely cause, since CI checkouts fetch one commit by default."""
    if _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").returncode == 0:
        return
    if _git(repo, "rev-parse", "--git-dir").returncode != 0:
        raise InputError([Problem(str(repo), "not inside a git repository", f"run from a git clone that has {rev!r}")])
    shallow = _git(repo, "rev-parse", "--is-shallow-repository").stdout.strip() == "true"
    if shallow:
        fix = (
            "this clone is shallow, so it lacks that history: fetch it with `git fetch --unshallow origin` "
            "(in GitHub Actions, actions/checkout with `fetch-depth: 0`)"
        )
    else:
        fix = "pass a commit, branch or tag that exists (git log --oneline; git fetch origin for origin/...)"
    raise InputError([Problem(str(repo), f"git revision {rev!r} does not exist", fix)])


def _parse_results(rev: str, summary_path: str, summary_text: str, cases_path: str, cases_text: str):
    problems: list[Problem] = []
    summary: Summary = {}
    try:
        summary = json.loads(summary_text)
    except json.JSONDecodeError as err:
        problems.append(
            Problem(
                f"{rev}:{summary_path}:{err.lineno}",
                f"malformed JSON: {err.msg}",
                "compare with a revision with intact results",
            )
        )
    rows: list[Row] = []
    for number, line in enumerate(cases_text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as err:
            problems.append(
                Problem(
                    f"{rev}:{cases_path}:{number}",
                    f"malformed JSON: {err.msg}",
                    "compare with a revision with intact results",
                )
            )
    if problems:
        raise InputError(problems)
    return summary, rows


def read_results_at(rev: str, configs: Iterable[str], repo: Path) -> dict[str, tuple[Summary, list[Row]] | None]:
    """Summary and per-case rows of each configuration as committed at ``rev``;
    None for a configuration that revision has no results for (a new one).

    These are the *results* of that revision (``metrics/<config>.json`` and
    ``metrics/cases/<config>.jsonl``), not its baseline folder: ``--against REV``
    asks "did this change regress relative to REV?". An unknown revision, a clone
    too shallow to have it, and a revision with no ragvet results at all are
    errors; paths are relative to ``repo`` (``./``), so the DVC project may be a
    subfolder of the git repository.
    """
    repo = Path(repo)
    _check_revision(rev, repo)
    if _git(repo, "cat-file", "-e", f"{rev}:./metrics/cases").returncode != 0:
        raise InputError(
            [
                Problem(
                    f"{rev}:metrics/cases",
                    "that revision has no ragvet results (no per-case tables committed)",
                    "compare with a revision where `dvc repro` ran and metrics/ was committed",
                )
            ]
        )
    results: dict[str, tuple[Summary, list[Row]] | None] = {}
    for config in sorted(set(configs)):
        summary_path, cases_path = f"metrics/{config}.json", f"metrics/cases/{config}.jsonl"
        texts = [_git(repo, "show", f"{rev}:./{path}") for path in (summary_path, cases_path)]
        if any(done.returncode != 0 for done in texts):
            results[config] = None
            continue
        results[config] = _parse_results(rev, summary_path, texts[0].stdout, cases_path, texts[1].stdout)
    return results
