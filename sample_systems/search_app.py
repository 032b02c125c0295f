"""A small search endpoint that answers Elasticsearch's ``_search``: BM25 (bm25s)
over its own chunking of a corpus, one passage per non-empty line.

It stands for "your production index": it knows nothing of ragvet's chunks, so
what it returns are foreign passages (``doc_id``, ``text``, ``start``, ``end``),
which ragvet locates in the corpus and scores against the span labels. It takes
``POST /<index>/_search?size=N`` with the body of the documented template
(docs/retrievers.md): ``query.bool.must.match.text`` is the question and
``query.bool.filter`` a list of ``{"term": {key: value}}`` matched against the
document's metadata. Hits come best first with ``_score`` and ``_source``.

One implementation for the sample run (``python -m sample_systems``), the
``kind: http`` tests (which subclass :class:`SearchHandler` to add faults) and
anyone who wants to try the http kind by hand.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import bm25s

from ragvet.schema import Doc

DEFAULT_SIZE = 10  # Elasticsearch's default number of hits


def line_passages(docs: Iterable[Doc]) -> list[dict[str, Any]]:
    """The app's own chunking: each non-empty line of each document, stripped, with its
    character offsets in the document and the document's metadata (values as text)."""
    passages = []
    for doc in docs:
        for match in re.finditer(r"[^\n]+", doc.text):
            line = match.group()
            text = line.strip()
            if text:
                start = match.start() + len(line) - len(line.lstrip())
                metadata = {key: str(value) for key, value in (doc.metadata or {}).items()}
                passages.append(
                    {"doc_id": doc.doc_id, "text": text, "start": start, "end": start + len(text), "meta": metadata}
                )
    return passages


def _admitted(passage: Mapping[str, Any], terms: Iterable[Mapping[str, Any]]) -> bool:
    """Every ``{"term": {key: value}}`` matches the passage's metadata (a list value: any of it)."""
    for term in terms:
        for key, wanted in term.get("term", {}).items():
            values = wanted if isinstance(wanted, list) else [wanted]
            if passage["meta"].get(key) not in [str(value) for value in values]:
                return False
    return True


class SearchHandler(BaseHTTPRequestHandler):
    """The ``_search`` endpoint over the class's ``passages`` (made by :func:`search_handler`)."""

    passages: list[dict[str, Any]] = []
    index: bm25s.BM25 | None = None

    def log_message(self, *args: Any) -> None:  # quiet: the run prints its own figures
        pass

    def reply(self, status: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def read_request(self) -> dict[str, Any]:
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def do_POST(self) -> None:
        self.answer(self.read_request())

    def answer(self, request: Mapping[str, Any]) -> None:
        self.reply(200, json.dumps(self.search(request)).encode())

    def search(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The hits of one request, best first: passages with a positive BM25 score that pass the filter."""
        query = request["query"]["bool"]
        terms = query.get("filter") or []
        size = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query).get("size", [DEFAULT_SIZE])[0]
        tokens = bm25s.tokenize([query["must"]["match"]["text"]], stopwords="en", show_progress=False)
        ids, scores = self.index.retrieve(tokens, k=len(self.passages), show_progress=False)
        hits = [
            {"_score": float(score), "_source": self.passages[i]}
            for i, score in zip(ids[0], scores[0])
            if score > 0 and _admitted(self.passages[i], terms)
        ]
        return {"hits": {"total": {"value": len(hits)}, "hits": hits[: int(size)]}}


def search_handler(passages: list[dict[str, Any]], base: type[SearchHandler] = SearchHandler) -> type[SearchHandler]:
    """A handler class (``base`` or a subclass of it) serving ``passages``, its BM25 index built once."""
    index = bm25s.BM25()
    index.index(bm25s.tokenize([p["text"] for p in passages], stopwords="en", show_progress=False), show_progress=False)
    return type(base.__name__, (base,), {"passages": passages, "index": index})


def serve(handler: type[SearchHandler], port: int = 0) -> ThreadingHTTPServer:
    """Serve ``handler`` on 127.0.0.1:``port`` (0: any free port) from a daemon thread;
    ``server.shutdown()`` stops it. Loopback only: nothing outside this machine can ask."""
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
