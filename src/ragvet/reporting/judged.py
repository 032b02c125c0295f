"""The judged share of the top k (``judged@k``, for cases imported with their qrels)
and the warning when a configuration's share falls far below its reference's.

An unjudged result counts as not relevant, so a configuration that retrieves what the
qrels never judged looks worse than it is; the warning says when its recall may be an
artefact of missing judgements rather than of retrieval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ragvet.reporting.markdown import md_table
from ragvet.reporting.summaries import ANSWERABLE_ONLY, Summary, split_figures
from ragvet.schema import EVAL
from ragvet.text.escaping import md_code, md_text
from ragvet.text.formatting import fmt, is_missing

JUDGED_WARNING = "its recall may be an artefact of missing judgements"


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
        current = split_figures(summaries[name], EVAL)[0].get(metric)
        for label, reference in references.get(name, ()):
            base = split_figures(reference, EVAL)[0].get(metric)
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
    names = [
        name for name in sorted(summaries) if any(f"judged@{k}" in split_figures(summaries[name], EVAL)[0] for k in ks)
    ]
    if not names:
        return []
    rows = []
    for name in names:
        means = split_figures(summaries[name], EVAL)[0]
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
        *md_table(header, rows),
        "",
        *warnings,
        *([""] if warnings else []),
    ]
