"""``engine: ray``: a corpus's passage vectors computed on a Ray cluster, the same bits as in one process.

How, and why each step keeps the bits:

1. The chunks, sorted by chunk_id, are cut into shards of ``shard_rows`` consecutive
   chunks. A shard's name is the sha256 of what determines its vectors (the model id of
   :func:`ragvet.retrieval.embedding.model_id`, the passage prefix, each chunk_id and the
   sha256 of its text), never of a worker, a run or an arrival order.
   The pairs stream in (:class:`ShardCutter`): a shard is cut as soon as it is full, so
   the driver never holds more than the shards it has cut and not yet seen stored.
2. Each shard still missing is handed, as it is cut, to a pool of :class:`ShardEncoder`
   actors (Ray's ``ActorPool``), at most :data:`IN_FLIGHT` per actor unfinished at a
   time: each actor loads the model once and encodes a shard with
   :func:`ragvet.retrieval.embedding.encode_grid`, the encoding the one-process stage runs,
   into grid vectors (int16), and writes one Parquet file per shard, ``<name>.parquet``,
   through fsspec (a local folder, or ``s3://...``): first under a temporary name, then
   moved, so a file that exists is whole.
3. A shard whose file exists is not computed again: a crashed or killed run resumes
   where it stopped, and a worker lost mid-shard only costs that shard (Ray restarts the
   actor elsewhere and runs its unfinished calls again).
4. The driver never reads the vectors to list them: whoever reads a shard (an actor of
   the exact search, or the driver itself when it builds an HNSW index) describes it
   (:func:`describe`), and the manifest (:func:`manifest`) is made from those records,
   checked against the plan: each shard's URI, rows and file sha256, with the model, its
   revision, tokenizer and maximum length, the dtype and grid, and the chunking's
   fingerprint. It is small enough for DVC; the vectors stay where it says, and it is
   stored beside them (:func:`write_manifest`).

A portable vector is a function of its text alone (see :mod:`ragvet.retrieval.embedding`),
so the cluster's vectors are byte for byte those of one machine; in fast mode they are
within ``ragvet verify``'s tolerance across CPUs, and equal on one CPU family. With
``ray_num_gpus`` each actor encodes on its GPU (:func:`encoder_device`): in portable mode
into the same grid vectors (float64 noise, absorbed by the grid), in fast mode under a
model id of their own (:func:`cluster_model_id`).
"""

from __future__ import annotations

import hashlib
import io
import itertools
import logging
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ragvet.errors import InputError, Problem
from ragvet.retrieval.embedding import (
    CPU,
    CUDA,
    GRID,
    GRID_BITS,
    cuda_available,
    encode_grid,
    load_encoder,
    model_id,
    model_revision,
    text_hash,
)
from ragvet.storage.files import dumps
from ragvet.storage.progress import progress_bar

MANIFEST_FORMAT = "ragvet-vectors-v1"
IN_FLIGHT = 2  # shards submitted per model actor and not yet finished: one encoding, one waiting
RAY_INSTALL_FIX = "install the ray extra: pip install 'ragvet[ray]' (pinned in requirements-ray.lock)"
MODEL_FIX = (
    "install the same ragvet[dense] lock and model package on every node as here "
    "(a model folder must be at the same absolute path on every node)"
)
NO_GPU = "ray_num_gpus gave it a GPU, and its torch sees no CUDA device"
NO_GPU_FIX = "install a CUDA build of torch on the GPU nodes, or set ray_num_gpus: 0 to encode on the CPUs"


@dataclass(frozen=True)
class Shard:
    """Consecutive chunks (by chunk_id) encoded and stored together, named by their content."""

    name: str
    chunk_ids: tuple[str, ...]
    texts: tuple[str, ...]

    def planned(self) -> PlannedShard:
        return PlannedShard(self.name, ids_digest(self.chunk_ids))


@dataclass(frozen=True)
class PlannedShard:
    """What the driver keeps of a shard once its texts went to the cluster: its name and the
    digest of its chunk ids (:func:`ids_digest`), against which a stored file is checked."""

    name: str
    ids: str


class ShardCutter:
    """Cuts ``(chunk_id, text)`` pairs arriving in chunk_id order into shards of ``rows``
    consecutive chunks, a shard as soon as it is full, so a stream of any length holds one
    shard at a time. Each shard is named by the sha256 of the model id, the prefix and its
    chunks' (chunk_id, text sha256): the same names on every run. The chunking's fingerprint
    (sha256 of every (chunk_id, text sha256), in chunk_id order: what the vectors were
    computed from) is summed on the way, from the same text hashes."""

    def __init__(self, mid: str, prefix: str, rows: int):
        self.head = f"{MANIFEST_FORMAT}\0{mid}\0{prefix}\n".encode()
        self.rows = rows
        self.digest = hashlib.sha256()

    def fingerprint(self) -> str:
        """The chunking's fingerprint of the pairs cut so far (of them all, once the stream is spent)."""
        return self.digest.hexdigest()

    def shards(self, pairs: Iterable[tuple[str, str]]) -> Iterator[Shard]:
        """The shards of ``pairs``, which must come in (chunk_id, text) order."""
        previous: tuple[str, str] | None = None
        part: list[tuple[str, str]] = []
        shard = hashlib.sha256(self.head)
        for pair in pairs:
            if previous is not None and pair < previous:
                raise ValueError(f"chunk {pair[0]!r} comes after {previous[0]!r}: the pairs are not in chunk_id order")
            line = f"{pair[0]}\0{text_hash(pair[1])}\n".encode()
            self.digest.update(line)
            shard.update(line)
            part.append(pair)
            previous = pair
            if len(part) == self.rows:
                yield _shard(shard, part)
                part, shard = [], hashlib.sha256(self.head)
        if part:
            yield _shard(shard, part)


def _shard(digest, part: list[tuple[str, str]]) -> Shard:
    return Shard(digest.hexdigest()[:32], tuple(c for c, _ in part), tuple(t for _, t in part))


def shard_uri(location: str, name: str) -> str:
    return f"{location.rstrip('/')}/{name}.parquet"


def shard_bytes(chunk_ids: Sequence[str], grid: np.ndarray) -> bytes:
    """One shard as Parquet: ``chunk_id`` (string) and ``vector`` (int16 array of the grid integers)."""
    frame = pl.DataFrame(
        {"chunk_id": list(chunk_ids), "vector": np.ascontiguousarray(grid, dtype=np.int16)},
        schema={"chunk_id": pl.String, "vector": pl.Array(pl.Int16, grid.shape[1])},
    )
    buffer = io.BytesIO()
    frame.write_parquet(buffer, compression="zstd", statistics=False)
    return buffer.getvalue()


def read_shard(data: bytes) -> tuple[list[str], np.ndarray]:
    """``(chunk_ids, int16 grid matrix)`` of one shard's Parquet bytes."""
    frame = pl.read_parquet(io.BytesIO(data))
    return frame["chunk_id"].to_list(), frame["vector"].to_numpy().astype(np.int16, copy=False)


def _filesystem(location: str):
    """fsspec's filesystem of ``location`` and the path in it; a protocol fsspec does not know,
    or whose package is not installed (``s3://`` without s3fs), is an error with the fix,
    naming the protocol only."""
    import fsspec  # deferred: a dependency of DVC, needed only by engine: ray (local folders; S3 with s3fs)

    where, protocol = "params.yaml: retrievers (engine: ray)", location.partition("://")[0]
    try:
        return fsspec.core.url_to_fs(location)
    except ImportError:
        what = f"`vectors` is on {protocol}://, and the package fsspec reads it with is not installed here"
        fix = "install it here and on every node (for s3://: pip install s3fs; the ray extra has it, pinned in "
        fix += "requirements-ray.lock)"
        raise InputError([Problem(where, what, fix)]) from None
    except ValueError:  # fsspec: "Protocol not known"
        what = f"`vectors` is on {protocol}://, a protocol fsspec does not know"
        raise InputError([Problem(where, what, "write a local folder or a URL fsspec reads, e.g. s3://")]) from None


def put(location: str, filename: str, data: bytes) -> None:
    """Write a file under ``location`` whole or not at all: a temporary name first, then a move onto its own."""
    fs, root = _filesystem(location)
    fs.makedirs(root, exist_ok=True)
    final = f"{root.rstrip('/')}/{filename}"
    temporary = f"{final}.{uuid.uuid4().hex}.tmp"
    with fs.open(temporary, "wb") as handle:
        handle.write(data)
    fs.mv(temporary, final)


def store(location: str, name: str, data: bytes) -> None:
    """Write shard ``name``'s Parquet bytes."""
    put(location, f"{name}.parquet", data)


def exists(location: str, name: str) -> bool:
    fs, root = _filesystem(location)
    return fs.exists(shard_uri(root, name))


def stored_shards(location: str) -> set[str]:
    """The names of the shards stored under ``location``, listed once: one request a page of
    names on S3, where asking shard by shard would cost a request for each of a hundred
    million chunks' tens of thousands of shards. The filesystem's cached listing is dropped
    first, so shards written since count."""
    fs, root = _filesystem(location)
    fs.invalidate_cache(root)
    try:
        listed = fs.ls(root, detail=False)
    except FileNotFoundError:
        return set()
    return {path.rsplit("/", 1)[-1].removesuffix(".parquet") for path in listed if path.endswith(".parquet")}


def load(location: str, name: str) -> bytes | None:
    """A shard's bytes (one request), or None when it was not written yet."""
    fs, root = _filesystem(location)
    try:
        return fs.cat_file(shard_uri(root, name))
    except FileNotFoundError:
        return None


class ShardEncoder:
    """A model actor: the model loaded once, then one shard per call, stored under its name.

    What stops this worker from loading the model (a model the driver resolves and this
    node does not, other weights or library versions) is not raised: Ray would restart the
    actor and hand the driver its traceback. It is returned with each shard instead, no
    shard is written, and the driver reports it (:func:`worker_problems`)."""

    def __init__(
        self, model_name: str, precision: str, prefix: str, batch_size: int, location: str, mid: str, device: str
    ):
        self.problem = ""
        try:
            if device == CUDA and not cuda_available():
                self.problem = NO_GPU
            elif model_id(model_name, precision, device) != mid:
                self.problem = (
                    "this worker's model files, library versions or (in fast precision) float kernels differ "
                    "from the driver's"
                )
            else:
                self.model = load_encoder(model_name, precision, device)
        except InputError as err:
            self.problem = "; ".join(problem.what for problem in err.problems)
        except Exception as err:  # anything else that stops the load: reported whole, never as a traceback
            self.problem = f"{type(err).__name__}: {err}"
        self.precision, self.prefix, self.batch_size, self.location = precision, prefix, batch_size, location

    def encode(self, shard: Shard) -> tuple[int, str]:
        """Store ``shard``'s vectors; its rows and this actor's problem ("" when none)."""
        if not self.problem and not exists(self.location, shard.name):  # a retried task may find its shard done
            inputs = [self.prefix + text for text in shard.texts]
            grid = encode_grid(self.model, inputs, self.batch_size, self.precision)
            store(self.location, shard.name, shard_bytes(shard.chunk_ids, grid))
        return len(shard.chunk_ids), self.problem


def worker_problems(found: set[str], settings: dict) -> list[Problem]:
    """The problems model actors returned, for the user: the model named, the fix for a cluster."""
    return [
        Problem(
            f"params.yaml: retrievers (model {settings['model']!r}, engine: ray)",
            f"a Ray worker could not load the model: {what}",
            NO_GPU_FIX if what == NO_GPU else MODEL_FIX,
        )
        for what in sorted(found)
    ]


def _ray():
    try:
        import ray  # deferred: the ray extra
    except ImportError:
        raise InputError([Problem("params.yaml", "engine: ray needs the Python module ray", RAY_INSTALL_FIX)]) from None
    return ray


def connect(address: str) -> Any:
    """ray, connected to ``address`` quietly: Ray's own logs would print the address."""
    ray = _ray()
    if not ray.is_initialized():
        ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False, configure_logging=True)
    logging.getLogger("ray").setLevel(logging.ERROR)
    return ray


def encoder_device(settings: dict) -> str:
    """Where the model actors encode: the GPU Ray gives each (``CUDA_VISIBLE_DEVICES``) when
    ``ray_num_gpus`` reserves one, else their CPUs."""
    return CUDA if settings["ray_num_gpus"] > 0 else CPU


def cluster_model_id(settings: dict) -> str:
    """The model id the actors' vectors are computed under (:func:`model_id` on their device),
    which names the shards and the manifest's model."""
    return model_id(settings["model"], settings["precision"], encoder_device(settings))


def start_encoders(ray, settings: dict, location: str, mid: str) -> list[Any]:
    """``ray_actors`` model actors; one whose node is lost is restarted elsewhere and its
    shard retried (Ray's actor fault tolerance), so a lost worker costs only its shard."""
    remote = ray.remote(ShardEncoder).options(
        num_cpus=settings["ray_num_cpus"], num_gpus=settings["ray_num_gpus"], max_restarts=-1, max_task_retries=-1
    )
    args = (settings["model"], settings["precision"], settings["passage_prefix"], settings["batch_size"], location, mid)
    args = (*args, encoder_device(settings))
    return [remote.remote(*args) for _ in range(settings["ray_actors"])]


def encode_on_cluster(ray, pending: Iterable[Shard], settings: dict, location: str, mid: str) -> int:
    """Encode the ``pending`` shards on the model actors as they come: each shard is its
    task's argument (Ray puts it in the object store), and at most :data:`IN_FLIGHT` shards
    per actor are submitted and not yet finished, so the driver holds that many shards' texts,
    whatever the length of ``pending``. The first problem an actor reports stops the
    submissions. Returns the number of shards computed; a bar counts their chunks, on a
    terminal only."""
    from ray.util import ActorPool  # deferred: the ray extra

    shards = iter(pending)
    first = next(shards, None)
    if first is None:  # every shard stored: no model is loaded
        return 0
    actors = start_encoders(ray, settings, location, mid)
    pool, found, computed, finished = ActorPool(actors), set(), 0, 0
    try:
        with progress_bar(total=None, desc="embedding on the cluster") as bar:
            for shard in itertools.chain([first], shards):
                if computed - finished >= IN_FLIGHT * len(actors):
                    found.add(_collect(pool, bar))
                    finished += 1
                if found - {""}:
                    break
                pool.submit(lambda actor, work: actor.encode.remote(work), shard)
                computed += 1
            while pool.has_next():
                found.add(_collect(pool, bar))
    finally:
        for actor in actors:
            ray.kill(actor)
    if found - {""}:
        raise InputError(worker_problems(found - {""}, settings))
    return computed


def _collect(pool, bar) -> str:
    """Wait for a shard to finish; the problem its actor reported ("" when none)."""
    rows, problem = pool.get_next_unordered()
    bar.update(rows)
    return problem


def store_on_cluster(ray, pairs: Iterable[tuple[str, str]], settings: dict) -> tuple[list[PlannedShard], str]:
    """Every shard of ``pairs`` (``(chunk_id, text)`` in chunk_id order, e.g. streamed from a
    chunk file by :func:`ragvet.storage.tables.chunk_texts_by_id`) stored: cut as the pairs
    come, and those whose file is missing computed on the cluster. Returns the plan (what the
    driver keeps of each shard) and the chunking's fingerprint."""
    location = io_location(settings["vectors"])
    mid = cluster_model_id(settings)
    cutter = ShardCutter(mid, settings["passage_prefix"], settings["shard_rows"])
    plan: list[PlannedShard] = []
    done = stored_shards(location)

    def missing() -> Iterator[Shard]:
        for shard in cutter.shards(pairs):
            plan.append(shard.planned())
            if shard.name not in done:
                yield shard

    computed = encode_on_cluster(ray, missing(), settings, location, mid)
    print(f"embeddings on the cluster: {len(plan) - computed} shards stored, {computed} computed")
    return plan, cutter.fingerprint()


def ids_digest(chunk_ids: Sequence[str]) -> str:
    """sha256 of a shard's chunk ids in order: how a reader checks a file holds the chunks its name says."""
    return hashlib.sha256("\n".join(chunk_ids).encode()).hexdigest()


def describe(name: str, blob: bytes | None) -> tuple[dict, list[str], np.ndarray]:
    """A stored shard's record (rows, file sha256, first and last chunk id, the digest of its
    chunk ids; ``ids`` None for a file missing or unreadable), its chunk ids and its grid.
    Whoever reads a shard describes it, so the driver never reads one to list it."""
    try:
        ids, grid = read_shard(blob) if blob is not None else ([], None)
    except (OSError, pl.exceptions.PolarsError):
        ids, grid = [], None
    if grid is None:
        return {"name": name, "ids": None}, [], np.zeros((0, 0), dtype=np.int16)
    record = {
        "name": name,
        "rows": len(ids),
        "sha256": hashlib.sha256(blob or b"").hexdigest(),
        "first_chunk_id": ids[0] if ids else "",
        "last_chunk_id": ids[-1] if ids else "",
        "ids": ids_digest(ids),
    }
    return record, ids, grid


def shard_entries(shards: Sequence[PlannedShard], records: Sequence[dict], location: str) -> list[dict]:
    """The manifest's shard list, in plan order, from the readers' records; a file that is
    missing, unreadable or holds other chunks than its name says is an error naming it."""
    by_name = {record["name"]: record for record in records}
    problems = [
        Problem(
            shard_uri(location, shard.name),
            "the vector shard is missing, unreadable or holds other chunks than its name says",
            "delete it and re-run: a missing shard is computed again",
        )
        for shard in shards
        if by_name.get(shard.name, {}).get("ids") != shard.ids
    ]
    if problems:
        raise InputError(problems)
    keys = ("rows", "sha256", "first_chunk_id", "last_chunk_id")
    return [
        {"name": s.name, "uri": shard_uri(location, s.name), **{k: by_name[s.name][k] for k in keys}} for s in shards
    ]


def gather_vectors(shards: Sequence[PlannedShard], location: str) -> tuple[np.ndarray, list[dict]]:
    """Every shard read here (what an index built in one process needs): the vectors as
    float32 (``k / GRID``, as :func:`embed_texts` returns them) in chunk_id order, and the records."""
    described = [describe(shard.name, load(location, shard.name)) for shard in shards]
    grids = [grid for _, _, grid in described if grid.size]
    vectors = grid_floats(np.concatenate(grids)) if grids else np.zeros((0, 0), np.float32)
    return vectors, [record for record, _, _ in described]


def grid_floats(grid: np.ndarray) -> np.ndarray:
    """Grid integers as the float32 vectors :func:`embed_texts` returns (``k / GRID``, exact in float32)."""
    return grid.astype(np.float32) / np.float32(GRID)


def manifest(shards: Sequence[PlannedShard], records: Sequence[dict], settings: dict, fingerprint: str) -> dict:
    """What the vectors are and where, checked against the plan: small, deterministic, free of
    credentials and absolute paths (``settings["vectors"]`` as written)."""
    model = load_encoder(settings["model"], settings["precision"])
    return {
        "format": MANIFEST_FORMAT,
        "model": settings["model"],
        "model_id": cluster_model_id(settings),
        "revision": model_revision(settings["model"]),
        "tokenizer": type(getattr(model, "tokenizer", None)).__name__,
        "max_seq_length": int(getattr(model, "max_seq_length", 0) or 0),
        "precision": settings["precision"],
        "passage_prefix": settings["passage_prefix"],
        "dtype": "int16",
        "grid": f"2**{GRID_BITS}",
        "chunking_fingerprint": fingerprint,
        "location": settings["vectors"],
        "shards": shard_entries(shards, records, settings["vectors"]),
    }


def write_manifest(listing: dict) -> None:
    """Store a manifest beside its shards, as ``<chunking fingerprint>-<model id>.manifest.json``
    (their first 16 hex digits): one file per chunking and model."""
    filename = f"{listing['chunking_fingerprint'][:16]}-{listing['model_id'][:16]}.manifest.json"
    put(io_location(listing["location"]), filename, dumps(listing).encode())


def io_location(location: str) -> str:
    """Where workers read and write: a URL as given, a local folder made absolute (a Ray
    worker's working folder is not the driver's; on several hosts it must be a shared one)."""
    return location if "://" in location else str(Path(location).resolve())
