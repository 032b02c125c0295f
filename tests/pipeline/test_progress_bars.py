"""Long work shows a progress bar on a terminal and stays quiet when its stderr is a pipe
or a file (CI's logs): the evaluate stage, ``ragvet import log``, ``ragvet verify``, the
ranking ``ragvet baseline accept`` keeps and the verdict's pairing of each table with its
baseline draw one through
``ragvet.storage.progress.progress_bar``. Each command runs as a user runs it, in a fresh
process whose stderr is a real pseudo-terminal or a pipe."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

from repos import tool_env

from ragvet.storage.progress import progress_bar

CONFIG = "fixed-300-bm25"  # a sample configuration without recorded answers: scored in batches


def terminal() -> tuple[int, int]:
    """A pseudo-terminal of 24 rows and 80 columns (tqdm draws no bar below a screen's last
    row, and a new pseudo-terminal has none): its master and slave ends."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    return master, slave


def on_terminal(command: list[str], cwd: Path) -> tuple[int, str]:
    """The exit code and what ``command`` wrote to its stderr, a pseudo-terminal."""
    master, slave = terminal()
    child = subprocess.Popen(
        command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave, env=tool_env()
    )
    os.close(slave)
    written = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        written.append(data)
    os.close(master)
    return child.wait(), b"".join(written).decode("utf-8", "replace")


def piped(command: list[str], cwd: Path) -> tuple[int, str]:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=tool_env(), check=False)
    return done.returncode, done.stderr


def evaluate(out: Path) -> list[str]:
    """The evaluate stage of ``CONFIG`` on the sample, its outputs in ``out``."""
    outputs = ["--metrics", f"{out}/m.json", "--per-case", f"{out}/c.parquet", "--slices", f"{out}/s.json"]
    return [sys.executable, "-m", "ragvet.cli", "evaluate", CONFIG, "--run", f"data/runs/{CONFIG}.parquet",
            "--chunks", "data/chunks/fixed-300.jsonl", "--corpus", "data/validated/corpus.jsonl",
            "--cases", "data/validated/cases.parquet", "--split", "data/split.json", *outputs]  # fmt: skip


def test_the_bar_draws_on_a_terminal_only(monkeypatch):
    master, slave = terminal()
    with os.fdopen(slave, "w") as screen:
        monkeypatch.setattr(sys, "stderr", screen)
        assert list(progress_bar(range(3), desc="counting")) == [0, 1, 2]
        screen.flush()
        drawn = os.read(master, 65536).decode() if select.select([master], [], [], 0)[0] else ""
    os.close(master)
    assert "counting:" in drawn and "0/3" in drawn  # drawn at the start, cleared at the end (leave=False)
    with open(os.devnull, "w") as pipe:
        monkeypatch.setattr(sys, "stderr", pipe)
        assert progress_bar(range(3), desc="counting").disable


def test_the_evaluate_stage_draws_its_batches_on_a_terminal_and_nothing_in_a_log(sample_repo, tmp_path):
    code, drawn = on_terminal(evaluate(tmp_path / "tty"), sample_repo)
    assert code == 0, drawn
    assert f"evaluate {CONFIG}: " in drawn and "0/1 [00:00<?, ? batches/s]" in drawn  # 181 cases: one batch
    code, logged = piped(evaluate(tmp_path / "pipe"), sample_repo)
    assert code == 0, logged
    assert f"evaluate {CONFIG}" not in logged
    assert (tmp_path / "tty/c.parquet").read_bytes() == (tmp_path / "pipe/c.parquet").read_bytes()


def test_import_log_counts_its_queries_on_a_terminal(tmp_path):
    log = tmp_path / "log.jsonl"
    rows = [
        {"query_id": f"q{n}", "question": "?", "results": [{"doc_id": "d", "rank": 1, "clicked": True}]}
        for n in range(3)
    ]
    log.write_text("".join(json.dumps(row) + "\n" for row in rows))
    outs = [f"--out-cases={tmp_path}/c.jsonl", f"--out-run={tmp_path}/r.jsonl"]
    command = [sys.executable, "-m", "ragvet.cli", "import", "log", str(log), *outs]
    code, drawn = on_terminal(command, tmp_path)
    assert code == 0, drawn
    assert "import log: 0 queries" in drawn
    code, logged = piped([*command, "--force"], tmp_path)
    assert code == 0, logged
    assert "import log" not in logged


def test_verify_draws_each_configuration_on_a_terminal(work_repo):
    command = [sys.executable, "-m", "ragvet.cli", "verify", "--against", "HEAD"]
    code, drawn = on_terminal(command, work_repo)
    assert code == 0, drawn
    assert f"verify {CONFIG}: 0 batches" in drawn
    code, logged = piped(command, work_repo)
    assert code == 0, logged
    assert "verify " not in logged


def test_baseline_accept_draws_the_ranking_it_keeps_on_a_terminal(work_repo):
    command = [sys.executable, "-m", "ragvet.cli", "baseline", "accept"]
    code, drawn = on_terminal(command, work_repo)
    assert code == 0, drawn
    assert "keep sentences-600-bm25's ranking: 0 batches" in drawn
    code, logged = piped(command, work_repo)
    assert code == 0, logged
    assert "ranking" not in logged


def test_the_verdict_draws_each_pairing_on_a_terminal(sample_repo, tmp_path):
    def verdict(out: Path) -> list[str]:
        return [sys.executable, "-m", "ragvet.cli", "verdict", "--cases-dir", "metrics/cases",
                "--split", "data/split.json", "--baseline", "metrics/baseline",
                "--out", f"{out}/gate.json", "--verdict", f"{out}/verdict.json"]  # fmt: skip

    code, drawn = on_terminal(verdict(tmp_path / "tty"), sample_repo)
    assert code == 0, drawn
    assert "pair sentences-600-bm25: 0 batches" in drawn  # the gated configuration
    code, logged = piped(verdict(tmp_path / "pipe"), sample_repo)
    assert code == 0, logged
    assert "pair " not in logged
    assert (tmp_path / "tty/verdict.json").read_bytes() == (tmp_path / "pipe/verdict.json").read_bytes()
