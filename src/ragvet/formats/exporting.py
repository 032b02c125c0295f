"""Exporting a run and the chunk-level qrels in TREC format, so that trec_eval,
pytrec_eval or ranx can recompute ragvet's numbers.

The run is ``qid Q0 docno rank score tag``; the qrels are ``qid 0 docno 1`` for
every relevant chunk of every answerable case: the chunks that
:func:`ragvet.evidence.relevant_chunks` finds, the same projection the evaluate
stage scores against. Abstention cases have no relevant chunk, so they have no
qrels line and the tools leave them out, as ragvet's means do.

**Ties.** ragvet ranks by rounded score, then by chunk id ascending. trec_eval
(and so pytrec_eval) re-sorts a run by score and breaks ties by docno
*descending*, so exporting tied scores as they are would let it reorder them and
its figures would differ from ragvet's. By default (``scores="auto"``) the
retriever's scores are exported when they strictly decrease down every case's
ranking, and otherwise every score is replaced by a pseudo-score derived from the
rank, ``max_rank + 1 - rank`` (so ``depth, depth - 1, ..., 1``), which every tool
orders exactly as ragvet did. ``scores="score"`` and ``scores="rank"`` force one
or the other.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence

from ragvet.errors import InputError, Problem, raise_if
from ragvet.evidence import chunks_by_doc, relevant_chunks
from ragvet.schema import Case, Chunk

SCORE_MODES = ("auto", "score", "rank")
_FIX_ID = "TREC files separate columns by whitespace: rename the doc (or case) so its id has no space, tab or newline"


def _has_space(value: str) -> bool:
    return any(character.isspace() for character in value) or not value


def _check_ids(ids: Iterable[tuple[str, str]]) -> None:
    """Every ``(kind, id)`` must be a non-empty token without whitespace."""
    raise_if(
        sorted(
            {
                Problem(f"{kind} {value!r}", f"the {kind} id is empty or holds whitespace", _FIX_ID)
                for kind, value in ids
                if _has_space(value)
            }
        )
    )


def _fmt(score: float) -> str:
    return f"{score:.6f}"


def _strictly_decreasing(rows: Sequence[dict]) -> bool:
    printed = [float(_fmt(row["score"])) for row in rows]
    return all(a > b for a, b in zip(printed, printed[1:]))


def trec_run_lines(rows: Iterable[dict], tag: str, scores: str = "auto") -> tuple[list[str], str]:
    """Run rows ``{case_id, rank, chunk_id, score}`` as TREC run lines, sorted by
    (case id, rank), with ``tag`` in the last column.

    Returns ``(lines, mode)``, ``mode`` being ``score`` or ``rank``: which scores
    were written (see the module docstring on ties). Raises :class:`InputError`
    for an id with whitespace, which a TREC line cannot hold.
    """
    if scores not in SCORE_MODES:
        raise ValueError(f"scores must be one of {SCORE_MODES}, got {scores!r}")
    by_case: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_case[row["case_id"]].append(row)
    ranked = {case_id: sorted(group, key=lambda row: row["rank"]) for case_id, group in sorted(by_case.items())}
    _check_ids([("tag", tag)])
    _check_ids(
        [("case", case_id) for case_id in ranked] + [("chunk", row["chunk_id"]) for g in ranked.values() for row in g]
    )
    mode = scores
    if mode == "auto":
        mode = "score" if all(_strictly_decreasing(group) for group in ranked.values()) else "rank"
    top = max((row["rank"] for group in ranked.values() for row in group), default=0)
    lines = []
    for case_id, group in ranked.items():
        for row in group:
            score = row["score"] if mode == "score" else top + 1 - row["rank"]
            lines.append(f"{case_id} Q0 {row['chunk_id']} {row['rank']} {_fmt(score)} {tag}")
    return lines, mode


def trec_qrels_lines(
    cases: Sequence[Case], chunks: Sequence[Chunk], case_ids: Collection[str] | None = None
) -> list[str]:
    """``qid 0 chunk_id 1`` for every relevant chunk of every answerable case
    (those in ``case_ids``, when given), sorted by case id, then chunk id.

    Relevance is binary, as ragvet's metrics are. Raises :class:`InputError` for
    an id with whitespace.
    """
    by_doc = chunks_by_doc(chunks)
    lines: list[str] = []
    problems: list[Problem] = []
    for case in sorted(cases, key=lambda c: c.case_id):
        if not case.answerable or (case_ids is not None and case.case_id not in case_ids):
            continue
        relevant = sorted(relevant_chunks(case.evidence, by_doc))
        try:
            _check_ids([("case", case.case_id)] + [("chunk", chunk_id) for chunk_id in relevant])
        except InputError as err:
            problems.extend(err.problems)
            continue
        lines.extend(f"{case.case_id} 0 {chunk_id} 1" for chunk_id in relevant)
    raise_if(problems)
    return lines
