"""One request to a team's endpoint, over http.client, and its retries.

The exchange is bounded so that no endpoint, broken or hostile, can do more than fail
with a message:

- **No redirect is followed.** A client that follows one sends the request, and its
  secret headers, wherever the ``Location`` points (another port, another host, even
  ``ftp://``), and a 302 turns a POST into a GET without its body, so another
  server's answer would be scored as this one's. A 3xx fails, naming where it points.
- **An answer has a size limit** (``max_response_bytes``, 32 MiB by default): one
  that declares more is refused before its body is read, one that streams more is cut
  off at the limit. Nothing larger is held in memory or cached.
- **``timeout_s`` bounds the whole attempt**, connecting, sending and reading
  together: a socket's timeout bounds each read alone, so a server sending one byte
  every 1.5 s held a request with ``timeout_s: 3`` for as long as it liked.
  :class:`Deadline` shuts the socket when the time is up.
- **A malformed answer is a message**, not a traceback: a status line that is not
  one, more headers or longer header lines than http.client reads, a body shorter
  than its ``Content-Length``.

A failure is a :class:`Refused`, worded for the problem ragvet prints, which says
whether another attempt may succeed (a 429, a 5xx, a timeout, a connection refused).
"""

from __future__ import annotations

import http.client
import json
import math
import re
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from email.message import Message
from typing import Any

from ragvet.retrieval.specs.http import MAX_WAIT_S

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
EXCERPT_BYTES = 200  # of a failing answer's body, in its message
HTTP_CLIENT_MAX_LINE = 65_536  # the longest status or header line http.client reads
CHECK_FIX = "check the endpoint and the response mapping in params.yaml, then re-run"


@dataclass(frozen=True)
class Limits:
    """How long one attempt may take, how large its answer may be and how often it is
    retried: the spec's knobs."""

    timeout: float
    retries: int
    backoff: float
    max_bytes: int


class Refused(Exception):
    """An attempt that failed: ``what`` for the message, ``retry`` when another attempt
    may succeed, ``retry_after`` the seconds the server asked for, if it did."""

    def __init__(self, what: str, retry: bool = False, retry_after: float | None = None, fix: str = CHECK_FIX):
        super().__init__(what)
        self.what, self.retry, self.retry_after, self.fix = what, retry, retry_after, fix


@dataclass(frozen=True)
class Reply:
    """A 2xx answer: its body, undecoded, and the seconds the attempt took."""

    status: int
    raw: bytes
    seconds: float


def excerpt(raw: bytes) -> str:
    """The start of a body, for a message (secrets are redacted by the caller)."""
    return raw[:EXCERPT_BYTES].decode("utf-8", "replace").replace("\n", " ")


def _connection(url: str, timeout: float) -> tuple[http.client.HTTPConnection, str]:
    """A connection to the URL's host and the request target (path and query) to ask it."""
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        raise Refused("the url's port is not a number from 0 to 65535", fix="fix url in params.yaml") from None
    if not parts.hostname:
        raise Refused("the url names no host", fix="fix url in params.yaml")
    if re.search(r"[\x00-\x20\x7f]", url):  # http.client would refuse it, but only after connecting
        raise Refused("the url holds a space or a control character", fix="percent-encode it in params.yaml")
    target = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
    if parts.scheme == "https":
        context = ssl.create_default_context()
        return http.client.HTTPSConnection(parts.hostname, port, timeout=timeout, context=context), target
    return http.client.HTTPConnection(parts.hostname, port, timeout=timeout), target


def _shown_location(url: str, location: str | None) -> str:
    """Where a redirect points, resolved against ``url``, without credentials or query."""
    if not location:
        return "nowhere (no Location header)"
    parts = urllib.parse.urlsplit(urllib.parse.urljoin(url, location.strip()))
    netloc = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))[:EXCERPT_BYTES]


def _status_refusal(url: str, status: int, headers: Message, raw: bytes) -> Refused:
    """Why a non-2xx answer fails, and whether it is retried."""
    if status in REDIRECT_STATUSES:
        what = f"status {status} redirects to {_shown_location(url, headers.get('Location'))}"
        return Refused(
            f"{what}: ragvet follows no redirect, so neither the request nor a secret header goes elsewhere",
            fix="if that address is the endpoint, set url to it",
        )
    what = f"status {status}: {excerpt(raw)}"
    if status in RETRY_STATUSES:
        return Refused(what, retry=True, retry_after=_retry_after(headers.get("Retry-After")))
    return Refused(what)


def _retry_after(value: str | None) -> float | None:
    """The server's ``Retry-After`` in seconds when it is a number (not a date), else ``None``."""
    try:
        seconds = float(value) if value is not None else math.nan
    except ValueError:
        return None
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _read_excerpt(response: http.client.HTTPResponse) -> bytes:
    """The start of a failing answer's body, for its message: what came, even if it stopped."""
    try:
        return response.read(EXCERPT_BYTES)
    except http.client.IncompleteRead as error:
        return error.partial


def _read_body(response: http.client.HTTPResponse, max_bytes: int) -> bytes:
    """The whole body, at most ``max_bytes``: a larger declared ``Content-Length`` fails
    unread, a longer stream (chunked, or ended by the connection) fails at the first byte
    over. A body shorter than its ``Content-Length`` fails too (http.client's
    ``read(amt)`` returns what came and leaves ``length`` at what did not)."""
    if response.length is not None and response.length > max_bytes:
        raise Refused(f"the response is {response.length:,} bytes, over max_response_bytes ({max_bytes:,})")
    parts, total = [], 0
    try:
        while chunk := response.read(min(1 << 16, max_bytes + 1 - total)):
            parts.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise Refused(f"the response is over max_response_bytes ({max_bytes:,})")
    except http.client.IncompleteRead as error:  # a chunked body that stopped
        raise Refused(f"the response was cut short after {total + len(error.partial):,} bytes") from None
    if response.length:
        expected = total + response.length
        raise Refused(f"the response was cut short: {total:,} of its {expected:,} bytes (Content-Length) came")
    return b"".join(parts)


def _refusal(error: Exception, timeout: float) -> Refused:
    """An exception of http.client or the socket, as a message."""
    if isinstance(error, Refused):
        return error
    if isinstance(error, TimeoutError):
        return Refused(f"timed out after {timeout:g} s", retry=True)
    if isinstance(error, http.client.RemoteDisconnected):
        return Refused("the server closed the connection without answering", retry=True)
    if isinstance(error, http.client.LineTooLong):
        line = str(error).rpartition("when reading ")[2] or "line"
        return Refused(f"a {line} longer than {HTTP_CLIENT_MAX_LINE:,} bytes")
    if isinstance(error, http.client.BadStatusLine):
        return Refused(f"malformed status line {str(error.line).strip()!r:.100}")
    if isinstance(error, http.client.HTTPException):
        return Refused(f"malformed response: {str(error)[:EXCERPT_BYTES]}")
    if isinstance(error, ssl.SSLError):
        return Refused(f"TLS failed: {error}")
    return Refused(f"no answer: {error}", retry=True)


class Deadline:
    """Shuts a socket once ``seconds`` have passed, which wakes any read or write blocked
    on it; ``expired`` then tells a timeout from the server closing.

    It holds the socket itself: http.client hands a connection's socket to the response
    when the server says ``Connection: close``, and the connection forgets it."""

    def __init__(self, seconds: float):
        self.expired, self._socket = False, None
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _expire(self) -> None:
        self.expired = True  # set before the socket is read, as watch sets the socket before checking
        if self._socket is not None:
            _shut(self._socket)

    def watch(self, sock: socket.socket | None) -> None:
        """Shut ``sock`` at the deadline (now, if it passed while connecting)."""
        self._socket = sock
        self.check()

    def check(self) -> None:
        """Raise a timeout if the deadline has passed."""
        if self.expired:
            raise TimeoutError

    def stop(self) -> None:
        """Cancel the timer and wait for it, so it never touches a socket being closed."""
        self._timer.cancel()
        self._timer.join()


def _shut(sock: socket.socket) -> None:
    """The plain socket's shutdown, under any TLS layer: it wakes a blocked reader and
    closes nothing (a socket already closed refuses, harmlessly)."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass


def exchange(method: str, url: str, data: bytes | None, headers: Mapping[str, str], limits: Limits) -> Reply:
    """One attempt, within ``limits.timeout`` from connecting to the last byte read: a
    2xx :class:`Reply`, or :class:`Refused`."""
    connection, target = _connection(url, limits.timeout)
    deadline = Deadline(limits.timeout)
    started = time.perf_counter()
    try:
        connection.connect()
        deadline.watch(connection.sock)
        connection.request(method, target, body=data, headers=dict(headers))
        response = connection.getresponse()
        if not 200 <= response.status < 300:
            raise _status_refusal(url, response.status, response.headers, _read_excerpt(response))
        raw = _read_body(response, limits.max_bytes)
        deadline.check()  # a shut socket reads as the end of a body the connection delimits
    except (http.client.HTTPException, OSError, Refused) as error:
        raise _refusal(TimeoutError() if deadline.expired else error, limits.timeout) from None
    finally:
        deadline.stop()
        connection.close()
    return Reply(response.status, raw, time.perf_counter() - started)


def parse(reply: Reply) -> Any:
    """The answer's JSON, or :class:`Refused` saying why it is not."""
    try:
        return json.loads(reply.raw)
    except RecursionError:
        raise Refused("the JSON nests too deeply to read") from None
    except ValueError:
        raise Refused(f"status {reply.status} but the response is not JSON: {excerpt(reply.raw)!r}") from None


def _wait(failure: Refused, backoff: float, attempt: int) -> float:
    """Seconds before the next attempt: the server's ``Retry-After``, else the backoff
    ``backoff * 2**attempt``; :class:`Refused` when that is over :data:`MAX_WAIT_S`,
    saying which it was. The power is taken in floats, capped, so no number of retries
    overflows it."""
    if failure.retry_after is not None:
        wait, why = failure.retry_after, f"the server's Retry-After, {failure.retry_after:g} s,"
    else:
        wait = backoff * 2.0 ** min(attempt, 1023)
        why = f"the next wait, backoff_s × 2^{attempt} = {wait:g} s,"
    if wait > MAX_WAIT_S:
        raise Refused(f"{failure.what} ({why} is over {MAX_WAIT_S:g} s)")
    return wait


def fetch(method: str, url: str, data: bytes | None, headers: Mapping[str, str], limits: Limits) -> tuple[Any, float]:
    """The parsed answer and the seconds its attempt took, retried on 429, 5xx, a timeout
    or no answer, up to ``retries`` times, waiting as :func:`_wait` says; :class:`Refused`
    when every attempt failed."""
    for attempt in range(limits.retries + 1):
        try:
            reply = exchange(method, url, data, headers, limits)
            return parse(reply), reply.seconds
        except Refused as refused:
            if not refused.retry or attempt == limits.retries:
                note = f" (after {attempt} retries)" if refused.retry and attempt else ""
                raise Refused(f"{refused.what}{note}", fix=refused.fix) from None
            time.sleep(_wait(refused, limits.backoff, attempt))
    raise AssertionError("unreachable: the last attempt returns or raises")
