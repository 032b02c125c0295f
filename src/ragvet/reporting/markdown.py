"""The markdown report (for a pull-request comment) and the rows for ``dvc plots``.

The report is read by people deciding whether a change is good, so every mean
sits beside its denominator, chunk-level recall is flagged as not comparable
across chunkings, and abstention cases get their own section instead of being
averaged away. It is a pure function of the summaries: no timestamps, fixed
decimals, configurations sorted by name, so re-running gives the same bytes and a
PR diff shows only real changes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ragvet.gating.compare import (
    Statistics,
    compare_metrics,
    family_text,
    fingerprint_reasons,
    gate_metrics,
    newly_found,
    newly_missed,
    newly_missed_k,
    slice_comparisons,
)
from ragvet.gating.latency import latency_text
from ragvet.gating.significance import describe_family
from ragvet.measures.answers import BEHAVIOURS, REVIEW_METRICS
from ragvet.measures.registry import FOREIGN, METRICS, higher_is_better
from ragvet.schema import DEV, EVAL, SPLITS
from ragvet.text.escaping import html_text, md_code, md_prose, md_text
from ragvet.text.formatting import DASH, fmt, fmt_p, is_missing

Summary = dict[str, Any]

# Name of the claim-pooled figure beside the macro claim_availability@k mean.
POOLED = "claim_availability_pooled@{k}"


def _joined(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``: a list as a sentence reads it."""
    return " and ".join(filter(None, [", ".join(items[:-1]), items[-1]])) if items else ""


def chunking_note() -> str:
    """Which figures may be compared across chunkings, from the registry's
    ``comparable_across_chunkings`` (DESIGN.md: "The report says so")."""
    comparable = [
        f"`{metric.key('B' if metric.budget else 'k')}`"
        for metric in METRICS.values()
        if metric.comparable_across_chunkings and not metric.judgements
    ]
    return (
        "**Note:** chunk-level `recall@k` cannot be compared across chunkings, because its denominator "
        f"(the relevant chunks) changes with the chunking. {_joined(comparable)} can."
    )


def foreign_note(summaries: Mapping[str, Summary]) -> list[str]:
    """The configurations that rank foreign passages, whose chunk-level figures are
    not reported (their relevant set would be only what the system returned)."""
    foreign = [md_code(name) for name, summary in sorted(summaries.items()) if summary.get("passages") == FOREIGN]
    if not foreign:
        return []
    return [
        f"**Foreign passages:** {_joined(foreign)} rank{'s' if len(foreign) == 1 else ''} the passages of a system "
        "that chunks the corpus its own way: the evidence is scored on them, and chunk-level figures "
        "(recall, hit, mrr, precision, ndcg) are not reported (`–`).",
        "",
    ]


_DIST_ORDER = ("min", "p10", "p25", "q1", "median", "p50", "mean", "p75", "q3", "p90", "max")


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
                md_text(name),
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
                md_text(name),
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
                md_text(name),
                md_text(str(summary.get("chunking", DASH))),
                md_text(str(summary.get("retriever", DASH))),
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
        f"context_chars@{k} {ANSWERABLE_ONLY}",
        "cases",
        "abstention cases",
        "cases without claims",
        "duplicates removed",
    ]
    return out + _table(header, rows) + [""]


def _distribution(dist: dict | None) -> str:
    if not dist:
        return DASH
    keys = [key for key in _DIST_ORDER if key in dist] + sorted(set(dist) - set(_DIST_ORDER))
    return ", ".join(f"{key} {fmt(dist[key])}" for key in keys)


def stale_threshold_lines(summaries: Mapping[str, dict]) -> list[str]:
    """One line per configuration whose abstention figures come from a stale threshold
    (``abstention.stale`` in its metrics JSON): why, and the command that fixes it."""
    lines = []
    for name, summary in sorted(summaries.items()):
        stale = (summary.get("abstention") or {}).get("stale")
        if stale:
            lines.append(
                f"- **Stale threshold, {md_code(name)}:** {md_text(stale['reason'])}; its abstention rates describe "
                f"a threshold chosen for other scores. Fix: {md_code(stale['fix'])}, then `dvc repro`."
            )
    return lines + [""] if lines else []


def threshold_section(summaries: Mapping[str, dict]) -> list[str]:
    """Report lines: each configuration's threshold, where it comes from, and its
    effect on dev (where it was chosen) beside eval (where it is judged); a stale
    threshold is marked in its row and named, with its fix, under the table."""
    rows = []
    for name, summary in sorted(summaries.items()):
        abst = summary.get("abstention") or {}
        threshold = abst.get("abstain_below")
        if threshold is None:
            continue
        dev, ev = abst.get(DEV) or {}, abst.get(EVAL) or {}
        mark = " (stale)" if abst.get("stale") else ""
        rows.append(
            f"| {md_text(name)} | {threshold}{mark} | {md_text(str(abst.get('abstain_below_source')))} | "
            f"{fmt(dev.get('abstain_rate'))} / {fmt(dev.get('false_abstain_rate'))} | "
            f"{fmt(ev.get('abstain_rate'))} / {fmt(ev.get('false_abstain_rate'))} |"
        )
    if not rows:
        return []
    return [
        "## Abstention thresholds",
        "",
        "The system abstains when its top-1 score is below the threshold. Tuned thresholds are chosen on dev only; "
        "eval shows their effect on cases the choice never saw.",
        "",
        "| config | abstain below | from | dev: abstain / false abstain | eval: abstain / false abstain |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ]


def review_section(summaries: Mapping[str, dict], ks: Sequence[int], k: int) -> list[str]:
    """Markdown lines for the report: the human review figures of each configuration
    with recorded answers, or nothing at all when none has any."""
    reviewed = {md_text(name): s["human_review"] for name, s in sorted(summaries.items()) if s.get("human_review")}
    if not reviewed:
        return []
    out = [
        "## Human review of recorded answers",
        "",
        (
            "From reviewers' labels in `data/answers/<config>.jsonl`; ragvet calls no model and judges no answer, "
            "so these are not faithfulness scores. Kept apart from retrieval: a case without a recorded answer "
            "has no figure, and unreviewed claims are counted, never taken as supported."
        ),
        "",
        "### Abstention cases",
        "",
        "| config | split | recorded / cases | handled (abstained, clarified, limited) | unsupported answer | "
        "sources shown | answered / abstained / clarified / limited |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, review in reviewed.items():
        for split in SPLITS:
            part = review[split]["abstention_cases"]
            fig, beh = part["figures"], part["behaviours"]
            out.append(
                f"| {name} | {split} | {part['recorded']} / {part['cases']} | {fmt(fig['abstention_handled'])} | "
                f"{fmt(fig['unsupported_answer'])} | {fmt(fig['sources_shown'])} | "
                f"{' / '.join(str(beh[b]) for b in BEHAVIOURS)} |"
            )
    out += [
        "",
        "### Answerable cases",
        "",
        f"| config | split | recorded / cases | false abstention | unsupported claims, macro / pooled | "
        f"claims reviewed / unreviewed | cited available@{k}, macro / pooled | citations |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, review in reviewed.items():
        for split in SPLITS:
            part = review[split]["answerable_cases"]
            fig, claims = part["figures"], part["claims"]
            out.append(
                f"| {name} | {split} | {part['recorded']} / {part['cases']} | {fmt(fig['false_abstention'])} | "
                f"{fmt(fig['unsupported_claims'])} / {fmt(fig['unsupported_claims_pooled'])} | "
                f"{claims['reviewed']} / {claims['unreviewed']} | "
                f"{fmt(fig[f'cited_available@{k}'])} / {fmt(fig[f'cited_available_pooled@{k}'])} | {part['cited']} |"
            )
    return out + [""]


def _abstention_section(summaries: dict[str, Summary]) -> list[str]:
    out = [
        "## Abstention cases (`answerable: false`)",
        "",
        (
            "Cases with no evidence are kept out of the means above. The top-1 score shows how confidently the "
            "retriever answers a question the corpus cannot; the rates apply where a threshold is set: "
            "`abstain_below` on the retriever, or tuned on dev by `ragvet tune-abstain` (abstention.yaml)."
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
                    md_text(name),
                    split,
                    fmt(part.get("cases")),
                    _distribution(part.get("top1_score")),
                    fmt(part.get("abstain_rate")),
                    fmt(part.get("false_abstain_rate")),
                ]
            )
    header = ["config", "split", "cases", "top-1 score", "abstain rate", "false abstain rate (answerable)"]
    return out + _table(header, rows) + [""]


# ------------------------------------------------------------------ comparison


def report_metrics(k: int, guarded: Sequence[str] = ()) -> list[str]:
    """The metrics each configuration's comparison table shows: the comparable
    ones first, the context budget last, then any guarded metric not yet listed."""
    shown = [f"evidence_recall@{k}", f"claim_availability@{k}", f"recall@{k}", f"hit@{k}", "mrr", f"context_chars@{k}"]
    return shown + [m for m in guarded if m not in shown]


def report_k(ks: Sequence[int], gate_params: dict) -> int:
    """The k of the report's comparisons and its newly missed and found cases: the
    gate's (:func:`newly_missed_k`), else the summary's."""
    return newly_missed_k(gate_params["metrics"]) or summary_k(ks)


def compared_metrics(ks: Sequence[int], gate_params: dict) -> list[str]:
    """Every metric :func:`compare_configs` and the gate compare: what the report reads
    of each per-case table, with the side-by-side table's."""
    k = report_k(ks, gate_params)
    return list(dict.fromkeys([*gate_metrics(gate_params), *report_metrics(k, gate_params["metrics"]), f"hit@{k}"]))


def compare_configs(
    current: dict[str, Sequence[dict]],
    baselines: dict[str, tuple[Summary | None, Sequence[dict] | None]],
    fingerprints: dict,
    ks: Sequence[int],
    gate_params: dict,
    slice_keys: Sequence[str],
    against: str | None = None,
    top_slices: int = 5,
) -> list[dict]:
    """Paired comparison of every configuration with its baseline, sorted by name.

    Each entry has the paired delta and bootstrap CI of every metric of
    :func:`report_metrics`, the slices whose ``gate.slice_metric`` moved most
    (largest absolute delta, among slices with at least ``min_slice_cases``), and
    the newly missed and newly found cases at ``hit@k``. ``reason`` is set, and
    nothing is compared, when there is no baseline or the fingerprints differ.
    """
    k = report_k(ks, gate_params)
    out = []
    stats = Statistics(gate_params)  # one draw per paired case set, shared by every configuration
    for config in sorted(current):
        rows = current[config]
        base_summary, base_rows = baselines.get(config, (None, None))
        gated = config in gate_params["configs"]
        entry: dict[str, Any] = {"config": config, "gated": gated, "k": k, "reason": None}
        if base_summary is None or base_rows is None:
            entry["reason"] = (
                f"no results at `{against}` to compare with (a new configuration)"
                if against
                else "no baseline: create it deliberately with `ragvet baseline accept`"
            )
        else:
            entry["reason"] = "; ".join(fingerprint_reasons(base_summary.get("fingerprints"), fingerprints)) or None
        if entry["reason"]:
            out.append(entry)
            continue
        guarded = gate_params["metrics"] if gated else ()
        entry["metrics"] = compare_metrics(base_rows, rows, report_metrics(k, guarded), gate_params, stats)
        for compared in entry["metrics"]:  # in place: stats.fill() below fills these dicts
            compared["guarded"] = compared["metric"] in guarded
        moved = [
            s for s in slice_comparisons(base_rows, rows, gate_params, slice_keys, stats) if s["delta"] is not None
        ]
        moved.sort(key=lambda s: (-abs(s["delta"]), s["key"], s["value"]))
        entry["slices"] = moved[:top_slices]
        entry["newly_missed"] = newly_missed(base_rows, rows, k)
        entry["newly_found"] = newly_found(base_rows, rows, k)
        out.append(entry)
    stats.fill()
    return out


def describe_evidence(ref: dict, texts: dict[str, str], limit: int = 160) -> str:
    """One evidence reference as a reviewer reads it: the doc and the quoted text
    of its span (whitespace collapsed, cut at ``limit``), any chunk of the doc for
    ``{doc}``, or the alternatives of ``{any}``."""
    if "any" in ref:
        return " or ".join(describe_evidence(alt, texts, limit) for alt in ref["any"])
    doc = ref.get("doc", "?")
    if "start" not in ref:
        return f"{md_code(doc)} (any chunk)"
    quote = " ".join(texts.get(doc, "")[ref["start"] : ref["end"]].split())
    if len(quote) > limit:
        quote = quote[: limit - 1].rstrip() + "…"
    return f"{md_code(doc)} [{ref['start']}:{ref['end']}] “{md_text(quote, limit=None)}”"


def _arrow(delta: float | None) -> str:
    if is_missing(delta) or abs(delta) < 0.0005:
        return "→"
    return "↑" if delta > 0 else "↓"


def _value(metric: str, value: Any, signed: bool = False) -> str:
    """Context budgets are characters: no decimals. Everything else via :func:`fmt`."""
    if metric.startswith("context_chars") and not is_missing(value):
        return (
            f"{value:+,.0f}" if signed and round(value) != 0 else f"{abs(value) if round(value) == 0 else value:,.0f}"
        )
    return fmt(value, signed)


def _ci(entry: dict) -> str:
    if is_missing(entry.get("ci_low")):
        return DASH
    return f"[{_value(entry['metric'], entry['ci_low'], True)}, {_value(entry['metric'], entry['ci_high'], True)}]"


def _slice_name(entry: dict) -> str:
    """A slice as ``key=value``, the form params and the terminal use."""
    return f"{entry['key']}={entry['value']}"


def _bad_move(metric: str) -> str:
    """The direction that fails: a drop, or a rise where lower is better (an unsupported-answer share)."""
    return "drop" if higher_is_better(metric) else "rise"


def _verdict_section(verdict: dict, against: str | None) -> list[str]:
    """Pass or fail first, then every reason it failed (or what passing covered)."""
    passed = verdict["passed"]
    out = [f"## {'✅ Gate passed' if passed else '❌ Gate failed'}", ""]
    if not verdict["configs"]:
        return out + ["- No configuration is gated: list them under `gate.configs` in params.yaml.", ""]
    for cfg in verdict["configs"]:
        name = md_code(cfg["config"])
        confidence = f"{cfg.get('confidence', 0.95) * 100:g}%"
        if cfg.get("accepted"):
            out.append(f"- {name}: accepted: {md_prose(cfg['accepted'])}.")
        for reason in cfg["reasons"]:
            out.append(f"- {name}: no valid comparison: {md_prose(reason)}")
        for m in cfg["metrics"]:
            if m["failed"]:
                out.append(
                    f"- {name}: {md_code(m['metric'])} {fmt(m['baseline'])} → {fmt(m['current'])} "
                    f"({fmt(m['delta'], True)}, {confidence} CI {_ci(m)}, corrected p {fmt_p(m['p_corrected'])}), "
                    f"a {_bad_move(m['metric'])} of more than "
                    f"`max_drop` {fmt(cfg['max_drop'])}"
                )
        for s in cfg["slices"]:
            if s["failed"]:
                out.append(
                    f"- {name}: slice {md_code(_slice_name(s))} ({s['cases']} cases) {md_code(s['metric'])} "
                    f"{fmt(s['baseline'])} → {fmt(s['current'])} ({fmt(s['delta'], True)}, {confidence} CI "
                    f"{_ci(s)}, corrected p {fmt_p(s['p_corrected'])}), a {_bad_move(s['metric'])} of more than "
                    f"`slice_max_drop` {fmt(cfg['slice_max_drop'])}"
                )
        timed = cfg.get("latency") or {}
        if timed.get("failed") or timed.get("note"):  # a p95 that passed is left out: it varies run to run
            out.append(f"- {name}: {md_prose(latency_text(timed))}.")
        if cfg["passed"] and not cfg.get("accepted"):
            guarded = ", ".join(md_code(m["metric"]) for m in cfg["metrics"])
            out.append(
                f"- {name}: no guarded metric ({guarded}) moved the wrong way by more than {fmt(cfg['max_drop'])}, "
                f"and none of its {len(cfg['slices'])} slices by more than {fmt(cfg['slice_max_drop'])}."
            )
        if cfg["newly_missed"]:
            out.append(
                f"- {name}: {len(cfg['newly_missed'])} case(s) newly missed at `hit@{cfg['newly_missed_k']}` "
                "(listed below)."
            )
    source = (
        f"{md_code(against)} (its committed results)" if against else "the committed baseline (`metrics/baseline/`)"
    )
    family = family_text(verdict["configs"][0].get("family"))
    return out + ["", f"Compared with {source}, paired over the same eval-split cases. {family}".rstrip(), ""]


# The context budget is averaged over two denominators: a configuration's summary
# counts answerable cases only, as every metric there; the paired comparison counts
# every eval case, since abstention cases cost context too. Each table shows one and
# names it, so that two figures for the same configuration never look like one.
ANSWERABLE_ONLY = "(mean over answerable cases)"
ALL_CASES = "(mean over all paired eval cases, abstention included)"


def _budget_section(comparisons: list[dict]) -> list[str]:
    rows = []
    for comp in comparisons:
        if comp["reason"]:
            continue
        by_name = {m["metric"]: m for m in comp["metrics"]}
        k = comp["k"]
        ev, rc, ctx = by_name[f"evidence_recall@{k}"], by_name[f"recall@{k}"], by_name[f"context_chars@{k}"]
        share = DASH
        if not is_missing(ctx["baseline"]) and ctx["baseline"]:
            share = f"{(ctx['current'] - ctx['baseline']) / ctx['baseline'] * 100:+.1f}%"
        rows.append(
            [
                md_code(comp["config"], table=True),
                f"{fmt(ev['current'])} ({fmt(ev['delta'], True)})",
                f"{fmt(rc['current'])} ({fmt(rc['delta'], True)})",
                f"{_value(ctx['metric'], ctx['baseline'])} → {_value(ctx['metric'], ctx['current'])}",
                share,
            ]
        )
    if not rows:
        return []
    k = comparisons[0]["k"]
    header = ["config", f"evidence_recall@{k} (Δ)", f"recall@{k} (Δ)", f"context_chars@{k} {ALL_CASES}", "context Δ"]
    intro = (
        "A recall gain bought with a larger context is not free: the generator reads every one of these "
        "characters. Compare recall at an equal budget."
    )
    return ["## Context budget beside recall", "", intro, "", *_table(header, rows), ""]


JUDGED_WARNING = "its recall may be an artefact of missing judgements"


def judged_settings(settings: dict) -> tuple[str, float]:
    """``(judged.metric, judged.max_drop)``; without the section, judged@10 (or the
    largest k below 10, else the smallest k) and 0.10."""
    ks = sorted(settings["ks"])
    default = 10 if 10 in ks else max([k for k in ks if k < 10], default=ks[0])
    judged = settings.get("judged") or {}
    return judged.get("metric", f"judged@{default}"), float(judged.get("max_drop", 0.10))


def judged_references(
    summaries: Mapping[str, Summary], reference: str, bases: Mapping[str, tuple], against: str | None
) -> dict[str, list[tuple[str, Summary]]]:
    """What each configuration's judged share is held against, as ``(label, summary)``:
    the reference configuration (the one the side-by-side table measures every other
    by), and its own baseline (committed, or at ``against``) when it has one. A label
    is markdown, the user's names in code spans."""
    own = f"its results at {md_code(against)}" if against else "its committed baseline"
    references: dict[str, list[tuple[str, Summary]]] = {name: [] for name in summaries}
    for name in summaries:
        if name != reference and reference in summaries:
            references[name].append((f"the reference configuration {md_code(reference)}", summaries[reference]))
        base_summary = bases.get(name, (None, None))[0]
        if base_summary is not None:
            references[name].append((own, base_summary))
    return references


def judged_warnings(
    summaries: Mapping[str, Summary],
    references: Mapping[str, Sequence[tuple[str, Summary]]],
    metric: str,
    max_drop: float,
) -> list[str]:
    """One line per configuration whose eval-split ``metric`` (a ``judged@k``) is more
    than ``max_drop`` below a reference's: ``references`` maps a configuration to
    ``(label, summary)`` pairs (:func:`judged_references`: markdown already). The drop
    is rounded to 9 places first, so a drop of exactly ``max_drop`` does not warn."""
    lines = []
    for name in sorted(summaries):
        current = _split(summaries[name], EVAL)[0].get(metric)
        for label, reference in references.get(name, ()):
            base = _split(reference, EVAL)[0].get(metric)
            if is_missing(current) or is_missing(base) or round(base - current, 9) <= max_drop:
                continue
            lines.append(
                f"- **Warning:** {md_code(name)}: {md_code(metric)} {fmt(current)} is {fmt(base - current)} below "
                f"{fmt(base)} for {label} (more than `judged.max_drop` {max_drop:g}): {JUDGED_WARNING}. "
                "Unjudged results count as not relevant."
            )
    return lines


def judged_section(summaries: Mapping[str, Summary], ks: Sequence[int], warnings: Sequence[str]) -> list[str]:
    """The eval split's ``judged@k`` per configuration (imported qrels), then the
    :func:`judged_warnings`; nothing when no configuration has a judged share
    (native cases have no judged set, and no ``judged@k``)."""
    names = [name for name in sorted(summaries) if any(f"judged@{k}" in _split(summaries[name], EVAL)[0] for k in ks)]
    if not names:
        return []
    rows = []
    for name in names:
        means = _split(summaries[name], EVAL)[0]
        counted = (summaries[name].get(EVAL) or {}).get("counted") or {}
        rows.append([md_text(name), *(fmt(means.get(f"judged@{k}")) for k in ks), fmt(counted.get(f"judged@{ks[-1]}"))])
    intro = (
        "The share of each configuration's top k that the imported qrels judged (any grade), eval split, "
        f"{ANSWERABLE_ONLY}. An unjudged result counts as not relevant, so a low share makes recall a lower bound."
    )
    header = ["config", *(f"judged@{k}" for k in ks), "cases with a judged set"]
    return [
        "## Judged share of the top k",
        "",
        intro,
        "",
        *_table(header, rows),
        "",
        *warnings,
        *([""] if warnings else []),
    ]


SIDE_BY_SIDE_TESTS = "every configuration and metric against the baseline configuration"


def side_by_side_section(table: dict | None, confidence: float, title: str = "configuration") -> list[str]:
    """Every configuration (or experiment) against one baseline, one table per
    metric: mean, delta, paired CI, corrected p-value (✱ below α) and the cases
    won, tied and lost. Built by :func:`ragvet.gating.side_by_side.side_by_side`."""
    if not table:
        return []
    baseline = md_code(table["baseline"])
    out = [
        f"## Every {title} against {baseline}",
        "",
        (
            f"Eval split, paired over the cases both have a value for. ✱: corrected p < α. W/T/L: cases won, tied "
            f"and lost against {baseline}. {describe_family(table['family'], SIDE_BY_SIDE_TESTS)}"
        ),
        "",
    ]
    for index, metric in enumerate(table["metrics"]):
        rows = []
        for entry in table["entries"]:
            name = md_code(entry["name"], table=True) + (" (baseline)" if entry["baseline"] else "")
            if entry["reason"]:
                rows.append([name, DASH, DASH, DASH, DASH, md_prose(entry["reason"], table=True)])
                continue
            m = entry["metrics"][index]
            if entry["baseline"]:
                rows.append([name, _value(metric, m["current"]), DASH, DASH, DASH, DASH])
                continue
            mark = " ✱" if m.get("significant") else ""
            rows.append(
                [
                    name,
                    _value(metric, m["current"]),
                    _value(metric, m["delta"], True) + mark,
                    _ci(m),
                    fmt_p(m["p_corrected"]),
                    f"{m['wins']}/{m['ties']}/{m['losses']}",
                ]
            )
        header = [md_code(metric, table=True), "mean", "Δ", f"paired {confidence * 100:g}% CI", "corrected p", "W/T/L"]
        out += _table(header, rows) + [""]
    return out


def _case_list(ids: Sequence[str], case_info: dict[str, dict], with_evidence: bool, cap: int | None) -> list[str]:
    out = []
    for case_id in ids[:cap]:
        info = case_info.get(case_id) or {}
        out.append(f"- **{md_code(case_id)}**: {md_text(info.get('question', DASH))}")
        if with_evidence:
            out += [f"  - missing: {text}" for text in info.get("evidence", [])]
    if cap is not None and len(ids) > cap:
        out.append(f"- … and {len(ids) - cap} more: `ragvet report --against` lists them all")
    return out


def _details(summary: str, body: list[str]) -> list[str]:
    """A collapsed section; ``summary`` is HTML (a raw HTML line on GitHub), escaped by the caller."""
    return ["<details>", f"<summary>{summary}</summary>", "", *body, "", "</details>", ""]


def _config_section(comp: dict, case_info: dict[str, dict], confidence: float, cap: int | None) -> list[str]:
    k = comp["k"]
    if comp["reason"]:
        return [f"{md_code(comp['config'])}: {md_prose(comp['reason'])}.", ""]
    rows = [
        [
            md_code(m["metric"], table=True) + (" (guarded)" if m["guarded"] else ""),
            _value(m["metric"], m["baseline"]),
            _value(m["metric"], m["current"]),
            _value(m["metric"], m["delta"], True),
            _ci(m),
            _arrow(m["delta"]),
            fmt(m["cases"]),
        ]
        for m in comp["metrics"]
    ]
    header = ["metric", "baseline", "current", "delta", f"paired {confidence * 100:g}% CI", "", "cases"]
    out = _table(header, rows) + [""]
    if comp["slices"]:
        metric = comp["slices"][0]["metric"]
        slice_rows = [
            [
                md_code(_slice_name(s), table=True),
                fmt(s["cases"]),
                fmt(s["baseline"]),
                fmt(s["current"]),
                fmt(s["delta"], True),
                _ci(s),
                _arrow(s["delta"]),
            ]
            for s in comp["slices"]
        ]
        body = _table(["slice", "cases", "baseline", "current", "delta", "CI", ""], slice_rows)
        out += _details(f"Slices that moved most ({html_text(metric)})", body)
    for key, label, evidence in (
        ("newly_missed", "hit in the baseline, missed now", True),
        ("newly_found", "missed in the baseline, hit now", False),
    ):
        ids = comp[key]
        title = f"{key.replace('_', ' ').capitalize()} at hit@{k}: {len(ids)} case{'s' if len(ids) != 1 else ''}"
        if ids:
            out += _details(f"{title} ({label})", _case_list(ids, case_info, evidence, cap))
        else:
            out += [f"{title}.", ""]
    return out


def _headline(comp: dict) -> str:
    """One line for a collapsed configuration: its evidence recall move."""
    config = f"<code>{html_text(comp['config'])}</code>"
    if comp["reason"]:
        return f"{config}: {html_text(comp['reason'], limit=None)}"
    ev = next(m for m in comp["metrics"] if m["metric"] == f"evidence_recall@{comp['k']}")
    return (
        f"{config}: evidence_recall@{comp['k']} {fmt(ev['baseline'])} → {fmt(ev['current'])} "
        f"({fmt(ev['delta'], True)}) {_arrow(ev['delta'])}, {len(comp['newly_missed'])} newly missed, "
        f"{len(comp['newly_found'])} newly found"
    )


COMMENT_MARKER = "<!-- ragvet-report -->"
DISCLAIMER = (
    "> Offline scores on labelled cases are not a production guarantee: they say whether the labelled "
    "evidence was retrieved for these questions, not that real users' answers will be right."
)


# GitHub refuses a comment longer than 65,536 characters; render_report never exceeds this.
COMMENT_LIMIT = 65_000


def render_report(
    summaries: dict[str, Summary],
    comparisons: list[dict],
    verdict: dict,
    case_info: dict[str, dict],
    ks: list[int],
    against: str | None = None,
    marker: bool = False,
    limit: int | None = None,
    table: dict | None = None,
    judged: Sequence[str] = (),
) -> str:
    """The pull-request document: the verdict first, then every configuration's
    paired comparison (gated ones open, the others collapsed), then the absolute
    figures of every configuration. ``marker`` prepends the hidden comment marker
    that lets CI find and update its one comment.

    With ``limit`` (characters), a document that would be longer lists fewer
    cases per list, then leaves out the absolute figures, so that the verdict and
    the comparisons always reach the reviewer instead of a rejected comment; if
    even that is too long (hundreds of configurations or slices), it is cut at a
    line, with a note, by :func:`_fit`.
    ``table`` is the many-configuration comparison (:func:`side_by_side_section`);
    ``judged`` the :func:`judged_warnings`.
    """
    for cap, absolute in ((None, True), (20, True), (5, True), (5, False), (0, False)):
        text = _render(
            summaries, comparisons, verdict, case_info, sorted(set(ks)), against, marker, cap, absolute, table, judged
        )
        if limit is None or len(text) <= limit:
            return text
    return _fit(text, limit)


CUT_NOTE = "**Cut here to fit a pull-request comment:** see `metrics/report.md` or the HTML report for the rest."


def _fit(text: str, limit: int) -> str:
    """The longest run of whole lines of ``text`` that, with the open
    ``<details>`` closed and :data:`CUT_NOTE` after them, stays within ``limit``
    characters. Lines are whole because no user value holds a line break."""
    kept: list[str] = []
    size, depth = 0, 0
    room = limit - len(CUT_NOTE) - 2
    for line in text.splitlines():
        step = depth + (line == "<details>") - (line == "</details>")
        if size + len(line) + 1 + len("\n</details>") * step > room:
            break
        kept.append(line)
        size, depth = size + len(line) + 1, step
    return "\n".join([*kept, *["</details>"] * depth, "", CUT_NOTE]) + "\n"


def _render(
    summaries: dict[str, Summary],
    comparisons: list[dict],
    verdict: dict,
    case_info: dict[str, dict],
    ks: list[int],
    against: str | None,
    marker: bool,
    cap: int | None,
    with_absolute: bool,
    table: dict | None = None,
    judged: Sequence[str] = (),
) -> str:
    """:func:`render_report` with at most ``cap`` cases per list, with or without the absolute figures."""
    confidence = float(verdict["configs"][0].get("confidence", 0.95)) if verdict["configs"] else 0.95
    lines = [COMMENT_MARKER, ""] if marker else []
    lines += ["# ragvet retrieval report", ""]
    lines += _verdict_section(verdict, against)
    lines += stale_threshold_lines(summaries)  # beside the verdict: a comment may leave the threshold table out
    lines += [DISCLAIMER, ""]
    lines += _budget_section(comparisons)
    lines += judged_section(summaries, ks, judged)
    lines += side_by_side_section(table, confidence)
    gated = [c for c in comparisons if c["gated"]]
    others = [c for c in comparisons if not c["gated"]]
    for comp in gated:
        lines += [f"## {md_code(comp['config'])} (gated)", ""] + _config_section(comp, case_info, confidence, cap)
    if others:
        lines += ["## Other configurations", ""]
        for comp in others:
            lines += _details(_headline(comp), _config_section(comp, case_info, confidence, cap))
    lines += ["## All configurations", ""]
    if not with_absolute:
        lines += ["Left out to fit a comment: see `metrics/report.md` or the HTML report.", ""]
        return "\n".join(lines).rstrip("\n") + "\n"
    absolute = [
        chunking_note(),
        "",
        *foreign_note(summaries),
        (
            "Means are macro over cases; each table gives its denominators. `–` means no value "
            "(no case to average over)."
        ),
        "",
    ]
    for split in SPLITS:
        absolute += _split_tables(summaries, split, ks)
    absolute += _abstention_section(summaries)
    absolute += threshold_section(summaries)
    absolute += review_section(summaries, ks, summary_k(ks))
    lines += _details("Absolute figures, both splits, abstention cases, human review", absolute)
    return "\n".join(lines).rstrip("\n") + "\n"


def plot_rows(summaries: dict[str, Summary], ks: list[int]) -> list[dict]:
    """Eval-split rows ``{config, k, recall, evidence_recall, claim_availability, hit, context_chars}``
    sorted by (config, k): one line per configuration in ``dvc plots``."""
    rows = []
    for name in sorted(summaries):
        means, _ = _split(summaries[name], EVAL)
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


def budget_rows(summaries: dict[str, Summary], k: int, budgets: Sequence[int] = (), unit: str = "chars") -> list[dict]:
    """Eval-split ``{config, budget, unit, evidence_recall}``: evidence recall against
    the context budget, one line per configuration in the budget plot.

    With ``budgets`` (``budget.values``, in ``unit``): one row per value, from
    ``evidence_recall_budget@B``. Without: one point per configuration, the
    characters its top ``k`` cost (``context_chars@k``) against ``evidence_recall@k``.
    """
    rows = []
    for name in sorted(summaries):
        means, _ = _split(summaries[name], EVAL)
        if budgets:
            points = [(b, unit, means.get(f"evidence_recall_budget@{b}")) for b in sorted(budgets)]
        else:
            points = [(means.get(f"context_chars@{k}"), f"chars in the top {k}", means.get(f"evidence_recall@{k}"))]
        rows += [{"config": name, "budget": b, "unit": u, "evidence_recall": v} for b, u, v in points]
    return rows


def slice_rows(slices: dict[str, dict], k: int) -> list[dict]:
    """Eval-split ``{config, slice, cases, recall, evidence_recall}`` at ``k`` from
    each configuration's slice table, sorted by (config, slice): the per-slice bars."""
    rows = []
    for name in sorted(slices):
        for key, values in sorted((slices[name].get(EVAL) or {}).items()):
            for value, entry in sorted(values.items()):
                means = entry.get("metrics") or {}
                rows.append(
                    {
                        "config": name,
                        "slice": f"{key}={value}",
                        "cases": entry.get("cases"),
                        "recall": means.get(f"recall@{k}"),
                        "evidence_recall": means.get(f"evidence_recall@{k}"),
                    }
                )
    return rows


def case_details(cases: Sequence[dict], texts: dict[str, str], ids: set[str]) -> dict[str, dict]:
    """``{case_id: {question, evidence}}`` for the listed validated cases, with
    each evidence reference described by :func:`describe_evidence`."""
    return {
        case["id"]: {
            "question": case.get("question", ""),
            "evidence": [describe_evidence(ref, texts) for ref in case.get("evidence") or []],
        }
        for case in cases
        if case.get("id") in ids
    }


_CSS = """
body { font: 14px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; max-width: 1100px;
       margin: 2em auto; padding: 0 1em; color: #1f2328; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: left; }
th { background: #f6f8fa; }
code { background: #f6f8fa; padding: 0 3px; border-radius: 3px; }
blockquote { color: #59636e; border-left: 4px solid #d0d7de; margin: 0; padding: 0 1em; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; }
"""


_OWN_HTML = re.compile(f"(</?(?:details|summary|code)>|{re.escape(COMMENT_MARKER)})")


def _own_html_only(renderer, tokens, idx, options, env) -> str:
    """A raw HTML token as HTML only where it is one of ragvet's own attribute-less
    tags (``details``, ``summary``, ``code``) or the comment marker; any other
    ``<`` or ``>`` in it is written as an entity. User text is escaped before it
    enters the markdown, so this is the second wall: no tag, attribute or script
    from a value can reach the page even if a rule upstream missed one."""
    parts = _OWN_HTML.split(tokens[idx].content)
    return "".join(part if i % 2 else part.replace("<", "&lt;").replace(">", "&gt;") for i, part in enumerate(parts))


def render_html(markdown: str, figures: Sequence[tuple[str, str]]) -> str:
    """One self-contained HTML page: the markdown report rendered (tables and
    ``<details>`` kept) followed by the inline SVG figures. No script and no
    external resource, so it opens offline and nothing is fetched: markdown
    images, links and autolinks are off, and raw HTML is limited to ragvet's own
    tags (:func:`_own_html_only`)."""
    from markdown_it import MarkdownIt  # deferred: the HTML report only

    md = MarkdownIt("commonmark", {"html": True}).enable("table").disable(["image", "link", "autolink"])
    md.add_render_rule("html_block", _own_html_only)
    md.add_render_rule("html_inline", _own_html_only)
    body = md.render(markdown)
    plots = ["<h2>Plots</h2>"]
    for title, svg in figures:
        plots.append(f"<figure><figcaption>{html_text(title)}</figcaption>\n{svg}</figure>")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        "<title>ragvet retrieval report</title>\n"
        f"<style>{_CSS}</style>\n</head>\n<body>\n{body}\n" + "\n".join(plots) + "\n</body>\n</html>\n"
    )


# --------------------------------------------------------------------------- metrics documentation

METRICS_DOC_INTRO = """# Metrics

Generated from the metric registry (`src/ragvet/measures/registry.py`) by
`ragvet metrics-doc > docs/metrics.md`; a test fails when this file and the
registry disagree, so edit the registry, not this page.

Each metric is computed per case; a summary is the macro mean over the cases
that have a value, printed beside its denominators. The retrieved list is
deduplicated first, keeping the first occurrence; `k <= 0` gives 0, and a k
beyond the retrieved depth counts the missing ranks as non-relevant, as
trec_eval does. A case's *relevant chunks* are the chunks that overlap any of
its evidence spans by at least one character (every chunk of the doc, for
`{doc}` evidence). A span's coverage counts its non-whitespace characters only, so
the whitespace that chunk boundaries trim never leaves a span short of being
covered. Chunk-level figures cannot be compared across chunkings,
because their denominator changes with the chunking. The reference definitions
(`src/ragvet/measures/reference.py`) give each formula and its empty-case value in
their docstrings; the engine (`src/ragvet/measures/engine.py`) is tested against them.

The budget metrics (`budget:` in params.yaml) spend `B` units, characters or the
tokens of a local tokenizer (`budget.unit`, `budget.tokenizer`), at each of
`budget.values`. A chunk costs the units that start in characters not yet sent,
so overlapping chunks pay for shared characters once; the chunk that crosses `B`
sends its characters up to its first unit start the budget cannot pay for. Token
starts are stored with the chunks by the chunk stage; no tokenizer is ever
downloaded. `tokens_to_evidence` is summarised by its mean, median (`_p50`) and
90th percentile (`_p90`, nearest rank); `counted` gives the cases that reached
full availability within the depth.

`judged@k` reads the judged set that `ragvet import trec|beir` keeps for each query
(every judged doc, of any grade: see [import-export.md](import-export.md)). It is
computed only when some case has one, and a native case has no value (never 0 or 1).
It follows ir_measures' `Judged@k`: a retrieved chunk is judged when its doc is, each
chunk of the top k counts (one chunk per document gives ir_measures' figure exactly),
and fewer than k results divide by what was retrieved. Its mean is over answerable
cases, like every other; abstention cases with a judged set have a per-case value.
The report shows it per configuration, and warns when a configuration's
`judged.metric` is more than `judged.max_drop` below its reference's: its recall may
be an artefact of missing judgements.
"""


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def metrics_doc() -> str:
    """``docs/metrics.md``: every registered metric and human review figure, from the
    registry, so the documentation cannot drift from what is computed."""
    header = ["metric", "definition", "comparable across chunkings", "better", "abstention cases", "gateable"]
    rows = [
        [
            f"`{metric.key('B' if metric.budget else 'k')}`",
            md_text(metric.definition, limit=None),
            _yes(metric.comparable_across_chunkings),
            "higher" if metric.higher_is_better else "lower",
            "a value" if metric.abstention else "no value (reported apart)",
            _yes(metric.share and not metric.judgements),
        ]
        for metric in METRICS.values()
    ]
    review = [
        [f"`{m.key('k')}`", md_text(m.definition, limit=None), m.cases, "higher" if m.higher_is_better else "lower"]
        for m in REVIEW_METRICS.values()
    ]
    lines = [METRICS_DOC_INTRO, "## Retrieval and evidence availability", "", *_table(header, rows), ""]
    lines += [
        "## Human review figures",
        "",
        "Read from recorded answers (`data/answers/<config>.jsonl`), never computed "
        "by a model; see [abstention.md](abstention.md).",
        "",
    ]
    lines += _table(["metric", "definition", "cases", "better"], review)
    return "\n".join(lines) + "\n"


def render_latency(summaries: dict[str, Summary], latencies: dict[str, dict], k: int) -> str:
    """Latency and load beside evidence recall, one row per configuration (eval split).

    A page of its own, never part of the committed report: latency varies run to
    run (see :mod:`ragvet.measures.latency`). A configuration without a latency
    record shows dashes, and the page says plainly that nothing was measured for it
    and how to measure it: DVC restores a run (run cache, ``dvc pull``) without
    running the stage, so a reader would otherwise take the dashes for a failure.
    """
    lines = [
        "# Latency and load",
        "",
        "Measured by this machine's last retrieve stages; it varies run to run, so it is not committed.",
        "Percentiles are over the queries a kind times one by one (bm25, pgvector, http); batch kinds: queries/s.",
        "",
        f"| configuration | evidence_recall@{k} | claim_availability@{k} | p50 ms | p95 ms | max ms | queries/s |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for config in sorted(summaries):
        metrics = summaries[config].get("eval", {}).get("metrics", {})
        timed = latencies.get(config, {})
        figures = [metrics.get(f"evidence_recall@{k}"), metrics.get(f"claim_availability@{k}")]
        figures += [timed.get(name) for name in ("p50_ms", "p95_ms", "max_ms", "qps")]
        lines.append(f"| {md_code(config, table=True)} | " + " | ".join(fmt(value) for value in figures) + " |")
    unmeasured = [config for config in sorted(summaries) if config not in latencies]
    if unmeasured:
        lines += [
            "",
            f"No latency was measured here for {', '.join(md_code(config) for config in unmeasured)}: DVC restored "
            "their runs (from its run cache or a remote) without running them, or they never ran in this clone. "
            "To measure one: `dvc repro -f -s retrieve@<config>`.",
        ]
    return "\n".join(lines) + "\n"
