"""The vectorised evaluation engine: every per-case metric of a whole run at once.

:mod:`ragvet.measures.reference` holds the reference definitions, one case at a time, over
Python sets. Scoring 100,000 cases that way costs seconds of set building per
metric, so this module computes the same figures over arrays instead:

* chunk ids are interned once to row numbers of the chunk table, and case ids to
  row numbers of the case list;
* the run becomes a ``cases x ranks`` matrix of chunk numbers (``-1`` past a
  case's last rank), deduplicated keeping the first occurrence;
* relevance is one ``cases x ranks`` boolean matrix, found by a sorted search of
  ``(case, chunk)`` keys, and every chunk-level metric is a cumulative sum or a
  first ``True`` along the ranks;
* evidence availability works on *pieces* (one evidence target's overlap with
  one chunk): each piece gets the rank of its chunk in the case's top ``max(ks)``,
  and the union of the pieces present at ``k`` is measured per target with one
  running maximum over all targets at once.

The test suite checks every figure against the reference functions on generated
runs with ties, duplicates, short runs, abstention cases and partly covered spans.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np

from ragvet.evidence import CountedTexts
from ragvet.measures.registry import METRICS
from ragvet.measures.spending import cut, spending
from ragvet.storage.columns import ChunkTable, EvidenceTable, Judgements, RunTable
from ragvet.storage.results import column

NONE = np.nan  # a metric with no value for a case (reported apart, never averaged)


@dataclass
class Ranking:
    """The deduplicated run as a ``cases x width`` matrix of chunk numbers (-1 = no chunk)."""

    matrix: np.ndarray
    retrieved: np.ndarray
    removed: np.ndarray
    top1_score: np.ndarray


def rank_matrix(run: RunTable, case_order: Sequence[str]) -> Ranking:
    """Lay the run out as one row per case of ``case_order``, best rank first.

    Cases missing from the run get an empty row. Repeated chunk ids within a case
    are dropped after their first occurrence (the rest move up) and counted.
    Rows are placed through flat indices, with as few temporaries of the run's
    length as can be: at millions of rows numpy's 2-D fancy assignment costs
    several times more, and fresh memory costs more than the arithmetic.
    """
    n_cases = len(case_order)
    if list(run.case_ids) == list(case_order):  # the readers number cases in this order already
        rows = run.case
    else:
        position = {case_id: row for row, case_id in enumerate(case_order)}
        row_of = np.asarray([position.get(case_id, -1) for case_id in run.case_ids], np.int64)
        rows = row_of[run.case] if len(run.case) else np.zeros(0, np.int64)
    chunk, rank, score = run.chunk, run.rank, run.score
    if len(rows) and rows.min() < 0:  # rows of cases not asked for
        keep = rows >= 0
        rows, chunk, rank, score = rows[keep], chunk[keep], rank[keep], score[keep]
    if len(rows) > 1 and not _sorted_by(rows, rank):
        order = np.lexsort((rank, rows))  # stable: tied ranks keep file order
        rows, chunk, score = rows[order], chunk[order], score[order]

    bounds = np.searchsorted(rows, np.arange(n_cases + 1, dtype=rows.dtype))  # sorted: a case's rows are a slice
    counts, starts = np.diff(bounds), bounds[:-1]
    width = int(counts.max()) if len(counts) else 0
    matrix = np.full((n_cases, width), -1, np.int32)
    index_type = np.int32 if n_cases * width < 2**31 else np.int64  # half the memory at 100,000 cases
    flat = (np.arange(n_cases, dtype=index_type) * width - starts.astype(index_type))[rows]
    flat += np.arange(len(rows), dtype=index_type)  # row r of case c goes to c * width + (r - starts[c])
    matrix.reshape(-1)[flat] = chunk
    top1 = np.full(n_cases, NONE)
    present = counts > 0
    top1[present] = score[starts[present]]

    removed = np.zeros(n_cases, np.int64)
    if width > 1 and not run.distinct:
        ordered = np.sort(matrix, axis=1)
        repeated = np.flatnonzero(((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)).any(axis=1))
        for row in repeated:  # rare: ragvet's own runs never repeat a chunk
            kept = list(dict.fromkeys(int(c) for c in matrix[row] if c >= 0))
            removed[row] = counts[row] - len(kept)
            matrix[row] = -1
            matrix[row, : len(kept)] = kept
    return Ranking(matrix, counts - removed, removed, top1)


def _sorted_by(rows: np.ndarray, rank: np.ndarray) -> bool:
    """Whether ``(rows, rank)`` is already in lexicographic order (ragvet writes runs so)."""
    return bool(((rows[1:] > rows[:-1]) | ((rows[1:] == rows[:-1]) & (rank[1:] >= rank[:-1]))).all())


# ---------------------------------------------------------------------------
# Evidence as flat arrays
# ---------------------------------------------------------------------------


@dataclass
class Evidence:
    """The evidence projected onto a chunking: a *piece* is a target's overlap with
    one chunk, ``(piece_lo, piece_hi)`` in doc coordinates, sorted by target then
    start. ``relevant`` holds the sorted unique ``case * n_chunks + chunk`` keys of
    each case's relevant chunks (those of its evidence units' targets)."""

    table: EvidenceTable
    piece_target: np.ndarray
    piece_chunk: np.ndarray
    piece_lo: np.ndarray
    piece_hi: np.ndarray
    target_length: np.ndarray
    target_whole: np.ndarray  # doc-level or zero-length: any present piece is enough
    evidence_units: np.ndarray  # the unit numbers of the cases' own evidence
    claim_links: np.ndarray  # the unit numbers cited by claims
    relevant: np.ndarray
    n_relevant: np.ndarray
    n_units: np.ndarray
    n_claims: np.ndarray


def _doc_ranges(chunks: ChunkTable, docs: Sequence[str]) -> tuple[np.ndarray, ...]:
    """Chunk rows sorted by (doc, ordinal) and their doc numbers; per doc of ``docs``
    its number and its ``[first, last)`` positions in that order (empty, number 0,
    for a doc the chunking does not have)."""
    number, chunk_doc = chunks.doc_numbers
    order, bounds = chunks.doc_order
    wanted = np.fromiter(map(number.get, docs, repeat(-1)), np.int64, len(docs))
    known = wanted >= 0
    first = np.where(known, bounds[np.maximum(wanted, 0)], 0)
    last = np.where(known, bounds[np.maximum(wanted, 0) + 1], 0)
    return order, chunk_doc[order], np.maximum(wanted, 0), first, last


def project(table: EvidenceTable, chunks: ChunkTable, texts: Mapping[str, str]) -> Evidence:
    """Every target's pieces, as :func:`ragvet.evidence.project_unit` finds them one
    unit at a time: all the chunks of a whole-doc target, and for a span the chunks
    of its doc that overlap it by at least one character, with the span's pieces
    and length in counted coordinates (:func:`_counted`).

    When each doc's chunks have non-decreasing starts and ends in ordinal order (as
    every built-in chunking does), a span's chunks are one contiguous run found by
    two sorted searches; otherwise every chunk of the doc is tried.
    """
    order, doc, target_code, first, last = _doc_ranges(chunks, table.target_doc)
    starts, ends = chunks.starts[order], chunks.ends[order]
    span = table.target_start >= 0
    same_doc = doc[1:] == doc[:-1]
    monotonic = bool(((np.diff(starts) >= 0) & (np.diff(ends) >= 0) | ~same_doc).all())
    lo_pos, hi_pos = first.copy(), last.copy()
    if monotonic and span.any():
        scale = int(max(ends.max(initial=0), table.target_end.max(initial=0))) + 2
        base = target_code[span] * scale  # keys below are sorted: doc first, then offset
        lo_pos[span] = np.searchsorted(doc * scale + ends, base + table.target_start[span], side="right")
        hi_pos[span] = np.searchsorted(doc * scale + starts, base + table.target_end[span], side="left")
        lo_pos, hi_pos = np.clip(lo_pos, first, last), np.clip(hi_pos, first, last)
    counts = np.maximum(hi_pos - lo_pos, 0)
    piece_target = np.repeat(np.arange(len(counts)), counts)
    offsets = np.arange(len(piece_target)) - np.repeat(np.cumsum(counts) - counts, counts)
    position = np.repeat(lo_pos, counts) + offsets
    t_start, t_end = table.target_start[piece_target], table.target_end[piece_target]
    whole = t_start < 0
    piece_lo = np.where(whole, starts[position], np.maximum(t_start, starts[position]))
    piece_hi = np.where(whole, ends[position], np.minimum(t_end, ends[position]))
    keep = whole | (piece_lo < piece_hi)
    piece_target, piece_lo, piece_hi = piece_target[keep], piece_lo[keep], piece_hi[keep]
    piece_chunk = order[position[keep]]
    if not monotonic:  # sort by target, then start, as the union needs (monotonic chunks come so already)
        sort = np.lexsort((piece_lo, piece_target))
        piece_target, piece_chunk = piece_target[sort], piece_chunk[sort]
        piece_lo, piece_hi = piece_lo[sort], piece_hi[sort]

    n_cases, n_chunks = table.n_cases, max(len(chunks), 1)
    unit_of_piece = table.target_unit[piece_target]
    own = table.unit_claim[unit_of_piece] < 0
    relevant = np.sort(table.unit_case[unit_of_piece[own]] * n_chunks + piece_chunk[own])
    relevant = relevant[np.concatenate(([True], relevant[1:] != relevant[:-1]))] if len(relevant) else relevant
    piece_lo, piece_hi, lengths = _counted(table, piece_target, piece_lo, piece_hi, CountedTexts.of(texts))
    evidence_units = np.flatnonzero(table.unit_claim < 0)
    return Evidence(
        table,
        piece_target,
        piece_chunk,
        piece_lo,
        piece_hi,
        lengths,
        ~span | (lengths <= 0),
        evidence_units,
        np.flatnonzero(table.unit_claim >= 0),
        relevant,
        np.bincount(relevant // n_chunks, minlength=n_cases),
        np.bincount(table.unit_case[evidence_units], minlength=n_cases),
        np.bincount(table.claim_case, minlength=n_cases),
    )


def _counted(
    table: EvidenceTable, piece_target: np.ndarray, piece_lo: np.ndarray, piece_hi: np.ndarray, texts: CountedTexts
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Span pieces' bounds and span targets' lengths in counted coordinates
    (:func:`ragvet.evidence.nonspace_before`, through ``texts``), so that coverage
    counts non-whitespace characters exactly as the reference does. A span no chunk
    overlaps keeps its length in characters: it is unavailable at any length."""
    lengths = np.where(table.target_start >= 0, table.target_end - table.target_start, 0)
    span_piece = np.flatnonzero(table.target_start[piece_target] >= 0)
    if not len(span_piece):
        return piece_lo, piece_hi, lengths
    targets = np.unique(piece_target[span_piece])
    doc = np.zeros(len(lengths), np.int64)
    doc[targets] = texts.numbers([table.target_doc[target] for target in targets.tolist()])
    lengths[targets] = texts.before(doc[targets], table.target_end[targets])
    lengths[targets] -= texts.before(doc[targets], table.target_start[targets])
    lo, hi = piece_lo.copy(), piece_hi.copy()
    piece_doc = doc[piece_target[span_piece]]
    lo[span_piece] = texts.before(piece_doc, piece_lo[span_piece])
    hi[span_piece] = texts.before(piece_doc, piece_hi[span_piece])
    return lo, hi, lengths


# ---------------------------------------------------------------------------
# Metrics over the matrix
# ---------------------------------------------------------------------------


def _relevance(matrix: np.ndarray, keys: np.ndarray, n_chunks: int) -> np.ndarray:
    """The ``cases x ranks`` relevance matrix from the sorted ``case * n_chunks + chunk`` keys.

    Each relevant (case, chunk) pair looks for its chunk along its case's row: a
    few comparisons per pair, cheaper than a sorted search per retrieved chunk.
    """
    relevant = np.zeros(matrix.shape, bool)
    if not matrix.shape[1]:
        return relevant
    for part in range(0, len(keys), 1 << 14):  # small temporaries: reused memory, not fresh pages
        case, chunk = np.divmod(keys[part : part + (1 << 14)], n_chunks)
        found = matrix[case] == chunk[:, None]
        hit = found.any(axis=1)
        relevant[case[hit], found[hit].argmax(axis=1)] = True
    return relevant


def _discounts(width: int) -> np.ndarray:
    return np.asarray([1.0 / math.log2(rank + 1) for rank in range(1, width + 1)])


def _ideal_dcg(k: int, n_relevant: np.ndarray) -> np.ndarray:
    """``IDCG@k`` per case, each an exact ``math.fsum`` as in the reference."""
    table = np.asarray([math.fsum(_discounts(m)) for m in range(k + 1)])
    return table[np.minimum(n_relevant, k)]


def _top_sums(values: np.ndarray, k: int) -> np.ndarray:
    """Row sums of the first ``k`` columns (all of them when the matrix is narrower)."""
    return values[:, :k].sum(axis=1)


def _availability(
    evidence: Evidence, piece_rank: np.ndarray, ks: Sequence[int], n_units: int, span_coverage: float
) -> dict[int, np.ndarray]:
    """Per k, per unit: whether it is available in the top ``k`` (see ``metrics.unit_available``)."""
    return {k: _units_available(evidence, piece_rank < k, evidence.piece_hi, n_units, span_coverage) for k in ks}


def _units_available(
    evidence: Evidence, present: np.ndarray, piece_hi: np.ndarray, n_units: int, span_coverage: float
) -> np.ndarray:
    """Per unit: whether the ``present`` pieces (ending at ``piece_hi``) make it available.

    The pieces are sorted by target then start, so one running maximum of piece
    ends, offset so that targets never reach into each other, gives each piece the
    reach of the pieces before it in its target; a piece adds only what lies past
    that reach, and the sum per target is the union's length.
    """
    n_targets = len(evidence.table.target_unit)
    span = 1 + (int(evidence.piece_hi.max()) if len(evidence.piece_hi) else 0)
    base = evidence.piece_target * span
    hits = np.bincount(evidence.piece_target[present], minlength=n_targets) > 0
    lo = np.where(present, evidence.piece_lo + base, base)
    hi = np.where(present, np.maximum(piece_hi, evidence.piece_lo) + base, base)
    reach = np.maximum.accumulate(hi) if len(hi) else hi
    before = np.concatenate(([0], reach[:-1])) if len(reach) else reach
    added = np.maximum(hi - np.maximum(lo, before), 0)
    covered = np.bincount(evidence.piece_target, weights=added, minlength=n_targets)
    with np.errstate(divide="ignore", invalid="ignore"):
        enough = covered / evidence.target_length >= span_coverage
    target_ok = hits & (evidence.target_whole | enough)
    return np.bincount(evidence.table.target_unit[target_ok], minlength=n_units) > 0


def _budget_availability(
    evidence: Evidence,
    piece_case: np.ndarray,
    piece_rank: np.ndarray,
    cut_at: tuple[np.ndarray, np.ndarray],
    chunks: ChunkTable,
    texts: CountedTexts,
    span_coverage: float,
) -> np.ndarray:
    """Per unit: whether it is available in what each case's budget sends
    (``cut_at``: :func:`ragvet.measures.spending.cut`), as the reference's ``_clip``
    sees it: pieces of chunks ranked before the crossing one count whole; a
    crossing chunk's span piece is cut at its prefix end (counted coordinates) and
    dropped when it starts past it; a whole-doc piece counts if anything was sent."""
    crossing_rank, prefix_end = cut_at
    end = prefix_end[piece_case]
    crossing = (piece_rank == crossing_rank[piece_case]) & (end > chunks.starts[evidence.piece_chunk])
    span = evidence.table.target_start[evidence.piece_target] >= 0
    counted = end.copy()
    clip = np.flatnonzero(crossing & span)
    docs = [evidence.table.target_doc[target] for target in evidence.piece_target[clip].tolist()]
    counted[clip] = texts.before(texts.numbers(docs), end[clip])
    present = (piece_rank < crossing_rank[piece_case]) | (crossing & (~span | (evidence.piece_lo < counted)))
    piece_hi = np.where(crossing & span, np.minimum(evidence.piece_hi, counted), evidence.piece_hi)
    return _units_available(evidence, present, piece_hi, len(evidence.table.unit_case), span_coverage)


def _all_available(evidence: Evidence, available: np.ndarray, n_cases: int) -> np.ndarray:
    """Per case: whether every one of its own evidence units is available (False without units)."""
    units = evidence.evidence_units
    found = np.bincount(evidence.table.unit_case[units], weights=available[units], minlength=n_cases)
    return (evidence.n_units > 0) & (found == evidence.n_units)


@dataclass
class Ranked:
    """What the metric kernels read of one scored run: cumulative relevance along
    the ranks, discounted gains, context lengths, and each evidence unit's
    availability and each case's available claims per k."""

    answerable: np.ndarray
    n_relevant: np.ndarray
    hits_cum: np.ndarray
    width: int
    first: np.ndarray  # rank of the first relevant chunk, 0 where there is none
    discounted: np.ndarray
    context: np.ndarray
    evidence: Evidence
    available: dict[int, np.ndarray]
    claims_ok: dict[int, np.ndarray]
    budget_available: dict[int, np.ndarray]  # per budget value, per unit
    to_evidence: np.ndarray  # the smallest budget making every unit available, NaN if none
    spans: dict[int, tuple[np.ndarray, np.ndarray]]  # per k: span precision and span IoU
    judged: dict[int, np.ndarray]  # per k: judged@k (NaN without a judged set); empty when no case has one

    def hits(self, k: int) -> np.ndarray:
        """Relevant chunks in each case's top ``k``."""
        return self.hits_cum[:, min(k, self.width) - 1] if self.width else np.zeros(len(self.answerable), np.int64)


def _evidence_recall(r: Ranked, available: np.ndarray) -> np.ndarray:
    """Share of each case's own evidence units that ``available`` marks."""
    ev = r.evidence
    units_ok = np.bincount(
        ev.table.unit_case[ev.evidence_units], weights=available[ev.evidence_units], minlength=len(r.answerable)
    )
    return np.where(ev.n_units > 0, units_ok / ev.n_units, NONE)


# Each registered metric (ragvet.measures.registry) over every case at once, by
# name; NaN where the reference gives None. Called under np.errstate: a case with
# nothing to find divides by zero and is masked to NaN.
KERNELS: dict[str, Callable[[Ranked, int | None], np.ndarray]] = {
    "recall": lambda r, k: np.where(r.answerable, r.hits(k) / r.n_relevant, NONE),
    "hit": lambda r, k: np.where(r.answerable, (r.hits(k) > 0).astype(float), NONE),
    "mrr": lambda r, k: np.where(r.answerable, np.where(r.first > 0, 1.0 / np.maximum(r.first, 1), 0.0), NONE),
    "precision": lambda r, k: np.where(r.answerable, r.hits(k) / k, NONE),
    "ndcg": lambda r, k: np.where(r.answerable, _top_sums(r.discounted, k) / _ideal_dcg(k, r.n_relevant), NONE),
    "evidence_recall": lambda r, k: _evidence_recall(r, r.available[k]),
    "claim_availability": lambda r, k: np.where(r.evidence.n_claims > 0, r.claims_ok[k] / r.evidence.n_claims, NONE),
    "context_chars": lambda r, k: _top_sums(r.context, k),
    "evidence_recall_budget": lambda r, b: _evidence_recall(r, r.budget_available[b]),
    "tokens_to_evidence": lambda r, b: r.to_evidence,
    "span_precision": lambda r, k: r.spans[k][0],
    "span_iou": lambda r, k: r.spans[k][1],
    "judged": lambda r, k: r.judged[k],
}


def _judged_figures(
    judged: Judgements | None, matrix: np.ndarray, retrieved: np.ndarray, chunks: ChunkTable, ks: Sequence[int]
) -> dict[int, np.ndarray]:
    """Per k: each case's judged@k (the reference's ``judged_at_k``), NaN for a case
    without a judged set; nothing when no case has one.

    Each (case, judged doc) and each (case, retrieved chunk's doc) becomes one key
    ``case * n_docs + doc``; a sorted search marks the retrieved cells whose key is
    judged, and a running sum along the ranks counts them."""
    if judged is None:
        return {}
    n_cases, width = matrix.shape
    names, codes = np.unique(np.asarray([*judged.doc, *chunks.doc_ids], dtype=str), return_inverse=True)
    n_docs = max(len(names), 1)
    keys = np.unique(judged.case * n_docs + codes[: len(judged.doc)])
    chunk_doc = np.append(codes[len(judged.doc) :], -1)  # chunk -1 (no chunk) has no doc
    cells = np.arange(n_cases)[:, None] * n_docs + chunk_doc[matrix]
    hit = (matrix >= 0) & np.isin(cells, keys)
    counted = np.cumsum(hit, axis=1) if width else np.zeros((n_cases, 0), np.int64)
    figures = {}
    for k in ks:
        shown = np.minimum(retrieved, k)
        judged_top = counted[:, min(k, width) - 1] if width else np.zeros(n_cases)
        share = np.where(shown > 0, judged_top / np.maximum(shown, 1), 0.0)
        figures[k] = np.where(judged.has, share, NONE)
    return figures


def _span_figures(
    table: EvidenceTable, matrix: np.ndarray, chunks: ChunkTable, context: np.ndarray, ks: Sequence[int]
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per k: each case's span precision and span IoU (see the reference's
    ``span_precision_at_k``), NaN without a plain evidence span.

    Evidence spans and top-k chunks become +1/-1 events per (case, doc), sorted by
    position: a running sum of each kind says whether a stretch between two events
    is evidence, sent, or both (every group's events sum to 0, so one running sum
    serves all groups). Only chunks in a (case, doc) with an evidence span can overlap
    one; the events are sorted once for the largest k, and a chunk ranked at k or below
    steps by 0 for a smaller k (it only splits a stretch)."""
    n_cases = matrix.shape[0]
    targets = np.bincount(table.target_unit, minlength=len(table.unit_case))
    plain = (targets[table.target_unit] == 1) & (table.target_start >= 0) & (table.unit_claim[table.target_unit] < 0)
    span_case = table.unit_case[table.target_unit[plain]]
    n_spans = np.bincount(span_case, minlength=n_cases)
    number, chunk_doc = chunks.doc_numbers
    docs = list(map(table.target_doc.__getitem__, np.flatnonzero(plain).tolist()))
    codes = np.fromiter(map(number.get, docs, repeat(-1)), np.int64, len(docs))
    strange = [docs[at] for at in np.flatnonzero(codes < 0).tolist()]  # docs the chunking lacks: numbered after
    unknown = {doc: len(number) + n for n, doc in enumerate(dict.fromkeys(strange))}
    codes[codes < 0] = [unknown[doc] for doc in strange]
    n_docs = len(number) + len(unknown)
    span_group = span_case * n_docs + codes
    case, rank = np.nonzero(matrix[:, : max(ks)] >= 0)
    chunk = matrix[case, rank]
    chunk_group = case * n_docs + chunk_doc[chunk]
    keys = np.unique(span_group)
    near = np.isin(chunk_group, keys) if len(keys) else np.zeros(len(chunk_group), bool)
    rank, chunk, chunk_group = rank[near], chunk[near], chunk_group[near]
    n_e, n_r = len(span_group), len(chunk)
    group = np.concatenate([span_group, chunk_group] * 2)
    position = np.concatenate(
        (table.target_start[plain], chunks.starts[chunk], table.target_end[plain], chunks.ends[chunk])
    )
    is_e = np.concatenate((np.ones(n_e), np.zeros(n_r), np.ones(n_e), np.zeros(n_r)))
    step = np.concatenate((np.ones(n_e + n_r), -np.ones(n_e + n_r)))
    event_rank = np.concatenate((np.zeros(n_e, np.int64), rank, np.zeros(n_e, np.int64), rank))
    order = np.lexsort((position, group))
    group, position, is_e, step, event_rank = group[order], position[order], is_e[order], step[order], event_rank[order]
    in_e = np.cumsum(step * is_e) > 0
    length = np.where(group[1:] == group[:-1], np.diff(position), 0) if len(group) else np.zeros(0)
    owner = group[:-1] // n_docs
    wanted = np.bincount(owner, weights=length * in_e[:-1], minlength=n_cases)
    figures = {}
    for k in ks:
        in_r = np.cumsum(step * (1 - is_e) * (event_rank < k)) > 0
        found = np.bincount(owner, weights=length * (in_e & in_r)[:-1], minlength=n_cases)
        sent = _top_sums(context, k)
        union = wanted + sent - found
        precision = np.where(sent > 0, found / np.maximum(sent, 1), 0.0)
        iou = np.where(union > 0, found / np.maximum(union, 1), 0.0)
        figures[k] = (np.where(n_spans > 0, precision, NONE), np.where(n_spans > 0, iou, NONE))
    return figures


def _budget_figures(
    evidence: Evidence,
    piece_case: np.ndarray,
    matrix: np.ndarray,
    chunks: ChunkTable,
    texts: CountedTexts,
    span_coverage: float,
    budgets: Sequence[int],
) -> tuple[dict[int, np.ndarray], np.ndarray]:
    """Per budget value, per unit: availability; per case: the smallest budget making
    every unit available (NaN when none does, or without units). What a budget
    sends only grows with it, so every case's budget is bisected at once between 0
    and the cost of its whole list."""
    n_cases, width = matrix.shape
    if not budgets:
        return {}, np.full(n_cases, NONE)
    spent = spending(matrix, chunks)
    rows = matrix[piece_case] if len(piece_case) else np.zeros((0, width), matrix.dtype)
    matches = rows == evidence.piece_chunk[:, None]
    piece_rank = np.where(matches.any(axis=1), matches.argmax(axis=1), width) if width else np.full(len(rows), 0)

    def available(budget: np.ndarray) -> np.ndarray:
        return _budget_availability(
            evidence, piece_case, piece_rank, cut(spent, budget, width), chunks, texts, span_coverage
        )

    by_budget = {b: available(np.full(n_cases, b, np.int64)) for b in budgets}
    low, high = np.zeros(n_cases, np.int64), spent.total.astype(np.int64)
    reachable = _all_available(evidence, available(high), n_cases)
    while (reachable & (low < high)).any():
        middle = (low + high) // 2
        enough = _all_available(evidence, available(middle), n_cases)
        low, high = np.where(enough, low, middle + 1), np.where(enough, middle, high)
    return by_budget, np.where(reachable, high, NONE)


@dataclass
class Scores:
    """Every per-case figure, one array per name, rows in the order of the cases."""

    metrics: dict[str, np.ndarray]  # NaN where the reference gives None
    counts: dict[str, np.ndarray]
    first_relevant_rank: np.ndarray  # 0 where there is none
    missed_units: np.ndarray  # evidence unit numbers not available at max(ks)
    top1_score: np.ndarray


def score(
    case_ids: Sequence[str],
    table: EvidenceTable,
    chunks: ChunkTable,
    run: RunTable,
    ks: Sequence[int],
    span_coverage: float,
    texts: Mapping[str, str],
    budgets: Sequence[int] = (),
    judged: Judgements | None = None,
) -> tuple[Scores, Evidence]:
    """Every metric of :data:`ragvet.measures.registry.METRICS` for every case, as arrays.

    ``table`` holds the evidence of ``case_ids``, in that order. Equal to
    :func:`ragvet.measures.reference.case_metrics` case by case (up to float summation
    order in nDCG); ``ks`` must be sorted, unique and positive. ``texts`` holds the
    text of every doc the evidence points into, for span coverage. The budget
    metrics are computed at each of ``budgets`` (sorted, unique; none without), and
    ``judged@k`` from the cases' judged sets ``judged`` (none when no case has one).
    A :class:`ragvet.evidence.CountedTexts` given as ``texts`` keeps what it learnt of
    the docs for the next call: a run scored in batches reads each doc's text once.
    """
    texts = CountedTexts.of(texts)
    evidence = project(table, chunks, texts)
    ranking = rank_matrix(run, case_ids)
    matrix = ranking.matrix
    n_cases, width = matrix.shape
    n_chunks = max(len(chunks), 1)
    top = max(ks)

    relevant = _relevance(matrix, evidence.relevant, n_chunks)

    n_rel = evidence.n_relevant
    answerable = n_rel > 0
    hits_cum = np.cumsum(relevant[:, :top], axis=1) if width else np.zeros((n_cases, 0), np.int64)
    first = np.where(relevant.any(axis=1), relevant.argmax(axis=1) + 1, 0) if width else np.zeros(n_cases, np.int64)
    discounted = relevant[:, :top] * _discounts(min(width, top))
    lengths = np.append(chunks.ends - chunks.starts, 0)  # chunk -1 (no chunk) has length 0
    context = lengths[matrix[:, :top]]

    piece_case = table.unit_case[table.target_unit[evidence.piece_target]]
    top_rows = matrix[piece_case, :top] if len(piece_case) else np.zeros((0, min(width, top)), np.int64)
    matches = top_rows == evidence.piece_chunk[:, None]
    piece_rank = (
        np.where(matches.any(axis=1), matches.argmax(axis=1), top)
        if matches.shape[1]
        else np.full(len(piece_case), top)
    )
    n_all_units = len(table.unit_case)
    claim_of_link = table.unit_claim[evidence.claim_links]

    available = _availability(evidence, piece_rank, ks, n_all_units, span_coverage)
    claims_ok = {}
    for k in ks:
        claim_ok = np.bincount(claim_of_link[available[k][evidence.claim_links]], minlength=len(table.claim_case))
        claims_ok[k] = np.bincount(table.claim_case, weights=(claim_ok > 0).astype(float), minlength=n_cases)
    budget_available, to_evidence = _budget_figures(evidence, piece_case, matrix, chunks, texts, span_coverage, budgets)
    ranked = Ranked(
        answerable,
        n_rel,
        hits_cum,
        width,
        first,
        discounted,
        context,
        evidence,
        available,
        claims_ok,
        budget_available,
        to_evidence,
        _span_figures(table, matrix, chunks, context, ks),
        _judged_figures(judged, matrix, ranking.retrieved, chunks, ks),
    )
    metrics: dict[str, np.ndarray] = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        for metric in METRICS.values():
            for cutoff in metric.cutoffs(ks, budgets, judged is not None):
                metrics[metric.key(cutoff)] = KERNELS[metric.name](ranked, cutoff)
    missed = evidence.evidence_units[~available[top][evidence.evidence_units]]
    counts = {
        "relevant": n_rel,
        "evidence": evidence.n_units,
        "claims": evidence.n_claims,
        "duplicates_removed": ranking.removed,
        "retrieved": ranking.retrieved,
        **{f"claims_available@{k}": claims_ok[k].astype(np.int64) for k in ks},
    }
    return Scores(metrics, counts, first, missed, ranking.top1_score), evidence


def case_columns(scores: Scores, evidence: Evidence, ks: Sequence[int]) -> dict[str, Any]:
    """The engine's arrays as the per-case table's columns (:mod:`ragvet.storage.results`),
    rows in the order of the cases: NaN where the reference gives None, counts as
    integers, ``first_relevant_rank`` NaN where there is none, and each case's missed
    evidence labels as ``missed_evidence`` (each label once, in unit order) given flat:
    ``missed_case`` the case row of each label of ``missed_label``."""
    n_cases = len(scores.top1_score)
    units = scores.missed_units
    cases, labels = evidence.table.case_labels(units)
    return {
        "top1_score": scores.top1_score,
        "first_relevant_rank": np.where(scores.first_relevant_rank > 0, scores.first_relevant_rank, NONE),
        "missed_case": cases,
        "missed_label": labels,
        "missed_evidence_at": np.full(n_cases, max(ks), np.int64),
        **{column("metrics", name): values for name, values in scores.metrics.items()},
        **{column("counts", name): np.asarray(values, np.int64) for name, values in scores.counts.items()},
    }
