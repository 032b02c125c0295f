"""The markdown report (for a pull-request comment) and the rows for ``dvc plots``.

The report is read by people deciding whether a change is good, so every mean
sits beside its denominator, chunk-level recall is flagged as not comparable
across chunkings, and abstention cases get their own section instead of being
averaged away. It is a pure function of the summaries: no timestamps, fixed
decimals, configurations sorted by name, so re-running gives the same bytes and a
PR diff shows only real changes.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

from stages.abstention import threshold_section
from stages.answers import review_section

Summary = dict[str, Any]

SPLITS = ("eval", "dev")
DASH = "–"
# Name of the claim-pooled figure beside the macro claim_availability@k mean.
POOLED = "claim_availability_pooled@{k}"
CHUNKING_NOTE = (
    "**Note:** chunk-level `recall@k` cannot be compared across chunkings, because its denominator "
    "(the relevant chunks) changes with the chunking. `evidence_recall@k`, `claim_availability@k` and "
    "`context_chars@k` can."
)
_DIST_ORDER = ("min", "p10", "p25", "q1", "median", "p50", "mean", "p75", "q3", "p90", "max")


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and not math.isfinite(value))


def fmt(value: Any, signed: bool = False) -> str:
    """3 decimals for floats, plain ints, a dash for None/NaN; never ``-0.000``."""
    if _missing(value):
        return DASH
    if isinstance(value, numbers.Integral):
        return str(int(value))
    text = f"{value:+.3f}" if signed else f"{value:.3f}"
    return "0.000" if text in ("-0.000", "+0.000") else text


def summary_k(ks: Sequence[int]) -> int:
    """The k for the single-k table: the largest k <= 5, else the smallest k."""
    ordered = sorted(ks)
    small = [k for k in ordered if k <= 5]
    return small[-1] if small else ordered[0]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _split(summary: Summary, split: str) -> tuple[dict, dict]:
    part = summary.get(split) or {}
    return part.get("metrics") or {}, part.get("denominators") or {}


def _split_tables(summaries: dict[str, Summary], split: str, ks: Sequence[int]) -> list[str]:
    names = sorted(summaries)
    k = summary_k(ks)
    out = [f"## {split} split", ""]
    if not names:
        return out + ["No configurations.", ""]

    out += ["### Evidence recall (comparable across chunkings)", ""]
    rows = []
    for name in names:
        means, den = _split(summaries[name], split)
        rows.append(
            [
                name,
                *(fmt(means.get(f"evidence_recall@{k_}")) for k_ in ks),
                fmt(den.get("cases")),
                fmt(den.get("abstention_cases")),
            ]
        )
    out += _table(["config", *(f"evidence_recall@{k_}" for k_ in ks), "cases", "abstention cases"], rows) + [""]

    out += ["### Claim availability, macro / claim-pooled (comparable across chunkings)", ""]
    rows = []
    for name in names:
        means, den = _split(summaries[name], split)
        cells = [f"{fmt(means.get(f'claim_availability@{k_}'))} / {fmt(means.get(POOLED.format(k=k_)))}" for k_ in ks]
        rows.append(
            [
                name,
                *cells,
                fmt(den.get("cases_with_claims")),
                fmt(den.get("claims")),
                fmt(den.get("cases_without_claims")),
                fmt(den.get("abstention_cases")),
            ]
        )
    header = [
        "config",
        *(f"claim_availability@{k_}" for k_ in ks),
        "cases with claims",
        "claims",
        "cases without claims",
        "abstention cases",
    ]
    out += _table(header, rows) + [""]

    out += [f"### Retrieval at k={k}", ""]
    rows = []
    for name in names:
        summary = summaries[name]
        means, den = _split(summary, split)
        rows.append(
            [
                name,
                str(summary.get("chunking", DASH)),
                str(summary.get("retriever", DASH)),
                fmt(means.get(f"recall@{k}")),
                fmt(means.get(f"hit@{k}")),
                fmt(means.get("mrr")),
                fmt(means.get(f"context_chars@{k}")),
                fmt(den.get("cases")),
                fmt(den.get("abstention_cases")),
                fmt(den.get("cases_without_claims")),
                fmt(den.get("duplicates_removed")),
            ]
        )
    header = [
        "config",
        "chunking",
        "retriever",
        f"recall@{k} (chunk-level)",
        f"hit@{k}",
        "mrr",
        f"context_chars@{k}",
        "cases",
        "abstention cases",
        "cases without claims",
        "duplicates removed",
    ]
    return out + _table(header, rows) + [""]


def _baseline_section(
    summaries: dict[str, Summary], baseline: dict[str, Summary], gate_configs: Sequence[str], ks: Sequence[int]
) -> list[str]:
    """Eval-split means of each gated config beside its baseline.

    These are plain summary means; the gate's verdict (``metrics/gate.json``) is
    the paired comparison with confidence intervals.
    """
    k = summary_k(ks)
    metrics = [
        f"evidence_recall@{k}",
        f"claim_availability@{k}",
        f"recall@{k}",
        f"hit@{k}",
        "mrr",
        f"context_chars@{k}",
    ]
    out = ["## vs baseline (eval split, gated configurations)", ""]
    if not gate_configs:
        return out + ["No configurations are gated.", ""]
    rows, notes = [], []
    for name in sorted(gate_configs):
        base, cur = baseline.get(name), summaries.get(name)
        if base is None or cur is None:
            missing = "no baseline: run `ragvet baseline accept`" if base is None else "no current results"
            rows.append([name, DASH, DASH, DASH, DASH, missing])
            continue
        base_fp, cur_fp = base.get("fingerprints") or {}, cur.get("fingerprints") or {}
        for key, why in (("eval_split", "eval split (labels) changed"), ("corpus", "corpus changed")):
            if base_fp.get(key) != cur_fp.get(key):
                notes.append(f"- `{name}`: {why} since the baseline; these deltas are not a valid comparison.")
        base_means, _ = _split(base, "eval")
        cur_means, den = _split(cur, "eval")
        for metric in metrics:
            b, c = base_means.get(metric), cur_means.get(metric)
            delta = None if _missing(b) or _missing(c) else c - b
            cases = den.get("cases_with_claims" if metric.startswith("claim_availability") else "cases")
            rows.append([name, metric, fmt(b), fmt(c), fmt(delta, signed=True), fmt(cases)])
    out += _table(["config", "metric", "baseline", "current", "delta", "cases (current)"], rows) + [""]
    return out + notes + ([""] if notes else [])


def _distribution(dist: dict | None) -> str:
    if not dist:
        return DASH
    keys = [key for key in _DIST_ORDER if key in dist] + sorted(set(dist) - set(_DIST_ORDER))
    return ", ".join(f"{key} {fmt(dist[key])}" for key in keys)


def _abstention_section(summaries: dict[str, Summary]) -> list[str]:
    out = [
        "## Abstention cases (`answerable: false`)",
        "",
        (
            "Cases with no evidence are kept out of the means above. The top-1 score shows how confidently the "
            "retriever answers a question the corpus cannot; the rates apply where a retriever sets `abstain_below`."
        ),
        "",
    ]
    rows = []
    for name in sorted(summaries):
        abst = summaries[name].get("abstention") or {}
        for split in SPLITS:
            part = abst.get(split) or {}
            rows.append(
                [
                    name,
                    split,
                    fmt(part.get("cases")),
                    _distribution(part.get("top1_score")),
                    fmt(part.get("abstain_rate")),
                    fmt(part.get("false_abstain_rate")),
                ]
            )
    header = ["config", "split", "cases", "top-1 score", "abstain rate", "false abstain rate (answerable)"]
    return out + _table(header, rows) + [""]


def render_report(
    summaries: dict[str, Summary], baseline: dict[str, Summary], gate_configs: list[str], ks: list[int]
) -> str:
    """Markdown comparing every configuration, and the gated ones with their baseline."""
    ks = sorted(set(ks))
    lines = [
        "# ragvet retrieval report",
        "",
        CHUNKING_NOTE,
        "",
        (
            "Means are macro over cases; each table gives its denominators. `–` means no value "
            "(no case to average over)."
        ),
        "",
    ]
    for split in SPLITS:
        lines += _split_tables(summaries, split, ks)
    lines += _baseline_section(summaries, baseline, gate_configs, ks)
    lines += _abstention_section(summaries)
    lines += threshold_section(summaries)
    lines += review_section(summaries, ks, summary_k(ks))
    return "\n".join(lines).rstrip("\n") + "\n"


def plot_rows(summaries: dict[str, Summary], ks: list[int]) -> list[dict]:
    """Eval-split rows ``{config, k, recall, evidence_recall, claim_availability, hit, context_chars}``
    sorted by (config, k): one line per configuration in ``dvc plots``."""
    rows = []
    for name in sorted(summaries):
        means, _ = _split(summaries[name], "eval")
        for k in sorted(set(ks)):
            rows.append(
                {
                    "config": name,
                    "k": k,
                    "recall": means.get(f"recall@{k}"),
                    "evidence_recall": means.get(f"evidence_recall@{k}"),
                    "claim_availability": means.get(f"claim_availability@{k}"),
                    "hit": means.get(f"hit@{k}"),
                    "context_chars": means.get(f"context_chars@{k}"),
                }
            )
    return rows
