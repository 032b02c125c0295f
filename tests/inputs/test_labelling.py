"""`ragvet sample-for-labels`: the moved, unlabelled queries of a hand-made log, drawn per
slice with a seed, written as cases the validator accepts, and bad input refused (exit 2)
at its file and line with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml
from builders import invoke, jsonl

from ragvet.inputs.cases import collect_cases
from ragvet.inputs.labelling import NO_SLICE, draw_order, stratified

REGIONS = ("emea", "apac", "us")


def ranking(rows: list[tuple[str, int, str]], path: Path) -> Path:
    pl.DataFrame(rows, schema=["case_id", "rank", "chunk_id"], orient="row").write_parquet(path)
    return path


@pytest.fixture
def traffic(tmp_path: Path) -> dict[str, Path]:
    """33 unlabelled queries (11 per region, 3 of them untagged) ranked 3 deep by both sides.
    The candidate replaces the third chunk of every query whose number is even (moved:
    q00, q02, ...), and only reorders the odd ones' top 3 (not moved: the set is the same)."""
    log, base, cand = [], [], []
    for n in range(33):
        query = f"q{n:02d}"
        tags = {"tags": {"region": REGIONS[n % 3]}} if n % 11 else {}
        log.append({"query_id": query, "question": f"what is item {n}?", **tags, "results": []})
        base += [(query, rank, f"doc{n}#{rank}") for rank in (1, 2, 3)]
        order = ["#1", "#2", "#9"] if n % 2 == 0 else ["#3", "#1", "#2"]
        cand += [(query, rank, f"doc{n}{suffix}") for rank, suffix in enumerate(order, start=1)]
    cand.insert(0, ("not-in-the-log", 1, "x#0"))  # a labelled case's ranking (in case order): never sampled
    (tmp_path / "unlabelled.jsonl").write_text(jsonl(log))
    return {
        "queries": tmp_path / "unlabelled.jsonl",
        "baseline": ranking(base, tmp_path / "base.parquet"),
        "candidate": ranking(cand, tmp_path / "cand.parquet"),
    }


def sample(traffic: dict[str, Path], out: Path, *options: str, code: int = 0):
    paths = [f"--{name}={path}" for name, path in traffic.items()]
    return invoke(
        "sample-for-labels", "--config=c", "--slice=region", f"--out={out}", "--k=3", *paths, *options, code=code
    )


def test_moved_queries_drawn_per_slice_as_valid_pending_cases(traffic, tmp_path):
    out = tmp_path / "to-label.yaml"
    result = sample(traffic, out, "--per-slice=2", "--seed=5")
    assert "17 of 33 unlabelled queries moved (top 3 changed)" in result.output
    written = out.read_bytes()
    cases, problems = collect_cases(out, {}, left_out=(left_out := {}))
    assert problems == [] and cases == []  # pending: valid, and out of the splits until labelled
    drawn = {row["id"]: row for row in yaml.safe_load(written)}
    assert set(left_out) == set(drawn) and set(left_out.values()) == {"pending"}
    moved = {f"q{n:02d}" for n in range(0, 33, 2)}
    assert set(drawn) <= moved
    per_slice = {}
    for row in drawn.values():
        per_slice.setdefault((row.get("tags") or {}).get("region", NO_SLICE), []).append(row["id"])
    # Moved per slice: emea q06 q12 q18 q24 q30; apac q04 q10 q16 q28; us q02 q08 q14 q20 q26
    # q32; untagged q00 q22 (q11 is untagged but not moved).
    assert {value: len(ids) for value, ids in per_slice.items()} == {"emea": 2, "apac": 2, "us": 2, NO_SLICE: 2}
    assert sorted(per_slice[NO_SLICE]) == ["q00", "q22"]
    emea = ["q06", "q12", "q18", "q24", "q30"]
    assert sorted(per_slice["emea"]) == sorted(sorted(emea, key=lambda q: draw_order(5, q))[:2])
    assert drawn["q00"] == {"id": "q00", "question": "what is item 0?", "status": "pending"}

    again = tmp_path / "again.yaml"
    sample(traffic, again, "--per-slice=2", "--seed=5")
    assert again.read_bytes() == written  # same seed, same bytes
    other = tmp_path / "other.jsonl"
    sample(traffic, other, "--per-slice=2", "--seed=6")
    other_ids = {json.loads(line)["id"] for line in other.read_text().splitlines()}
    assert other_ids != set(drawn) and len(other_ids) == 8
    assert collect_cases(other, {}) == ([], [])


def test_a_slice_with_fewer_moved_queries_gives_them_all():
    class Moved:
        def __init__(self, query_id, region):
            self.query_id, self.tags = query_id, {"region": region}

    drawn = stratified([Moved("b", "x"), Moved("a", "x"), Moved("c", "y")], "region", 5, 0)
    assert {value: [q.query_id for q in queries] for value, queries in drawn.items()} == {"x": ["a", "b"], "y": ["c"]}


def test_bad_input_is_refused_at_its_place_with_nothing_written(traffic, tmp_path):
    out = tmp_path / "to-label.yaml"
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"query_id": "q1", "question": "a?"}\nnot json\n{"query_id": "q1", "question": "b?"}\n')
    result = sample({**traffic, "queries": broken}, out, code=2)
    assert f"{broken}:2: malformed JSON" in result.output
    assert f"{broken}:3: duplicate query_id 'q1': already defined at {broken}:1" in result.output
    assert not out.exists()

    wrong = ranking([], tmp_path / "wrong.parquet")
    pl.DataFrame({"case_id": ["q1"], "score": [1.0]}).write_parquet(wrong)
    result = sample({**traffic, "baseline": wrong}, out, code=2)
    assert f"{wrong}: the baseline ranking has no column rank, chunk_id" in result.output
    result = sample({**traffic, "candidate": tmp_path / "absent.parquet"}, out, code=2)
    assert "the run does not exist" in result.output
    unsorted = ranking([("q2", 1, "a"), ("q1", 1, "b")], tmp_path / "unsorted.parquet")  # read a batch at a time
    result = sample({**traffic, "candidate": unsorted}, out, code=2)
    assert f"{unsorted}: case ids not in ascending order (row 2: 'q1')" in result.output
    assert not out.exists()

    out.write_text("kept\n")
    result = sample(traffic, out, "--per-slice=0", code=2)
    assert "the cases file exists" in result.output and "--per-slice: must be at least 1, got 0" in result.output
    assert out.read_text() == "kept\n"
