"""`ragvet import log` as a user runs it on a large search log: wall time and peak RSS of a
fresh process at several sizes, to show memory stays bounded as the log grows.

    python benchmarks/import_log.py [--sizes 100000 1000000] [--depth 10] [--seed 7]
                                    [--parquet] [--workdir DIR]

Each size is a seeded synthetic log of per-query JSONL rows (``--parquet``: also the same
log as per-passage Parquet rows), ``--depth`` chunk ids a query, a third of the queries
with one click (rank drawn from a geometric law, as clicks fall off with rank) and one in
twenty with a grade as well, five tenants. It is generated into ``--workdir`` (never the
repository) and imported by ``ragvet import log --chunking bench`` in a fresh process
timed from outside through ``stages.LAUNCHER`` (wall clock, and the child's own peak RSS
from ``wait4``). The point is how peak RSS grows: by 8 bytes per query id (the hash that
finds a repeated id), not with the rows.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
from pathlib import Path

from stages import LAUNCHER  # the sibling benchmark's launcher: the child's own peak RSS

HERE = Path(__file__).resolve().parent
TENANTS = ["acme", "beta", "corvid", "delta", "ember"]


def clicks(rng: random.Random, depth: int) -> tuple[int | None, int | None]:
    """The clicked rank (or None) and a grade of it (or None) of one query."""
    if rng.random() >= 1 / 3:
        return None, None
    rank = 1
    while rank < depth and rng.random() < 0.5:
        rank += 1
    return rank, (rng.randint(1, 3) if rng.random() < 0.15 else None)


def write_jsonl(path: Path, queries: int, depth: int, seed: int) -> None:
    """Per-query rows, written with string templates: json.dumps would dominate the time."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as handle:
        for number in range(queries):
            clicked, grade = clicks(rng, depth)
            results, base = [], rng.randrange(200_000)  # distinct docs within a query: a passage once
            for rank in range(1, depth + 1):
                label = ""
                if rank == clicked:
                    label = ',"clicked":true' + (f',"grade":{grade}' if grade else "")
                results.append(f'{{"chunk_id":"d{(base + rank * 7919) % 200_000}#{rank % 4}","rank":{rank}{label}}}')
            handle.write(
                f'{{"query_id":"q{number}","question":"how does feature {number % 9973} work",'
                f'"tenant":"{TENANTS[number % 5]}","results":[{",".join(results)}]}}\n'
            )


def write_parquet(jsonl: Path, path: Path) -> None:
    """The same log as per-passage Parquet rows (one row per returned chunk)."""
    import polars as pl

    result = pl.Struct({"chunk_id": pl.String, "rank": pl.Int64, "clicked": pl.Boolean, "grade": pl.Int64})
    schema = {"query_id": pl.String, "question": pl.String, "tenant": pl.String, "results": pl.List(result)}
    frame = (
        pl.scan_ndjson(jsonl, schema=schema)
        .explode("results")
        .unnest("results")
        .select("query_id", "question", "tenant", "chunk_id", "rank", "clicked", "grade")
    )
    frame.sink_parquet(path, row_group_size=100_000)


def run_import(folder: Path, log: Path, src: Path) -> dict:
    outs = [f"--out-cases={folder / 'cases.jsonl'}", f"--out-run={folder / 'run.jsonl'}"]
    command = [sys.executable, "-m", "ragvet.cli", "import", "log", str(log), "--chunking", "bench", *outs, "--force"]
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", LAUNCHER, *command], cwd=folder, env=env, capture_output=True, text=True
    )
    *err, last = done.stderr.splitlines() or [""]
    seconds, code, rss_kb = json.loads(last)
    if code != 0:
        raise SystemExit(f"exit {code}: {' '.join(err)[-400:]}")
    cases = next(line for line in done.stdout.splitlines() if line.startswith("cases:"))
    return {"seconds": seconds, "rss_mb": rss_kb / 1024, "cases": cases.split()[1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000], help="queries")
    parser.add_argument("--depth", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--parquet", action="store_true", help="also import the log as per-passage Parquet")
    parser.add_argument("--workdir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "ragvet-bench-log")
    args = parser.parse_args()
    src = HERE.parent / "src"
    print(f"depth {args.depth}, seed {args.seed}; {os.cpu_count()} cores; Python {sys.version.split()[0]}")
    print("| queries | log | MB | cases | seconds | µs per query | peak RSS MB |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for queries in args.sizes:
        folder = args.workdir / f"{queries}x{args.depth}"
        folder.mkdir(parents=True, exist_ok=True)
        logs = [folder / f"log-{args.seed}.jsonl"]
        if not logs[0].exists():
            write_jsonl(logs[0], queries, args.depth, args.seed)
        if args.parquet:
            logs.append(folder / f"log-{args.seed}.parquet")
            if not logs[1].exists():
                write_parquet(logs[0], logs[1])
        for log in logs:
            got = run_import(folder, log, src)
            layout = "per-query JSONL" if log.suffix == ".jsonl" else "per-passage Parquet"
            size = log.stat().st_size / 2**20
            print(f"| {queries:,} | {layout} | {size:,.0f} | {int(got['cases']):,} | {got['seconds']:.1f} "
                  f"| {got['seconds'] / queries * 1e6:.1f} | {got['rss_mb']:.0f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
