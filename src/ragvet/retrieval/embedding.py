"""Sentence-embedding models, loaded offline, and a persistent cache of their vectors.

Models never come from a hub: a model name stands for a local folder
(:func:`ragvet.retrieval.models.resolve_model`, which loads none of this module's libraries).

torch and sentence-transformers belong to the ``dense`` extra, not to the core
install, so they are imported inside functions and their absence is an
:class:`InputError` that says how to install them.

**Same bits on every machine.** A vector must be a function of its text alone:
never of the texts encoded beside it, the thread count, the batch size, or the
CPU, whose instruction set (AVX-512 here, AVX2 there) picks the kernels of torch,
MKL and oneDNN, and so how their sums round. Two precisions (``precision``):

- ``portable`` (the default): the model runs in float64, and each L2-normalised
  vector is rounded to a grid of :data:`GRID` steps per unit (int16 at 2**14). The
  float64 noise between kernels, thread counts and batch shapes is below 4e-16
  per component (measured, ``docs/reproducibility.md``), against a grid step of
  6.1e-5, so a component lands on another grid point with probability about 1e-12:
  the grid turns noise into the same integers everywhere.
- ``fast``: the model runs in float32, whose noise (up to 2e-7) moves about one
  component in 2,600 to a neighbouring grid point on another CPU; ``ragvet verify``
  tells that noise from a real change (:mod:`ragvet.gating.reproduction`).

Portable texts are encoded in sentence-transformers' own padded batches of similar
length: padding, like the batch a text lands in, changes a float64 vector by noise
of the same size, which the grid absorbs (measured with it). Fast texts are encoded
in batches of equal token length (no padding), which costs about twice the time on
texts of many lengths. A float32 vector then does not depend on its company, and a
warm cache gives a cold one's bytes, where MKL runs its matrix products in strict
mode on its AVX2 or AVX-512 branch (measured; ragvet pins AVX2 strict, which MKL
honours on Intel CPUs). In MKL's other modes (its COMPATIBLE branch, any branch
without STRICT, the AUTO it falls back to on an AMD CPU) a vector's last bits can
follow the size of its batch, within ``ragvet verify``'s tolerance. Both precisions
run under torch, MKL and oneDNN kernels pinned to AVX2 (:func:`pin_float_kernels`),
which removes most float32 noise on one CPU family. Vectors are stored *and* returned
as grid points, so a cached vector is the one the same call returned when it was computed.

**Exact scores.** A grid vector is ``k / 2**14`` with integers ``|k| <= 2**14``, so
:func:`exact_scores` computes dot products on those integers in float64. Every
product and partial sum is an integer below 2**53 (the sum is bounded by the
product of the norms, about 2**28), so the result is exact whatever the summation
order, thread count, FMA or SIMD width: scores carry no noise of their own.

**Cache.** :class:`EmbeddingCache` is one SQLite file, keyed by (model id, prefix,
sha256 of the text). SQLite is in the standard library, keeps everything in one
file and makes each write an atomic transaction, so a killed run cannot leave a
torn entry and two stages writing at once wait for each other. The model id
(:func:`model_id`) hashes the content of the model's weight, config and tokenizer
files, the versions of torch, transformers and sentence-transformers, the
precision and, in fast mode, the float kernels in force (:func:`kernel_label`, MKL's
mode as MKL reports it), so two different models, or one model under two library
versions, never share entries, while the same weights at two paths do. The cache
never changes results; if its file cannot be opened or written, ragvet says so on
stderr and goes on without it.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.metadata
import os
import platform
import sqlite3
import sys
from collections import defaultdict
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragvet.errors import InputError, Problem
from ragvet.retrieval.models import DEFAULT_MODEL, DENSE_INSTALL_FIX, FAST, PORTABLE, WHERE, model_error, resolve_model
from ragvet.storage.progress import progress_bar

GRID_BITS = 14
GRID = float(2**GRID_BITS)  # grid steps per unit of a normalised component; int16 holds +-2**14
LOGIT_GRID = float(2**20)  # grid steps per unit of a cross-encoder logit
CACHE_FILE = "embeddings-v2.sqlite"

# Files whose content defines what a model computes.
_FINGERPRINT_SUFFIXES = {".json", ".txt", ".model", ".safetensors", ".bin", ".pt", ".pth", ".py", ".vocab", ".spm"}
_FINGERPRINT_SKIP_DIRS = {"onnx", "openvino", ".git", ".cache"}
_SQL_VARS = 500  # ids per IN (...) query, well under SQLite's limit
SAVE_EVERY = 2048  # texts encoded between two cache writes
CPU, CUDA = "cpu", "cuda"  # the devices an encoder runs on: every engine's CPU, a Ray actor's GPU


def _library_versions() -> str:
    versions = []
    for dist in ("torch", "transformers", "sentence-transformers"):
        try:
            versions.append(f"{dist}={importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{dist}=none")
    return ";".join(versions)


@functools.lru_cache(maxsize=16)
def _folder_fingerprint(folder: str) -> str:
    digest = hashlib.sha256()
    root = Path(folder)
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if not path.is_file() or path.suffix not in _FINGERPRINT_SUFFIXES:
            continue
        if _FINGERPRINT_SKIP_DIRS & set(rel.parts[:-1]) or rel.name.startswith("."):
            continue
        file_hash = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                file_hash.update(block)
        digest.update(f"{rel.as_posix()}\0{file_hash.hexdigest()}\n".encode())
    return digest.hexdigest()


def model_id(name: str, precision: str = PORTABLE, device: str = CPU) -> str:
    """Identity of what a model computes: its files' content, the library versions, the vector format.

    The path is not part of it, so the same weights at two paths share cache entries.
    The float kernels are part of it in fast mode only: portable vectors do not depend on
    them, nor on the device, so a GPU's portable vectors are a CPU's. A fast vector
    computed on a GPU (``device`` ``cuda``) is named by the device alone: its float32
    noise is the GPU's, within ``ragvet verify``'s tolerance of a CPU's.
    """
    folder = resolve_model(name)
    kernels = "any" if precision != FAST else kernel_label() if device == CPU else device
    key = (
        f"ragvet-embedding-v2;grid=2**{GRID_BITS};normalized;precision={precision};kernels={kernels};"
        f"{_library_versions()};{_folder_fingerprint(folder)}"
    )
    return hashlib.sha256(key.encode()).hexdigest()


def model_revision(name: str) -> str:
    """sha256 of a model folder's weight, config and tokenizer files: which weights, wherever they lie."""
    return _folder_fingerprint(resolve_model(name))


# --- float kernels --------------------------------------------------------

# What each library reads, before its first float operation, to pick its kernels.
PINNED_KERNELS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2,STRICT", "ONEDNN_MAX_CPU_ISA": "AVX2"}
NATIVE = "native"


def _cpu_has_avx2(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """True on an x86-64 CPU with AVX2; outside Linux, any x86-64 counts (all current ones have it)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        flags = next(line for line in cpuinfo.read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        return sys.platform != "linux"
    return "avx2" in flags.split()


def pin_float_kernels(environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """Pin torch's, MKL's and oneDNN's kernels to AVX2 before torch loads; return what is in force.

    Why: each library otherwise picks its kernels by CPU model, so two machines
    round differently and committed dense scores would move (see module doc).
    A value the user already set wins, so ``ATEN_CPU_CAPABILITY=default`` still
    simulates another CPU, and ``RAGVET_FLOAT_KERNELS=native`` opts out. Nothing
    is pinned on a CPU without AVX2, where those code paths do not exist.
    """
    if environ.get("RAGVET_FLOAT_KERNELS", "") == NATIVE or not _cpu_has_avx2():
        return {}
    for name, value in PINNED_KERNELS.items():
        environ.setdefault(name, value)
    return {name: environ[name] for name in PINNED_KERNELS}


def kernel_label(environ: Mapping[str, str] = os.environ) -> str:
    """The float kernels vectors are computed with, for the cache key: ``native`` or the pinned settings.

    MKL's setting is the mode MKL reports in force in this process (:func:`mkl_mode`), not
    the variable: MKL offers its named branches on Intel CPUs only and falls back to AUTO,
    silently, elsewhere or on a value it does not parse, so an AMD CPU's vectors get a key
    of their own. Where MKL cannot be asked, the variable stands.
    """
    settings = pin_float_kernels(dict(environ))
    if settings and (mode := mkl_mode()) is not None:
        settings["MKL_CBWR"] = mode
    return ",".join(f"{name}={value}" for name, value in sorted(settings.items())) or NATIVE


# MKL's code branches by number (mkl_service.h: MKL_CBWR_BRANCH_OFF ... MKL_CBWR_AVX512_E1).
_MKL_BRANCHES = {1: "OFF", 2: "AUTO", 3: "COMPATIBLE", 4: "SSE2", 6: "SSSE3", 7: "SSE4_1", 8: "SSE4_2", 9: "AVX"}
_MKL_BRANCHES |= {10: "AVX2", 11: "AVX512_MIC", 12: "AVX512", 13: "AVX512_MIC_E1", 14: "AVX512_E1"}
_MKL_CBWR_BRANCH, _MKL_CBWR_ALL, _MKL_CBWR_STRICT = 1, -1, 0x10000


def mkl_mode() -> str | None:
    """MKL's reproducibility mode in force in this process, spelt as ``MKL_CBWR`` spells it
    (``AVX2,STRICT``, ``AUTO``, ``OFF``); None where torch links no MKL it can be asked.

    Why: MKL reads ``MKL_CBWR`` at its first call, honours a named branch on Intel CPUs
    only and takes AUTO without a word for anything else, so only MKL itself can say which
    kernels ran. Pins this process's kernels first (:func:`pin_float_kernels`), as loading
    a model does, since asking is MKL's first call when no model has run yet.
    """
    pin_float_kernels()
    try:
        import torch  # deferred: the dense extra is optional and heavy
    except ImportError:
        return None
    if not torch.backends.mkl.is_available():
        return None
    try:
        get = ctypes.CDLL(str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so")).mkl_serv_cbwr_get
    except (OSError, AttributeError):  # not Linux: torch's library has another name there
        return None
    get.argtypes, get.restype = [ctypes.c_int], ctypes.c_int
    number = get(_MKL_CBWR_BRANCH)
    branch = _MKL_BRANCHES.get(number, str(number))
    return f"{branch},STRICT" if get(_MKL_CBWR_ALL) & _MKL_CBWR_STRICT else branch


def _warn_if_unpinned() -> None:
    """Say so when torch ran a float operation before ragvet could pin its kernels (then they are the CPU's)."""
    import torch  # deferred: the dense extra

    wanted = os.environ.get("ATEN_CPU_CAPABILITY", "").upper()
    found = torch.backends.cpu.get_cpu_capability()
    if pin_float_kernels() and wanted and wanted != found:
        print(
            f"ragvet: torch runs {found} kernels, not the pinned {wanted}: it was used before ragvet loaded it, "
            "so dense scores may differ in the last bits from another machine's.\n"
            "    fix: let ragvet import torch first, or set the variables of PINNED_KERNELS before starting Python",
            file=sys.stderr,
        )


# --- loading --------------------------------------------------------------


def _import_sentence_transformers():
    """sentence_transformers, imported offline with pinned float kernels; an InputError when the extra is missing."""
    pin_float_kernels()
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import sentence_transformers  # deferred: the dense extra
        import torch  # noqa: F401  (deferred: the dense extra is optional and heavy)
    except ImportError as err:
        raise InputError(
            [
                Problem(
                    WHERE,
                    f"dense retrieval needs {err.name or 'sentence-transformers'}, which is not installed",
                    DENSE_INSTALL_FIX,
                )
            ]
        ) from None
    _warn_if_unpinned()
    try:
        from transformers.utils import logging as transformers_logging  # deferred: the dense extra

        transformers_logging.disable_progress_bar()  # "Loading weights" bars are noise in stage output
        transformers_logging.set_verbosity_error()
    except ImportError:
        pass
    return sentence_transformers


def _in_precision(model, precision: str):
    """The model in float64 for ``portable``, as loaded (float32) for ``fast``."""
    if precision == PORTABLE:
        import torch  # deferred: the dense extra is optional and heavy

        model.to(torch.float64)
    return model


@functools.lru_cache(maxsize=4)
def _encoder_at(folder: str, precision: str, device: str):
    st = _import_sentence_transformers()
    return _in_precision(st.SentenceTransformer(folder, device=device, local_files_only=True), precision)


@functools.lru_cache(maxsize=4)
def _cross_encoder_at(folder: str, precision: str):
    st = _import_sentence_transformers()
    return _in_precision(st.CrossEncoder(folder, device="cpu", local_files_only=True), precision)


def load_encoder(name: str, precision: str = PORTABLE, device: str = CPU):
    """A SentenceTransformer on ``device`` in ``precision``, loaded once per process for each model folder."""
    return _encoder_at(resolve_model(name), precision, device)


def cuda_available() -> bool:
    """Whether torch here sees a CUDA device (imported as the encoders import it: kernels pinned first)."""
    _import_sentence_transformers()
    import torch  # deferred: the dense extra

    return torch.cuda.is_available()


def load_cross_encoder(path: str, precision: str = PORTABLE):
    """A CrossEncoder on CPU in ``precision``, loaded once per process for each model folder."""
    model = _cross_encoder_at(resolve_model(path), precision)
    if getattr(model, "num_labels", 1) != 1:
        raise model_error(
            path,
            f"is a cross-encoder with {model.num_labels} labels; reranking needs one score",
            "use a reranking cross-encoder (one output label)",
        )
    return model


def default_prompt(model) -> str | None:
    """The prompt a model's own config prepends to every input (usually none)."""
    name = getattr(model, "default_prompt_name", None)
    return (getattr(model, "prompts", None) or {}).get(name) if name else None


def run_by_length(
    model, inputs: list, batch_size: int, run: Callable[[list], np.ndarray], desc: str = "", bar=None
) -> np.ndarray:
    """``run`` over ``inputs`` in batches of equal token length.

    Results come back in input order. Equal lengths mean no padding, so each
    result does not depend on the other inputs of its batch (see module doc).
    ``run`` must apply :func:`default_prompt` as lengths are measured with it.
    ``bar`` is a progress bar to advance; without one, a bar named ``desc`` is shown.
    """
    import torch  # deferred: the dense extra

    lengths: list[int] = []
    for start in range(0, len(inputs), 256):
        features = model.preprocess(inputs[start : start + 256], prompt=default_prompt(model))
        mask = features.get("attention_mask") if hasattr(features, "get") else None  # a dict or BatchEncoding
        if mask is None:  # a model without an attention mask: one group, padding or not
            lengths = [0] * len(inputs)
            break
        lengths.extend(int(n) for n in mask.sum(dim=1).tolist())
    groups: dict[int, list[int]] = defaultdict(list)
    for position, length in enumerate(lengths):
        groups[length].append(position)
    results: list[Any] = [None] * len(inputs)
    own_bar = bar is None
    bar = progress_bar(total=len(inputs), desc=desc) if own_bar else bar
    try:
        with torch.inference_mode():
            for length in sorted(groups):
                members = groups[length]
                for start in range(0, len(members), batch_size):
                    batch = members[start : start + batch_size]
                    # A lone input runs twice in one batch: CPU kernels for a single row
                    # (matrix-vector) sum in another order than those for several rows.
                    values = run([inputs[i] for i in batch] * (2 if len(batch) == 1 else 1))
                    for position, value in zip(batch, values):
                        results[position] = value
                    bar.update(len(batch))
    finally:
        if own_bar:
            bar.close()
    return np.asarray(results)


def grid_vectors(vectors: np.ndarray) -> np.ndarray:
    """L2-normalise in float64 and round each component to the grid: the integers ``k`` of ``k / GRID``.

    Why: rounding to a grid far coarser than the float noise is what makes a vector
    the same bits on every machine (module doc). A zero vector stays zero.
    """
    values = np.asarray(vectors, dtype=np.float64)
    norms = np.sqrt((values * values).sum(axis=1, keepdims=True))
    unit = np.divide(values, norms, out=np.zeros_like(values), where=norms > 0)
    return (np.rint(unit * GRID) + 0.0).astype(np.int16)  # + 0.0: no -0 before the cast


def grid_logits(logits: np.ndarray) -> np.ndarray:
    """Cross-encoder logits rounded to steps of ``1 / LOGIT_GRID`` (about 1e-6), as float64.

    The float64 noise of a logit (about 1e-15) moves it to another grid point with
    probability about 1e-9, so reranking scores are the same bits on every machine.
    """
    return (np.rint(np.asarray(logits, dtype=np.float64) * LOGIT_GRID) + 0.0) / LOGIT_GRID


def exact_scores(passages: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Inner products of grid vectors, exact in float64 (see module doc).

    ``queries`` is one vector (result shape ``(len(passages),)``) or a matrix of them
    (shape ``(len(queries), len(passages))``); either way no bit depends on BLAS.
    """
    p = np.rint(np.asarray(passages, dtype=np.float64) * GRID)
    q = np.rint(np.asarray(queries, dtype=np.float64) * GRID)
    return (q @ p.T if q.ndim == 2 else p @ q) / (GRID * GRID)


# --- cache ----------------------------------------------------------------


def default_cache_dir() -> Path:
    """``$RAGVET_CACHE_DIR``, else ``.ragvet/cache`` under the current (DVC project) folder."""
    return Path(os.environ.get("RAGVET_CACHE_DIR") or Path(".ragvet") / "cache")


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    """Grid vectors (int16) keyed by (model id, prefix, sha256 of the text), in one SQLite file."""

    def __init__(self, directory: str | Path | None = None):
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.path = self.directory / CACHE_FILE
        self._conn: sqlite3.Connection | None = None
        self.disabled = False

    def _disable(self, err: Exception) -> None:
        if not self.disabled:
            print(
                f"ragvet: embedding cache {self.path} is unusable ({err}); going on without it.\n"
                f"    fix: delete that file, or set RAGVET_CACHE_DIR to a writable folder",
                file=sys.stderr,
            )
        self.disabled = True
        self.close()

    def _connect(self) -> sqlite3.Connection | None:
        if self._conn is None and not self.disabled:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(self.path, timeout=120)
                with conn:
                    conn.execute(
                        "CREATE TABLE IF NOT EXISTS embeddings (model TEXT NOT NULL, prefix TEXT NOT NULL, "
                        "text_sha256 TEXT NOT NULL, dim INTEGER NOT NULL, vector BLOB NOT NULL, "
                        "PRIMARY KEY (model, prefix, text_sha256)) WITHOUT ROWID"
                    )
                self._conn = conn
            except (sqlite3.Error, OSError) as err:
                self._disable(err)
        return self._conn

    def get_many(self, model: str, prefix: str, texts: Sequence[str]) -> tuple[dict[int, np.ndarray], list[int]]:
        """``({index: vector} for the cached texts, [indices of the others])``; duplicates each get theirs."""
        hashes = [text_hash(text) for text in texts]
        found: dict[str, np.ndarray] = {}
        conn = self._connect()
        if conn is not None:
            unique = sorted(set(hashes))
            try:
                for start in range(0, len(unique), _SQL_VARS):
                    part = unique[start : start + _SQL_VARS]
                    rows = conn.execute(
                        f"SELECT text_sha256, dim, vector FROM embeddings WHERE model = ? AND prefix = ? "
                        f"AND text_sha256 IN ({','.join('?' * len(part))})",
                        [model, prefix, *part],
                    ).fetchall()
                    for sha, dim, blob in rows:
                        if len(blob) == 2 * dim:  # anything else is damage: recompute it
                            found[sha] = np.frombuffer(blob, dtype="<i2").astype(np.int16)
            except sqlite3.Error as err:
                self._disable(err)
                found = {}
        hits = {i: found[h] for i, h in enumerate(hashes) if h in found}
        return hits, [i for i, h in enumerate(hashes) if h not in found]

    def put_many(self, model: str, prefix: str, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Store one grid vector (int16) per text, in one transaction (existing entries are kept)."""
        conn = self._connect()
        if conn is None:
            return
        rows = [
            (model, prefix, text_hash(text), int(vector.shape[0]), np.asarray(vector, dtype="<i2").tobytes())
            for text, vector in zip(texts, vectors)
        ]
        try:
            with conn:
                conn.executemany("INSERT OR IGNORE INTO embeddings VALUES (?, ?, ?, ?, ?)", rows)
        except sqlite3.Error as err:
            self._disable(err)

    def count(self) -> int:
        conn = self._connect()
        return 0 if conn is None else conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> EmbeddingCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --- embedding ------------------------------------------------------------


def encode_grid(model, inputs: list[str], batch_size: int, precision: str, bar=None) -> np.ndarray:
    """Grid vectors (int16 rows, in input order) of ``inputs`` as given (prefixes already applied).

    The one encoding every engine runs, in one process or on each actor of a cluster,
    so a vector has the same bits wherever it is computed. Portable: padded batches of
    similar length, as sentence-transformers forms them (the padding noise is float64
    noise, which the grid absorbs). Fast: equal lengths, no padding. ``bar`` is advanced
    by the number of inputs encoded.
    """

    def encode(batch: list[str], size: int) -> np.ndarray:
        return model.encode(
            batch, prompt=default_prompt(model), batch_size=size, convert_to_numpy=True, show_progress_bar=False
        )

    if precision == PORTABLE:
        vectors = encode(inputs, batch_size)
        if bar is not None:
            bar.update(len(inputs))
    else:
        vectors = run_by_length(model, inputs, batch_size, lambda batch: encode(batch, len(batch)), bar=bar)
    return grid_vectors(vectors)


def embed_texts(
    texts: Sequence[str],
    model_name: str = DEFAULT_MODEL,
    prefix: str = "",
    batch_size: int = 32,
    cache: EmbeddingCache | None = None,
    precision: str = PORTABLE,
) -> tuple[np.ndarray, dict[str, int]]:
    """Embed ``prefix + text`` for each text: rows of grid vectors as float32 (``k / GRID``, exact), in input order.

    Stats: ``hits`` and ``misses`` count input texts found or not in the cache;
    ``computed`` counts the distinct texts actually encoded. Only misses are
    encoded, each distinct text once, and then stored.
    """
    texts = list(texts)
    if not texts:
        return np.zeros((0, 0), dtype=np.float32), {"hits": 0, "misses": 0, "computed": 0}
    mid = model_id(model_name, precision)
    if cache is not None:
        hits, missing = cache.get_many(mid, prefix, texts)
    else:
        hits, missing = {}, list(range(len(texts)))
    unique = sorted({text_hash(texts[i]): texts[i] for i in missing}.items())
    computed: dict[str, np.ndarray] = {}
    if unique:
        model = load_encoder(model_name, precision)
        with progress_bar(total=len(unique), desc="embedding") as bar:
            # Stored slice by slice, so an interrupted run keeps what it computed. Slicing
            # changes no vector (a fast one's last bits only outside strict MKL: module doc).
            for start in range(0, len(unique), SAVE_EVERY):
                part = unique[start : start + SAVE_EVERY]
                vectors = encode_grid(model, [prefix + text for _, text in part], batch_size, precision, bar)
                computed.update((sha, vector) for (sha, _), vector in zip(part, vectors))
                if cache is not None:
                    cache.put_many(mid, prefix, [text for _, text in part], vectors)
    rows = [hits[i] if i in hits else computed[text_hash(texts[i])] for i in range(len(texts))]
    stats = {"hits": len(texts) - len(missing), "misses": len(missing), "computed": len(unique)}
    return np.stack(rows).astype(np.float32) / np.float32(GRID), stats
