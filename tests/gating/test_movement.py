"""What a change moved (ragvet.gating.movement): the summary of hand-made per-case figures,
and a run against the ranking a baseline kept, read from files as the verdict stage reads them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
import yaml
from builders import gate_of

from ragvet.errors import InputError
from ragvet.gating import movement
from ragvet.gating.baselines import baseline_ranking_path, ranking_of, write_ranking
from ragvet.gating.compare import render_verdict
from ragvet.gating.movement import (
    MovementTally,
    distribution,
    empty_table,
    guard_movement,
    measure_movement,
    moved_by_config,
    movement_entry,
    ranked_sides,
    rankings_kept_by_ids,
    table_rows,
)
from ragvet.inputs.params import validate_params
from ragvet.measures.overlap import moved_at
from ragvet.reporting.verdict import verdict_section
from ragvet.settings import MOST_MOVED
from ragvet.storage import rankings, results
from ragvet.storage.atomic import write_parquet
from ragvet.storage.tables import RUN_METADATA


def test_distribution_by_hand_and_empty():
    # Linear interpolation over 0, 0.5, 1, 1: the 10th percentile is 0.3 · 0.5, the median (0.5 + 1) / 2.
    assert distribution(np.array([1.0, 0.0, 1.0, 0.5])) == pytest.approx(
        {"mean": 0.625, "p10": 0.15, "p50": 0.75, "p90": 1.0}
    )
    assert distribution(np.array([])) == {"mean": None, "p10": None, "p50": None, "p90": None}


def moves() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "case_id": ["a", "b", "c", "d"],
            "overlap@2": [1.0, 0.5, 0.0, 1.0],
            "topk_changed@2": [0, 1, 1, 0],
            "rbo@2": [1.0, 0.5, 0.0, 0.9],
        }
    )


def test_summary_over_all_cases_per_slice_and_the_most_moved():
    tags = pl.DataFrame({"case_id": ["a", "b", "c", "d"], "tags.region": ["eu", "eu", "us", None]})
    tally = MovementTally(2, ["region"], 2)
    tally.add(moves(), tags)
    summary = tally.summary(0.9)
    assert summary["cases"] == 4 and summary["topk_changed"] == 0.5
    assert summary["rbo"]["mean"] == pytest.approx(0.6)
    assert summary["slices"] == {
        "region": {
            "eu": {
                "cases": 2,
                "topk_changed": 0.5,
                "overlap": pytest.approx({"mean": 0.75, "p10": 0.55, "p50": 0.75, "p90": 0.95}),
                "rbo": pytest.approx({"mean": 0.75, "p10": 0.55, "p50": 0.75, "p90": 0.95}),
            },
            "us": {
                "cases": 1,
                "topk_changed": 1.0,
                "overlap": {"mean": 0.0, "p10": 0.0, "p50": 0.0, "p90": 0.0},
                "rbo": {"mean": 0.0, "p10": 0.0, "p50": 0.0, "p90": 0.0},
            },
        }
    }
    # Lowest RBO first; d (reordered, RBO 0.9) would come third; a did not move at all.
    assert summary["most_moved"] == [
        {"case_id": "c", "overlap": 0.0, "rbo": 0.0},
        {"case_id": "b", "overlap": 0.5, "rbo": 0.5},
    ]
    in_batches = MovementTally(2, ["region"], 2)  # c's tags in the batch before its figures: a left join per batch
    in_batches.add(moves().slice(0, 1), tags.slice(0, 3))
    in_batches.add(moves().slice(1), tags.slice(1))
    assert in_batches.summary(0.9) == summary


def ranking(rows, path):
    pl.DataFrame(rows, schema=["case_id", "rank", "chunk_id"], orient="row").write_parquet(path)


def two_rankings(tmp_path: Path) -> tuple[Path, Path]:
    """A baseline that kept x's ranking (y's none), and x's run: q1 reordered, q2 replaced."""
    runs, baseline = tmp_path / "runs", tmp_path / "baseline"
    for folder in (runs, baseline_ranking_path(baseline, "x").parent):
        folder.mkdir(parents=True)
    ranking([("q1", 1, "a"), ("q1", 2, "b"), ("q2", 1, "c")], baseline_ranking_path(baseline, "x"))
    for config in ("x", "y"):
        ranking([("q1", 1, "b"), ("q1", 2, "a"), ("q2", 1, "d")], runs / f"{config}.parquet")
    return runs, baseline


def test_a_run_against_the_baselines_ranking(tmp_path: Path):
    runs, baseline = two_rankings(tmp_path)
    cases = tmp_path / "cases"
    cases.mkdir()
    rows = [
        {"case_id": case, "split": "eval", "answerable": True, "tags": {"t": value}, "metrics": {"hit@1": 1.0}}
        for case, value in (("q1", "one"), ("q2", "two"))
    ]
    results.write_results(cases / "x.parquet", results.results_frame(rows))
    rows: list[pl.DataFrame] = []
    sides = lambda config: ranked_sides(config, baseline, None, runs)  # noqa: E731
    found = moved_by_config(measure_movement(["x", "y"], sides, [], 2, 0.9, cases, ["t", "absent"], rows.append))
    assert found["y"] == {
        "unavailable": f"the baseline keeps no ranking ({baseline_ranking_path(baseline, 'y').as_posix()}): "
        "accept it again with `ragvet baseline accept`"
    }
    # q1: ab vs ba at p = 0.9: X = 0, 2, so (0.1/0.9)·(0 + 2/2·0.81) + 1·0.81 = 0.9; q2: c vs d, 0.
    assert found["x"]["topk_changed"] == 0.5
    assert found["x"]["most_moved"] == [
        {"case_id": "q2", "overlap": 0.0, "rbo": 0.0},
        {"case_id": "q1", "overlap": 1.0, "rbo": pytest.approx(0.9, abs=1e-15)},
    ]
    assert found["x"]["slices"]["t"]["one"]["rbo"]["mean"] == pytest.approx(0.9, abs=1e-15)
    assert list(found["x"]["slices"]) == ["t"]  # a slice key no case carries has no entry
    table = pl.concat(rows)  # what the verdict stage writes for programs: y measured nothing
    assert table.rows() == [("x", "q1", 1.0, 0, 0.9), ("x", "q2", 0.0, 1, 0.0)]
    assert table.columns == ["config", "case_id", "overlap@2", "topk_changed@2", "rbo@2"]
    assert empty_table(2).schema == table.schema


def test_a_guarded_share_fails_above_max_drop_and_exactly_it_passes():
    moves = (4, 1)  # four cases, one whose top 2 changed
    entry = movement_entry("topk_changed@2", moves, 0.25)
    assert entry["baseline"] == 0.0 and entry["current"] == 0.25 and entry["cases"] == 4
    assert (entry["losses"], entry["ties"], entry["failed"]) == (1, 3, False)  # exactly the limit passes
    assert movement_entry("topk_changed@2", moves, 0.2)["failed"]
    unmeasured = movement_entry("topk_changed@2", "no ranking", 0.5)
    assert unmeasured["failed"] and unmeasured["current"] is None and unmeasured["unmeasured"] == "no ranking"


def test_the_gate_guards_movement_beside_the_paired_metrics(tmp_path: Path, monkeypatch):
    gate = gate_of({"configs": ["x", "y"], "metrics": ["recall@5", "topk_changed@2"], "max_drop": 0.4})
    assert gate.metrics == ("recall@5",) and gate.movement == ("topk_changed@2",)
    runs, baseline = two_rankings(tmp_path)
    paired = {"metric": "recall@5", "baseline": 0.5, "current": 0.5, "delta": 0.0, "ci_low": 0.0, "ci_high": 0.0}
    paired |= {"p_corrected": 1.0, "cases": 2, "failed": False}
    shape = {"reasons": [], "slices": [], "skipped": [], "newly_missed": [], "max_drop": 0.4, "slice_max_drop": 0.1}
    verdict = {
        "passed": True,
        "configs": [{"config": c, "passed": True, "metrics": [paired], **shape} for c in ("x", "y")],
    }
    measured = measure_movement(
        ["x", "y"], lambda config: ranked_sides(config, baseline, None, runs), [2], None, 0.9, tmp_path, []
    )
    decided = guard_movement(verdict, gate, measured, {})
    x, y = decided["configs"]
    # x: q1 only reordered (same set), q2 replaced: half the cases changed, beyond 0.4.
    assert x["metrics"][0] == paired and x["metrics"][1]["current"] == 0.5 and not x["passed"]
    assert y["metrics"][1]["unmeasured"].startswith("the baseline keeps no ranking") and not decided["passed"]
    terminal = render_verdict(decided)
    assert "FAIL x topk_changed@2: 0.000 -> 0.500 (delta +0.500" in terminal
    assert "FAIL y topk_changed@2: not measured: the baseline keeps no ranking" in terminal
    assert any(
        "`topk_changed@2` not measured: the baseline keeps no ranking" in line
        for line in verdict_section(decided, None)
    )
    assert guard_movement(verdict, gate_of({"configs": ["x"]}), {}, {}) is verdict
    # Under another chunking, chunk ids name other passages: skipped with the reason, as chunk-level metrics are.
    other = guard_movement(verdict, gate, measured, {"x": "not comparable across chunkings (...)"})
    assert other["configs"][0]["metrics"] == [paired] and other["configs"][0]["passed"]
    assert other["configs"][0]["skipped"] == [
        {"metric": "topk_changed@2", "reason": "not comparable across chunkings (...)"}
    ]


def test_only_gate_metrics_may_name_a_movement_metric(tmp_path: Path):
    params = yaml.safe_load((Path(__file__).parents[2] / "params.yaml").read_text())
    params["gate"]["metrics"] = [*params["gate"]["metrics"], "topk_changed@5"]
    params["gate"]["rbo_p"] = 0.5
    assert validate_params(params, "params.yaml") == []
    assert gate_of({"rbo_p": 0.5}).rbo_p == 0.5 and gate_of({}).rbo_p == 0.9
    params["gate"]["rbo_p"] = 1
    (problem,) = validate_params(params, "params.yaml")
    assert "gate.rbo_p" in problem.where
    params["gate"]["rbo_p"] = 0.5
    params["gate"]["slice_metric"] = "topk_changed@5"
    (problem,) = validate_params(params, "params.yaml")
    assert "gate.slice_metric" in problem.where and "against the baseline's ranking" in problem.what


def traffic(tmp_path: Path) -> tuple[pl.DataFrame, pl.DataFrame, Path]:
    """A kept ranking and a run of 30 cases in case order, and a per-case table tagging some:
    lists of 0 to 5 chunks (shorter than k = 3 too), tied ranks, ranks listed backwards in
    some cases, cases only one side holds, and tagged cases neither side ranks."""
    rng = np.random.default_rng(7)
    sides: list[list[tuple[str, int, str]]] = [[], []]
    for case in range(30):
        for side in sides:
            if rng.random() < 0.15:  # this side lacks the case
                continue
            chunks = rng.choice(6, size=int(rng.integers(1, 6)), replace=False)
            ranks = np.sort(rng.integers(1, 4, size=len(chunks)))  # ties: equal ranks, broken by chunk id
            rows = [(f"q{case:02}", int(rank), f"c{chunk}") for rank, chunk in zip(ranks, chunks)]
            side.extend(rows[::-1] if case % 4 == 0 else rows)
    base, run = (pl.DataFrame(rows, schema=RANKING, orient="row") for rows in sides)
    tagged = [
        {"case_id": f"q{case:02}", "split": "eval", "answerable": True, "tags": {"t": "ab"[case % 2]}}
        for case in range(0, 34, 3)
    ]
    per_case = tmp_path / "cases"
    per_case.mkdir()
    results.write_results(per_case / "x.parquet", results.results_frame(tagged))
    return base, run, per_case


RANKING = {"case_id": pl.String, "rank": pl.Int32, "chunk_id": pl.String}


NUMBERING = '{"cases": "q00 .. q33", "chunks": "c0 .. c5"}'


def write_numbered(frame: pl.DataFrame, path: Path, numbering: str = NUMBERING) -> None:
    """``frame`` (in its own row order) with each case's and chunk's number among the sorted
    ids q00 .. q33 and c0 .. c5, and the numbering in the metadata, as the retrieve stage
    writes a run and `ragvet baseline accept` keeps one."""
    numbers = [pl.col(f"{name}_id").str.slice(1).cast(pl.Int32).alias(name) for name in ("case", "chunk")]
    write_parquet(path, frame.with_columns(numbers), metadata={RUN_METADATA: numbering})


@pytest.mark.parametrize("numbered", [False, True])
@pytest.mark.parametrize("rows", [1, 4, 1 << 20])
def test_movement_read_in_batches_is_that_of_the_whole_rankings(tmp_path: Path, monkeypatch, rows: int, numbered: bool):
    """Batches of 1 and 4 rows cut cases' ranks apart; the figures, the rows written and the
    guarded counts are those of the two rankings paired whole by their ids (:func:`moved_at`),
    whether the files are paired by ids or, numbered alike, by their numbers (then the
    ids of the cases only the run ranks come from the run)."""
    base, run, per_case = traffic(tmp_path)
    for frame, name in ((base, "base"), (run, "run")):
        if numbered:
            write_numbered(frame, tmp_path / f"{name}.parquet")
        else:
            frame.write_parquet(tmp_path / f"{name}.parquet")
    sides = ((tmp_path / "base.parquet", "base"), (tmp_path / "run.parquet", "run"))
    monkeypatch.setattr(rankings, "BATCH_ROWS", rows)
    if numbered:  # the numbers, never the ids, pair them
        monkeypatch.setattr(movement, "moved_at", None)
    written: list[pl.DataFrame] = []
    found = measure_movement(["x"], lambda config: sides, [1, 3], 3, 0.8, per_case, ["t"], written.append)["x"]
    whole = moved_at(base, run, [3], 0.8)
    assert whole.height == len(set(base["case_id"]) | set(run["case_id"])) == 30
    tally = MovementTally(3, ["t"], MOST_MOVED)
    tags = pl.read_parquet(per_case / "x.parquet", columns=["case_id", "tags.t"])
    tally.add(whole, tags)
    assert found.summary == tally.summary(0.8)
    assert found.summary["slices"]["t"]["a"]["cases"] + found.summary["slices"]["t"]["b"]["cases"] == 10
    assert pl.concat(written).equals(table_rows("x", whole, 3))
    top1 = moved_at(base, run, [1], 0.8)["topk_changed@1"]
    assert found.changed == {1: (30, int(top1.sum())), 3: (30, int(whole["topk_changed@3"].sum()))}


def test_numbered_rankings_paired_by_hand(tmp_path: Path):
    """q01 reordered (overlap 1, same set, RBO at p = 0.5 of [1, 0] vs [0, 1]: (1 - p)/p ·
    (0/1 · p + 2/2 · p²) + 1 · p² = 0.5), q02 replaced (0, changed, 0), q03 only in the run
    (its id read from the run: 0, changed, 0 with one list empty), q04 only in the baseline.
    Numbered differently (another chunking), the ids pair them: the same figures."""
    base = [("q01", 1, "c1"), ("q01", 2, "c0"), ("q02", 1, "c2"), ("q04", 1, "c5")]
    run = [("q01", 1, "c0"), ("q01", 2, "c1"), ("q02", 1, "c3"), ("q03", 1, "c4")]
    expected = {
        "case_id": ["q01", "q02", "q03", "q04"],
        "overlap@2": [1.0, 0.0, 0.0, 0.0],
        "topk_changed@2": [0, 1, 1, 1],
        "rbo@2": [0.5, 0.0, 0.0, 0.0],
    }
    for other in (NUMBERING, '{"cases": "q00 .. q33", "chunks": "another"}'):
        write_numbered(pl.DataFrame(base, schema=RANKING, orient="row"), tmp_path / "base.parquet")
        write_numbered(pl.DataFrame(run, schema=RANKING, orient="row"), tmp_path / "run.parquet", other)
        sides = ((tmp_path / "base.parquet", "base"), (tmp_path / "run.parquet", "run"))
        written: list[pl.DataFrame] = []
        measure_movement(["x"], lambda config, sides=sides: sides, [], 2, 0.5, tmp_path, [], written.append)
        assert pl.concat(written).drop("config").to_dict(as_series=False) == expected


def test_a_numbered_ranking_without_a_chunk_number_is_refused(tmp_path: Path):
    write_numbered(pl.DataFrame([("q01", 1, "c1")], schema=RANKING, orient="row"), tmp_path / "base.parquet")
    run = pl.DataFrame([("q01", 1, "c1"), ("q02", 1, "c2")], schema=RANKING, orient="row")
    write_parquet(
        tmp_path / "run.parquet",
        run.with_columns(case=pl.Series([1, 2], dtype=pl.Int32), chunk=pl.Series([1, None], dtype=pl.Int32)),
        metadata={RUN_METADATA: NUMBERING},
    )
    sides = ((tmp_path / "base.parquet", "base"), (tmp_path / "run.parquet", "run"))
    with pytest.raises(InputError) as err:
        measure_movement(["x"], lambda config: sides, [1], None, 0.5, tmp_path, [], None)
    (problem,) = err.value.problems
    assert problem.where == "run" and problem.what.startswith("a row without a rank or a chunk number")


def test_a_ranking_kept_in_batches_is_that_of_the_whole_run(tmp_path: Path, monkeypatch):
    """:func:`ranking_of` a batch of 4 rows at a time, written in row groups of 8 rows, reads back
    as the whole run sorted and cut at depth 2; a table of one row group has the bytes of one."""
    _, run, _ = traffic(tmp_path)
    run.write_parquet(tmp_path / "run.parquet")
    monkeypatch.setattr(rankings, "BATCH_ROWS", 4)
    monkeypatch.setattr(results, "ROW_GROUP_ROWS", 8)
    write_ranking(tmp_path / "kept.parquet", tmp_path / "run.parquet", 2)
    expected = run.sort(["case_id", "rank", "chunk_id"]).filter(pl.int_range(pl.len()).over("case_id") < 2)
    assert pq.ParquetFile(tmp_path / "kept.parquet").metadata.num_row_groups == -(-expected.height // 8) > 1
    assert pl.read_parquet(tmp_path / "kept.parquet").equals(expected)
    monkeypatch.setattr(results, "ROW_GROUP_ROWS", 1 << 16)
    write_ranking(tmp_path / "kept.parquet", tmp_path / "run.parquet", 2)
    write_parquet(tmp_path / "whole.parquet", expected)
    assert (tmp_path / "kept.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()


@pytest.mark.parametrize("group_rows", [8, 1 << 16])  # several row groups (pyarrow's writer), then one
def test_a_ranking_kept_of_a_numbered_run_keeps_its_numbers(tmp_path: Path, monkeypatch, group_rows: int):
    """The kept ranking of a numbered run holds the run's case and chunk numbers of its rows
    and the run's numbering: a later run numbered alike pairs with it by numbers."""
    _, run, _ = traffic(tmp_path)
    write_numbered(run, tmp_path / "run.parquet")
    monkeypatch.setattr(results, "ROW_GROUP_ROWS", group_rows)
    write_ranking(tmp_path / "kept.parquet", tmp_path / "run.parquet", 2)
    expected = run.sort(["case_id", "rank", "chunk_id"]).filter(pl.int_range(pl.len()).over("case_id") < 2)
    kept = pl.read_parquet(tmp_path / "kept.parquet")
    assert kept.columns == ["case_id", "rank", "chunk_id", "case", "chunk"]
    assert kept.select(list(RANKING)).equals(expected) and kept["case"][0] == int(expected["case_id"][0][1:])
    assert (kept["chunk"] == kept["chunk_id"].str.slice(1).cast(pl.Int32)).all()
    assert rankings.numbering(tmp_path / "kept.parquet") == NUMBERING
    # The same run in rank order, as the retrieve stage writes it, is kept by its numbers
    # without a sort (the run above lists some cases backwards): the same ranking, the same bytes.
    write_numbered(run.sort(["case_id", "rank", "chunk_id"]), tmp_path / "in_order.parquet")
    write_ranking(tmp_path / "again.parquet", tmp_path / "in_order.parquet", 2)
    assert (tmp_path / "again.parquet").read_bytes() == (tmp_path / "kept.parquet").read_bytes()


@pytest.mark.parametrize("backwards", [False, True])
def test_a_numbered_run_in_row_groups_keeps_the_ranks_its_ids_give(tmp_path: Path, monkeypatch, backwards: bool):
    """A numbered run with dictionary-encoded ids (as the retrieve stage writes them) in row
    groups of 3 rows, read 4 rows at a time: a case across two groups, a batch across
    three. Its first 2 ranks per case, ids taken from the groups holding the kept rows, are
    the hand-made ones and what the same run without numbers keeps by its ids; so also
    when one case lists its ranks backwards (its batch is then sorted by its ids)."""
    q03 = [("q03", 1, "c5"), ("q03", 2, "c3"), ("q03", 3, "c1"), ("q03", 3, "c2")]
    rows = [("q01", 1, "c4"), ("q01", 2, "c1"), ("q01", 3, "c0"), ("q02", 1, "c2")]
    rows += [*(q03[::-1] if backwards else q03), ("q05", 1, "c0"), ("q05", 2, "c3")]
    run = pl.DataFrame(rows, schema=RANKING, orient="row")
    numbers = [pl.col(f"{name}_id").str.slice(1).cast(pl.Int32).alias(name) for name in ("case", "chunk")]
    table = run.with_columns(*numbers, pl.col("case_id", "chunk_id").cast(pl.Categorical)).to_arrow()
    pq.write_table(table.replace_schema_metadata({RUN_METADATA: NUMBERING}), tmp_path / "run.parquet", row_group_size=3)
    run.write_parquet(tmp_path / "ids.parquet")
    monkeypatch.setattr(rankings, "BATCH_ROWS", 4)
    kept = pl.concat(ranking_of(tmp_path / "run.parquet", 2))
    expected = [("q01", 1, "c4"), ("q01", 2, "c1"), ("q02", 1, "c2"), ("q03", 1, "c5"), ("q03", 2, "c3")]
    expected += [("q05", 1, "c0"), ("q05", 2, "c3")]
    assert kept.select(list(RANKING)).rows() == expected
    assert kept.select("case", "chunk").rows() == [(int(case[1:]), int(chunk[1:])) for case, _, chunk in expected]
    assert kept.select(list(RANKING)).equals(pl.concat(ranking_of(tmp_path / "ids.parquet", 2)))


def test_a_numbered_run_without_its_chunk_ids_is_refused(tmp_path: Path):
    run = pl.DataFrame([("q01", 1, 1, 1)], schema=["case_id", "rank", "case", "chunk"], orient="row")
    write_parquet(tmp_path / "run.parquet", run, metadata={RUN_METADATA: NUMBERING})  # numbered, no chunk_id
    with pytest.raises(InputError) as err:
        list(ranking_of(tmp_path / "run.parquet", 2))
    (problem,) = err.value.problems
    assert problem.where == (tmp_path / "run.parquet").as_posix()
    assert problem.what == "not a readable Parquet table (unable to find column 'chunk_id')"


def test_the_first_rows_of_each_case_by_hand():
    """Cases 3, 5 and 8 of 3, 1 and 2 rows: their first 2 rows are rows 0, 1, 3, 4 and 5; none at depth 0."""
    case = np.array([3, 3, 3, 5, 8, 8], dtype=np.int32)
    assert rankings.first_rows(case, 2).tolist() == [0, 1, 3, 4, 5]
    assert rankings.first_rows(case, 1).tolist() == [0, 3, 4]
    assert rankings.first_rows(case, 0).tolist() == rankings.first_rows(case[:0], 2).tolist() == []


def test_the_verdict_names_a_kept_ranking_of_ids_beside_a_numbered_run(tmp_path: Path):
    """Only a ranking kept without numbers, beside a numbered run, is paired the slow way."""
    _, run, _ = traffic(tmp_path)
    baseline, runs = tmp_path / "baseline", tmp_path / "runs"
    runs.mkdir()
    write_numbered(run, runs / "cfg.parquet")
    run.write_parquet(runs / "plain.parquet")  # a run without numbers: nothing faster to be had
    for config in ("cfg", "plain"):
        baseline_ranking_path(baseline, config).parent.mkdir(parents=True, exist_ok=True)
        run.write_parquet(baseline_ranking_path(baseline, config))  # ids only
    assert rankings_kept_by_ids(["cfg", "plain", "absent"], baseline, runs) == [baseline_ranking_path(baseline, "cfg")]
    write_ranking(baseline_ranking_path(baseline, "cfg"), runs / "cfg.parquet", 2)  # accepted again: numbered
    assert rankings_kept_by_ids(["cfg", "plain"], baseline, runs) == []


def test_a_run_not_in_case_order_is_refused_at_its_row(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(rankings, "BATCH_ROWS", 2)
    rows = [("q1", 1, "a"), ("q1", 2, "b"), ("q2", 1, "a"), ("q1", 3, "c")]
    pl.DataFrame(rows, schema=RANKING, orient="row").write_parquet(tmp_path / "run.parquet")
    with pytest.raises(InputError) as err:
        list(ranking_of(tmp_path / "run.parquet", 2))
    (problem,) = err.value.problems
    assert problem.where == (tmp_path / "run.parquet").as_posix()
    assert problem.what == "case ids not in ascending order (row 4: 'q1')" and "sorted by case_id" in problem.fix
