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

Every response whose hits mapped and were found is cached under ``<cache>/http/``
by the hash of its request (method, URL, body and the non-secret headers), with the
latency measured when it was fetched: a re-run is deterministic and does not load
the cluster again, and a failing answer is asked for again. ``ragvet cache clear
--http`` empties it. Secret headers come from environment variables named in params
(``secret_headers: {Authorization: SEARCH_AUTH}``); they are not part of the cache
key, every run of :data:`PIECE` of their characters is redacted from every message,
and a response holding such a run is refused before it is cached or mapped, so they
reach no output, log, error or cache file. The exchange itself (no redirect, a
deadline, a size limit) is :mod:`ragvet.retrieval.transport`'s.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragvet.errors import Problem, raise_if
from ragvet.retrieval.embedding import default_cache_dir
from ragvet.retrieval.passages import PassageLocator
from ragvet.retrieval.plugins import add_score, item_id
from ragvet.retrieval.ranking import RunRow, rank_scored
from ragvet.retrieval.request import Request
from ragvet.retrieval.specs.http import RESPONSE_KEYS, header_value_flaw, setting
from ragvet.retrieval.transport import CHECK_FIX, Limits, Refused, fetch
from ragvet.schema import Case
from ragvet.storage.atomic import write_text
from ragvet.text.values import is_number, kind_of

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


# --- secrets in responses and messages ----------------------------------------------


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


def _echo(request: HttpRequest, spec: dict, text: str) -> str | None:
    """What is wrong with a response whose text holds a secret header's value, or a piece
    of it (:func:`holds_secret`): an endpoint that echoes the credential it was sent."""
    echoed = [header for header, value in sorted(request.secret.items()) if holds_secret(text, [value])]
    if not echoed:
        return None
    names = ", ".join(f"{header} (${spec['secret_headers'][header]})" for header in echoed)
    what = f"the response holds the value of secret header {names}, or {PIECE} or more characters of it in a row"
    return f"{what}: ragvet neither uses nor caches such a response"


ECHO_FIX = "make the endpoint stop returning the credential it was sent"


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
    or what is wrong with the response. A hit's fields are single values: a list or an
    object where an id or a text belongs is refused here, not quoted whole later."""
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
        nested = [name for name in fields if isinstance(item[name], (list, dict))]
        if nested:
            return f"hit {number}: `{mapping[nested[0]]}` is {kind_of(item[nested[0]])}, not a single value"
        items.append(item)
    return items


# --- the cache ----------------------------------------------------------------------

CACHE_FIX = "delete it, or run `ragvet cache clear --http`, then re-run: the endpoint is asked again"


@dataclass(frozen=True)
class Answer:
    """One case's mapped hits and the seconds its request took, or why not (``where``
    overrides the endpoint as the place, for a cache file). ``cached`` is the file it was
    read from; ``keep`` the file and text to cache once its hits are located."""

    items: list[dict] | None = None
    seconds: float = 0.0
    failure: str | None = None
    fix: str = CHECK_FIX
    where: str | None = None
    cached: Path | None = None
    keep: tuple[Path, str] | None = None


def _stored(path: Path) -> tuple[dict, str] | str:
    """A cache file's ``{"response", "seconds"}`` and its text, or why it is not one ragvet wrote."""
    try:
        text = path.read_text(encoding="utf-8")
        stored = json.loads(text)
    except (OSError, ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return "not UTF-8 JSON"
    if not isinstance(stored, dict) or set(stored) != {"response", "seconds"}:
        return "not a mapping of `response` and `seconds`"
    if not is_number(stored["seconds"]) or stored["seconds"] < 0:
        return f"its seconds are {kind_of(stored['seconds'])}, not a number ≥ 0"
    return stored, text


def _from_cache(request: HttpRequest, spec: dict, path: Path) -> Answer:
    """The answer a cache file holds. A file ragvet did not write is an error at the file;
    a response that fails now (an older ragvet cached it, or the mapping changed) says it
    came from the cache and how to ask the endpoint again."""
    read = _stored(path)
    if isinstance(read, str):
        return Answer(failure=f"is not a response ragvet cached ({read})", fix=CACHE_FIX, where=str(path))
    stored, text = read
    note = f"; the response was read from the cache ({path})"
    echo = _echo(request, spec, text)
    if echo is not None:
        return Answer(failure=echo + note, fix=f"{ECHO_FIX}; then {CACHE_FIX}", cached=path)
    mapped = map_hits(stored["response"], spec["response"])
    if isinstance(mapped, str):
        fix = f"check the response mapping in params.yaml; if the endpoint answers otherwise now, {CACHE_FIX}"
        return Answer(failure=mapped + note, fix=fix, cached=path)
    return Answer(mapped, stored["seconds"], cached=path)


def answer(request: HttpRequest, spec: dict, folder: Path) -> Answer:
    """The answer to ``request``: the cached one, else the endpoint's. A fresh response is
    checked before anything keeps it: one that holds a secret is refused, one whose hits
    do not map fails, and only a good one is offered for the cache (``keep``), so that a
    re-run asks the endpoint again rather than reading a bad answer for ever."""
    path = folder / f"{request.key()}.json"
    if path.exists():
        return _from_cache(request, spec, path)
    fetched = ask(request, spec)
    if fetched.failure is not None:
        return Answer(failure=fetched.failure, fix=fetched.fix)
    try:
        text = json.dumps({"response": fetched.body, "seconds": fetched.seconds}, sort_keys=True)
    except RecursionError:
        return Answer(failure="the JSON nests too deeply to read")
    echo = _echo(request, spec, text)
    if echo is not None:
        return Answer(failure=echo, fix=ECHO_FIX)
    mapped = map_hits(fetched.body, spec["response"])
    if isinstance(mapped, str):
        return Answer(failure=mapped)
    return Answer(mapped, fetched.seconds, keep=(path, text))


def endpoint_answers(spec: dict, cases: Sequence[Case], depth: int) -> list[Answer]:
    """Each case's answer, in case order, at most ``concurrency`` requests at a time.
    Only an environment variable that is missing or unusable raises: then nothing is sent."""
    env = os.environ
    raise_if(secret_problems(spec, env, _where(spec)))
    requests = [build_request(spec, case, depth, env) for case in cases]
    folder = http_cache_dir()
    with ThreadPoolExecutor(max_workers=setting(spec, "concurrency")) as pool:
        return list(pool.map(lambda request: answer(request, spec, folder), requests))


# --- the run ------------------------------------------------------------------------


def _located(
    answered: Answer, case_id: str, endpoint: str, lookup: dict, locator: PassageLocator, scored: dict
) -> list[Problem]:
    """Score one answer's hits into ``scored``, locating foreign passages; its problems."""
    problems: list[Problem] = []
    for number, item in enumerate(answered.items or [], start=1):
        at = f"{endpoint} (case {case_id}, hit {number})"
        found = item_id({key: value for key, value in item.items() if key != "score"}, lookup, locator, at)
        problems += found if isinstance(found, list) else add_score(scored, case_id, found, item["score"], at)
    if answered.cached is not None:
        note = f"; the response was read from the cache ({answered.cached})"
        problems = [
            Problem(p.where, p.what + note, f"{p.fix}; or, if the endpoint answers otherwise now, {CACHE_FIX}")
            for p in problems
        ]
    return problems


def http_run(request: Request, spec: dict) -> list[RunRow]:
    """``kind: http``: ask the team's endpoint (:func:`endpoint_answers`) and rank what it
    returned: chunk ids of the chunking, or foreign passages located in the corpus.

    Every failure (a status, a timeout, a malformed response, a hit not found) is
    collected and raised together, naming the case, the request and the status, with
    every secret redacted: no run is written. A case whose hits all located has its
    fresh response cached, whatever the other cases did.
    """
    answers = endpoint_answers(spec, request.cases, request.depth)
    secrets = list(secret_values(spec, os.environ).values())
    locator, lookup = PassageLocator(request.docs), request.chunk_by_id()
    scored: dict[str, dict[str, float]] = {}
    problems: list[Problem] = []
    endpoint = _where(spec)
    for case, answered in zip(request.cases, answers):
        if answered.failure is not None:
            where = answered.where or f"{endpoint} (case {case.case_id})"
            problems.append(Problem(where, answered.failure, answered.fix))
            continue
        found = _located(answered, case.case_id, endpoint, lookup, locator, scored)
        problems += found
        if not found:
            request.latency[case.case_id] = answered.seconds
            if answered.keep is not None:
                write_text(*answered.keep)
    raise_if([Problem(problem.where, redact(problem.what, secrets), problem.fix) for problem in problems])
    return [
        row for case in request.cases for row in rank_scored(case, scored.get(case.case_id, {}), lookup, request.depth)
    ]
