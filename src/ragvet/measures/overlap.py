"""How much a configuration's ranking moved from its baseline's, per case, with or without labels.

Both rankings of a batch of cases are ``cases x width`` integer matrices of chunk numbers,
best rank first, ``-1`` past a case's last rank (the layout of
:func:`ragvet.measures.engine.rank_matrix`); row ``i`` of both is the same case, and the
two sides number chunks the same way. A row holds each chunk at most once. Every function
here is array in, array out over the whole batch, so a caller holding millions of cases
calls it once per batch and keeps only the per-case results.

The figures, for a baseline list ``B`` and a candidate list ``C`` cut at depth ``k``:

* ``overlap@k = |B:k ∩ C:k| / k`` (the missing ranks of a list shorter than ``k`` count as
  no overlap, as a missing rank counts as non-relevant in trec_eval); 0.0 when ``k <= 0``.
* ``topk_changed@k``: 1 when the *sets* of the top ``k`` chunks differ, else 0 (the order
  within the top ``k`` is RBO's business). Two empty lists have not changed: 0.
* ``rbo``: rank-biased overlap, Webber, Moffat and Zobel (2010), "A similarity measure for
  indefinite rankings", ACM TOIS 28(4), in its extrapolated form for lists of uneven
  length, RBO_EXT (their eq. 32): with ``X_d`` the overlap at depth ``d``, ``s`` and ``l``
  the shorter and longer list's lengths,

      RBO_EXT = (1-p)/p · (Σ_{d=1..l} X_d/d · p^d + Σ_{d=s+1..l} X_s·(d-s)/(s·d) · p^d)
                + ((X_l - X_s)/l + X_s/s) · p^l

  It assumes the agreement seen at the evaluated depth goes on below it, so two identical
  lists score 1.0 at any depth. Empty cases (the paper leaves them undefined): 1.0 when
  both lists are empty (both show nothing), 0.0 when exactly one is. ``0 < p < 1``; the
  first ``d`` ranks carry the weight ``1 - p^(d-1) + (1-p)/p · d · (ln(1/(1-p)) - Σ_{i<d}
  p^i/i)`` (their eq. 21): 86% for the first 10 at ``p = 0.9``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from ragvet.storage.rankings import NUMBERED_COLUMNS, in_rank_order, positions_in_case

MISSING = -1  # a rank past the end of a case's list


def _checked(baseline: np.ndarray, candidate: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two matrices as int64, cut to a common width (padding the narrower with -1)."""
    baseline, candidate = np.asarray(baseline, dtype=np.int64), np.asarray(candidate, dtype=np.int64)
    if baseline.ndim != 2 or candidate.ndim != 2 or baseline.shape[0] != candidate.shape[0]:
        raise ValueError(f"two matrices of one row per case expected, got {baseline.shape} and {candidate.shape}")
    width = max(baseline.shape[1], candidate.shape[1])

    def padded(matrix: np.ndarray) -> np.ndarray:
        extra = width - matrix.shape[1]
        return np.pad(matrix, ((0, 0), (0, extra)), constant_values=MISSING) if extra else matrix

    return padded(baseline), padded(candidate)


BROADCAST_WIDTH = 32  # up to this width, positions are matched by comparing every pair
BLOCK = 1 << 22  # pair comparisons held at once: a few MB, whatever the batch


def _sorted_match(baseline: np.ndarray, candidate: np.ndarray) -> np.ndarray:
    """:func:`_match` by one sorted search of ``(case, chunk)`` keys: ``O(cases · width · log)``."""
    cases, width = baseline.shape
    present = candidate >= 0
    found = np.full((cases, width), MISSING, dtype=np.int64)
    if not present.any():
        return found
    span = int(max(baseline.max(), candidate.max())) + 1
    rows = np.arange(cases, dtype=np.int64)[:, None]
    keys = (rows * span + candidate)[present]
    order = np.argsort(keys, kind="stable")
    sorted_keys, positions = keys[order], np.nonzero(present)[1][order]
    wanted = rows * span + baseline
    at = np.searchsorted(sorted_keys, wanted).clip(max=len(sorted_keys) - 1)
    matched = (baseline >= 0) & (sorted_keys[at] == wanted)
    found[matched] = positions[at[matched]]
    return found


def _paired_match(baseline: np.ndarray, candidate: np.ndarray) -> np.ndarray:
    """:func:`_match` by comparing every pair of positions, :data:`BLOCK` pairs at a time:
    ``O(cases · width²)``, several times faster than sorting for the k users see."""
    cases, width = baseline.shape
    found = np.full((cases, width), MISSING, dtype=np.int64)
    step = max(1, BLOCK // max(width * width, 1))
    for at in range(0, cases, step):
        b, c = baseline[at : at + step], candidate[at : at + step]
        equal = (b[:, :, None] == c[:, None, :]) & (b[:, :, None] >= 0)
        found[at : at + step] = np.where(equal.any(axis=2), equal.argmax(axis=2), MISSING)
    return found


def _match(baseline: np.ndarray, candidate: np.ndarray) -> np.ndarray:
    """For each baseline entry, the candidate position holding the same chunk; -1 for none."""
    narrow = baseline.shape[1] <= BROADCAST_WIDTH
    return (_paired_match if narrow else _sorted_match)(baseline, candidate)


def overlap_by_depth(baseline: np.ndarray, candidate: np.ndarray) -> np.ndarray:
    """``X[i, d-1] = |B_i:d ∩ C_i:d|`` for every case ``i`` and depth ``d`` up to the width.

    A chunk at baseline position ``a`` and candidate position ``b`` joins the overlap at
    depth ``max(a, b) + 1``. Memory is a few copies of the matrices and one block of
    pair comparisons, never ``cases · width²``."""
    baseline, candidate = _checked(baseline, candidate)
    cases, width = baseline.shape
    if cases == 0 or width == 0:
        return np.zeros((cases, width), dtype=np.int64)
    found = _match(baseline, candidate)
    rows = np.arange(cases, dtype=np.int64)[:, None]
    joins = np.maximum(np.arange(width)[None, :], found)
    counts = np.bincount((rows * width + joins)[found >= 0], minlength=cases * width).reshape(cases, width)
    return np.cumsum(counts, axis=1)


def lengths(ranking: np.ndarray) -> np.ndarray:
    """How many chunks each case's list holds."""
    return (np.asarray(ranking) >= 0).sum(axis=1)


def _top(baseline: np.ndarray, candidate: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The overlaps by depth of the two top-``k`` lists, and each list's length."""
    top_b, top_c = _checked(*(np.asarray(m)[:, : max(k, 0)] for m in (baseline, candidate)))
    return overlap_by_depth(top_b, top_c), lengths(top_b), lengths(top_c)


def _common(overlap: np.ndarray) -> np.ndarray:
    """``|B:k ∩ C:k|`` from the overlaps by depth (0 for zero width)."""
    return overlap[:, -1] if overlap.shape[1] else np.zeros(overlap.shape[0], dtype=np.int64)


def _overlap_share(overlap: np.ndarray, k: int) -> np.ndarray:
    return _common(overlap) / k if k > 0 else np.zeros(overlap.shape[0])


def _changed(overlap: np.ndarray, len_b: np.ndarray, len_c: np.ndarray) -> np.ndarray:
    common = _common(overlap)
    return (~((len_b == common) & (len_c == common))).astype(np.int8)


def movement(
    baseline: np.ndarray, candidate: np.ndarray, k: int, p: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(overlap@k, topk_changed@k, rbo@k)`` per case from one overlap computation, RBO
    being that of the two top-``k`` lists (1.0 for every case when ``k <= 0``: both empty)."""
    _check_p(p)
    overlap, len_b, len_c = _top(baseline, candidate, k)
    return _overlap_share(overlap, k), _changed(overlap, len_b, len_c), _rbo(overlap, len_b, len_c, p)


def overlap_at_k(baseline: np.ndarray, candidate: np.ndarray, k: int) -> np.ndarray:
    """``|B:k ∩ C:k| / k`` per case (float64); 0.0 when ``k <= 0``."""
    return _overlap_share(_top(baseline, candidate, k)[0], k)


def topk_changed(baseline: np.ndarray, candidate: np.ndarray, k: int) -> np.ndarray:
    """1 where the set of the top ``k`` chunks differs between the two sides, else 0 (int8)."""
    return _changed(*_top(baseline, candidate, k))


def _check_p(p: float) -> None:
    if not 0.0 < p < 1.0:
        raise ValueError(f"RBO's persistence p must be strictly between 0 and 1, got {p!r}")


def rbo_ext(baseline: np.ndarray, candidate: np.ndarray, p: float) -> np.ndarray:
    """RBO_EXT (Webber et al. 2010, eq. 32) of each case's two lists, as deep as the
    matrices go (:func:`movement` cuts them at ``k``): float64 in [0, 1]; 1.0 for two
    empty lists, 0.0 for one empty list."""
    _check_p(p)
    baseline, candidate = _checked(baseline, candidate)
    return _rbo(overlap_by_depth(baseline, candidate), lengths(baseline), lengths(candidate), p)


def _powers(p: float, width: int) -> np.ndarray:
    """``p^0 .. p^width`` by repeated multiplication: IEEE products, the same bits on every
    machine, where ``pow`` comes from the platform's maths library."""
    powers = np.ones(width + 1)
    for d in range(1, width + 1):
        powers[d] = powers[d - 1] * p
    return powers


def _rbo(overlap: np.ndarray, len_b: np.ndarray, len_c: np.ndarray, p: float) -> np.ndarray:
    """Eq. 32 from the overlaps by depth and the two lists' lengths. The sums over depth
    run one column at a time, in depth order: elementwise IEEE operations only, so no
    reduction order, SIMD width or thread count can change a bit. Where the shorter list
    is a prefix of the other (identical lists included) the value is exactly 1.0, as the
    formula gives it, rather than a sum rounded a bit below it."""
    overlap = overlap.astype(np.float64)
    width = overlap.shape[1]
    short, long = np.minimum(len_b, len_c), np.maximum(len_b, len_c)
    result = np.where(long == 0, 1.0, 0.0)
    scored = short > 0
    if not scored.any():
        return result
    overlap, short, long = overlap[scored], short[scored], long[scored]
    powers = _powers(p, width)
    row = np.arange(len(short))
    x_short, x_long = overlap[row, short - 1], overlap[row, long - 1]
    total = np.zeros(len(short))
    for d in range(1, width + 1):
        within, beyond_short = d <= long, (d <= long) & (d > short)
        total += np.where(within, overlap[:, d - 1] / d * powers[d], 0.0)
        total += np.where(beyond_short, x_short * (d - short) / (short * d) * powers[d], 0.0)
    tail = ((x_long - x_short) / long + x_short / short) * powers[long]
    depth = np.arange(1, width + 1)[None, :]
    prefix = np.all((overlap == depth) | (depth > short[:, None]), axis=1)
    result[scored] = np.where(prefix, 1.0, np.clip((1.0 - p) / p * total + tail, 0.0, 1.0))
    return result


def paired_rankings(
    baseline: pl.DataFrame, candidate: pl.DataFrame, depth: int
) -> tuple[pl.Series, np.ndarray, np.ndarray]:
    """Two rankings' first ``depth`` ranks (frames of ``case_id, rank, chunk_id``, as a
    retrieve stage writes them, holding whole cases: a batch of cases, or all of them) as
    the matrices the functions above take: one row per case of either side, sorted by case
    id (a case one side lacks has an empty row there), chunk ids numbered in their sorted
    order over both sides. The numbers only need to agree within a case, so each batch of
    cases may number its chunks afresh."""
    sides = [
        frame.select(pl.col("case_id").cast(pl.String), "rank", pl.col("chunk_id").cast(pl.String))
        for frame in (baseline, candidate)
    ]
    case_ids = pl.concat([side["case_id"] for side in sides]).unique().sort()
    chunk_ids = pl.concat([side["chunk_id"] for side in sides]).unique().sort()
    case_rows = pl.DataFrame({"case_id": case_ids, "case": np.arange(len(case_ids), dtype=np.int64)})
    chunk_numbers = pl.DataFrame({"chunk_id": chunk_ids, "chunk": np.arange(len(chunk_ids), dtype=np.int64)})
    numbered = [side.join(case_rows, on="case_id").join(chunk_numbers, on="chunk_id") for side in sides]
    _, matrices = numbered_rankings(*numbered, depth)  # every case is on a side: the rows are case_ids'
    return case_ids, matrices[0], matrices[1]


def _in_rank_order(frame: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """A numbered ranking's case and chunk numbers in ``(case, rank, chunk)`` order (the
    order :func:`paired_rankings` sorts ids in, as the numbers follow the sorted ids);
    sorted only when the rows are not already so, as the retrieve stage writes them."""
    case, rank, chunk = (frame[name].to_numpy() for name in NUMBERED_COLUMNS)
    if not in_rank_order(case, rank, chunk):
        order = np.lexsort((chunk, rank, case))
        case, chunk = case[order], chunk[order]
    return case, chunk


def numbered_rankings(
    baseline: pl.DataFrame, candidate: pl.DataFrame, depth: int
) -> tuple[np.ndarray, list[np.ndarray]]:
    """:func:`paired_rankings` of two rankings numbered alike (frames of ``case, rank,
    chunk``: :func:`ragvet.storage.rankings.numbering`), their own numbers used as they
    are: the case numbers of either side, ascending, and the two matrices."""
    sides = [_in_rank_order(frame) for frame in (baseline, candidate)]
    cases = np.union1d(*(np.unique(case) for case, _ in sides))
    matrices = []
    for case, chunk in sides:
        position = positions_in_case(case)
        kept = position < depth
        matrix = np.full((len(cases), max(depth, 0)), MISSING, dtype=np.int64)
        matrix[np.searchsorted(cases, case[kept]), position[kept]] = chunk[kept]
        matrices.append(matrix)
    return cases, matrices


def moved_at(baseline: pl.DataFrame, candidate: pl.DataFrame, ks: Sequence[int], p: float) -> pl.DataFrame:
    """Per case of either ranking (whole cases, as :func:`paired_rankings` takes them),
    sorted by case id: ``case_id``, then for each ``k`` of ``ks`` ``overlap@k``,
    ``topk_changed@k`` and ``rbo@k`` (RBO_EXT of the two top-``k`` lists, persistence
    ``p``); paired once, at the deepest k."""
    return figures_at(*paired_rankings(baseline, candidate, max(ks, default=0)), ks, p)


MOVED = ("overlap", "topk_changed", "rbo")  # the figures of each k, in their columns' order


def figures_at(case_ids: pl.Series, base: np.ndarray, cand: np.ndarray, ks: Sequence[int], p: float) -> pl.DataFrame:
    """:func:`moved_at` of two paired matrices, as deep as the largest of ``ks``, whose rows
    ``case_ids`` name."""
    columns: dict[str, object] = {"case_id": case_ids}
    for k in ks:
        columns |= dict(zip((f"{name}@{k}" for name in MOVED), movement(base, cand, k, p)))
    return pl.DataFrame(columns, schema_overrides={"case_id": pl.String})
