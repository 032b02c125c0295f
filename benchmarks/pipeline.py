"""Pipeline overhead and a grid of configurations through DVC's experiment queue.

    python benchmarks/pipeline.py [--rounds 3] [--grid 250 300 350 400] [--skip-queue]

Works on a clone of this repository's committed HEAD in a temporary folder (the
embedding cache is copied in, so dense stages read cached vectors as they would
on a developer's machine). It prints:

* **no-op**: ``dvc repro`` on an up-to-date sample against ``dvc status`` alone
  (best of ``--rounds``): what the pipeline adds to DVC's own check;
* **one chunking edited**: ``dvc repro`` after changing ``chunking.headings-1200``'s
  ``max_chars``, against a full ``dvc repro -f``, with the number of stages each
  ran (``fixed-300`` would re-run everything: cases cite chunks of it, so its
  params re-resolve their labels in ``validate``);
* **grid**: the ``--grid`` values of ``chunking.headings-1200.max_chars`` run as
  experiments one after another (``dvc exp run -S ...``) and then through the
  queue with two workers (``dvc exp run --queue -S ...``; ``dvc queue start -j 2``),
  the speed-up, and whether every queued experiment's metrics files equal the
  sequential one's byte for byte.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
METRICS = "metrics/headings-1200-bm25.json"


def sh(repo: Path, *args: str, check: bool = True) -> tuple[float, subprocess.CompletedProcess]:
    env = {
        **os.environ,
        "DVC_NO_ANALYTICS": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    env.pop("PYTHONPATH", None)  # the installed ragvet runs, whatever the caller put on the path
    start = time.perf_counter()
    done = subprocess.run(args, cwd=repo, env=env, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} exited {done.returncode}\n{done.stdout}\n{done.stderr}")
    return time.perf_counter() - start, done


def stages_run(output: str) -> int:
    return len(re.findall(r"^Running stage", output, flags=re.MULTILINE))


def best(repo: Path, rounds: int, *args: str) -> tuple[float, str]:
    times, output = [], ""
    for _ in range(rounds):
        seconds, done = sh(repo, *args)
        times.append(seconds)
        output = done.stdout
    return min(times), output


def clone(work: Path) -> Path:
    repo = work / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(repo)], check=True)
    if (ROOT / ".ragvet" / "cache").is_dir():
        shutil.copytree(ROOT / ".ragvet" / "cache", repo / ".ragvet" / "cache")
    for key, value in (("user.email", "bench@example.com"), ("user.name", "bench")):
        sh(repo, "git", "config", key, value)
    sh(repo, "dvc", "config", "--local", "core.analytics", "false")
    return repo


def overhead(repo: Path, rounds: int) -> None:
    cold, done = sh(repo, "dvc", "repro")
    print(f"fresh clone, first dvc repro: {cold:.1f} s, {stages_run(done.stdout)} stages ran")
    status, _ = best(repo, rounds, "dvc", "status")
    noop, output = best(repo, rounds, "dvc", "repro")
    print(f"\n{'command':<44}{'seconds':>9}{'stages run':>12}")
    print(f"{'dvc status':<44}{status:>9.2f}{'-':>12}")
    print(f"{'dvc repro (nothing changed)':<44}{noop:>9.2f}{stages_run(output):>12}")

    params = repo / "params.yaml"
    original = params.read_text()
    params.write_text(original.replace("    max_chars: 1200\n", "    max_chars: 1000\n", 1))
    edited, done = sh(repo, "dvc", "repro", check=False)
    edited_stages = stages_run(done.stdout)
    forced, done = sh(repo, "dvc", "repro", "-f", check=False)
    forced_stages = stages_run(done.stdout)
    print(f"{'dvc repro (chunking.headings-1200 edited)':<44}{edited:>9.2f}{edited_stages:>12}")
    print(f"{'dvc repro -f (everything)':<44}{forced:>9.2f}{forced_stages:>12}")
    print(f"\nno-op repro / dvc status: {noop / status:.2f}")
    print(f"edited-chunking repro / full repro -f: {edited / forced:.2f} ({edited_stages} of {forced_stages} stages)")
    params.write_text(original)
    sh(repo, "dvc", "repro")


def grid(repo: Path, sizes: list[int]) -> None:
    sh(repo, "git", "add", "-A")
    sh(repo, "git", "commit", "-q", "-m", "benchmark base", "--allow-empty")
    start = time.perf_counter()
    for size in sizes:
        sh(repo, "dvc", "exp", "run", "-S", f"chunking.headings-1200.max_chars={size}", "--name", f"seq-{size}")
    sequential = time.perf_counter() - start

    for size in sizes:
        setting = f"chunking.headings-1200.max_chars={size}"
        sh(repo, "dvc", "exp", "run", "--queue", "-S", setting, "--name", f"queued-{size}")
    start = time.perf_counter()
    sh(repo, "dvc", "queue", "start", "-j", "2")
    while True:
        _, done = sh(repo, "dvc", "queue", "status")
        if not re.search(r"\b(Queued|Running)\b", done.stdout):
            break
        time.sleep(0.5)
    queued = time.perf_counter() - start
    failed = re.findall(r"\bFailed\b", done.stdout)

    same = 0
    for size in sizes:
        texts = [
            sh(repo, "git", "show", f"refs/exps/{ref}:{METRICS}", check=False)[1].stdout for ref in _refs(repo, size)
        ]
        same += len(texts) == 2 and texts[0] == texts[1] and bool(texts[0])
    print(f"\n{'grid of ' + str(len(sizes)) + ' experiments':<44}{'seconds':>9}")
    print(f"{'dvc exp run -S ..., one after another':<44}{sequential:>9.1f}")
    print(f"{'dvc exp run --queue; dvc queue start -j 2':<44}{queued:>9.1f}")
    print(f"\nspeed-up with 2 workers: {sequential / queued:.2f}x; failed experiments: {len(failed)}")
    print(f"{METRICS} equal between queued and sequential runs: {same} of {len(sizes)}")
    sh(repo, "dvc", "queue", "stop", check=False)


def _refs(repo: Path, size: int) -> list[str]:
    """The exp refs (``<baseline>/<name>`` under refs/exps) of the sequential and queued runs of one size."""
    _, done = sh(repo, "git", "for-each-ref", "--format=%(refname)", "refs/exps")
    refs = [line.removeprefix("refs/exps/") for line in done.stdout.split()]
    return [ref for name in (f"seq-{size}", f"queued-{size}") for ref in refs if ref.endswith(f"/{name}")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--grid", type=int, nargs="+", default=[600, 900, 1500, 2000])
    parser.add_argument("--skip-queue", action="store_true")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, Python {platform.python_version()}, dvc {metadata.version('dvc')}")
    with tempfile.TemporaryDirectory(prefix="ragvet-bench-pipeline-") as scratch:
        repo = clone(Path(scratch))
        overhead(repo, args.rounds)
        if not args.skip_queue:
            grid(repo, args.grid)


if __name__ == "__main__":
    main()
