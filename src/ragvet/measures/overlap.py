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

import numpy as np
import polars as pl

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


def overlap_by_depth(baseline: np.ndarray, candidate: np.ndarray) -> np.ndarray:
    """``X[i, d-1] = |B_i:d ∩ C_i:d|`` for every case ``i`` and depth ``d`` up to the width.

    A chunk at baseline position ``a`` and candidate position ``b`` joins the overlap at
    depth ``max(a, b) + 1``; the positions are matched by one sorted search of
    ``(case, chunk)`` keys, so the cost is ``O(cases · width · log)`` and the memory a few
    copies of the matrices, never ``cases · width²``."""
    baseline, candidate = _checked(baseline, candidate)
    cases, width = baseline.shape
    if cases == 0 or width == 0:
        return np.zeros((cases, width), dtype=np.int64)
    present = candidate >= 0
    if not present.any():
        return np.zeros((cases, width), dtype=np.int64)
    span = int(max(baseline.max(), candidate.max())) + 1
    rows = np.arange(cases, dtype=np.int64)[:, None]
    keys = (rows * span + candidate)[present]
    order = np.argsort(keys, kind="stable")
    sorted_keys, positions = keys[order], np.nonzero(present)[1][order]
    wanted = rows * span + baseline
    found_at = np.searchsorted(sorted_keys, wanted).clip(max=len(sorted_keys) - 1)
    matched = (baseline >= 0) & (sorted_keys[found_at] == wanted)
    joins = np.maximum(np.arange(width)[None, :], positions[found_at])
    flat = (rows * width + joins)[matched]
    counts = np.bincount(flat, minlength=cases * width).reshape(cases, width)
    return np.cumsum(counts, axis=1)


def lengths(ranking: np.ndarray) -> np.ndarray:
    """How many chunks each case's list holds."""
    return (np.asarray(ranking) >= 0).sum(axis=1)


def overlap_at_k(baseline: np.ndarray, candidate: np.ndarray, k: int) -> np.ndarray:
    """``|B:k ∩ C:k| / k`` per case (float64); 0.0 when ``k <= 0``."""
    cases = np.asarray(baseline).shape[0]
    if k <= 0:
        return np.zeros(cases)
    overlap = overlap_by_depth(*(np.asarray(m)[:, :k] for m in (baseline, candidate)))
    return (overlap[:, -1] if overlap.shape[1] else np.zeros(cases)) / k


def topk_changed(baseline: np.ndarray, candidate: np.ndarray, k: int) -> np.ndarray:
    """1 where the set of the top ``k`` chunks differs between the two sides, else 0 (int8)."""
    cases = np.asarray(baseline).shape[0]
    if k <= 0:
        return np.zeros(cases, dtype=np.int8)
    top_b, top_c = (np.asarray(m)[:, :k] for m in (baseline, candidate))
    overlap = overlap_by_depth(top_b, top_c)
    common = overlap[:, -1] if overlap.shape[1] else np.zeros(cases, dtype=np.int64)
    same = (lengths(top_b) == common) & (lengths(top_c) == common)
    return (~same).astype(np.int8)


def rbo_ext(baseline: np.ndarray, candidate: np.ndarray, p: float) -> np.ndarray:
    """RBO_EXT (Webber et al. 2010, eq. 32) of each case's two lists, as deep as the
    matrices go (cut them at ``k`` first for RBO@k): float64 in [0, 1]; 1.0 for two
    empty lists, 0.0 for one empty list."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"RBO's persistence p must be strictly between 0 and 1, got {p!r}")
    overlap = overlap_by_depth(baseline, candidate).astype(np.float64)
    cases, width = overlap.shape
    len_b, len_c = lengths(baseline), lengths(candidate)
    short, long = np.minimum(len_b, len_c), np.maximum(len_b, len_c)
    result = np.where(long == 0, 1.0, 0.0)
    scored = short > 0
    if not scored.any():
        return result
    overlap, short, long = overlap[scored], short[scored], long[scored]
    depth = np.arange(1, width + 1, dtype=np.float64)[None, :]
    weight = np.power(p, depth)
    row = np.arange(len(short))
    x_short, x_long = overlap[row, short - 1], overlap[row, long - 1]
    within = depth <= long[:, None]
    agreement = np.where(within, overlap / depth * weight, 0.0).sum(axis=1)
    beyond_short = within & (depth > short[:, None])
    carried = (x_short[:, None] * (depth - short[:, None]) / (short[:, None] * depth)) * weight
    carried = np.where(beyond_short, carried, 0.0).sum(axis=1)
    tail = ((x_long - x_short) / long + x_short / short) * np.power(p, long.astype(np.float64))
    result[scored] = np.clip((1.0 - p) / p * (agreement + carried) + tail, 0.0, 1.0)
    return result


def paired_rankings(
    baseline: pl.DataFrame, candidate: pl.DataFrame, depth: int
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Two runs' first ``depth`` ranks (frames of ``case_id, rank, chunk_id``, as a retrieve
    stage writes them) as the matrices the functions above take: one row per case of
    either side, sorted by case id (a case one side lacks has an empty row there), chunk
    ids numbered in their sorted order over both sides."""
    sides = [
        frame.select(pl.col("case_id").cast(pl.String), "rank", pl.col("chunk_id").cast(pl.String))
        for frame in (baseline, candidate)
    ]
    case_ids = pl.concat([side["case_id"] for side in sides]).unique().sort()
    chunk_ids = pl.concat([side["chunk_id"] for side in sides]).unique().sort()
    case_rows = pl.DataFrame({"case_id": case_ids, "row": np.arange(len(case_ids), dtype=np.int64)})
    chunk_numbers = pl.DataFrame({"chunk_id": chunk_ids, "number": np.arange(len(chunk_ids), dtype=np.int64)})
    matrices = []
    for side in sides:
        placed = (
            side.sort(["case_id", "rank", "chunk_id"])
            .with_columns(position=pl.int_range(pl.len()).over("case_id"))
            .filter(pl.col("position") < depth)
            .join(case_rows, on="case_id")
            .join(chunk_numbers, on="chunk_id")
        )
        matrix = np.full((len(case_ids), max(depth, 0)), MISSING, dtype=np.int64)
        matrix[placed["row"].to_numpy(), placed["position"].to_numpy()] = placed["number"].to_numpy()
        matrices.append(matrix)
    return case_ids.to_list(), matrices[0], matrices[1]


def moved(baseline: pl.DataFrame, candidate: pl.DataFrame, k: int, p: float) -> pl.DataFrame:
    """Per case of either run: ``overlap@k``, ``topk_changed@k`` and ``rbo@k`` (RBO_EXT of
    the two top-``k`` lists, persistence ``p``), sorted by case id."""
    case_ids, base, cand = paired_rankings(baseline, candidate, k)
    return pl.DataFrame(
        {
            "case_id": case_ids,
            f"overlap@{k}": overlap_at_k(base, cand, k),
            f"topk_changed@{k}": topk_changed(base, cand, k),
            f"rbo@{k}": rbo_ext(base, cand, p),
        },
        schema_overrides={"case_id": pl.String},
    )
