"""The markdown the report's sections are built of: a table, a collapsed section, a
list read as a sentence.

One syntax for each, so every section renders alike on GitHub, in ``metrics/report.md``
and in the HTML page, and a change to how a table is written is one change here. User
text is escaped by the caller (:mod:`ragvet.reporting.escaping`) before it reaches them.
"""

from __future__ import annotations

from collections.abc import Sequence


def joined(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``: a list as a sentence reads it."""
    return " and ".join(filter(None, [", ".join(items[:-1]), items[-1]])) if items else ""


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A GitHub table's lines; the cells are markdown already (escaped with ``table=True``)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def md_details(summary: str, body: list[str]) -> list[str]:
    """A collapsed section; ``summary`` is HTML (a raw HTML line on GitHub), escaped by the caller."""
    return ["<details>", f"<summary>{summary}</summary>", "", *body, "", "</details>", ""]
