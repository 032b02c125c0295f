"""A newly missed or found case as a reviewer reads it: its question, and each piece
of evidence that went missing quoted from the corpus.

A case id alone says nothing in a pull request; the quoted span tells the reviewer
what the retriever stopped bringing back without opening the cases file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ragvet.text.escaping import md_code, md_text
from ragvet.text.formatting import DASH


def listed_cases(comparisons: Iterable[dict]) -> set[str]:
    """The cases the comparisons list: newly missed or newly found somewhere."""
    return {cid for comp in comparisons for key in ("newly_missed", "newly_found") for cid in comp.get(key, [])}


def case_details(cases: Iterable[dict], texts: dict[str, str], ids: set[str]) -> dict[str, dict]:
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


def case_list(ids: Sequence[str], case_info: dict[str, dict], with_evidence: bool, cap: int | None) -> list[str]:
    out = []
    for case_id in ids[:cap]:
        info = case_info.get(case_id) or {}
        out.append(f"- **{md_code(case_id)}**: {md_text(info.get('question', DASH))}")
        if with_evidence:
            out += [f"  - missing: {text}" for text in info.get("evidence", [])]
    if cap is not None and len(ids) > cap:
        out.append(f"- … and {len(ids) - cap} more: `ragvet report --against` lists them all")
    return out
