"""What an evaluate stage must read and write at a million cases, whatever it computes,
against DuckDB's and Polars' whole recall@k and MRR query on the same run.

    flock /tmp/bench.lock python benchmarks/io_floor.py [--workdir /tmp/ragvet-streaming]
                                                        [--size 1000000] [--rounds 3]

It reads the files ``streaming.py`` generated for ``--size`` cases x 100 and the per-case
table its evaluate run wrote there (``out/cases/bench.parquet``). Each step is a fresh
process (``streaming.timed``: wall seconds and peak RSS from outside), and the read and
write steps also time their one call from inside:

* **read**: pyarrow reads the run's ``case``, ``chunk`` and ``rank`` columns (what the
  peers read), then those and ``score`` (what the evaluate stage reads: the top score is
  the abstention signal), a row group (a million rows) at a time, each dropped when read,
  its columns decoded in threads;
* **write**: pyarrow writes the per-case table as the evaluate stage writes it (zstd, row
  groups of 65,536 rows, no statistics), the table read before the clock starts;
* **duckdb**, **polars**: ``streaming.py``'s queries, whole processes.

The rounds alternate the order. Printed: each step's best time, and the floor (the
four-column read plus the write, inside times) over DuckDB's and Polars' whole process.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from streaming import DUCKDB, POLARS, peer_command, timed

READ = """
import json, sys, time
import pyarrow.parquet as pq
start, rows = time.perf_counter(), 0
run = pq.ParquetFile(sys.argv[1])
for group in range(run.num_row_groups):
    rows += run.read_row_group(group, columns=json.loads(sys.argv[2])).num_rows
print(json.dumps({"inside": time.perf_counter() - start, "rows": rows}))
"""

WRITE = """
import json, sys, tempfile, time
import pyarrow.parquet as pq
table = pq.read_table(sys.argv[1])
with tempfile.TemporaryDirectory() as folder:
    start = time.perf_counter()
    pq.write_table(table, folder + "/cases.parquet", compression="zstd", write_statistics=False, row_group_size=65536)
    inside = time.perf_counter() - start
print(json.dumps({"inside": inside, "rows": table.num_rows, "columns": table.num_columns}))
"""


def steps(folder: Path) -> dict[str, list[str]]:
    """Each step's command, by name."""
    run, cases = str(folder / "run.parquet"), str(folder / "out/cases/bench.parquet")
    peers_columns, evaluate_columns = ["case", "chunk", "rank"], ["case", "chunk", "rank", "score"]
    return {
        "read case, chunk, rank": [sys.executable, "-c", READ, run, json.dumps(peers_columns)],
        "read case, chunk, rank, score": [sys.executable, "-c", READ, run, json.dumps(evaluate_columns)],
        "write the per-case table": [sys.executable, "-c", WRITE, cases],
        "duckdb (whole query)": peer_command(DUCKDB, folder),
        "polars (whole query)": peer_command(POLARS, folder),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ragvet-streaming"))
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    folder = args.workdir / f"{args.size}x100"
    if not (folder / "out/cases/bench.parquet").is_file():
        raise SystemExit(f"{folder}: run streaming.py --sizes {args.size} first (its evaluate run writes the table)")
    commands = steps(folder)
    best: dict[str, dict] = {}
    for round_number in range(args.rounds):
        order = list(commands) if round_number % 2 == 0 else list(reversed(commands))
        for name in order:
            got = timed(commands[name], folder)
            inside = json.loads(got["out"]).get("inside")
            got = {**got, "inside": inside if inside is not None else got["seconds"]}
            if name not in best or got["inside"] < best[name]["inside"]:
                best[name] = got
    print(f"{args.size:,} cases x 100; best of {args.rounds}; seconds inside the call (the peers: whole process)")
    print("| step | seconds | process seconds | peak RSS MB |")
    print("| --- | ---: | ---: | ---: |")
    for name, got in best.items():
        print(f"| {name} | {got['inside']:.2f} | {got['seconds']:.2f} | {got['rss_mb']:.0f} |")
    floor = best["read case, chunk, rank, score"]["inside"] + best["write the per-case table"]["inside"]
    for peer in ("duckdb (whole query)", "polars (whole query)"):
        print(f"floor (read + write) / {peer.split()[0]}: {floor / best[peer]['seconds']:.2f}")


if __name__ == "__main__":
    main()
