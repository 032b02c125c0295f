"""``kind: http``: the team's own retrieval endpoint as a configuration.

One request per case, built from a template: ``{question}``, ``{k}`` (the run's
depth), ``{filter}`` (the case's metadata filter as a JSON object) and
``{filter_terms}`` (the same as a list of ``{"term": {key: value}}``, what an
Elasticsearch/OpenSearch ``bool.filter`` takes). A body string that is exactly
one placeholder becomes the value itself (a number, an object); a placeholder
inside a longer string is replaced by its text. The URL takes ``{question}`` and
``{k}``, URL-encoded.

The response is mapped to passages by dot paths (``response.hits``, then per
hit ``chunk_id``, or ``doc_id`` with ``start``/``end`` or ``text``, and ``score``).

Every response is cached under ``<cache>/http/`` by the hash of its request
(method, URL, body and the non-secret headers), with the latency measured when
it was fetched: a re-run is deterministic and does not load the cluster again.
``ragvet cache clear --http`` empties it. Secret headers come from environment
variables named in params (``secret_headers: {Authorization: SEARCH_AUTH}``);
they are not part of the cache key and their values are redacted from every
message, so they reach no output, log or error.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragvet.errors import InputError, Problem, raise_if
from ragvet.retrieval.embedding import default_cache_dir
from ragvet.retrieval.passages import PassageLocator
from ragvet.retrieval.plugins import add_score, item_id
from ragvet.retrieval.ranking import RunRow, rank_scored
from ragvet.retrieval.request import Request
from ragvet.retrieval.specs.http import RESPONSE_KEYS, header_value_flaw, setting
from ragvet.retrieval.transport import CHECK_FIX, Limits, Refused, fetch
from ragvet.schema import Case
from ragvet.storage.atomic import write_text
from ragvet.text.values import is_number

CACHE_FOLDER = "http"
PIECE = 8  # this many characters of a secret in a row are redacted from a message, refused in a response


def http_cache_dir() -> Path:
    """Where responses are cached: beside the embedding cache (``$RAGVET_CACHE_DIR``)."""
    return default_cache_dir() / CACHE_FOLDER


def clear_http_cache() -> int:
    """Delete every cached response; returns how many there were."""
    folder = http_cache_dir()
    count = len(list(folder.glob("*.json"))) if folder.is_dir() else 0
    shutil.rmtree(folder, ignore_errors=True)
    return count


# --- the request --------------------------------------------------------------------


def _filter_terms(filter_: Mapping[str, Any]) -> list[dict]:
    return [{"term": {key: value}} for key, value in sorted(filter_.items())]


def _fill(template: Any, values: Mapping[str, Any]) -> Any:
    """The template with each ``{name}`` replaced (see the module's docstring)."""
    if isinstance(template, dict):
        return {key: _fill(value, values) for key, value in template.items()}
    if isinstance(template, list):
        return [_fill(value, values) for value in template]
    if isinstance(template, str):
        for name, value in values.items():
            if template == f"{{{name}}}":
                return value
        for name, value in values.items():
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            template = template.replace(f"{{{name}}}", text)
    return template


@dataclass(frozen=True)
class HttpRequest:
    """One case's request. ``secret`` headers never enter the key, a message or the cache."""

    method: str
    url: str
    body: Any
    headers: Mapping[str, str]
    secret: Mapping[str, str]

    def key(self) -> str:
        """The cache key: a hash of what the server sees, bar the credentials."""
        payload = {"method": self.method, "url": self.url, "body": self.body, "headers": dict(self.headers)}
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def build_request(spec: dict, case: Case, depth: int, env: Mapping[str, str]) -> HttpRequest:
    """The request of one case, from the spec's templates and the named environment variables."""
    values = {
        "question": case.question,
        "k": depth,
        "filter": dict(case.filter or {}),
        "filter_terms": _filter_terms(case.filter or {}),
    }
    url_values = {"question": urllib.parse.quote(case.question), "k": str(depth)}
    method = spec.get("method", "POST").upper()
    body = _fill(spec["body"], values) if "body" in spec else None
    return HttpRequest(
        method, _fill(spec["url"], url_values), body, dict(spec.get("headers") or {}), secret_values(spec, env)
    )


def secret_values(spec: dict, env: Mapping[str, str]) -> dict[str, str]:
    """Each secret header's value, from the environment variable it names."""
    return {header: env.get(name, "") for header, name in (spec.get("secret_headers") or {}).items()}


def _where(spec: dict) -> str:
    """Where an endpoint's problems are: its method and URL template, without credentials
    (params refuses a URL holding any; a spec given in code may not have been checked)."""
    parts = urllib.parse.urlsplit(spec["url"])
    url = urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    return f"http retriever {str(spec.get('method', 'POST')).upper()} {url}"


def secret_problems(spec: dict, env: Mapping[str, str], where: str) -> list[Problem]:
    """What keeps a secret header from being sent: its environment variable is not set, or
    its value cannot be a header value (a CI secret pasted with a trailing newline, a
    ``.env`` saved with CRLF, a character outside Latin-1). http.client would raise with
    the value in its message; this names the variable, never the value."""
    secret_headers = spec.get("secret_headers") or {}
    missing = sorted(name for name in secret_headers.values() if not env.get(name))
    if missing:
        return [Problem(where, f"environment variable {', '.join(missing)} is not set", "export it before dvc repro")]
    problems = []
    for header, name in sorted(secret_headers.items()):
        flaw = header_value_flaw(env[name])
        if flaw is not None:
            what = f"environment variable {name} (secret header {header}) {flaw}"
            fix = f"set {name} to the header's value alone: no line break (a pasted newline, a CRLF .env), Latin-1 only"
            problems.append(Problem(where, what, fix))
    return problems


# --- fetching -----------------------------------------------------------------------


@dataclass(frozen=True)
class Fetched:
    """A response: its parsed JSON and the seconds it took, or why it failed and the fix."""

    body: Any = None
    seconds: float = 0.0
    failure: str | None = None
    fix: str = CHECK_FIX


def limits(spec: dict) -> Limits:
    """The spec's bounds on one request, defaults filled in."""
    timeout, backoff = float(setting(spec, "timeout_s")), float(setting(spec, "backoff_s"))
    return Limits(timeout, setting(spec, "retries"), backoff, setting(spec, "max_response_bytes"))


def ask(request: HttpRequest, spec: dict) -> Fetched:
    """One case's request over :mod:`ragvet.retrieval.transport`: no redirect followed,
    retried on 429, 5xx, a timeout or a refused connection."""
    data = None if request.body is None else json.dumps(request.body, sort_keys=True).encode()
    headers = {"Accept": "application/json", "User-Agent": "ragvet", **request.headers, **request.secret}
    if data is not None:
        headers["Content-Type"] = "application/json"
    try:
        body, seconds = fetch(request.method, request.url, data, headers, limits(spec))
    except Refused as refused:
        return Fetched(failure=refused.what, fix=refused.fix)
    return Fetched(body, seconds)


def _echoed(request: HttpRequest, spec: dict, text: str, fix: str) -> Fetched | None:
    """The failure of a response whose text holds a secret header's value, or a piece of
    it (:func:`holds_secret`): an endpoint that echoes the credential it was sent."""
    echoed = [header for header, value in sorted(request.secret.items()) if holds_secret(text, [value])]
    if not echoed:
        return None
    names = ", ".join(f"{header} (${spec['secret_headers'][header]})" for header in echoed)
    what = f"the response holds the value of secret header {names}, or {PIECE} or more characters of it in a row"
    return Fetched(failure=f"{what}: ragvet neither uses nor caches such a response", fix=fix)


def cached_fetch(request: HttpRequest, spec: dict, folder: Path) -> Fetched:
    """The cached response of ``request``, else a fresh one, cached only when it succeeded
    and holds no secret: a response that echoes a credential is refused before it is
    cached or mapped, so that no message, log or cache file can carry it."""
    path = folder / f"{request.key()}.json"
    if path.is_file():
        text = path.read_text(encoding="utf-8")
        echo = _echoed(request, spec, text, f"delete {path}, or run `ragvet cache clear --http`, then re-run")
        if echo is not None:
            return echo
        stored = json.loads(text)
        return Fetched(stored["response"], stored["seconds"])
    fetched = ask(request, spec)
    if fetched.failure is None:
        try:
            text = json.dumps({"response": fetched.body, "seconds": fetched.seconds}, sort_keys=True)
        except RecursionError:
            return Fetched(failure="the JSON nests too deeply to read")
        echo = _echoed(request, spec, text, "make the endpoint stop returning the credential it was sent")
        if echo is not None:
            return echo
        write_text(path, text)
    return fetched


def fetch_all(
    requests: Sequence[HttpRequest], spec: dict, fetcher: Callable[[HttpRequest, dict, Path], Fetched] = cached_fetch
) -> list[Fetched]:
    """Every request, at most ``concurrency`` (default 4) at a time, in request order."""
    folder = http_cache_dir()
    with ThreadPoolExecutor(max_workers=setting(spec, "concurrency")) as pool:
        return list(pool.map(lambda request: fetcher(request, spec, folder), requests))


# --- the response -------------------------------------------------------------------


def at_path(value: Any, path: str) -> Any:
    """``value`` followed down the dot ``path`` (``hits.hits``, ``_source.doc_id``); KeyError if absent."""
    for part in path.split("."):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            raise KeyError(path)
    return value


def map_hits(body: Any, mapping: Mapping[str, str]) -> list[dict] | str:
    """The response's hits as run-file items (``chunk_id`` or a passage, and a score),
    or what is wrong with the response."""
    try:
        hits = at_path(body, mapping["hits"])
    except KeyError:
        return f"the response has no `{mapping['hits']}` (response.hits)"
    if not isinstance(hits, list):
        return f"`{mapping['hits']}` is not a list"
    fields = [name for name in sorted(RESPONSE_KEYS - {"hits"}) if name in mapping]
    items = []
    for number, hit in enumerate(hits, start=1):
        try:
            item = {name: at_path(hit, mapping[name]) for name in fields}
        except KeyError as missing:
            return f"hit {number} has no `{missing.args[0]}`"
        if not is_number(item.get("score")):
            return f"hit {number}: score {item.get('score')!r:.40} is not a number"
        items.append(item)
    return items


def secret_pieces(secret: str) -> set[str]:
    """Every run of :data:`PIECE` characters of ``secret`` (the whole of a shorter one),
    as written and as JSON escapes it (a cache file's spelling)."""
    forms = {secret, json.dumps(secret)[1:-1]}
    return {form[start : start + PIECE] for form in forms for start in range(max(1, len(form) - PIECE + 1))}


def holds_secret(text: str, secrets: Iterable[str]) -> bool:
    """Whether ``text`` holds any :data:`PIECE` characters of a secret in a row."""
    return any(piece in text for secret in secrets if secret for piece in secret_pieces(secret))


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret, and every run of :data:`PIECE` or more of its
    characters, replaced: an excerpt cut at 200 bytes can end inside a token, and an
    exact match of the whole value would leave that part in the message."""
    spans = []
    for piece in {piece for secret in secrets if secret for piece in secret_pieces(secret)}:
        start = text.find(piece)
        while start != -1:
            spans.append((start, start + len(piece)))
            start = text.find(piece, start + 1)
    merged: list[list[int]] = []
    for start, stop in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], stop)
        else:
            merged.append([start, stop])
    kept, end = [], 0
    for start, stop in merged:
        kept += [text[end:start], "[redacted]"]
        end = stop
    return "".join(kept) + text[end:]


def endpoint_items(spec: dict, cases: Sequence[Case], depth: int) -> tuple[dict[str, list[dict]], dict[str, float]]:
    """Each case's mapped hits and the latency of its request, in seconds.

    Every failure (a status, a timeout, a malformed response) is collected and
    raised together, naming the case, the request and the status: nothing is
    returned, so no partial run is written.
    """
    env = os.environ
    where = _where(spec)
    raise_if(secret_problems(spec, env, where))
    requests = [build_request(spec, case, depth, env) for case in cases]
    secrets = list(secret_values(spec, env).values())
    items: dict[str, list[dict]] = {}
    latency: dict[str, float] = {}
    problems = []
    for case, fetched in zip(cases, fetch_all(requests, spec)):
        mapped = fetched.failure or map_hits(fetched.body, spec["response"])
        if isinstance(mapped, str):
            fix = fetched.fix if fetched.failure else CHECK_FIX
            problems.append(Problem(f"{where} (case {case.case_id})", redact(mapped, secrets), fix))
        else:
            items[case.case_id], latency[case.case_id] = mapped, fetched.seconds
    if problems:
        raise InputError(problems)
    return items, latency


def http_run(request: Request, spec: dict) -> list[RunRow]:
    """``kind: http``: ask the team's endpoint (:func:`endpoint_items`) and rank what it
    returned: chunk ids of the chunking, or foreign passages located in the corpus."""
    returned, latency = endpoint_items(spec, request.cases, request.depth)
    request.latency.update(latency)
    secrets = list(secret_values(spec, os.environ).values())
    locator, lookup = PassageLocator(request.docs), request.chunk_by_id()
    scored: dict[str, dict[str, float]] = {}
    problems: list[Problem] = []
    for case_id, items in returned.items():
        for number, item in enumerate(items, start=1):
            where = f"{_where(spec)} (case {case_id}, hit {number})"
            found = item_id({key: value for key, value in item.items() if key != "score"}, lookup, locator, where)
            problems += found if isinstance(found, list) else add_score(scored, case_id, found, item["score"], where)
    raise_if([Problem(problem.where, redact(problem.what, secrets), problem.fix) for problem in problems])
    return [
        row for case in request.cases for row in rank_scored(case, scored.get(case.case_id, {}), lookup, request.depth)
    ]
