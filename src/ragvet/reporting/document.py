"""The report document: its sections in order (the one-line verdict first, its details
folded, the gated configurations' tables, then the other comparisons, the absolute
figures last and collapsed), and its fit into one pull-request comment.

It is a pure function of what it is given: no timestamps, fixed decimals,
configurations sorted by name, so re-running gives the same bytes and a PR diff shows
only real changes. GitHub refuses a comment over 65,536 characters, so a comment lists
fewer cases, then leaves out the absolute figures, then is cut at a line: the verdict
and the comparisons always reach the reviewer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragvet.reporting.absolute import absolute_figures, stale_threshold_lines
from ragvet.reporting.comparison_tables import budget_section, config_section, headline
from ragvet.reporting.judged import judged_section
from ragvet.reporting.markdown import md_details
from ragvet.reporting.movement import movement_section
from ragvet.reporting.side_by_side import side_by_side_section
from ragvet.reporting.summaries import Summary
from ragvet.reporting.verdict import verdict_headline, verdict_section
from ragvet.text.escaping import md_code

COMMENT_MARKER = "<!-- ragvet-report -->"

# The folded verdict details' summary line, under the one-line verdict.
VERDICT_DETAILS = "ragvet's gate: every reason, and what it compared"


DISCLAIMER = (
    "> Offline scores on labelled cases are not a production guarantee: they say whether the labelled "
    "evidence was retrieved for these questions, not that real users' answers will be right."
)


# GitHub refuses a comment longer than 65,536 characters; render_report never exceeds this.
COMMENT_LIMIT = 65_000


@dataclass(frozen=True)
class Contents:
    """What a report shows: every configuration's summary (``summaries``), the paired
    comparisons (:func:`ragvet.reporting.comparisons.compare_configs`), the gate's
    ``verdict``, the questions and evidence of the cases that moved (``case_info``),
    the cutoffs ``ks``, the many-configuration comparison (``table``,
    :func:`side_by_side_section`) and the :func:`judged_warnings` lines."""

    summaries: dict[str, Summary]
    comparisons: list[dict]
    verdict: dict
    case_info: dict[str, dict]
    ks: Sequence[int]
    table: dict | None = None
    judged: Sequence[str] = ()


def render_report(
    contents: Contents, against: str | None = None, marker: bool = False, limit: int | None = None
) -> str:
    """The pull-request document: the one-line verdict first (its details folded), then
    the gated configurations' paired comparisons, the budget, judged and side-by-side
    sections, the other configurations (collapsed), then the absolute figures of every
    configuration. ``marker`` prepends the hidden comment marker
    that lets CI find and update its one comment.

    With ``limit`` (characters), a document that would be longer lists fewer
    cases per list, then leaves out the absolute figures, so that the verdict and
    the comparisons always reach the reviewer instead of a rejected comment; if
    even that is too long (hundreds of configurations or slices), it is cut at a
    line, with a note, by :func:`_fit`.
    """
    for cap, absolute in ((None, True), (20, True), (5, True), (5, False), (0, False)):
        text = _render(contents, against, marker, cap, absolute)
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


def _render(contents: Contents, against: str | None, marker: bool, cap: int | None, with_absolute: bool) -> str:
    """:func:`render_report` with at most ``cap`` cases per list, with or without the absolute figures."""
    summaries, comparisons, verdict = contents.summaries, contents.comparisons, contents.verdict
    ks, case_info = sorted(set(contents.ks)), contents.case_info
    confidence = float(verdict["configs"][0].get("confidence", 0.95)) if verdict["configs"] else 0.95
    lines = [COMMENT_MARKER, ""] if marker else []
    lines += [f"# {verdict_headline(verdict)}", ""]
    lines += md_details(VERDICT_DETAILS, verdict_section(verdict, against))
    lines += stale_threshold_lines(summaries)  # beside the verdict: a comment may leave the threshold table out
    gated = [c for c in comparisons if c["gated"]]
    others = [c for c in comparisons if not c["gated"]]
    skipped = {cfg["config"]: [s["metric"] for s in cfg.get("skipped") or []] for cfg in verdict["configs"]}
    for comp in gated:
        section = config_section(comp, case_info, confidence, cap, skipped.get(comp["config"], ()))
        lines += [f"## {md_code(comp['config'])} (gated)", ""] + section
    lines += movement_section(verdict)
    lines += [DISCLAIMER, ""]
    lines += budget_section(comparisons)
    lines += judged_section(summaries, ks, contents.judged)
    lines += side_by_side_section(contents.table, confidence)
    if others:
        lines += ["## Other configurations", ""]
        for comp in others:
            lines += md_details(headline(comp), config_section(comp, case_info, confidence, cap))
    lines += ["## All configurations", ""]
    if not with_absolute:
        lines += ["Left out to fit a comment: see `metrics/report.md` or the HTML report.", ""]
        return "\n".join(lines).rstrip("\n") + "\n"
    title = "Absolute figures, both splits, abstention cases, human review"
    lines += md_details(title, absolute_figures(summaries, ks))
    return "\n".join(lines).rstrip("\n") + "\n"
