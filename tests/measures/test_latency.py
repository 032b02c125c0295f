"""Latency and load: per-query timings, their percentiles, and where they go."""

from __future__ import annotations

import json

import pytest
import yaml
from repos import ROOT, ragvet, set_param, sh
from typer.testing import CliRunner

from ragvet.cli import app
from ragvet.gating.latency import compare_latency, latency_text
from ragvet.inputs.params import validate_params
from ragvet.measures.latency import ACCEPTED, latency_figures, machine_fingerprint, nearest_rank
from ragvet.reporting.latency_page import render_latency
from ragvet.retrieval.kinds import retrieve
from ragvet.schema import Case, Chunk


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
    assert "No latency was measured here for `c`: DVC restored their runs" in page
    assert "No latency was measured" not in render_latency(summaries, {"a|b": {}, "c": {}}, 5)


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


# --------------------------------------------------------------------------- the gate's p95 check

HERE = {"system": "Linux", "arch": "x86_64", "cpu": "A", "cpus": 2, "memory_gib": 8.0}


def record(p95: float | None, machine: dict | None = HERE) -> dict:
    per_query = "measured" if p95 is not None else "not measured (a batch kind)"
    return {"p95_ms": p95, "per_query": per_query, "machine": machine}


@pytest.mark.parametrize(
    ("base", "current", "rise", "failed"),
    [(10.0, 14.0, 0.4, False), (10.0, 15.0, 0.5, False), (10.0, 16.0, 0.6, True), (10.0, 5.0, -0.5, False)],
)
def test_a_p95_rise_fails_only_beyond_the_param(base, current, rise, failed):
    entry = compare_latency(record(base), record(current), 0.5)
    assert (entry["rise"], entry["failed"], entry["note"]) == (rise, failed, None)
    assert latency_text(entry).endswith(f"({rise * 100:+.1f}%; max_p95_rise +50.0%)")


def test_what_cannot_be_compared_is_a_note_never_a_failure():
    other = {**HERE, "cpu": "B", "cpus": 4}
    entry = compare_latency(record(10.0, other), record(99.0), 0.5)
    assert not entry["failed"] and entry["rise"] is None
    assert entry["note"] == (
        "not comparable: measured on another machine "
        "(cpu: 'A' here, 'B' in the baseline; cpus: 2 here, 4 in the baseline)"
    )
    assert compare_latency(record(10.0, None), record(99.0), 0.5)["note"].endswith("(the machine was not recorded)")
    assert compare_latency(None, record(99.0), 0.5)["note"].startswith("no latency baseline")
    assert compare_latency(record(10.0), None, 0.5)["note"].startswith("no latency was measured")
    batch = compare_latency(record(None), record(None), 0.5)
    assert batch["note"] == "p95 not measured (not measured (a batch kind))" and not batch["failed"]
    assert compare_latency(record(0.0), record(0.0), 0.0)["failed"] is False  # empty case: 0 ms stays 0 ms
    assert compare_latency(record(0.0), record(0.001), 10.0)["failed"] is True  # any rise from 0 ms


@pytest.mark.parametrize(
    ("latency", "fragment"),
    [
        ({"max_p95_rise": -0.1}, "`gate.latency.max_p95_rise` must be a number in [0, ∞), got -0.1"),
        ({"max_p95_rise": "fast"}, "`gate.latency.max_p95_rise` must be a number in [0, ∞), got 'fast'"),
        ({"p99": 1}, "unknown key"),
        ("on", "`gate.latency` must be a non-empty mapping"),
    ],
)
def test_the_latency_param_is_checked(latency, fragment):
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["gate"]["latency"] = latency
    assert any(fragment in p.what for p in validate_params(params, "params.yaml")), validate_params(params, "p")
    params["gate"]["latency"] = {"max_p95_rise": None}
    assert validate_params(params, "params.yaml") == []


def test_the_gate_fails_on_a_p95_rise_of_real_runs_measured_on_the_baseline_machine(work_repo):
    repo, gated = work_repo, "sentences-600-bm25"
    set_param(repo, ["gate", "latency"], {"max_p95_rise": 0.5})
    sh(repo, "dvc", "repro", "validate", "settings")  # both read all of params.yaml: until they ran, the gate refuses
    assert ragvet(repo, "baseline", "accept").returncode == 0
    accepted = repo / "metrics" / "baseline" / "latency" / f"{gated}.json"
    measured = json.loads((repo / ".ragvet" / "latency" / f"{gated}.json").read_text())
    assert json.loads(accepted.read_text()) == {name: measured[name] for name in ACCEPTED}
    assert measured["machine"] == machine_fingerprint() and measured["p95_ms"] is not None

    sh(repo, "dvc", "repro", "-f", "-s", f"retrieve@{gated}")  # a second real measurement
    current = json.loads((repo / ".ragvet" / "latency" / f"{gated}.json").read_text())
    rise = round(current["p95_ms"] / measured["p95_ms"] - 1.0, 6)
    done = ragvet(repo, "gate")
    assert done.returncode == (1 if rise > 0.5 else 0), done.stdout  # whichever way this machine went
    assert f"({rise * 100:+.1f}%; max_p95_rise +50.0%)" in done.stdout

    def gate_with_baseline(**changes) -> str:
        accepted.write_text(json.dumps({**measured, **changes}))
        done = ragvet(repo, "gate")
        return f"{done.returncode} {done.stdout}"

    p95 = current["p95_ms"]
    assert gate_with_baseline(p95_ms=p95 / 1.6).startswith("1 ")
    assert f"FAIL {gated} p95 latency " in gate_with_baseline(p95_ms=p95 / 1.6)
    assert "(+60.0%; max_p95_rise +50.0%)" in gate_with_baseline(p95_ms=p95 / 1.6)
    report = ragvet(repo, "report", "--latency-dir", ".ragvet/latency").stdout
    assert (
        "# Gate: FAILED - " in report
        and "p95 latency rose too far" in report
        and f"`{gated}`: p95 latency " in report
        and "ms (+60.0%; max" in report
    )
    assert gate_with_baseline(p95_ms=p95 / 1.5).startswith("0 ")  # exactly the limit passes
    within = gate_with_baseline(p95_ms=p95 / 1.25)
    assert within.startswith("0 ") and f"ok   {gated} p95 latency " in within and "(+25.0%;" in within

    elsewhere = gate_with_baseline(p95_ms=p95 / 10, machine={**measured["machine"], "cpu": "Another CPU 9000"})
    assert elsewhere.startswith("0 ") and "gate: PASSED" in elsewhere
    cpu = machine_fingerprint()["cpu"]
    assert f"note {gated} p95 latency not comparable: measured on another machine (cpu: {cpu!r} here, " in elsewhere

    record_path = repo / ".ragvet" / "latency" / f"{gated}.json"
    record_path.unlink()  # as after DVC restored the run instead of running the stage
    unmeasured = ragvet(repo, "gate")
    assert (
        unmeasured.returncode == 2 and "gate: PASSED" not in unmeasured.stdout and "Traceback" not in unmeasured.stderr
    )
    assert f".ragvet/latency/{gated}.json: gate.latency.max_p95_rise is on but no latency was measured here" in (
        unmeasured.stderr
    )
    assert f"fix: measure it: `dvc repro -f -s retrieve@{gated}`" in unmeasured.stderr
    page = ragvet(repo, "report", "--latency-dir", ".ragvet/latency", "--latency-out", "page.md")
    assert page.returncode == 0 and f"No latency was measured here for `{gated}`" in (repo / "page.md").read_text()
    accepted.unlink()
    record_path.write_text(json.dumps(current))
    unaccepted = ragvet(repo, "gate")
    assert unaccepted.returncode == 2 and f"the baseline has no latency record for {gated}" in unaccepted.stderr

    set_param(repo, ["gate", "latency"], {"max_p95_rise": -1})
    refused = ragvet(repo, "gate")
    assert refused.returncode == 2 and "gate.latency.max_p95_rise" in refused.stdout + refused.stderr
    set_param(repo, ["gate", "latency"], {"max_p95_rise": None})
    sh(repo, "dvc", "repro", "validate", "settings")
    assert ragvet(repo, "baseline", "accept").returncode == 0 and not accepted.exists()  # off: no latency kept
    unchecked = ragvet(repo, "gate")
    assert unchecked.returncode == 0 and "p95" not in unchecked.stdout
