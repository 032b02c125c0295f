"""The per-case results table: vectorised rounding equal to ``round_floats``, the
Parquet layout, and its one reader (paths, bytes, file objects, clear errors)."""

import io
import math

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragvet.errors import InputError
from ragvet.storage.files import round_floats
from ragvet.storage.results import read_results, result_rows, results_frame, round_array, round_results, write_results


def same_as_round_floats(values: list[float]) -> None:
    rounded = round_array(np.asarray(values, dtype=np.float64)).tolist()
    expected = [round_floats(value) for value in values]
    for value, got, want in zip(values, rounded, expected):
        same_sign = want is not None and math.copysign(1, got) == math.copysign(1, want)  # -0.0 is 0.0
        assert (math.isnan(got) and want is None) or (got == want and same_sign), (value, got, want)


def test_round_array_hand_values():
    values = [1.23456789, -0.0000004, 2.0, math.nan, math.inf, -math.inf, 0.1 + 0.2, 1e300, 123.4567895]
    rounded = round_array(np.asarray(values))
    assert rounded[:3].tolist() == [1.234568, 0.0, 2.0]
    assert math.copysign(1, rounded[1]) == 1  # -0.0 is written as 0.0
    assert np.isnan(rounded[3:6]).all()
    assert rounded[6] == 0.3 and rounded[7] == 1e300
    # 123.4567895 is stored as 123.456789499999...: Python's round gives ...789, not ...790.
    assert rounded[8] == round(123.4567895, 6) == 123.456789


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=50))
def test_round_array_equals_round_floats_on_any_float(values):
    same_as_round_floats(values)


@settings(max_examples=300, deadline=None)
@given(st.integers(-(10**12), 10**12), st.integers(-3, 3), st.integers(0, 8))
def test_round_array_equals_round_floats_next_to_half_steps(n, ulps, places_shift):
    """The hard cases: values within a few ulps of ``(n + 1/2) * 10**-6``, where the
    scaled product's own rounding could cross the half."""
    value = (n + 0.5) / 10**6 * 10.0**-places_shift
    for _ in range(abs(ulps)):
        value = np.nextafter(value, math.inf if ulps > 0 else -math.inf)
    same_as_round_floats([float(value), float(-value)])


def test_round_array_on_a_million_generated_metric_values():
    """Generated like the engine's figures: shares i/j, nDCG-like sums of 1/log2, scores."""
    rng = np.random.default_rng(7)
    shares = rng.integers(0, 50, 300_000) / rng.integers(1, 50, 300_000)
    ndcg = np.cumsum(1 / np.log2(np.arange(2, 300_002)))[::-1] / 1000
    scores = rng.normal(0, 20, 400_000)
    values = np.concatenate([shares, ndcg, scores])
    expected = np.asarray([round_floats(float(v)) for v in values], dtype=np.float64)
    assert np.array_equal(round_array(values), expected)


ROWS = [
    {
        "answerable": True,
        "case_id": "b",
        "counts": {"claims": 2, "retrieved": 20},
        "first_relevant_rank": 3,
        "human_review": {"behaviour": "answered", "cited": 1},
        "metrics": {"context_chars@1": 300, "mrr": 0.333333, "recall@1": None},
        "missed_evidence": ["policy[0:10]", "faq"],
        "missed_evidence_at": 10,
        "split": "eval",
        "tags": {"phrasing": "natural"},
        "top1_score": 2.5,
    },
    {
        "answerable": False,
        "case_id": "a",
        "counts": {"claims": 0, "retrieved": 0},
        "first_relevant_rank": None,
        "human_review": None,
        "metrics": {"context_chars@1": 0, "mrr": None, "recall@1": None},
        "missed_evidence": [],
        "missed_evidence_at": 10,
        "split": "dev",
        "tags": {"doc_type": "policy"},
        "top1_score": None,
    },
]


def test_table_columns_and_round_trip_through_path_bytes_and_file(tmp_path):
    path = tmp_path / "cases" / "cfg.parquet"
    write_results(path, results_frame(ROWS))
    frame = pl.read_parquet(path)
    assert frame.columns == sorted(frame.columns)
    assert frame["case_id"].to_list() == ["a", "b"]  # sorted by case_id
    assert frame["metrics.context_chars@1"].dtype == pl.Int64 and frame["metrics.mrr"].dtype == pl.Float64
    assert frame["tags.doc_type"].to_list() == ["policy", None]
    expected = sorted(ROWS, key=lambda row: row["case_id"])
    data = path.read_bytes()
    for source in (path, str(path), data, io.BytesIO(data)):
        assert result_rows(read_results(source)) == expected
    assert read_results(path, columns=["metrics.mrr", "nope"]).columns == [
        "answerable",
        "case_id",
        "metrics.mrr",
        "split",
    ]
    assert read_results(path, columns=["tags"]).columns == [
        "answerable",
        "case_id",
        "split",
        "tags.doc_type",
        "tags.phrasing",
    ]
    write_results(tmp_path / "again.parquet", results_frame(list(reversed(ROWS))))
    assert (tmp_path / "again.parquet").read_bytes() == data  # same rows, same bytes


def test_round_results_rounds_float_columns_only():
    frame = results_frame([dict(ROWS[0], top1_score=1.23456789, metrics={"mrr": -1e-9, "context_chars@1": 7})])
    rounded = result_rows(round_results(frame))[0]
    assert rounded["top1_score"] == 1.234568
    assert rounded["metrics"] == {"mrr": 0.0, "context_chars@1": 7}


def test_unreadable_tables_are_named_with_a_fix(tmp_path):
    broken = tmp_path / "cfg.parquet"
    broken.write_text('{"case_id": "a"}\n')
    with pytest.raises(InputError) as err:
        read_results(broken)
    [problem] = err.value.problems
    assert problem.where == str(broken) and "not a readable per-case Parquet table" in problem.what
    assert "dvc repro" in problem.fix
    with pytest.raises(InputError) as err:
        read_results(b"PAR1 nonsense", where="HEAD:metrics/cases/cfg.parquet")
    assert err.value.problems[0].where == "HEAD:metrics/cases/cfg.parquet"
    pl.DataFrame({"case_id": ["a"]}).write_parquet(broken)
    with pytest.raises(InputError) as err:
        read_results(broken)
    assert err.value.problems[0].what == "per-case table lacks column(s) split, answerable"
