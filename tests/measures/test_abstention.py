"""Abstention thresholds: the dev sweep, the stated rules, the params file, and
the proof that eval labels never reach the choice."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from builders import gate_of
from hypothesis import given, settings
from hypothesis import strategies as st
from repos import ROOT

from ragvet.errors import InputError
from ragvet.measures.abstention import (
    candidate_thresholds,
    choose_threshold,
    overcautious,
    rates,
    read_thresholds,
    score_rows,
    spec_fingerprint,
    sweep,
    threshold_for,
    threshold_warnings,
    write_thresholds,
)
from ragvet.schema import Case
from ragvet.storage.tables import write_run


def rows(*pairs) -> list[dict]:
    return [{"answerable": answerable, "top1_score": score} for answerable, score in pairs]


# Dev: abstention cases score 1 and 3; answerable ones 2, 4, 5.
DEV = rows((False, 1.0), (False, 3.0), (True, 2.0), (True, 4.0), (True, 5.0))


def test_candidates_are_midpoints_plus_both_ends():
    assert candidate_thresholds([3.0, 1.0, None, 3.0, 2.0]) == [0.0, 1.5, 2.5, 4.0]
    assert candidate_thresholds([None]) == [0.0]


def test_rates_by_hand():
    point = rates(DEV, 3.5)  # abstains on 1, 2, 3
    assert point["abstain_rate"] == 1.0  # both abstention cases
    assert point["false_abstain_rate"] == pytest.approx(1 / 3)  # the answerable case at 2
    assert point["precision"] == pytest.approx(2 / 3)
    assert point["f1"] == pytest.approx(0.8)
    none = rates(DEV, 0.5)
    assert (none["abstain_rate"], none["false_abstain_rate"], none["precision"], none["f1"]) == (0.0, 0.0, None, None)
    assert rates(rows((True, None)), 0.0)["false_abstain_rate"] == 1.0  # nothing retrieved: abstains


def test_sweep_and_both_rules():
    assert [p["threshold"] for p in sweep(DEV)] == [0.0, 1.5, 2.5, 3.5, 4.5, 6.0]
    # F1 at 1.5: 1/2 recall, precision 1 -> 2/3; at 3.5: 0.8; at 4.5: 4/6 -> 2/3 ... best 3.5
    assert choose_threshold(DEV, "f1")["threshold"] == 3.5
    # the most abstention with no false abstention: abstain below 1.5 only
    assert choose_threshold(DEV, "false-abstention", 0.0)["threshold"] == 1.5
    assert choose_threshold(DEV, "false-abstention", 0.34)["threshold"] == 3.5
    assert choose_threshold(DEV, "false-abstention", 1.0)["threshold"] == 6.0
    with pytest.raises(ValueError, match="needs abstention cases and answerable cases"):
        choose_threshold(rows((True, 1.0)), "f1")
    with pytest.raises(ValueError, match="top-1 scores do not vary"):
        choose_threshold(rows((False, 1.0), (True, 1.0), (True, None)), "f1")  # ranks only: every top-1 is 1/1
    with pytest.raises(ValueError, match="unknown rule"):
        choose_threshold(DEV, "best")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.none() | st.sampled_from([0.5, 1.0, 1.25, 2.0]) | st.floats(-5, 5)), max_size=30
    )
)
def test_sweep_counts_by_binary_search_exactly_as_rates_counts_case_by_case(cases):
    dev = rows(*cases)
    expected = [rates(dev, t) for t in candidate_thresholds([row["top1_score"] for row in dev])]
    assert sweep(dev) == expected


def test_choice_depends_on_dev_only():
    cases = [Case(f"c{i}", "q", answerable=i % 2 == 0) for i in range(12)]
    split = {f"c{i}": "dev" if i < 6 else "eval" for i in range(12)}
    run = {f"c{i}": [{"score": float(i % 5)}] for i in range(12)}
    chosen = choose_threshold(score_rows(cases, run, split)["dev"], "f1")["threshold"]
    relabelled = [Case(c.case_id, "q", answerable=not c.answerable) if split[c.case_id] == "eval" else c for c in cases]
    rescored = {cid: [{"score": 99.0}] if split[cid] == "eval" else ranked for cid, ranked in run.items()}
    assert choose_threshold(score_rows(relabelled, rescored, split)["dev"], "f1")["threshold"] == chosen


SETTINGS = {
    "configs": {"cfg": {"chunking": "ch", "retriever": "r"}},
    "chunking": {"ch": {"strategy": "fixed", "unit": "chars", "window": 300, "overlap": 0}},
    "retrievers": {"r": {"kind": "bm25"}},
}
ENTRY = {
    "abstain_below": 2.5,
    "config_fingerprint": spec_fingerprint(SETTINGS, "cfg"),
    "dev_split_fingerprint": "dev0",
    "rule": "f1",
    "tuned_on": "dev",
}
RETUNE = "fix: run `ragvet tune-abstain --config cfg` again, or delete the entry"
STALE_FIX = "fix: run `ragvet tune-abstain --config cfg` again, then `dvc repro` (or delete the entry)"
MARKED = "so its abstention figures are marked stale"


def test_params_file_round_trip_and_errors(tmp_path):
    path = tmp_path / "abstention.yaml"
    assert read_thresholds(path, {"cfg": {}}) == {}
    write_thresholds(path, {"cfg": ENTRY})
    assert path.read_text().startswith("# Abstention thresholds")
    assert read_thresholds(path, {"cfg": {}}) == {"cfg": ENTRY}
    with pytest.raises(InputError, match="which does not exist"):
        read_thresholds(path, {"other": {}})
    path.write_text("cfg: {abstain_below: high}\n")
    with pytest.raises(InputError, match="numeric abstain_below"):
        read_thresholds(path, {"cfg": {}})


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("cfg: 2.5\n", "needs a mapping with a numeric abstain_below (an old format?)"),
        (
            "cfg: {abstain_below: 2.5, rule: f1, tuned_on: dev}\n",
            "does not record what it was tuned on (config_fingerprint, dev_split_fingerprint): an old format",
        ),
    ],
)
def test_an_old_format_entry_is_a_problem_with_its_fix(tmp_path, text, what):
    """A bare number (the first format) and an entry without fingerprints: re-tune, not a crash."""
    path = tmp_path / "abstention.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        read_thresholds(path, {"cfg": {}})
    assert [problem.render() for problem in err.value.problems] == [f"{path}:1 (cfg): {what}\n    {RETUNE}"]
    assert read_thresholds(path, {"cfg": {}}, retuning="cfg") == yaml.safe_load(text)  # tune-abstain replaces it


def test_a_threshold_tuned_on_what_changed_is_stale(tmp_path, monkeypatch):
    """The spec fingerprint covers the chunking's params and the retriever's spec; the
    dev split is checked only where it is known (evaluate, report; not validate)."""
    monkeypatch.chdir(tmp_path)
    path = Path("abstention.yaml")
    write_thresholds(path, {"cfg": ENTRY})
    where = f"abstention.yaml:{path.read_text().splitlines().index('cfg:') + 1} (cfg)"
    assert threshold_warnings(path, SETTINGS, "dev0") == []
    assert threshold_warnings(path, SETTINGS, None) == []
    chunked = {**SETTINGS, "chunking": {"ch": {"strategy": "fixed", "unit": "chars", "window": 200, "overlap": 0}}}
    retrieved = {**SETTINGS, "retrievers": {"r": {"kind": "bm25", "k1": 1.2}}}
    for changed in (chunked, retrieved):
        [problem] = threshold_warnings(path, changed, "dev0")
        assert problem.render() == (
            f"{where}: threshold stale: the configuration spec (chunking 'ch' or retriever 'r') "
            f"changed since it was tuned, {MARKED}\n    {STALE_FIX}"
        )
    [problem] = threshold_warnings(path, SETTINGS, "dev1")
    assert problem.what == f"threshold stale: the dev split (its cases or labels) changed since it was tuned, {MARKED}"
    [problem] = threshold_warnings(path, chunked, "dev1")
    assert problem.what == (
        "threshold stale: the configuration spec (chunking 'ch' or retriever 'r') and the dev split "
        f"(its cases or labels) changed since it was tuned, {MARKED}"
    )


def test_threshold_source_and_conflict(tmp_path):
    path = tmp_path / "abstention.yaml"
    tuned = {"cfg": {"abstain_below": 2.5, "rule": "f1"}}
    assert threshold_for("cfg", tuned, "bm25", {}, path) == (2.5, "abstention.yaml (tuned on dev, rule f1)")
    assert threshold_for("cfg", {}, "bm25", {"abstain_below": 1}, path) == (1.0, "retrievers.bm25.abstain_below")
    assert threshold_for("cfg", {}, "bm25", {}, path) == (None, None)
    with pytest.raises(InputError, match="set here and in retrievers.bm25.abstain_below"):
        threshold_for("cfg", tuned, "bm25", {"abstain_below": 1}, path)


def tune(project: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ragvet.cli", "tune-abstain", "--config", "cfg", *extra],
        cwd=project,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": str(Path(sys.executable).parent)},
    )


def project(tmp_path: Path, eval_answerable: bool, eval_score: float) -> Path:
    """A tiny project on disk: 4 dev and 4 eval cases with a run and a split."""
    root = tmp_path / f"p-{eval_answerable}-{eval_score}"
    (root / "data" / "runs").mkdir(parents=True)
    (root / "data" / "chunks").mkdir(parents=True)
    (root / "data" / "validated").mkdir(parents=True)
    (root / "params.yaml").write_text(
        yaml.safe_dump({**SETTINGS, "ks": [1], "evidence": {"span_coverage": 1.0}, "slices": []})
    )
    (root / "data" / "validated" / "corpus.jsonl").write_text(json.dumps({"doc_id": "d", "text": "x"}) + "\n")
    (root / "data" / "chunks" / "ch.jsonl").write_text(
        json.dumps({"chunk_id": "d#0", "doc_id": "d", "ordinal": 0, "start": 0, "end": 1, "text": "x"}) + "\n"
    )
    dev = {"d1": (False, 1.0), "d2": (False, 3.0), "d3": (True, 2.0), "d4": (True, 5.0)}
    ev = {f"e{i}": (eval_answerable if i % 2 else not eval_answerable, eval_score + i) for i in range(4)}
    cases, runs, split = (
        [],
        [],
        {"cases": {}, "fingerprints": {"dev_split": "dev0", "eval_split": "ev0", "corpus": "c0"}},
    )
    for case_id, (answerable, score) in sorted({**dev, **ev}.items()):
        cases.append(Case(case_id, "q", answerable=answerable).to_row())
        runs.append({"case_id": case_id, "rank": 1, "chunk_id": "d#0", "score": score})
        split["cases"][case_id] = {"split": "dev" if case_id in dev else "eval"}
    (root / "data" / "validated" / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    write_run(root / "data" / "runs" / "cfg.parquet", runs, [c["id"] for c in cases], ["d#0"])
    (root / "data" / "split.json").write_text(json.dumps(split))
    return root


def test_tune_abstain_command_ignores_eval_labels(tmp_path):
    outputs = []
    for eval_answerable, eval_score in ((True, 0.0), (False, 10.0)):
        root = project(tmp_path, eval_answerable, eval_score)
        done = tune(root)
        assert done.returncode == 0, done.stderr
        outputs.append((root / "abstention.yaml").read_text())
        assert "abstain below 4 (rule f1, chosen on dev)" in done.stdout  # 1, 2, 3 abstain: F1 0.8
        assert "eval: abstains on" in done.stdout
    assert outputs[0] == outputs[1]
    assert yaml.safe_load(outputs[0]) == {"cfg": {**ENTRY, "abstain_below": 4.0}}


def test_tune_abstain_refuses_bad_options_without_writing(tmp_path):
    root = project(tmp_path, True, 0.0)
    done = tune(root, "--rule", "false-abstention")
    assert done.returncode == 2 and "--target: needs a rate in [0, 1]" in done.stderr
    assert "Traceback" not in done.stderr and not (root / "abstention.yaml").exists()
    done = tune(root, "--rule", "false-abstention", "--target", "0")
    assert done.returncode == 0 and yaml.safe_load((root / "abstention.yaml").read_text())["cfg"]["target"] == 0.0


def test_overcautious_warns_above_half_of_the_answerable_dev_cases():
    """Answerable dev cases score 2, 4 and 5: below 3.5 one of them abstains, below 4.5 two."""
    assert overcautious(rates(DEV, 3.5)) is None
    assert overcautious(rates(rows((True, 1.0), (True, 3.0), (False, 0.5)), 2.0)) is None  # exactly half: no warning
    assert overcautious(rates(DEV, 4.5)) == (
        "the threshold 4.5 abstains on 2 of the 3 answerable dev cases (66.7%), more than half: the top-1 score "
        "barely tells answerable cases from the others under this configuration. Check the figures above before "
        "committing it; `--rule false-abstention --target 0.1` caps that rate instead"
    )


def test_tune_abstain_warns_about_a_threshold_that_refuses_most_answerable_cases(tmp_path):
    """Dev: abstention cases score 1 and 3, answerable ones 2 and 5. A target of 1 allows
    the highest candidate, 6, which abstains on both answerable cases; f1 picks 4, which
    abstains on one of the two: exactly half, no warning."""
    root = project(tmp_path, True, 0.0)
    done = tune(root, "--rule", "false-abstention", "--target", "1")
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("ragvet: warning: cfg: the threshold 6 abstains on 2 of the 2 answerable dev cases")
    assert yaml.safe_load((root / "abstention.yaml").read_text())["cfg"]["abstain_below"] == 6.0
    done = tune(root)
    assert done.returncode == 0 and done.stderr == ""


def evaluate(project: Path) -> subprocess.CompletedProcess:
    """The evaluate command on the tiny project, as dvc.yaml runs it."""
    paths = {"run": "data/runs/cfg.parquet", "chunks": "data/chunks/ch.jsonl", "corpus": "data/validated/corpus.jsonl"}
    paths |= {"cases": "data/validated/cases.jsonl", "split": "data/split.json", "metrics": "m.json"}
    paths |= {"per-case": "c.parquet", "slices": "s.json", "thresholds": "abstention.yaml"}
    options = [item for name, path in paths.items() for item in (f"--{name}", path)]
    return subprocess.run(
        [sys.executable, "-m", "ragvet.cli", "evaluate", "cfg", *options],
        cwd=project,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": str(Path(sys.executable).parent)},
    )


def test_evaluate_applies_a_current_threshold_and_marks_a_stale_one(tmp_path):
    """Tuned on dev (abstention cases 1, 3; answerable 2, 5) the threshold is 4. Eval
    scores 0..3 with e1, e3 answerable: all four abstain, so abstain_rate 2/2 = 1 and
    false_abstain_rate 2/2 = 1. After the chunking's size or the dev split changes,
    evaluate still writes every figure, warns, and marks the abstention figures stale
    with the fix; the metrics JSON of a current threshold has no such mark."""
    root = project(tmp_path, True, 0.0)
    assert tune(root).returncode == 0
    done = evaluate(root)
    assert done.returncode == 0, done.stderr
    abstention = json.loads((root / "m.json").read_text())["abstention"]
    assert (abstention["abstain_below"], abstention["abstain_below_source"]) == (
        4.0,
        "abstention.yaml (tuned on dev, rule f1)",
    )
    assert (abstention["eval"]["abstain_rate"], abstention["eval"]["false_abstain_rate"]) == (1.0, 1.0)
    assert (abstention["dev"]["abstain_rate"], abstention["dev"]["false_abstain_rate"]) == (1.0, 0.5)
    assert "stale" not in abstention
    current = json.loads((root / "m.json").read_text())
    (root / "m.json").unlink()
    changed = {**SETTINGS, "chunking": {"ch": {"strategy": "fixed", "unit": "chars", "window": 200, "overlap": 0}}}
    params = yaml.safe_load((root / "params.yaml").read_text())
    (root / "params.yaml").write_text(yaml.safe_dump({**params, **changed}))
    done = evaluate(root)
    assert done.returncode == 0, done.stderr
    spec_changed = "the configuration spec (chunking 'ch' or retriever 'r') changed since it was tuned"
    assert f"ragvet: warning: abstention.yaml:4 (cfg): threshold stale: {spec_changed}, {MARKED}" in done.stderr
    assert STALE_FIX in done.stderr
    marked = json.loads((root / "m.json").read_text())
    assert marked["abstention"]["stale"] == {
        "reason": f"threshold stale: {spec_changed}, {MARKED}",
        "fix": "ragvet tune-abstain --config cfg",
    }
    assert marked["abstention"]["abstain_below"] == 4.0  # applied, not dropped: the mark says what it is worth
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    split = json.loads((root / "data" / "split.json").read_text())
    split["fingerprints"]["dev_split"] = "dev1"
    (root / "data" / "split.json").write_text(json.dumps(split))
    done = evaluate(root)
    assert done.returncode == 0, done.stderr
    dev_changed = "the dev split (its cases or labels) changed since it was tuned"
    assert json.loads((root / "m.json").read_text())["abstention"]["stale"]["reason"] == (
        f"threshold stale: {dev_changed}, {MARKED}"
    )
    assert current["eval"] == marked["eval"]  # the retrieval figures do not depend on the threshold


def test_a_stale_threshold_stops_the_gate_only_where_it_guards_a_figure_the_threshold_moves(tmp_path):
    """No metric the gate can guard today reads a threshold, so the sample's gate never
    stops on one; a guarded abstain rate of a configuration marked stale would."""
    from ragvet.gating.freshness import stale_guards
    from ragvet.measures.answers import REVIEW_METRICS
    from ragvet.measures.registry import METRICS, reads_threshold

    mark = {"reason": "threshold stale: the dev split changed", "fix": "ragvet tune-abstain --config c"}
    (tmp_path / "c.json").write_text(json.dumps({"abstention": {"stale": mark}}))
    (tmp_path / "d.json").write_text(json.dumps({"abstention": {}}))
    assert [name for name in [*METRICS, *REVIEW_METRICS] if reads_threshold(name)] == []
    assert stale_guards(gate_of({"configs": ["c", "d"], "metrics": ["recall@5", "unsupported_answer"]}), tmp_path) == []
    [problem] = stale_guards(gate_of({"configs": ["c", "d"], "metrics": ["recall@5", "abstain_rate"]}), tmp_path)
    assert (problem.where, problem.fix) == (
        str(tmp_path / "c.json"),
        "run `ragvet tune-abstain --config c`, then `dvc repro`",
    )
    assert problem.what == "the gate guards abstain_rate of c, which its stale threshold moves: " + mark["reason"]


def test_the_report_names_a_stale_threshold_and_its_fix():
    from ragvet.reporting.absolute import stale_threshold_lines, threshold_section

    mark = {"reason": "threshold stale: the dev split changed", "fix": "ragvet tune-abstain --config c"}
    summaries = {
        "c": {"abstention": {"abstain_below": 2.5, "stale": mark}},
        "d": {"abstention": {"abstain_below": 1.0}},
    }
    assert stale_threshold_lines(summaries) == [
        "- **Stale threshold, `c`:** threshold stale: the dev split changed; its abstention rates describe a "
        "threshold chosen for other scores. Fix: `ragvet tune-abstain --config c`, then `dvc repro`.",
        "",
    ]
    rows = [line for line in threshold_section(summaries) if line.startswith("| c |") or line.startswith("| d |")]
    assert [row.split(" | ")[1] for row in rows] == ["2.5 (stale)", "1.0"]
    assert stale_threshold_lines({"d": summaries["d"]}) == []
    hostile = {"reason": "r", "fix": "ragvet tune-abstain --config a_b`x"}  # a name with markdown in it
    (line, _) = stale_threshold_lines({"a_b`x": {"abstention": {"stale": hostile}}})
    assert line.endswith("Fix: ``ragvet tune-abstain --config a_b`x``, then `dvc repro`.")  # verbatim, one span


def test_tune_abstain_and_evaluate_refuse_a_split_record_without_its_fingerprints(tmp_path):
    """A data/split.json whose dev fingerprint is gone: both read it before anything else
    (it was a KeyError traceback), exit 2 at the file, and write nothing."""
    root = project(tmp_path, True, 0.0)
    split = root / "data" / "split.json"
    split.write_text(json.dumps({**json.loads(split.read_text()), "fingerprints": {"eval_split": "ev0", "corpus": 3}}))
    for done in (tune(root), evaluate(root)):
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        assert "data/split.json: `fingerprints.corpus` must be text, got a number" in done.stderr
        assert "data/split.json: `fingerprints.dev_split` must be text, got nothing (null)" in done.stderr
    assert not (root / "abstention.yaml").exists() and not (root / "m.json").exists()
