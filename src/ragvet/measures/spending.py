"""The context budget over a whole run at once: what each case's budget sends.

The reference (``ragvet.measures.reference``, "At a context budget") walks one
case's ranking chunk by chunk. Here every case is cut at once:

* each case's retrieved chunks of one doc split that doc into *segments* at their
  boundaries, and each segment is paid for by the best-ranked chunk covering it
  (so characters already sent cost nothing, whatever the chunks' nesting);
* a segment costs its characters, or the paying chunk's token starts inside it;
* a cumulative sum of costs in (rank, position) order finds, per case, the segment
  where the budget runs out: its chunk is the *crossing* chunk, sent up to the
  unit start the budget cannot pay for; better-ranked chunks are sent whole.

The structure (:class:`Spending`) does not depend on the budget, so
``tokens_to_evidence`` bisects every case's budget at once on one structure.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ragvet.storage.columns import ChunkTable


@dataclass
class Spending:
    """Every case's paid segments in (case, rank, position) order, with their costs."""

    case: np.ndarray
    rank: np.ndarray
    start: np.ndarray  # the segment's first character, doc coordinates
    cost: np.ndarray
    first_unit: np.ndarray  # tokens: the segment's first token start in ``ChunkTable.token_positions``
    spent_before: np.ndarray  # what the case paid before this segment
    total: np.ndarray  # per case: the cost of the whole retrieved list
    tokens: np.ndarray | None  # every chunk's absolute token starts, by chunk (None: characters)


def _segments(matrix: np.ndarray, chunks: ChunkTable, doc_code: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per (retrieved chunk, segment it covers) pair where it pays: case, rank, chunk,
    segment start and end."""
    case, rank = np.nonzero(matrix >= 0)
    chunk = matrix[case, rank].astype(np.int64)
    starts, ends = chunks.starts[chunk], chunks.ends[chunk]
    scale = int(chunks.ends.max(initial=0)) + 1
    group = np.unique(case * (int(doc_code.max(initial=0)) + 1) + doc_code[chunk], return_inverse=True)[1]
    bounds = np.unique(np.concatenate((group * scale + starts, group * scale + ends)))
    lo = np.searchsorted(bounds, group * scale + starts)
    count = np.searchsorted(bounds, group * scale + ends) - lo
    pair = np.repeat(np.arange(len(chunk)), count)
    segment = np.repeat(lo, count) + np.arange(len(pair)) - np.repeat(np.cumsum(count) - count, count)
    payer = np.full(len(bounds), matrix.shape[1])
    np.minimum.at(payer, segment, rank[pair])
    paid = rank[pair] == payer[segment]
    pair, segment = pair[paid], segment[paid]
    offset = group[pair] * scale
    return case[pair], rank[pair], chunk[pair], bounds[segment] - offset, bounds[segment + 1] - offset


def spending(matrix: np.ndarray, chunks: ChunkTable) -> Spending:
    """The budget-independent structure of every case's ranking (rows of ``matrix``)."""
    doc_code = np.unique(np.asarray(chunks.doc_ids, dtype=object).astype(str), return_inverse=True)[1]
    case, rank, chunk, lo, hi = _segments(matrix, chunks, doc_code)
    tokens = None
    first_unit = np.zeros(len(case), np.int64)
    if chunks.token_bounds is None:
        cost = hi - lo
    else:
        scale = int(chunks.ends.max(initial=0)) + 1
        owner = np.repeat(np.arange(len(chunks)), np.diff(chunks.token_bounds))
        tokens = chunks.starts[owner] + chunks.token_offsets
        keys = owner * scale + tokens
        first_unit = np.searchsorted(keys, chunk * scale + lo)
        cost = np.searchsorted(keys, chunk * scale + hi) - first_unit
    order = np.lexsort((lo, rank, case))
    case, rank, lo, cost, first_unit = case[order], rank[order], lo[order], cost[order], first_unit[order]
    running = np.cumsum(cost)
    case_start = np.searchsorted(case, np.arange(matrix.shape[0] + 1))
    paid_before = np.concatenate(([0], running))[case_start]
    spent_before = running - cost - paid_before[case]
    return Spending(case, rank, lo, cost, first_unit, spent_before, np.diff(paid_before), tokens)


def cut(spent: Spending, budget: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Per case: the rank of its crossing chunk (``width`` when the budget pays for the
    whole list) and the end of that chunk's sent prefix, in doc coordinates."""
    n_cases = len(budget)
    crossing_rank, prefix_end = np.full(n_cases, width), np.zeros(n_cases, np.int64)
    over = np.flatnonzero(spent.spent_before + spent.cost > budget[spent.case])
    if not len(over):
        return crossing_rank, prefix_end
    first = over[np.unique(spent.case[over], return_index=True)[1]]
    case = spent.case[first]
    need = budget[case] - spent.spent_before[first]
    crossing_rank[case] = spent.rank[first]
    if spent.tokens is None:
        prefix_end[case] = spent.start[first] + need
    else:
        prefix_end[case] = spent.tokens[spent.first_unit[first] + need]
    return crossing_rank, prefix_end
