"""``kind: http`` against hostile and broken endpoints (issue 31).

Every endpoint is a real server on 127.0.0.1 (or 127.0.0.2) started by the test:
:class:`Endpoint`, a raw socket server that reads one request and answers it with
whatever bytes the test scripts, malformed or not. The tests that carry a secret run
the installed ``ragvet retrieve`` in a subprocess, as DVC does, and search its stdout,
stderr and every file it left (the cache under ``.ragvet/cache/http/``,
``.ragvet/problems.txt``) for the secret and for every 8-character piece of it.
"""

from __future__ import annotations

import json
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragvet.cli import app
from ragvet.errors import InputError
from ragvet.retrieval.endpoints import build_request
from ragvet.retrieval.kinds import retrieve
from ragvet.retrieval.specs.registry import retriever_problems
from ragvet.schema import Case, Doc

LEAVE = "Employees get 25 days.\nCarry up to five unused days into the next year.\nThe plan year is 2026."
DOCS = {"leave": Doc("leave", LEAVE)}
CASES = [Case("c1", "carry unused days")]
CARRY = "Carry up to five unused days into the next year."
GOOD = {"hits": [{"doc_id": "leave", "text": CARRY, "score": 2.0}]}
SECRET = "Bearer s3cr3t-0123456789-abcdefghij"
RAGVET = Path(sys.executable).parent / "ragvet"


# --- the endpoint ---------------------------------------------------------------------


@dataclass
class Seen:
    """One request as the endpoint read it (header names in lower case)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


Answer = Callable[[Seen, socket.socket], None]


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.server.connections += 1
        reader = self.request.makefile("rb")
        line = reader.readline(100_000)
        if not line.strip():
            return
        method, path, _ = line.decode("latin-1").split(" ", 2)
        headers = {}
        while (line := reader.readline(100_000)) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        seen = Seen(method, path, headers, reader.read(int(headers.get("content-length", 0))))
        self.server.seen.append(seen)
        try:
            self.server.answer(seen, self.request)
        except OSError:  # the client hung up: what a size limit or a deadline does
            pass


class Endpoint(socketserver.ThreadingTCPServer):
    """A server on ``host`` answering every request with ``answer(seen, socket)``."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, answer: Answer, host: str = "127.0.0.1"):
        super().__init__((host, 0), _Handler)
        self.answer, self.seen, self.connections = answer, [], 0
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://{self.server_address[0]}:{self.server_address[1]}"

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()


def reply(status: int, body: bytes, headers: tuple[str, ...] = ()) -> bytes:
    head = [f"HTTP/1.1 {status} Status", "Content-Type: application/json", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join([*head, "Connection: close"]) + "\r\n\r\n").encode("latin-1") + body


def answering(status: int, body: object, headers: tuple[str, ...] = ()) -> Answer:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return lambda seen, sock: sock.sendall(reply(status, raw, headers))


# --- the project and the run ----------------------------------------------------------


def spec_for(url: str, **extra) -> dict:
    return {
        "kind": "http",
        "url": url,
        "body": {"q": "{question}", "k": "{k}"},
        "response": {"hits": "hits", "doc_id": "doc_id", "text": "text", "score": "score"},
        "secret_headers": {"Authorization": "SEARCH_AUTH"},
        "retries": 0,
        "timeout_s": 5,
        **extra,
    }


def project(folder: Path, spec: dict) -> Path:
    """A ragvet project of one configuration, ``es``, whose retriever is ``spec``."""
    (folder / "cases.jsonl").write_text("".join(json.dumps(c.to_row()) + "\n" for c in CASES))
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d.to_row()) + "\n" for d in DOCS.values()))
    (folder / "chunks.jsonl").write_text("")
    params = {"retrievers": {"es": spec}, "configs": {"es": {"chunking": "x", "retriever": "es"}}, "depth": 3}
    params["chunking"] = {"x": {"strategy": "fixed", "unit": "chars", "window": 40, "overlap": 0}}
    (folder / "params.yaml").write_text(json.dumps(params))
    return folder


ARGS = ["retrieve", "es", "--chunks", "chunks.jsonl", "--cases", "cases.jsonl", "--corpus", "corpus.jsonl"]
ARGS += ["--out", "run.parquet"]


def ragvet(folder: Path, secret: str = SECRET) -> subprocess.CompletedProcess:
    """``ragvet retrieve es`` in ``folder``, as DVC runs it, with ``$SEARCH_AUTH`` set to ``secret``."""
    env = {key: value for key, value in os.environ.items() if key != "RAGVET_CACHE_DIR"}
    env["SEARCH_AUTH"] = secret
    return subprocess.run([str(RAGVET), *ARGS], cwd=folder, env=env, capture_output=True, text=True, timeout=120)


def pieces(secret: str) -> set[str]:
    """The secret and every 8-character piece of it."""
    return {secret} | {secret[i : i + 8] for i in range(len(secret) - 7)}


def leaks(folder: Path, result: subprocess.CompletedProcess, secret: str = SECRET) -> list[str]:
    """Where the secret, or a piece of it, shows: the output, the errors, any file left behind."""
    places = {"stdout": result.stdout.encode(), "stderr": result.stderr.encode()}
    places |= {str(path.relative_to(folder)): path.read_bytes() for path in folder.rglob("*") if path.is_file()}
    forms = {form for piece in pieces(secret) for form in (piece.encode(), json.dumps(piece)[1:-1].encode())}
    return sorted(f"{place}: {form!r}" for place, data in places.items() for form in forms if form in data)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("RAGVET_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SEARCH_AUTH", SECRET)
    return tmp_path / "cache" / "http"


def cached(folder: Path) -> list[Path]:
    return sorted((folder / ".ragvet" / "cache" / "http").glob("*"))


# --- 1. redirects ---------------------------------------------------------------------


@contextmanager
def redirecting(status: int, target: str) -> Iterator[tuple[Endpoint, Endpoint]]:
    """The endpoint, answering ``status`` to ``target`` (``port``, ``host``, ``ftp``, ``same``),
    and the server the redirect points at, which answers well: a client that follows it
    would get a valid answer."""
    host = "127.0.0.2" if target == "host" else "127.0.0.1"
    with Endpoint(answering(200, GOOD), host) as other:
        location = {
            "port": f"{other.url}/elsewhere",
            "host": f"{other.url}/elsewhere",
            "ftp": f"ftp://127.0.0.1:{other.server_address[1]}/pub",
        }.get(target, "/final")

        def answer(seen: Seen, sock: socket.socket) -> None:
            if seen.path == "/final":
                return answering(200, GOOD)(seen, sock)
            sock.sendall(reply(status, b"moved", (f"Location: {location}",)))

        with Endpoint(answer) as endpoint:
            yield endpoint, other


@pytest.mark.parametrize(
    ("status", "target"), [(302, "port"), (301, "host"), (303, "ftp"), (307, "port"), (308, "same")]
)
def test_no_redirect_is_followed_so_the_secret_goes_nowhere_else(tmp_path, status, target):
    with redirecting(status, target) as (endpoint, other):
        result = ragvet(project(tmp_path, spec_for(f"{endpoint.url}/search", timeout_s=2)))
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert f"status {status} redirects to " in result.stderr and "follows no redirect" in result.stderr
        assert [(seen.method, seen.path) for seen in endpoint.seen] == [("POST", "/search")]
        assert endpoint.seen[0].body and other.connections == 0  # nothing asked the other origin
    assert not (tmp_path / "run.parquet").exists() and cached(tmp_path) == []
    assert leaks(tmp_path, result) == []


# --- 2. a secret no header can carry ------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [f"{SECRET}\n", f"{SECRET}\r\n", f"{SECRET[:12]}\n{SECRET[12:]}", f"{SECRET}€"],
    ids=["newline", "crlf", "inner-newline", "not-latin-1"],
)
def test_a_secret_no_header_can_carry_is_named_by_its_variable(tmp_path, value):
    with Endpoint(answering(200, GOOD)) as endpoint:
        result = ragvet(project(tmp_path, spec_for(f"{endpoint.url}/search")), secret=value)
        assert endpoint.connections == 0
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "environment variable SEARCH_AUTH (secret header Authorization)" in result.stderr
    assert leaks(tmp_path, result, value.strip()) == [] and leaks(tmp_path, result, value) == []


# --- 3. an endpoint that echoes the credential ----------------------------------------


def echoing(where: str) -> Answer:
    """An endpoint that puts the ``Authorization`` it was sent ``where`` in its answer."""

    def answer(seen: Seen, sock: socket.socket) -> None:
        auth = seen.headers.get("authorization", "")
        if where == "error":  # cut at the 200-byte excerpt with 20 characters of the token in
            return sock.sendall(reply(401, ("denied " + "." * 173 + auth).encode()))
        if where == "chunk_id":
            body = json.dumps({"hits": [{"id": auth, "score": 1.0}]}).encode()
        elif where == "text":
            body = json.dumps({"hits": [{"doc_id": "leave", "text": auth, "score": 1.0}]}).encode()
        elif where == "anywhere":
            body = json.dumps({**GOOD, "debug": {"headers": {"Authorization": auth}}}).encode()
        else:  # escaped: the JSON text spells each character as \\uXXXX, its value is the token
            body = json.dumps({**GOOD, "debug": ""}).encode()[:-2] + b"".join(b"\\u%04x" % ord(c) for c in auth) + b'"}'
        sock.sendall(reply(200, body))

    return answer


@pytest.mark.parametrize("where", ["chunk_id", "text", "anywhere", "escaped", "error"])
def test_a_credential_echoed_back_reaches_no_message_and_no_cache(tmp_path, where):
    extra = {"response": {"hits": "hits", "chunk_id": "id", "score": "score"}} if where == "chunk_id" else {}
    with Endpoint(echoing(where)) as endpoint:
        result = ragvet(project(tmp_path, spec_for(f"{endpoint.url}/search", **extra)))
        assert endpoint.seen[0].headers["authorization"] == SECRET  # it was sent, and came back
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"http retriever POST {endpoint.url}/search (case c1)" in result.stderr
    assert leaks(tmp_path, result) == []
    assert cached(tmp_path) == [] and not (tmp_path / "run.parquet").exists()


# --- 7. malformed responses -----------------------------------------------------------

MALFORMED = {
    "short body": (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n" + b'{"hits": [',
        "the response was cut short: 10 of its 1,000 bytes (Content-Length) came",
    ),
    "status line": (b"HTTP/1.1 two hundred OK\r\nContent-Length: 2\r\n\r\n{}", "malformed status line"),
    "many headers": (
        b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(101)) + b"Content-Length: 2\r\n\r\n{}",
        "malformed response: got more than 100 headers",
    ),
    "long header": (
        b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * 70_000 + b"\r\nContent-Length: 2\r\n\r\n{}",
        "a header line longer than 65,536 bytes",
    ),
    "deep json": (reply(200, b"[" * 100_000 + b"]" * 100_000), "the JSON nests too deeply to read"),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_response_is_a_located_error(tmp_path, monkeypatch, case):
    raw, fragment = MALFORMED[case]
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAGVET_CACHE_DIR", raising=False)
    monkeypatch.setenv("SEARCH_AUTH", SECRET)
    with Endpoint(lambda seen, sock: sock.sendall(raw)) as endpoint:
        project(tmp_path, spec_for(f"{endpoint.url}/search"))
        result = CliRunner().invoke(app, ARGS)
    assert result.exit_code == 2, result.exception  # an InputError, no traceback
    assert f"http retriever POST {endpoint.url}/search (case c1): {fragment}" in result.output
    assert not (tmp_path / "run.parquet").exists() and cached(tmp_path) == []


# --- 8. size and time -----------------------------------------------------------------


def test_a_response_declared_over_the_limit_is_refused_unread(cache_dir):
    def answer(seen: Seen, sock: socket.socket) -> None:
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 300000000\r\n\r\n" + b" " * 1_000_000)
        time.sleep(3)

    with Endpoint(answer) as endpoint, pytest.raises(InputError) as caught:
        started = time.monotonic()
        retrieve(CASES, [], spec_for(endpoint.url), 3, docs=DOCS)
    assert time.monotonic() - started < 2.5  # refused on the header, not read
    assert "the response is 300,000,000 bytes, over max_response_bytes (33,554,432)" in caught.value.render()
    assert not cache_dir.exists() or list(cache_dir.iterdir()) == []


def test_a_stream_over_the_limit_is_cut_off(cache_dir):
    sent = []

    def answer(seen: Seen, sock: socket.socket) -> None:  # no Content-Length: the body ends with the connection
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
        for _ in range(32):
            sock.sendall(b" " * 1_000_000)
            sent.append(1_000_000)

    with Endpoint(answer) as endpoint, pytest.raises(InputError) as caught:
        retrieve(CASES, [], spec_for(endpoint.url, max_response_bytes=1_000_000), 3, docs=DOCS)
    assert "the response is over max_response_bytes (1,000,000)" in caught.value.render()
    assert sum(sent) < 16_000_000  # the client stopped reading and hung up
    assert not cache_dir.exists() or list(cache_dir.iterdir()) == []


@pytest.mark.parametrize("phase", ["status line", "body"])
def test_timeout_s_bounds_the_whole_request(cache_dir, phase):
    raw = reply(200, json.dumps(GOOD).encode())
    head = raw.index(b"\r\n\r\n") + 4 if phase == "body" else 0

    def answer(seen: Seen, sock: socket.socket) -> None:  # each byte 1.5 s after the last: no single read times out
        sock.sendall(raw[:head])
        for byte in raw[head : head + 8]:
            time.sleep(1.5)
            sock.sendall(bytes([byte]))

    with Endpoint(answer) as endpoint, pytest.raises(InputError) as caught:
        started = time.monotonic()
        retrieve(CASES, [], spec_for(endpoint.url, timeout_s=3), 3, docs=DOCS)
    assert time.monotonic() - started < 5
    assert "timed out after 3 s" in caught.value.render()


# --- 9. params the checks let through -------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "where", "fragment"),
    [
        ("method", 5, "method", "method must be GET or POST, got a number 5"),
        ("secret_headers", {"Authorization": 5}, "secret_headers.Authorization", "must name an environment variable"),
        ("secret_headers", {"Bad Name": "X"}, "secret_headers", "'Bad Name' is not a header name"),
        ("headers", {"X-Team": "a\nb"}, "headers.X-Team", "a header value must be one line of Latin-1 text"),
        ("headers", {"X-Team": 5}, "headers.X-Team", "a header value must be one line of Latin-1 text"),
        ("timeout_s", 1.5e308, "timeout_s", "timeout_s must be a number of seconds over 0 and at most 600"),
        ("timeout_s", 0, "timeout_s", "timeout_s must be a number of seconds over 0 and at most 600"),
        ("retries", 1100, "retries", "retries must be a whole number from 0 to 10"),
        ("backoff_s", 1e300, "backoff_s", "backoff_s must be a number of seconds from 0 to 60"),
        ("concurrency", 10_000, "concurrency", "concurrency must be a whole number from 1 to 64"),
        ("max_response_bytes", 2**40, "max_response_bytes", "from 1 to 1,073,741,824"),
        ("url", "http://127.0.0.1:99999/x", "url", "the url's port is not a number from 0 to 65535"),
        ("url", "http:///x", "url", "the url names no host"),
        ("url", "http://127.0.0.1:9/a b", "url", "the url holds a space or a control character"),
        ("url", "http://token@127.0.0.1:9/x", "url", "the url holds a user name"),
    ],
)
def test_params_the_checks_let_through_are_refused_at_their_key(key, value, where, fragment):
    spec = {**spec_for("http://127.0.0.1:9/x"), key: value}
    problems = retriever_problems("es", spec, "params.yaml: retrievers.es")
    assert [(p.where, fragment in p.what) for p in problems] == [(f"params.yaml: retrievers.es.{where}", True)]


def test_a_backoff_that_would_wait_over_60_s_is_refused():
    (problem,) = retriever_problems("es", spec_for("http://127.0.0.1:9/x", retries=8), "params.yaml: retrievers.es")
    assert problem.where == "params.yaml: retrievers.es.retries"
    assert "retries 8 with backoff_s 0.5 would wait 64 s before the last retry" in problem.what


def test_the_stage_refuses_a_bad_method_at_its_key(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    project(tmp_path, spec_for("http://127.0.0.1:9/x", method=5))
    result = CliRunner().invoke(app, ARGS)
    assert result.exit_code == 2, result.exception
    assert "params.yaml:1 (retrievers.es.method): method must be GET or POST, got a number 5" in result.output


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("http://127.0.0.1:99999/x", "the url's port is not a number"),
        ("http://127.0.0.1:9/a b", "the url holds a space"),
    ],
)
def test_a_url_the_checks_would_refuse_is_a_problem_at_run_time_too(cache_dir, url, fragment):
    with pytest.raises(InputError) as caught:  # a spec given in code, never checked
        retrieve(CASES, [], spec_for(url), 3, docs=DOCS)
    assert fragment in caught.value.render()


def test_many_retries_do_not_overflow_the_backoff(cache_dir):
    with Endpoint(answering(429, b"slow down", ("Retry-After: 0",))) as endpoint, pytest.raises(InputError) as caught:
        retrieve(CASES, [], spec_for(endpoint.url, retries=1100, backoff_s=0.01), 3, docs=DOCS)
    assert "status 429: slow down (after 1100 retries)" in caught.value.render()
    assert len(endpoint.seen) == 1101


# --- 18. the cache --------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [{"hits": "nope"}, {"hits": [{"doc_id": "leave", "text": CARRY, "score": "high"}]}],
    ids=["hits-not-a-list", "text-score"],
)
def test_a_response_that_fails_to_map_is_never_cached(cache_dir, bad):
    with Endpoint(answering(200, bad)) as endpoint:
        for _ in range(2):
            with pytest.raises(InputError):
                retrieve(CASES, [], spec_for(endpoint.url), 3, docs=DOCS)
        assert len(endpoint.seen) == 2  # the re-run asked again
    assert not cache_dir.exists() or list(cache_dir.iterdir()) == []


def test_a_response_whose_hits_are_not_found_is_never_cached(cache_dir):
    stale = {"hits": [{"doc_id": "leave", "text": "A line the corpus no longer holds.", "score": 1.0}]}
    with Endpoint(answering(200, stale)) as endpoint:
        for _ in range(2):
            with pytest.raises(InputError, match="not found in doc 'leave'"):
                retrieve(CASES, [], spec_for(endpoint.url), 3, docs=DOCS)
        assert len(endpoint.seen) == 2  # the index may be rebuilt between runs: ask again
    assert not cache_dir.exists() or list(cache_dir.iterdir()) == []


def cache_file(spec: dict) -> Path:
    """Where the response of :data:`CASES`' request is cached."""
    key = build_request(spec, CASES[0], 3, {"SEARCH_AUTH": SECRET}).key()
    return Path(os.environ["RAGVET_CACHE_DIR"]) / "http" / f"{key}.json"


def test_a_cached_response_that_fails_to_map_says_how_to_ask_again(cache_dir):
    with Endpoint(answering(200, GOOD)) as endpoint:
        spec = spec_for(endpoint.url)
        path = cache_file(spec)
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"response": {"hits": "nope"}, "seconds": 0.1}))  # as an older ragvet kept it
        with pytest.raises(InputError) as caught:
            retrieve(CASES, [], spec, 3, docs=DOCS)
        assert endpoint.seen == []
    (problem,) = caught.value.problems
    assert "`hits` is not a list" in problem.what and f"the response was read from the cache ({path})" in problem.what
    assert "ragvet cache clear --http" in problem.fix


@pytest.mark.parametrize(
    "content",
    [b"not json{", b"[1, 2]", b'{"response": {}}', b'{"response": {}, "seconds": "fast"}', b"\xff\xfe"],
    ids=["not-json", "a-list", "no-seconds", "text-seconds", "not-utf-8"],
)
def test_a_cache_file_ragvet_did_not_write_is_a_clear_error(cache_dir, content):
    with Endpoint(answering(200, GOOD)) as endpoint:
        spec = spec_for(endpoint.url)
        path = cache_file(spec)
        path.parent.mkdir(parents=True)
        path.write_bytes(content)
        with pytest.raises(InputError) as caught:
            retrieve(CASES, [], spec, 3, docs=DOCS)
    (problem,) = caught.value.problems
    assert problem.where == str(path) and "is not a response ragvet cached" in problem.what
    assert "ragvet cache clear --http" in problem.fix


def test_a_backoff_over_60_s_is_not_called_a_retry_after(cache_dir):
    with Endpoint(answering(503, b"backend down")) as endpoint, pytest.raises(InputError) as caught:
        retrieve(CASES, [], spec_for(endpoint.url, retries=1, backoff_s=61), 3, docs=DOCS)
    rendered = caught.value.render()
    assert "status 503: backend down (the next wait, backoff_s × 2^0 = 61 s, is over 60 s)" in rendered
    assert "Retry-After" not in rendered
    with Endpoint(answering(503, b"backend down", ("Retry-After: 120",))) as endpoint, pytest.raises(InputError) as c:
        retrieve(CASES, [], spec_for(endpoint.url, retries=1), 3, docs=DOCS)
    assert "status 503: backend down (the server's Retry-After, 120 s, is over 60 s)" in c.value.render()
