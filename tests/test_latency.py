"""Latency and load: per-query timings, their percentiles, and where they go."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from stages.cli import app
from stages.measures.latency import latency_figures, nearest_rank
from stages.reporting.markdown import render_latency
from stages.retrieval.kinds import retrieve
from stages.schema import Case, Chunk


def test_nearest_rank_percentiles_by_hand():
    values = [40.0, 10.0, 30.0, 20.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0]
    assert nearest_rank(values, 0.50) == 50.0  # ceil(0.5 * 10) = 5th smallest
    assert nearest_rank(values, 0.95) == 100.0  # ceil(9.5) = 10th
    assert nearest_rank(values[:3], 0.95) == 40.0  # ceil(2.85) = 3rd of [10, 30, 40]
    assert nearest_rank([7.0], 0.5) == 7.0 and nearest_rank([], 0.5) is None


def test_latency_figures_by_hand():
    figures = latency_figures({"a": 0.010, "b": 0.030, "c": 0.020, "d": 0.040}, n_cases=4, wall_s=0.5)
    assert {name: figures[name] for name in ("p50_ms", "p95_ms", "max_ms", "qps")} == {
        "p50_ms": 20.0,
        "p95_ms": 40.0,
        "max_ms": 40.0,
        "qps": 8.0,
    }
    assert figures["per_case_ms"] == {"a": 10.0, "b": 30.0, "c": 20.0, "d": 40.0}
    batch = latency_figures({}, n_cases=3, wall_s=1.5)
    assert (batch["p95_ms"], batch["qps"], batch["per_query"]) == (None, 2.0, "not measured (a batch kind)")
    assert latency_figures({}, 0, 0.0)["qps"] is None


def test_bm25_times_every_case_and_members_are_not_timed():
    chunks = [Chunk("a#0", "a", 0, 0, 11, "vacation days"), Chunk("b#0", "b", 0, 0, 6, "dental")]
    cases = [Case("q1", "vacation"), Case("q2", "zebra")]
    timed: dict[str, float] = {}
    retrieve(cases, chunks, {"kind": "bm25"}, 5, latency=timed)
    assert sorted(timed) == ["q1", "q2"] and all(seconds >= 0 for seconds in timed.values())
    hybrid = {"kind": "hybrid", "members": ["bm25"]}
    timed = {}
    retrieve(cases, chunks, hybrid, 5, {"bm25": {"kind": "bm25"}, "h": hybrid}, latency=timed)
    assert timed == {}  # a hybrid answers in batch: its member's queries are not its own


def test_the_latency_page_escapes_names_and_dashes_what_is_missing():
    summaries = {"a|b": {"eval": {"metrics": {"evidence_recall@5": 0.5}}}, "c": {"eval": {"metrics": {}}}}
    page = render_latency(summaries, {"a|b": {"p50_ms": 1.5, "p95_ms": 3.25, "max_ms": 4.0, "qps": 120.0}}, 5)
    assert "| `a\\|b` | 0.500 | – | 1.500 | 3.250 | 4.000 | 120.000 |" in page
    assert "| `c` | – | – | – | – | – | – |" in page


def test_the_retrieve_stage_writes_latency_beside_a_byte_identical_run(tmp_path, monkeypatch):
    """The run does not change from run to run; only the latency file does."""
    monkeypatch.chdir(tmp_path)
    chunk = Chunk("a#0", "a", 0, 0, 8, "vacation", {})
    (tmp_path / "chunks.jsonl").write_text(json.dumps(chunk.to_row()) + "\n")
    (tmp_path / "cases.jsonl").write_text(json.dumps(Case("q1", "vacation").to_row()) + "\n")
    params = {"retrievers": {"b": {"kind": "bm25"}}, "configs": {"c": {"chunking": "x", "retriever": "b"}}, "depth": 3}
    params["chunking"] = {"x": {"strategy": "fixed", "unit": "chars", "window": 40, "overlap": 0}}  # checked at start
    (tmp_path / "params.yaml").write_text(json.dumps(params))
    args = ["retrieve", "c", "--chunks", "chunks.jsonl", "--cases", "cases.jsonl", "--latency", "lat.json"]
    runs = []
    for name in ("one.parquet", "two.parquet"):
        result = CliRunner().invoke(app, [*args, "--out", name])
        assert result.exit_code == 0, result.output
        runs.append((tmp_path / name).read_bytes())
    assert runs[0] == runs[1]
    figures = json.loads((tmp_path / "lat.json").read_text())
    assert figures["config"] == "c" and figures["cases"] == 1 and list(figures["per_case_ms"]) == ["q1"]
    assert figures["p95_ms"] == figures["max_ms"] == figures["per_case_ms"]["q1"]
