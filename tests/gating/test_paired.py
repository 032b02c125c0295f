"""A paired sample held by its moved cases: the same from one table or many batches,
and the same figures as the dense deltas it stands for."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from ragvet.gating import paired as paired_module
from ragvet.gating.bootstrap import bootstrap_cis, moved_cis
from ragvet.gating.paired import PairedBuilder, PairedSample, moved_union
from ragvet.gating.significance import moved_ps, permutation_ps


def test_a_sample_keeps_the_paired_counts_sums_and_only_the_moved_cases():
    ids = ["a", "b", "c", "d", "e"]
    base = np.array([0.5, 1.0, np.nan, 0.25, 0.3])
    cur = np.array([0.5, 0.0, 1.0, 0.75, 0.3000001])  # c unpaired (NaN); e moves by 1e-7, a tie at 6 places
    sample = PairedBuilder().add(ids, base, cur).sample()
    assert sample.n == 4
    assert sample.means() == (math.fsum([0.5, 1.0, 0.25, 0.3]) / 4, math.fsum([0.5, 0.0, 0.75, 0.3000001]) / 4)
    assert (sample.rises, sample.falls) == (1, 1)  # d rose, b fell; a and e tie
    assert sample.positions.tolist() == [1, 2, 3]  # b, d, e among the paired a, b, d, e
    assert sample.ids.to_list() == ["b", "d", "e"]
    assert sample.deltas.tolist() == [-1.0, 0.5, 0.3000001 - 0.3]
    assert sample.digest[0] == 4


def test_means_are_exact_sums_over_n():
    """Ten 0.1s add up to 0.9999999999999999 left to right; their exact sum rounds to 1.0."""
    sample = PairedBuilder().add([str(i) for i in range(10)], np.full(10, 0.1), np.full(10, 0.2)).sample()
    assert sample.means() == (0.1, 0.2)


def test_no_paired_case_is_an_empty_sample():
    sample = PairedBuilder().add(["a"], np.array([np.nan]), np.array([1.0])).sample()
    assert (sample.n, sample.means(), len(sample.positions), len(sample.ids)) == (0, (None, None), 0, 0)
    positions, ids, rows = moved_union([sample])
    assert moved_cis(0, positions, ids, rows, 100, 1, 0.95) == [(None, None)]
    assert moved_ps(0, positions, rows, 100, 1) == [None]


def fields(sample: PairedSample) -> tuple:
    """Everything a sample holds, comparable with ==."""
    arrays = (sample.positions.tolist(), sample.ids.to_list(), sample.deltas.tolist())
    return (sample.n, sample.base_total, sample.cur_total, sample.rises, sample.falls, sample.digest, *arrays)


@pytest.mark.parametrize("n", [600, 3_000])  # the classic bootstrap, then the Poisson one
def test_many_tiny_batches_give_the_sample_one_table_gives(n, monkeypatch):
    rng = np.random.default_rng(5)
    ids = pl.Series("case_id", [f"q{i:05d}" for i in range(n)])
    base = rng.integers(0, 4, (n, 2)) / 4
    cur = np.where(rng.random((n, 2)) < 0.2, rng.integers(0, 4, (n, 2)) / 4, base)
    base[::97, 0] = np.nan  # unpaired on metric 0 only: its cases differ from metric 1's
    whole = [PairedBuilder().add(ids, base[:, j], cur[:, j]).sample() for j in range(2)]
    monkeypatch.setattr(paired_module, "ROW_GROUP_ROWS", 5)  # a long batch goes in 5 rows at a time
    for j, one in enumerate(whole):
        builder = PairedBuilder()
        for start in range(0, n, 7):
            builder.add(ids.slice(start, 7), base[start : start + 7, j], cur[start : start + 7, j])
        for batched in (builder.sample(), PairedBuilder().add(ids, base[:, j], cur[:, j]).sample()):
            assert fields(batched) == fields(one)
        # the moved rows gathered batch by batch are those the dense deltas give: the same figures
        paired = np.isfinite(base[:, j])
        dense = (cur[paired, j] - base[paired, j])[:, None]
        positions, moved_ids, rows = moved_union([batched])
        assert moved_cis(one.n, positions, moved_ids, rows, 300, 3, 0.9) == bootstrap_cis(
            dense, 300, 3, 0.9, ids.filter(pl.Series(paired))
        )
        assert moved_ps(one.n, positions, rows, 500, 4) == permutation_ps(dense, 500, 4)
    assert whole[0].digest != whole[1].digest and whole[0].n == n - len(range(0, n, 97))


def test_samples_over_the_same_cases_stack_their_moved_rows():
    ids = ["a", "b", "c", "d"]
    base = np.array([0.0, 0.5, 1.0, 0.5])
    first = PairedBuilder().add(ids, base, np.array([0.0, 1.0, 1.0, 0.5])).sample()  # b moved
    second = PairedBuilder().add(ids, base, np.array([0.0, 0.5, 0.0, 0.0])).sample()  # c and d moved
    positions, moved_ids, rows = moved_union([first, second])
    assert positions.tolist() == [1, 2, 3] and moved_ids.to_list() == ["b", "c", "d"]
    assert rows.tolist() == [[0.5, 0.0], [0.0, -1.0], [0.0, -0.5]]
    assert first.digest == second.digest
