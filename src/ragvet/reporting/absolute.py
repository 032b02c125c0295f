"""Each configuration's own figures, both splits: evidence recall, claim availability
and retrieval at k with their denominators, the abstention cases, tuned thresholds and
the human review of recorded answers.

They are the report's last, collapsed section. People decide on these tables, so
every mean sits beside its denominator, chunk-level recall is flagged as not
comparable across chunkings, and abstention cases get their own table instead of being
averaged away.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ragvet.measures.answers import BEHAVIOURS
from ragvet.measures.registry import FOREIGN, METRICS
from ragvet.reporting.markdown import joined, md_table
from ragvet.reporting.summaries import ANSWERABLE_ONLY, Summary, split_figures, summary_k
from ragvet.schema import DEV, EVAL, SPLITS
from ragvet.text.escaping import md_code, md_text
from ragvet.text.formatting import DASH, fmt

# Name of the claim-pooled figure beside the macro claim_availability@k mean.
POOLED = "claim_availability_pooled@{k}"


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
        f"(the relevant chunks) changes with the chunking. {joined(comparable)} can."
    )


def foreign_note(summaries: Mapping[str, Summary]) -> list[str]:
    """The configurations that rank foreign passages, whose chunk-level figures are
    not reported (their relevant set would be only what the system returned)."""
    foreign = [md_code(name) for name, summary in sorted(summaries.items()) if summary.get("passages") == FOREIGN]
    if not foreign:
        return []
    return [
        f"**Foreign passages:** {joined(foreign)} rank{'s' if len(foreign) == 1 else ''} the passages of a system "
        "that chunks the corpus its own way: the evidence is scored on them, and chunk-level figures "
        "(recall, hit, mrr, precision, ndcg) are not reported (`–`).",
        "",
    ]


_DIST_ORDER = ("min", "p10", "p25", "q1", "median", "p50", "mean", "p75", "q3", "p90", "max")


def split_tables(summaries: dict[str, Summary], split: str, ks: Sequence[int]) -> list[str]:
    names = sorted(summaries)
    k = summary_k(ks)
    out = [f"## {split} split", ""]
    if not names:
        return out + ["No configurations.", ""]

    out += ["### Evidence recall (comparable across chunkings)", ""]
    rows = []
    for name in names:
        means, den = split_figures(summaries[name], split)
        rows.append(
            [
                md_text(name),
                *(fmt(means.get(f"evidence_recall@{k_}")) for k_ in ks),
                fmt(den.get("cases")),
                fmt(den.get("abstention_cases")),
            ]
        )
    out += md_table(["config", *(f"evidence_recall@{k_}" for k_ in ks), "cases", "abstention cases"], rows) + [""]

    out += ["### Claim availability, macro / claim-pooled (comparable across chunkings)", ""]
    rows = []
    for name in names:
        means, den = split_figures(summaries[name], split)
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
    out += md_table(header, rows) + [""]

    out += [f"### Retrieval at k={k}", ""]
    rows = []
    for name in names:
        summary = summaries[name]
        means, den = split_figures(summary, split)
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
    return out + md_table(header, rows) + [""]


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


def abstention_section(summaries: dict[str, Summary]) -> list[str]:
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
    return out + md_table(header, rows) + [""]


def absolute_figures(summaries: dict[str, Summary], ks: Sequence[int]) -> list[str]:
    """The body of the report's collapsed last section: which figures compare across
    chunkings, then both splits' tables, the abstention cases, the thresholds and the
    human review, for every configuration."""
    out = [
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
        out += split_tables(summaries, split, ks)
    out += abstention_section(summaries)
    out += threshold_section(summaries)
    out += review_section(summaries, ks, summary_k(ks))
    return out
