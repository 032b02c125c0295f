"""overlap@k, topk_changed@k and RBO_EXT (ragvet.measures.overlap): values computed by hand
on tiny rankings, the worked example of Webber, Moffat and Zobel (2010), and the values of
an independent implementation, the `rbo` package (changyaochen/rbo)."""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

from ragvet.measures.overlap import (
    moved_at,
    movement,
    overlap_at_k,
    overlap_by_depth,
    paired_rankings,
    rbo_ext,
    topk_changed,
)


def matrix(*lists: str, width: int | None = None) -> np.ndarray:
    """One row per list of letters, each letter its chunk number, -1 past the end."""
    width = max(map(len, lists)) if width is None else width
    rows = np.full((len(lists), width), -1, dtype=np.int64)
    for row, letters in enumerate(lists):
        rows[row, : len(letters)] = [ord(letter) - ord("a") for letter in letters]
    return rows


def test_overlap_by_depth_is_the_papers_figure_5():
    # Webber et al. (2010), Figure 5: S = abcdefg, T = zcavwxy; the overlap X_d at each depth
    # is 0, 0, 2, 2, 2, 2, 2, so the agreements average to 0.312 (the figure's AO@7).
    found = overlap_by_depth(matrix("abcdefg"), matrix("zcavwxy"))
    assert found.tolist() == [[0, 0, 2, 2, 2, 2, 2]]
    assert round(float(np.mean(found[0] / np.arange(1, 8))), 3) == 0.312


def test_overlap_at_k_by_hand():
    base, cand = matrix("abc", "abc", ""), matrix("cd", "cba", "")
    assert overlap_at_k(base, cand, 3).tolist() == [1 / 3, 1.0, 0.0]  # {a,b,c} ∩ {c,d}; same set; nothing
    assert overlap_at_k(base, cand, 2).tolist() == [0.0, 0.5, 0.0]  # {a,b} ∩ {c,d}; {a,b} ∩ {c,b}
    assert overlap_at_k(base, cand, 5).tolist() == [1 / 5, 3 / 5, 0.0]  # missing ranks are no overlap
    assert overlap_at_k(base, cand, 0).tolist() == [0.0, 0.0, 0.0]


def test_topk_changed_is_a_change_of_the_set():
    base, cand = matrix("abc", "abc", "ab", "", "a"), matrix("cba", "abd", "abc", "", "")
    assert topk_changed(base, cand, 3).tolist() == [0, 1, 1, 0, 1]  # reordered only; d for c; c added
    assert topk_changed(base, cand, 2).tolist() == [1, 0, 0, 0, 1]  # {a,b} vs {c,b}; the rest agree to 2
    assert topk_changed(base, cand, 1).tolist() == [1, 0, 0, 0, 1]
    assert topk_changed(base, cand, 0).tolist() == [0, 0, 0, 0, 0]


def rbo_by_hand(short: list[int], long: list[int], p: Fraction) -> Fraction:
    """Eq. 32 written out term by term over exact fractions, from the overlaps X_d."""
    s, n = len(short), len(long)
    return (1 - p) / p * (
        sum(Fraction(x, d) * p**d for d, x in enumerate(long, start=1))
        + sum(Fraction(short[-1] * (d - s), s * d) * p**d for d in range(s + 1, n + 1))
    ) + (Fraction(long[-1] - short[-1], n) + Fraction(short[-1], s)) * p**n


def test_rbo_ext_by_hand_even_and_uneven():
    # abcde vs bacde: X = 0, 2, 3, 4, 5; at p = 0.9, 0.59049 + (0.1/0.9)·2.78559 = 0.9 exactly.
    assert rbo_by_hand([0, 2, 3, 4, 5], [0, 2, 3, 4, 5], Fraction(9, 10)) == Fraction(9, 10)
    # abc vs cbadefg: s = 3, l = 7, X = 0, 1, 3 then 3 to depth 7; at p = 1/2 it is 3/8.
    assert rbo_by_hand([0, 1, 3], [0, 1, 3, 3, 3, 3, 3], Fraction(1, 2)) == Fraction(3, 8)
    found = rbo_ext(matrix("abcde", "abc"), matrix("bacde", "cbadefg"), 0.9)
    assert found[0] == pytest.approx(0.9, abs=1e-15)
    assert rbo_ext(matrix("abc"), matrix("cbadefg"), 0.5)[0] == pytest.approx(0.375, abs=1e-15)
    assert rbo_ext(matrix("cbadefg"), matrix("abc"), 0.5)[0] == pytest.approx(0.375, abs=1e-15)  # symmetric


def test_rbo_ext_empty_identical_and_disjoint():
    base, cand = matrix("", "a", "", "abcde", "abcde", "abcde"), matrix("", "", "a", "abcde", "abc", "fghij")
    found = rbo_ext(base, cand, 0.9)
    assert found.tolist()[:3] == [1.0, 0.0, 0.0]  # both empty: nothing moved; one empty: all moved
    assert found[3] == 1.0  # identical lists, at any depth: exactly, so "moved" never means a rounding
    assert found[4] == 1.0  # a prefix: agreement extrapolated from the shorter list
    assert found[5] == 0.0
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        rbo_ext(base, cand, 1.0)


# rbo 0.1.3 (changyaochen/rbo), RankingSimilarity(S, T).rbo_ext(p): the package declares
# numpy<2 and so cannot be pinned beside ragvet's numpy 2; these are its outputs, recorded with
# `pip install --no-deps --target DIR rbo==0.1.3 tqdm` and the lists below.
PEER = [
    ("abcdefg", "zcavwxy", 0.9, 0.28821728571428573),  # the paper's Figure 5
    ("abcde", "bacde", 0.9, 0.9),
    ("abcde", "abced", 0.9, 0.981775),
    ("abcdefghij", "abcde", 0.9, 1.0),
    ("abc", "cbadefg", 0.9, 0.855),
    ("a", "b", 0.9, 0.0),
    ("abcdef", "fedcba", 0.9, 0.679428),
    ("abcdefgh", "xaybzc", 0.9, 0.42993900000000007),
    ("abcdefg", "zcavwxy", 0.5, 0.13675595238095237),
    ("abcdef", "fedcba", 0.5, 0.0875),
    ("abcdefgh", "xaybzc", 0.5, 0.22604166666666667),
]


@pytest.mark.parametrize("p", sorted({p for *_, p, _ in PEER}))
def test_rbo_ext_matches_the_rbo_package(p):
    rows = [(s, t, value) for s, t, at, value in PEER if at == p]
    found = rbo_ext(matrix(*(s for s, _, _ in rows), width=10), matrix(*(t for _, t, _ in rows), width=10), p)
    assert found.tolist() == pytest.approx([value for *_, value in rows], abs=1e-12)


@pytest.mark.parametrize("width", [8, 40])  # pairs compared, and the sorted search past BROADCAST_WIDTH
def test_a_batch_equals_its_rows_one_by_one_and_sets(width):
    # Each row's chunk numbers collide with the other rows': the kernel must keep cases apart.
    rng = random.Random(width)
    lists = [[rng.sample(range(width + 4), rng.randint(0, width)) for _ in range(2)] for _ in range(300)]
    base, cand = np.full((300, width), -1), np.full((300, width), -1)
    for row, (b, c) in enumerate(lists):
        base[row, : len(b)], cand[row, : len(c)] = b, c
    expected = [[len(set(b[:d]) & set(c[:d])) for d in range(1, width + 1)] for b, c in lists]
    assert overlap_by_depth(base, cand).tolist() == expected
    whole = rbo_ext(base, cand, 0.8)
    one_by_one = [rbo_ext(base[row : row + 1], cand[row : row + 1], 0.8)[0] for row in range(300)]
    assert whole.tolist() == one_by_one
    assert ((whole >= 0) & (whole <= 1)).all()
    k = width // 2
    overlap, changed, rbo = movement(base, cand, k, 0.8)
    assert overlap.tolist() == [len(set(b[:k]) & set(c[:k])) / k for b, c in lists]
    assert changed.tolist() == [int(set(b[:k]) != set(c[:k])) for b, c in lists]
    assert rbo.tolist() == rbo_ext(base[:, :k], cand[:, :k], 0.8).tolist()


def test_moved_pairs_two_runs_by_case_and_cuts_them_at_k():
    def run(rows):
        return pl.DataFrame(rows, schema=["case_id", "rank", "chunk_id"], orient="row")

    base = run([("q1", 1, "d#0"), ("q1", 2, "d#1"), ("q1", 3, "d#9"), ("q2", 1, "e#0"), ("q3", 1, "f#0")])
    cand = run([("q1", 2, "d#0"), ("q1", 1, "d#1"), ("q1", 3, "x#0"), ("q2", 1, "e#0"), ("q4", 1, "g#0")])
    case_ids, b, c = paired_rankings(base, cand, 2)
    assert case_ids.to_list() == ["q1", "q2", "q3", "q4"]
    assert b.shape == c.shape == (4, 2)
    found = moved_at(base, cand, [2], 0.9)
    assert found["case_id"].to_list() == case_ids.to_list()
    assert found["overlap@2"].to_list() == [1.0, 0.5, 0.0, 0.0]  # q1's top 2 swapped; q3, q4 on one side only
    assert found["topk_changed@2"].to_list() == [0, 0, 1, 1]
    # q1: ab vs ba at p = 0.9: X = 0, 2, so (0.1/0.9)·(0 + 2/2·0.81) + 1·0.81 = 0.9.
    assert found["rbo@2"].to_list() == pytest.approx([0.9, 1.0, 0.0, 0.0], abs=1e-15)


def test_the_gate_splits_off_exactly_the_registrys_movement_metrics():
    from ragvet.measures.registry import MOVEMENT
    from ragvet.settings import MOVEMENT_METRICS

    assert tuple(MOVEMENT) == MOVEMENT_METRICS
