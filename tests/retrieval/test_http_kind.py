"""``kind: http`` against a real HTTP server on 127.0.0.1, started by the test.

The server is the sample's search app (:mod:`sample_systems.search_app`): BM25 over
its own line chunking of a tiny corpus, answering in Elasticsearch's ``_search``
shape, so the spec under test is the documented Elasticsearch template. Other
paths are slow, failing, rate-limited, malformed, or need a credential.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections import Counter
from pathlib import Path

import pytest
from builders import evaluate_run
from typer.testing import CliRunner

from ragvet.cli import app
from ragvet.errors import InputError
from ragvet.inputs.params import run_cache_blind_keys
from ragvet.retrieval.kinds import retrieve
from ragvet.retrieval.passages import passage_table
from ragvet.retrieval.specs.registry import retriever_problems
from ragvet.schema import Case, Claim, Doc, EvidenceUnit
from sample_systems.search_app import SearchHandler, line_passages, search_handler, serve

LEAVE = "Employees get 25 days.\nCarry up to five unused days into the next year.\nThe plan year is 2026."
BENEFITS = "Dental is covered.\nVision is covered after one year."
DOCS = {
    "leave": Doc("leave", LEAVE, metadata={"doc_type": "policy"}),
    "benefits": Doc("benefits", BENEFITS, metadata={"doc_type": "benefits"}),
}
CARRY = EvidenceUnit("leave", 23, 51)  # "Carry up to five unused days"
CASES = [
    Case("c1", "carry unused days", True, (CARRY,), (Claim("five days carry", (CARRY,)),)),
    Case("c2", "is vision covered", filter={"doc_type": "benefits"}),
]
SECRET = "s3cr3t-token-value"


class Faulty(SearchHandler):
    """POST /<mode>/_search with an Elasticsearch body; ``mode`` picks a behaviour, ``ok`` the app's own."""

    calls: Counter = Counter()

    def do_POST(self):
        mode = urllib.parse.urlsplit(self.path).path.strip("/").split("/")[0]
        request = self.read_request()
        question = request["query"]["bool"]["must"]["match"]["text"]
        Faulty.calls[mode, question] += 1
        calls = Faulty.calls[mode, question]
        if mode == "slow":
            time.sleep(1.0)  # longer than the client's timeout: nobody reads an answer
            return None
        if mode == "fail":
            return self.reply(503, b"backend down")
        if mode == "busy" and calls <= 2:
            return self.reply(429, b"slow down", {"Retry-After": "0"})
        if mode == "wait" and calls == 1:
            return self.reply(429, b"slow down", {"Retry-After": "1"})
        if mode == "notjson":
            return self.reply(200, b"<html>oops</html>")
        if mode == "nohits":
            return self.reply(200, b'{"took": 3}')
        if mode == "auth" and self.headers.get("Authorization") != f"Bearer {SECRET}":
            return self.reply(401, f"bad credential {self.headers.get('Authorization')}".encode())
        self.answer(request)


Search = search_handler(line_passages(DOCS.values()), Faulty)


def test_the_app_chunks_by_lines_with_offsets_and_metadata():
    passages = line_passages([Doc("d", "  # Title \n\nFirst line.\n   \nLast", metadata={"year": 2026})])
    assert [(p["text"], p["start"], p["end"]) for p in passages] == [
        ("# Title", 2, 9),
        ("First line.", 12, 23),
        ("Last", 28, 32),
    ]
    assert passages[0]["meta"] == {"year": "2026"} and passages[0]["doc_id"] == "d"


@pytest.fixture(scope="module")
def server():
    httpd = serve(Search)
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("RAGVET_CACHE_DIR", str(tmp_path / "cache"))
    Faulty.calls.clear()
    return tmp_path / "cache" / "http"


def es_spec(url: str, **extra) -> dict:
    """The documented Elasticsearch/OpenSearch BM25 template (docs/retrievers.md)."""
    return {
        "kind": "http",
        "url": f"{url}?size={{k}}",  # as Elasticsearch takes it; a params key named size is refused
        "method": "POST",
        "body": {
            "query": {"bool": {"must": {"match": {"text": "{question}"}}, "filter": "{filter_terms}"}},
        },
        "response": {"hits": "hits.hits", "doc_id": "_source.doc_id", "text": "_source.text", "score": "_score"},
        "retries": 2,
        "backoff_s": 0.01,
        **extra,
    }


def test_the_elasticsearch_template_is_a_valid_spec(server):
    assert retriever_problems("es", es_spec(f"{server}/ok/_search"), "params.yaml") == []
    assert run_cache_blind_keys(es_spec(f"{server}/ok/_search")) == []  # no `size` key DVC's run cache would miss


def test_foreign_passages_from_the_endpoint_are_scored_against_span_labels(server):
    run = retrieve(CASES, [], es_spec(f"{server}/ok/_search"), 3, docs=DOCS)
    # c1: the server's line 2 of leave ("Carry up to five unused days into the next year.",
    # 48 characters) is located at [23, 71), its line 1 ("Employees get 25 days.") at [0, 22);
    # c2's filter leaves only the benefits doc, whose two lines both say "covered".
    assert [(r["case_id"], r["rank"], r["chunk_id"]) for r in run] == [
        ("c1", 1, "leave@23-71"),
        ("c1", 2, "leave@0-22"),
        ("c2", 1, "benefits@19-52"),
        ("c2", 2, "benefits@0-18"),
    ]
    rows = evaluate_run(
        CASES, passage_table([r["chunk_id"] for r in run]), {"c1": run[:2], "c2": run[2:]},
        {"c1": "eval", "c2": "eval"}, [1, 2], 1.0, {d.doc_id: d.text for d in DOCS.values()}, chunk_level=False,
    )  # fmt: skip
    # the evidence [23, 51) lies inside the top passage: available at k = 1, its claim too
    assert rows[0]["metrics"]["evidence_recall@1"] == 1.0
    assert rows[0]["metrics"]["claim_availability@1"] == 1.0
    assert rows[0]["metrics"]["context_chars@2"] == 48 + 22
    assert rows[0]["metrics"]["recall@1"] is None


def test_responses_are_cached_by_request_and_the_cache_clears(server, cache):
    spec = es_spec(f"{server}/ok/_search")
    timed: dict[str, float] = {}
    first = retrieve(CASES, [], spec, 3, docs=DOCS, latency=timed)
    assert sum(Faulty.calls.values()) == 2 and len(list(cache.glob("*.json"))) == 2
    again: dict[str, float] = {}
    assert retrieve(CASES, [], spec, 3, docs=DOCS, latency=again) == first
    assert sum(Faulty.calls.values()) == 2  # the re-run asked nothing
    assert again == timed and sorted(timed) == ["c1", "c2"]  # each response keeps the latency it was fetched in
    retrieve(CASES, [], spec, 4, docs=DOCS)  # another k is another request
    assert sum(Faulty.calls.values()) == 4
    result = CliRunner().invoke(app, ["cache", "clear", "--http"])
    assert result.exit_code == 0 and "removed 4 cached http responses" in result.output
    assert retrieve(CASES, [], spec, 3, docs=DOCS) == first
    assert sum(Faulty.calls.values()) == 6


def test_rate_limits_are_retried_after_the_servers_delay(server):
    run = retrieve(CASES[:1], [], es_spec(f"{server}/busy/_search"), 3, docs=DOCS)
    assert run[0]["chunk_id"] == "leave@23-71" and Faulty.calls["busy", "carry unused days"] == 3
    started = time.monotonic()
    retrieve(CASES[:1], [], es_spec(f"{server}/wait/_search", backoff_s=0), 3, docs=DOCS)
    assert time.monotonic() - started >= 1.0  # Retry-After: 1 was respected, backoff_s 0 was not used


@pytest.mark.parametrize(
    ("mode", "extra", "fragment", "calls"),
    [
        ("fail", {}, "status 503: backend down (after 2 retries)", 3),
        ("slow", {"timeout_s": 0.2, "retries": 0}, "timed out after 0.2 s", 1),
        ("notjson", {}, "status 200 but the response is not JSON: '<html>oops</html>'", 1),
        ("nohits", {}, "the response has no `hits.hits`", 1),
    ],
)
def test_failures_name_the_case_and_the_status(server, mode, extra, fragment, calls):
    url = f"{server}/{mode}/_search"
    with pytest.raises(InputError) as caught:
        retrieve(CASES[:1], [], es_spec(url, **extra), 3, docs=DOCS)
    (problem,) = caught.value.problems
    assert problem.where == f"http retriever POST {url}?size={{k}} (case c1)"  # the template, not its values
    assert fragment in problem.what
    assert Faulty.calls[mode, "carry unused days"] == calls


def test_a_failing_endpoint_writes_no_run_and_exits_2(server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cases.jsonl").write_text("".join(json.dumps(c.to_row()) + "\n" for c in CASES))
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(d.to_row()) + "\n" for d in DOCS.values()))
    (tmp_path / "chunks.jsonl").write_text("")
    spec = es_spec(f"{server}/fail/_search")
    params = {"retrievers": {"es": spec}, "configs": {"es": {"chunking": "x", "retriever": "es"}}, "depth": 3}
    params["chunking"] = {"x": {"strategy": "fixed", "unit": "chars", "window": 40, "overlap": 0}}  # checked at start
    (tmp_path / "params.yaml").write_text(json.dumps(params))
    args = ["retrieve", "es", "--chunks", "chunks.jsonl", "--cases", "cases.jsonl", "--corpus", "corpus.jsonl"]
    result = CliRunner().invoke(app, [*args, "--out", "run.parquet"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "(case c1)" in result.output and "(case c2)" in result.output and "status 503" in result.output
    assert not (tmp_path / "run.parquet").exists()


def test_credentials_come_from_the_environment_and_never_show(server, tmp_path, monkeypatch, cache):
    spec = es_spec(f"{server}/auth/_search", secret_headers={"Authorization": "SEARCH_AUTH"}, retries=0)
    monkeypatch.delenv("SEARCH_AUTH", raising=False)
    with pytest.raises(InputError, match="environment variable SEARCH_AUTH is not set"):
        retrieve(CASES, [], spec, 3, docs=DOCS)
    wrong = f"Bearer {SECRET}-old"
    monkeypatch.setenv("SEARCH_AUTH", wrong)
    with pytest.raises(InputError) as caught:
        retrieve(CASES, [], spec, 3, docs=DOCS)
    rendered = caught.value.render()
    assert "status 401: bad credential [redacted]" in rendered and SECRET not in rendered
    monkeypatch.setenv("SEARCH_AUTH", f"Bearer {SECRET}")
    run = retrieve(CASES, [], spec, 3, docs=DOCS)
    assert run[0]["chunk_id"] == "leave@23-71"
    stored = "".join(path.read_text() for path in cache.glob("*.json"))
    assert len(list(cache.glob("*.json"))) == 2 and SECRET not in stored


def test_spec_problems_are_named():
    problems = retriever_problems("es", {"kind": "http", "url": "http://u:pw@host/x", "response": {"hits": "h"}}, "p")
    whats = [p.what for p in problems]
    assert "the url holds a password" in whats
    assert "http needs `response` with `hits` and `score` paths" in whats
