"""The HTML report's case explorer: every eval case of the gated configurations, moved
ones first, with its slices and its guarded metrics baseline beside candidate; for a
chosen case its question, claims and evidence, and each side's top k chunks with the
evidence characters highlighted.

:func:`explorer_data` gathers what the page's script shows into one compact JSON value
(columns of parallel lists, ids interned, so 100,000 cases stay a few megabytes), and
:func:`explorer_section` embeds it in a ``<script type="application/json">`` block,
escaped by :func:`ragvet.text.escaping.script_json`. Nothing here writes user text into
markup: the script (:mod:`ragvet.reporting.explorer_script`) puts it in with
``textContent``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

from ragvet.gating.retrieved import Retrieved
from ragvet.reporting.explorer_script import SCRIPT, STYLE
from ragvet.reporting.moves import STATUSES
from ragvet.storage.tables import gc_paused
from ragvet.text.escaping import script_json

SCORE_PLACES = 4  # a chunk's score as the explorer shows it
# The cases the page holds at most (about 10 MB of page): newly missed and found ones first.
# Past it the page says how many it leaves out; the moves CSV (``--moves``) lists every case.
EXPLORER_CASES = 100_000


def _targets(ref: dict) -> list[dict]:
    """The single targets of a validated evidence reference (the alternatives of ``{any}``)."""
    return [target for alt in ref["any"] for target in _targets(alt)] if "any" in ref else [ref]


class _Interned:
    """Values numbered in the order first seen, so a repeated one costs an index."""

    def __init__(self) -> None:
        self.index: dict = {}

    def __call__(self, value) -> int:
        return self.index.setdefault(value, len(self.index))

    def values(self) -> list:
        return list(self.index)


def _evidence(case: dict, texts: Mapping[str, str], docs: _Interned) -> tuple[list, list]:
    """A case's evidence targets as ``[doc, start, end, quote]`` (start, end and quote
    None for a whole doc), and its claims as ``[text, [target index, ...]]``."""
    targets: dict[tuple, int] = {}
    rows: list[list] = []

    def index(ref: dict) -> int:
        key = (ref["doc"], ref.get("start"), ref.get("end"))
        if key not in targets:
            targets[key] = len(rows)
            quote = None if ref.get("start") is None else texts.get(ref["doc"], "")[ref["start"] : ref["end"]]
            rows.append([docs(ref["doc"]), ref.get("start"), ref.get("end"), quote])
        return targets[key]

    for ref in case.get("evidence") or []:
        for target in _targets(ref):
            index(target)
    claims = [
        [claim.get("text", ""), [index(t) for ref in claim.get("evidence") or [] for t in _targets(ref)]]
        for claim in case.get("claims") or []
    ]
    return rows, claims


def _top(side: Retrieved, ids: Sequence[str], chunks: _Interned, docs: _Interned) -> list | None:
    """Per case the side's ``[chunk index, score, ...]`` pairs flattened, best first; None when
    unavailable. A chunk is interned by its content once per side: the two sides' chunkings may
    give one id to different chunks."""
    if side.top is None:
        return None
    index = {
        chunk_id: chunks((chunk_id, docs(chunk.doc_id), chunk.start, chunk.end, chunk.text))
        for chunk_id, chunk in sorted(side.chunks.items())
    }
    return [
        [value for chunk_id, score in side.top.get(case_id, ()) if chunk_id in index
         for value in (index[chunk_id], round(score, SCORE_PLACES))]
        for case_id in ids
    ]  # fmt: skip


def _per_case(moves: list[dict], ids: Sequence[str], columns: Sequence[str]) -> tuple[list, list]:
    """One configuration's status number per case (:data:`STATUSES`; unchanged for a case it
    lacks) and its ``columns``, baseline then candidate, per case (None where it lacks the case)."""
    found = {row["case_id"]: row for row in moves}
    keys = [key for name in columns for key in (f"baseline_{name}", name)]
    status = [STATUSES.index(found[c]["status"]) if c in found else 2 for c in ids]
    return status, [[found[c][key] for key in keys] if c in found else [None] * len(keys) for c in ids]


def explorer_ids(moves: Mapping[str, list[dict]], limit: int | None = EXPLORER_CASES) -> list[str]:
    """The first ``limit`` cases any configuration's ``moves`` list: those newly missed
    somewhere first, then newly found, then the rest, each by id."""
    rank: dict[str, int] = {}
    for config in sorted(moves):
        for row in moves[config]:
            rank[row["case_id"]] = min(rank.get(row["case_id"], 2), STATUSES.index(row["status"]))
    return sorted(rank, key=lambda case_id: (rank[case_id], case_id))[:limit]


def explorer_data(
    cases: Iterable[dict],
    texts: Mapping[str, str],
    moves: Mapping[str, list[dict]],
    sides: Mapping[str, tuple[Retrieved, Retrieved]],
    columns: Sequence[str],
    slices: Sequence[str],
    k: int,
    baseline: str,
    ids: Sequence[str],
    listed: int,
) -> dict:
    """What the explorer shows, as one JSON-ready value.

    ``moves`` are each gated configuration's :func:`ragvet.reporting.moves.case_moves`
    rows (the ``columns`` among them in pairs, baseline then candidate); ``sides`` its
    baseline and candidate :class:`Retrieved`; ``cases`` the validated cases (question,
    tags, evidence, claims; only those of ``ids`` are kept) and ``texts`` the corpus, for
    the quotes. The page shows the cases ``ids`` (:func:`explorer_ids`) of the ``listed``
    eval cases, and says so when it shows fewer.
    """
    with gc_paused():  # millions of small lists and no cycle: the collector's passes doubled the time
        configs = sorted(moves)
        shown = set(ids)
        by_id = {case.get("id"): case for case in cases if case.get("id") in shown}
        docs, chunks = _Interned(), _Interned()
        evidence, claims = (
            zip(*(_evidence(by_id.get(case_id, {}), texts, docs) for case_id in ids), strict=True) if ids else ((), ())
        )
        per_case = [_per_case(moves[config], ids, columns) for config in configs]
        status, rows = [found[0] for found in per_case], [found[1] for found in per_case]
        top = [
            [_top(sides[config][0], ids, chunks, docs), _top(sides[config][1], ids, chunks, docs)] for config in configs
        ]
        return {
            "baseline": baseline,
            "k": k,
            "configs": configs,
            "slices": list(slices),
            "columns": list(columns),
            "ids": list(ids),
            "questions": [by_id.get(c, {}).get("question", "") for c in ids],
            "tags": [[str((by_id.get(c, {}).get("tags") or {}).get(s, "")) for s in slices] for c in ids],
            "status": status,
            "rows": rows,
            "evidence": list(evidence),
            "claims": list(claims),
            "top": top,
            "unavailable": [[sides[config][0].unavailable, sides[config][1].unavailable] for config in configs],
            "docs": docs.values(),
            "chunks": [list(chunk) for chunk in chunks.values()],
        } | ({"listed": listed} if listed > len(ids) else {})


def explorer_section(data: dict) -> str:
    """The explorer's markup, its data block and its script, for the end of the page's body."""
    payload = script_json(json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False))
    return (
        f"<style>{STYLE}</style>\n"
        '<section id="ragvet-explorer">\n<h2>Cases</h2>\n<p id="rx-summary" class="rx-note"></p>\n'
        '<div class="rx-controls">'
        '<label>Configuration <select id="rx-config"></select></label>'
        '<label>Moved <select id="rx-status"><option value="">any</option></select></label>'
        '<label>Slice <select id="rx-slice"><option value="">every slice</option></select></label>'
        '<label>Search <input id="rx-search" type="search" placeholder="case id or question"></label>'
        '<span id="rx-count"></span></div>\n'
        '<div id="rx-table" class="rx-scroll"><table><thead><tr id="rx-head"></tr></thead>'
        '<tbody id="rx-body"></tbody></table></div>\n<div id="rx-detail"></div>\n</section>\n'
        f'<script type="application/json" id="ragvet-cases">{payload}</script>\n<script>{SCRIPT}</script>\n'
    )
