"""The whole pipeline at 100,000 cases: each stage's time and peak RSS, and the git
bytes each run adds, with the per-case tables in git and in DVC.

    python benchmarks/scale.py [--cases 100000] [--corpus-copies 10] [--no-dense] [--distinct-questions]

Makes a project with ``ragvet init`` (one BM25 configuration, gated) in a temporary
folder. Its corpus is the sample's, copied ``--corpus-copies`` times under new doc ids
(``<doc>~<r>``); its cases are the sample's, copied until there are ``--cases``, each
copy with a new id, its evidence pointing into copy ``n % corpus-copies`` of its docs
(cases labelled by chunk id stay on the original docs). Unless ``--no-dense``, a dense
configuration (the sample's MiniLM, flat index) on the same chunking is added, not
gated. Its embedding cache is keyed by text, so the copies of a question or a chunk
are embedded once: at this size the dense stages measure the search, the cache and
the writing, and embedding throughput is ``retrieval.py``'s (on this 2-core machine
MiniLM embeds about 30 texts a second under load, so 100,000 distinct questions would
take most of an hour). ``--distinct-questions`` suffixes each copy's question with a
token no doc holds (``q<n>``) to embed every one.

Then, committing after each step:

1. tables in git, as the sample keeps them: ``dvc repro report``, ``ragvet baseline
   accept``, ``dvc repro`` (the first baseline), then one run after a change of
   ``retrievers.bm25.k1``;
2. ``ragvet migrate-storage``;
3. tables in DVC: one run after another change of ``k1``, then ``ragvet baseline
   accept`` and its ``dvc repro``.

For each commit it prints the bytes of the git objects it adds (blobs and trees,
uncompressed: ``git rev-list --objects A..B`` sized by ``git cat-file``), the largest
blob, and the time of the step. For the first ``dvc repro report`` and for the runs it
prints every stage process DVC started, as users run them: a ``ragvet`` first on PATH
times each ``ragvet <stage>`` command DVC runs and reads its peak RSS from
``wait4`` (DVC's own hashing between stages is in the step's time, not the stage's).
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
DENSE = "sentences-600-dense"
TIMER = """import json, os, subprocess, sys, time
start = time.perf_counter()
child = subprocess.Popen([{ragvet!r}, *sys.argv[1:]])
_, status, usage = os.wait4(child.pid, 0)
record = {{"stage": os.environ.get("DVC_STAGE", sys.argv[1]),
          "seconds": time.perf_counter() - start, "rss_mb": usage.ru_maxrss / 1024}}
with open({log!r}, "a") as handle:
    handle.write(json.dumps(record) + "\\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def tool_env(timers: Path | None = None) -> dict[str, str]:
    """This interpreter's folder first on PATH (dvc, ragvet), the stage timer before it."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    if timers is not None:
        path = f"{timers}{os.pathsep}{path}"
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "PATH": path}
    env.pop("PYTHONPATH", None)
    return env


def sh(repo: Path, *args: str, timers: Path | None = None) -> str:
    done = subprocess.run(args, cwd=repo, env=tool_env(timers), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} exited {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done.stdout


def stage_timer(work: Path) -> tuple[Path, Path]:
    """A folder holding a ``ragvet`` that runs this environment's and logs each stage's
    seconds and peak RSS to the returned log file."""
    folder, log = work / "timer", work / "stages.jsonl"
    folder.mkdir()
    script = folder / "timer.py"
    ragvet = str(Path(sys.executable).with_name("ragvet"))
    script.write_text(TIMER.format(ragvet=ragvet, log=str(log)), encoding="utf-8")
    wrapper = folder / "ragvet"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    return folder, log


def copied_corpus(copies: int, out: Path) -> None:
    """The sample's docs, ``copies`` times: copy 0 keeps the original ids, copy r
    is ``<doc>~<r>``."""
    out.mkdir()
    for source in sorted((ROOT / "data" / "corpus").iterdir()):
        for r in range(copies):
            name = source.name if r == 0 else f"{source.stem}~{r}{source.suffix}"
            shutil.copyfile(source, out / name)


def _moved(units: list[dict], copy: int) -> list[dict]:
    return [{**unit, "doc": f"{unit['doc']}~{copy}"} if copy else unit for unit in units]


def replicated_cases(count: int, copies: int, out: Path, distinct: bool) -> None:
    """The sample's cases, copied under new ids (``<id>~<n>``) until there are
    ``count``, each copy's evidence moved to a corpus copy (and its question made
    distinct with ``distinct``)."""
    cases = yaml.safe_load((ROOT / "data" / "cases" / "cases.yaml").read_text(encoding="utf-8"))
    with out.open("w", encoding="utf-8") as handle:
        for n in range(count):
            case = dict(cases[n % len(cases)])
            case["id"] = f"{case['id']}~{n // len(cases)}"
            if distinct:
                case["question"] = f"{case['question']} q{n}"
            copy = (n // len(cases)) % copies
            if "chunk" not in json.dumps(case):  # chunk ids name the original docs
                case["evidence"] = _moved(case.get("evidence", []), copy)
                case["claims"] = [{**c, "evidence": _moved(c["evidence"], copy)} for c in case.get("claims", [])]
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


def bench_params(dense: bool):
    """The chunking the sample's chunk-id labels are anchored on, an open gate (the
    gate is not what is measured, so no k1 change may stop `dvc repro`), and the
    sample's dense retriever beside BM25."""

    def change(params: dict) -> None:
        sample = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
        params["chunking"]["fixed-300"] = sample["chunking"]["fixed-300"]
        params["gate"]["max_drop"] = params["gate"]["slice_max_drop"] = 1.0
        if dense:
            params["retrievers"]["minilm"] = sample["retrievers"]["minilm"]
            params["configs"][DENSE] = {"chunking": params["configs"][CONFIG]["chunking"], "retriever": "minilm"}

    return change


class Steps:
    """Runs and commits each step, printing the git bytes it added; with ``stages``
    it also keeps the stage processes' times the timer logged during the step."""

    def __init__(self, repo: Path, timers: Path, log: Path) -> None:
        self.repo, self.timers, self.log = repo, timers, log
        self.stage_tables: list[tuple[str, list[dict]]] = []

    def step(self, label: str, commands: list[tuple[str, ...]], stages: bool = False) -> None:
        self.log.unlink(missing_ok=True)
        start = time.perf_counter()
        for command in commands:
            sh(self.repo, *command, timers=self.timers)
        before = sh(self.repo, "git", "rev-parse", "HEAD").strip()
        sh(self.repo, "git", "add", "-A")
        sh(self.repo, "git", "commit", "-q", "-m", label)
        total, largest = added_bytes(self.repo, before, "HEAD")
        print(f"| {label} | {total:,} | {largest:,} | {time.perf_counter() - start:.0f} |", flush=True)
        if stages and self.log.exists():
            records = [json.loads(line) for line in self.log.read_text().splitlines()]
            self.stage_tables.append((label, records))

    def print_stages(self) -> None:
        for label, records in self.stage_tables:
            print(f"\nStage processes of '{label}':\n\n| stage | seconds | peak RSS MB |\n| --- | ---: | ---: |")
            for record in records:
                print(f"| {record['stage']} | {record['seconds']:.1f} | {record['rss_mb']:.0f} |")
            seconds, peak = sum(r["seconds"] for r in records), max(r["rss_mb"] for r in records)
            print(f"| all stages | {seconds:.1f} | {peak:.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--corpus-copies", type=int, default=10)
    parser.add_argument("--no-dense", action="store_true", help="BM25 only")
    parser.add_argument("--distinct-questions", action="store_true", help="embed every question (slow)")
    parser.add_argument("--keep", action="store_true", help="keep the project folder (printed) to profile it")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ragvet-scale-"))
    try:
        copied_corpus(args.corpus_copies, work / "corpus")
        replicated_cases(args.cases, args.corpus_copies, work / "cases.jsonl", args.distinct_questions)
        repo = work / "project"
        sh(work, "ragvet", "init", str(repo), "--corpus", str(work / "corpus"), "--cases", str(work / "cases.jsonl"))
        sh(repo, "git", "config", "user.email", "bench@example.com")
        sh(repo, "git", "config", "user.name", "bench")
        edit_params(repo, bench_params(not args.no_dense))
        sh(repo, "git", "add", "-A")
        sh(repo, "git", "commit", "-q", "-m", "project")
        configs = CONFIG if args.no_dense else f"{CONFIG} (gated) and {DENSE}"
        docs = len(list((work / "corpus").iterdir()))
        print(f"{args.cases:,} cases, {docs} docs, {configs}, in {repo}\n")
        print("| commit | git bytes added | largest blob | seconds |\n| --- | ---: | ---: | ---: |")
        steps = Steps(repo, *stage_timer(work))
        repro = ("dvc", "repro")
        steps.step("git: first run (`dvc repro report`)", [("dvc", "repro", "report")], stages=True)
        steps.step("git: first baseline (`baseline accept`, `dvc repro`)", [("ragvet", "baseline", "accept"), repro])
        edit_params(repo, nudge_k1)
        steps.step("git: one run", [repro], stages=True)
        steps.step("migrate-storage", [("ragvet", "migrate-storage")])
        edit_params(repo, nudge_k1)
        steps.step("dvc: one run", [repro], stages=True)
        steps.step("dvc: baseline accepted", [("ragvet", "baseline", "accept"), repro])
        steps.print_stages()
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
