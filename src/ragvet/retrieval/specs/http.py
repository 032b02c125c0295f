"""``kind: http``: its keys, their defaults and bounds, and their checks (the run:
:mod:`ragvet.retrieval.endpoints`).

Every knob has a bound as well as a type: a timeout of ``1.5e308`` s does not fit a
socket, 1,100 retries overflow the backoff's ``2^attempt``, and a header value with a
line break would split the request. Each problem is placed at its key
(``params.yaml: retrievers.es.timeout_s``).
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

from ragvet.errors import Problem
from ragvet.text.values import is_int, is_number, kind_of

HTTP_KEYS = {
    "kind",
    "url",
    "method",
    "body",
    "headers",
    "secret_headers",
    "response",
    "concurrency",
    "timeout_s",
    "retries",
    "backoff_s",
    "max_response_bytes",
    "abstain_below",
}
RESPONSE_KEYS = {"hits", "chunk_id", "doc_id", "start", "end", "text", "occurrence", "score"}
METHODS = ("GET", "POST")
HTTP_DEFAULTS: dict[str, Any] = {
    "method": "POST",
    "concurrency": 4,
    "timeout_s": 10,
    "retries": 3,
    "backoff_s": 0.5,
    "max_response_bytes": 32 * 2**20,  # 32 MiB: a hundred hits of long passages is well under 1 MiB
}
MAX_CONCURRENCY = 64
MAX_TIMEOUT_S = 600  # one request of a search: ten minutes is already a broken endpoint
MAX_RETRIES = 10
MAX_WAIT_S = 60.0  # a wait longer than this (the server's Retry-After, or the backoff) counts as failing
MAX_RESPONSE_BYTES = 2**30  # 1 GiB: the cap of max_response_bytes, held in memory and cached whole

# RFC 9110: a field name is a token; a value is visible Latin-1 text, spaces and tabs.
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_LINE_BREAK = re.compile(r"[\r\n]")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def setting(spec: dict, key: str) -> Any:
    """The value of ``key`` in ``spec``, or its default."""
    return spec.get(key, HTTP_DEFAULTS[key])


def header_value_flaw(value: str) -> str | None:
    """Why ``value`` cannot be sent as an HTTP header value, or ``None``. http.client
    raises on a line break and on a character outside Latin-1 (with the value in its
    message); any other control character is not field text either."""
    if _LINE_BREAK.search(value):
        where = "ends with" if _LINE_BREAK.search(value.rstrip("\r\n")) is None else "holds"
        return f"{where} a line break"
    if _CONTROL.search(value):
        return "holds a control character"
    if any(ord(character) > 0xFF for character in value):
        return "holds a character outside Latin-1, which an HTTP header cannot carry"
    return None


def _header_problems(spec: dict, key: str, where: str) -> list[Problem]:
    """``headers`` map names to values; ``secret_headers`` map names to environment variable names."""
    headers = spec.get(key, {})
    if not isinstance(headers, dict):
        return [Problem(f"{where}.{key}", f"{key} must be a mapping", f"e.g. {key}: {{X-Team: search}}")]
    problems = []
    for name, value in headers.items():
        if not isinstance(name, str) or not _TOKEN.match(name):
            fix = "use letters, digits and - (e.g. X-Team)"
            problems.append(Problem(f"{where}.{key}", f"{name!r} is not a header name", fix))
        elif key == "secret_headers" and not (isinstance(value, str) and _ENV_NAME.match(value)):
            what = f"a secret header must name an environment variable, got {kind_of(value)} {value!r:.40}"
            problems.append(Problem(f"{where}.{key}.{name}", what, f"e.g. {name}: SEARCH_AUTH, and export it"))
        elif key == "headers" and not (isinstance(value, str) and header_value_flaw(value) is None):
            what = f"a header value must be one line of Latin-1 text, got {kind_of(value)} {value!r:.40}"
            problems.append(Problem(f"{where}.{key}.{name}", what, 'quote it, e.g. X-Team: "search"'))
    return problems


def _bounded(spec: dict, key: str, where: str, valid: bool, what: str, fix: str) -> list[Problem]:
    if key in spec and not valid:
        return [Problem(f"{where}.{key}", f"{what}, got {kind_of(spec[key])} {spec[key]!r:.40}", fix)]
    return []


def _number_problems(spec: dict, where: str) -> list[Problem]:
    """Whole numbers and seconds within their bounds, and a backoff whose last wait is not over a minute."""
    concurrency, retries, timeout, backoff, most = (
        spec.get(key) for key in ("concurrency", "retries", "timeout_s", "backoff_s", "max_response_bytes")
    )
    checks = [
        ("concurrency", is_int(concurrency) and 1 <= concurrency <= MAX_CONCURRENCY, f"from 1 to {MAX_CONCURRENCY}"),
        ("retries", is_int(retries) and 0 <= retries <= MAX_RETRIES, f"from 0 to {MAX_RETRIES}"),
        ("max_response_bytes", is_int(most) and 1 <= most <= MAX_RESPONSE_BYTES, f"from 1 to {MAX_RESPONSE_BYTES:,}"),
    ]
    problems = [
        problem
        for key, valid, bounds in checks
        for problem in _bounded(
            spec, key, where, valid, f"{key} must be a whole number {bounds}", f"e.g. {key}: {HTTP_DEFAULTS[key]}"
        )
    ]
    problems += _bounded(
        spec, "timeout_s", where, is_number(timeout) and 0 < timeout <= MAX_TIMEOUT_S,
        f"timeout_s must be a number of seconds over 0 and at most {MAX_TIMEOUT_S}", "e.g. timeout_s: 10",
    )  # fmt: skip
    problems += _bounded(
        spec, "backoff_s", where, is_number(backoff) and 0 <= backoff <= MAX_WAIT_S,
        f"backoff_s must be a number of seconds from 0 to {MAX_WAIT_S:g}", "e.g. backoff_s: 0.5",
    )  # fmt: skip
    if not problems:
        retries, backoff = setting(spec, "retries"), setting(spec, "backoff_s")
        longest = backoff * 2 ** (retries - 1) if retries else 0
        if longest > MAX_WAIT_S:
            what = f"retries {retries} with backoff_s {backoff:g} would wait {longest:g} s before the last retry"
            fix = f"lower retries or backoff_s: a wait over {MAX_WAIT_S:g} s counts as failing"
            problems.append(Problem(f"{where}.retries", what, fix))
    return problems


def _url_problems(spec: dict, where: str) -> list[Problem]:
    """An http(s) URL with no credentials in it: the URL is shown in every message."""
    url = spec.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return [Problem(f"{where}.url", "http needs `url` (http:// or https://)", "e.g. url: http://127.0.0.1:9200/x")]
    parts = urllib.parse.urlsplit(url)
    if parts.password is not None or parts.username is not None:
        what = "the url holds a password" if parts.password is not None else "the url holds a user name"
        return [Problem(f"{where}.url", what, "move the credential to secret_headers (an env var name)")]
    try:
        _ = parts.port  # urlsplit parses the port only when asked
    except ValueError:
        return [Problem(f"{where}.url", "the url's port is not a number from 0 to 65535", "e.g. :9200")]
    if not parts.hostname:
        return [Problem(f"{where}.url", "the url names no host", "e.g. url: http://127.0.0.1:9200/x")]
    if re.search(r"[\x00-\x20\x7f]", url):
        fix = "percent-encode it (a space is %20)"
        return [Problem(f"{where}.url", "the url holds a space or a control character", fix)]
    return []


def _response_problems(spec: dict, where: str) -> list[Problem]:
    response = spec.get("response")
    if not isinstance(response, dict) or not {"hits", "score"} <= set(response):
        return [
            Problem(
                f"{where}.response", "http needs `response` with `hits` and `score` paths", "see docs/retrievers.md"
            )
        ]
    problems = []
    if set(response) - RESPONSE_KEYS:
        unknown = ", ".join(sorted(map(str, set(response) - RESPONSE_KEYS)))
        problems.append(
            Problem(f"{where}.response", f"unknown response keys: {unknown}", f"use {', '.join(sorted(RESPONSE_KEYS))}")
        )
    if ("chunk_id" in response) == ("doc_id" in response):
        problems.append(
            Problem(f"{where}.response", "response needs one of `chunk_id` or `doc_id`", "map hits to one of them")
        )
    elif "doc_id" in response and "text" not in response and not {"start", "end"} <= set(response):
        problems.append(
            Problem(f"{where}.response", "a doc_id needs `text`, or `start` and `end`", "map the passage's location")
        )
    return problems


def http_problems(spec: dict, where: str) -> list[Problem]:
    """Every problem with one ``kind: http`` entry, each at its key under ``where``."""
    problems = _url_problems(spec, where)
    method = spec.get("method", HTTP_DEFAULTS["method"])
    if not isinstance(method, str) or method.upper() not in METHODS:
        what = f"method must be GET or POST, got {kind_of(method)} {method!r:.40}"
        problems.append(Problem(f"{where}.method", what, "use method: GET or POST"))
    problems += _response_problems(spec, where)
    problems += _header_problems(spec, "headers", where) + _header_problems(spec, "secret_headers", where)
    return problems + _number_problems(spec, where)
