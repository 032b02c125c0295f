"""``kind: http``: its keys and their checks (the run: :mod:`ragvet.retrieval.endpoints`)."""

from __future__ import annotations

import urllib.parse

from ragvet.errors import Problem
from ragvet.text.values import is_number, is_positive_int

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
    "abstain_below",
}
RESPONSE_KEYS = {"hits", "chunk_id", "doc_id", "start", "end", "text", "occurrence", "score"}


def http_problems(spec: dict, where: str) -> list[Problem]:
    problems = []
    if not isinstance(spec.get("url"), str) or not spec["url"].startswith(("http://", "https://")):
        problems.append(Problem(where, "http needs `url` (http:// or https://)", "e.g. url: http://127.0.0.1:9200/x"))
    elif urllib.parse.urlsplit(spec["url"]).password is not None:
        problems.append(
            Problem(where, "the url holds a password", "move the credential to secret_headers (an env var name)")
        )
    if spec.get("method", "POST").upper() not in ("GET", "POST"):
        problems.append(Problem(where, f"unknown method {spec['method']!r}", "use method: GET or POST"))
    response = spec.get("response")
    if not isinstance(response, dict) or not {"hits", "score"} <= set(response):
        problems.append(Problem(where, "http needs `response` with `hits` and `score` paths", "see docs/retrievers.md"))
    else:
        if set(response) - RESPONSE_KEYS:
            unknown = ", ".join(sorted(set(response) - RESPONSE_KEYS))
            problems.append(
                Problem(where, f"unknown response keys: {unknown}", f"use {', '.join(sorted(RESPONSE_KEYS))}")
            )
        if ("chunk_id" in response) == ("doc_id" in response):
            problems.append(Problem(where, "response needs one of `chunk_id` or `doc_id`", "map hits to one of them"))
        elif "doc_id" in response and "text" not in response and not {"start", "end"} <= set(response):
            problems.append(Problem(where, "a doc_id needs `text`, or `start` and `end`", "map the passage's location"))
    for key in ("headers", "secret_headers"):
        if not isinstance(spec.get(key, {}), dict):
            problems.append(Problem(where, f"{key} must be a mapping", f"e.g. {key}: {{X-Team: search}}"))
    for key in ("concurrency", "retries"):
        if key in spec and not (is_positive_int(spec[key]) or (key == "retries" and spec[key] == 0)):
            problems.append(Problem(where, f"{key} must be a whole number", f"e.g. {key}: 4"))
    for key in ("timeout_s", "backoff_s"):
        if key in spec and (not is_number(spec[key]) or spec[key] < 0):
            problems.append(Problem(where, f"{key} must be a number of seconds ≥ 0", f"e.g. {key}: 10"))
    return problems
