"""Git bytes one pipeline run adds, with the per-case tables in git and in DVC.

    python benchmarks/history.py [--cases 100000]

Makes a project with ``ragvet init`` (one BM25 configuration, gated) in a temporary
folder, on the sample's corpus and the sample's cases replicated to ``--cases`` (new
ids, the same evidence). Then, committing after each step:

1. tables in git, as the sample keeps them: ``dvc repro report``, ``ragvet baseline
   accept``, ``dvc repro`` (the first baseline), then one run after a change of
   ``retrievers.bm25.k1``;
2. ``ragvet migrate-storage``;
3. tables in DVC: one run after another change of ``k1``, then ``ragvet baseline
   accept`` and its ``dvc repro``.

For each commit it prints the bytes of the git objects it adds (blobs and trees,
uncompressed: ``git rev-list --objects A..B`` sized by ``git cat-file``), the
largest blob, and the time of the step.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIG = "sentences-600-bm25"


def sh(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "DVC_NO_ANALYTICS": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    env.pop("PYTHONPATH", None)
    done = subprocess.run(args, cwd=repo, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} exited {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done.stdout


def replicated_cases(count: int, out: Path) -> None:
    """The sample's cases, copied under new ids (``<id>~<n>``) until there are ``count``."""
    cases = yaml.safe_load((ROOT / "data" / "cases" / "cases.yaml").read_text(encoding="utf-8"))
    with out.open("w", encoding="utf-8") as handle:
        for n in range(count):
            case = dict(cases[n % len(cases)])
            case["id"] = f"{case['id']}~{n // len(cases)}"
            handle.write(json.dumps(case, ensure_ascii=False, sort_keys=True) + "\n")


def added_bytes(repo: Path, before: str, after: str) -> tuple[int, int]:
    """Uncompressed bytes of the git objects ``after`` adds to ``before``, and the largest blob."""
    objects = sh(repo, "git", "rev-list", "--objects", f"{before}..{after}")
    names = "\n".join(line.split()[0] for line in objects.splitlines()) + "\n"
    sizes = subprocess.run(
        ["git", "cat-file", "--batch-check=%(objecttype) %(objectsize)"],
        cwd=repo,
        input=names,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    pairs = [line.split() for line in sizes if line]
    blobs = [int(size) for kind, size in pairs if kind == "blob"]
    return sum(int(size) for kind, size in pairs if kind != "commit"), max(blobs, default=0)


def edit_params(repo: Path, change) -> None:
    params = yaml.safe_load((repo / "params.yaml").read_text())
    change(params)
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def nudge_k1(params: dict) -> None:
    """A change that moves the results, so that a run rewrites the per-case table."""
    params["retrievers"]["bm25"]["k1"] = round(params["retrievers"]["bm25"]["k1"] + 0.1, 3)


def bench_params(params: dict) -> None:
    """The chunking the sample's chunk-id labels are anchored on, and an open gate:
    the gate is not what is measured, so no k1 change may stop `dvc repro`."""
    sample = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    params["chunking"]["fixed-300"] = sample["chunking"]["fixed-300"]
    params["gate"]["max_drop"] = params["gate"]["slice_max_drop"] = 1.0


def step(repo: Path, label: str, commands: list[tuple[str, ...]]) -> None:
    start = time.perf_counter()
    for command in commands:
        sh(repo, *command)
    before = sh(repo, "git", "rev-parse", "HEAD").strip()
    sh(repo, "git", "add", "-A")
    sh(repo, "git", "commit", "-q", "-m", label)
    total, largest = added_bytes(repo, before, "HEAD")
    print(f"| {label} | {total:,} | {largest:,} | {time.perf_counter() - start:.0f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=100_000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ragvet-history-"))
    try:
        cases = work / "cases.jsonl"
        replicated_cases(args.cases, cases)
        repo = work / "project"
        sh(work, "ragvet", "init", str(repo), "--corpus", str(ROOT / "data" / "corpus"), "--cases", str(cases))
        sh(repo, "git", "config", "user.email", "bench@example.com")
        sh(repo, "git", "config", "user.name", "bench")
        edit_params(repo, bench_params)
        sh(repo, "git", "add", "-A")
        sh(repo, "git", "commit", "-q", "-m", "project")
        print(f"{args.cases:,} cases, one BM25 configuration ({CONFIG}), in {repo}\n")
        print("| commit | git bytes added | largest blob | seconds |\n| --- | ---: | ---: | ---: |")
        repro = ("dvc", "repro")
        step(repo, "git: first baseline", [("dvc", "repro", "report"), ("ragvet", "baseline", "accept"), repro])
        edit_params(repo, nudge_k1)
        step(repo, "git: one run", [repro])
        step(repo, "migrate-storage", [("ragvet", "migrate-storage")])
        edit_params(repo, nudge_k1)
        step(repo, "dvc: one run", [repro])
        step(repo, "dvc: baseline accepted", [("ragvet", "baseline", "accept"), repro])
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
