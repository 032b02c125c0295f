"""The sample scored through "your own search system": a real PostgreSQL + pgvector
server and a real HTTP search app, against ragvet's own path.

    RAGVET_CACHE_DIR=... python benchmarks/own_systems.py   # after dvc repro (reads data/ and metrics/)

1. pgvector, ragvet's own table of the sentences-600 MiniLM vectors (exact, then
   HNSW): is the run identical to the ``dense`` kind with a flat index? Latency.
2. http: a BM25 app on 127.0.0.1 that chunks the corpus its own way (one passage
   per line, returned with its offsets), asked once per case, then again from the
   response cache; the foreign passages scored against the span labels (eval split).

Latency is this machine's, under whatever else it runs: read it as an order of magnitude.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import bm25s
import pgserver

from stages.measures.evaluation import evaluate_run
from stages.measures.latency import latency_figures
from stages.retrieval.kinds import retrieve
from stages.retrieval.passages import passage_table
from stages.storage.files import read_json
from stages.storage.tables import read_case_table, read_cases, read_chunks, read_docs

DEPTH = 20
FIGURES = ("p50_ms", "p95_ms", "max_ms", "qps")


def timed_run(cases, chunks, spec, docs=None) -> tuple[list[dict], dict]:
    timed: dict[str, float] = {}
    started = time.perf_counter()
    rows = retrieve(cases, chunks, spec, DEPTH, docs=docs, latency=timed)
    figures = latency_figures(timed, len(cases), time.perf_counter() - started)
    return rows, {name: figures[name] for name in FIGURES}


def pgvector_against_dense(cases, chunks) -> None:
    folder = tempfile.mkdtemp(prefix="ragvet-pg-")  # directly under /tmp: PostgreSQL runs as its own user
    started = time.perf_counter()
    server = pgserver.get_server(folder, cleanup_mode="stop")
    print(f"pgserver up in {time.perf_counter() - started:.1f} s")
    os.environ["RAGVET_BENCH_PG"] = server.get_uri()
    try:
        dense, _ = timed_run(cases, chunks, {"kind": "dense", "index": "flat"})
        for index in ({"index": "exact"}, {"index": "hnsw", "ef_search": 40}):
            spec = {"kind": "pgvector", "dsn_env": "RAGVET_BENCH_PG", "table": "bench_sentences_600", **index}
            rows, figures = timed_run(cases, chunks, spec)
            print(f"pgvector {index}: identical to dense/flat: {rows == dense}; {figures}")
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def line_passages(docs) -> list[dict]:
    """The app's own chunking: one passage per non-empty line, with its offsets and its doc's metadata."""
    passages = []
    for doc in docs.values():
        for match in re.finditer(r"[^\n]+", doc.text):
            text = match.group()
            if text.strip():
                start = match.start() + len(text) - len(text.lstrip())
                meta = {key: str(value) for key, value in doc.metadata.items()}
                passages.append({"doc_id": doc.doc_id, "start": start, "end": start + len(text.strip()), **meta})
    return passages


def search_app(docs) -> ThreadingHTTPServer:
    passages = line_passages(docs)
    texts = [docs[p["doc_id"]].text[p["start"] : p["end"]] for p in passages]
    index = bm25s.BM25()
    index.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)

    def admitted(passage: dict, wanted: dict) -> bool:
        return all(passage.get(k) in [str(v) for v in (w if isinstance(w, list) else [w])] for k, w in wanted.items())

    class Search(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            tokens = bm25s.tokenize([request["q"]], stopwords="en", show_progress=False)
            ids, scores = index.retrieve(tokens, k=len(passages), show_progress=False)
            hits = [
                {"score": float(score), **passages[i]}
                for i, score in zip(ids[0], scores[0])
                if score > 0 and admitted(passages[i], request["filter"])
            ]
            body = json.dumps({"hits": hits[: request["k"]]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Search)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"search app: {len(passages)} line passages")
    return server


def http_foreign_passages(cases, docs) -> None:
    """The responses are cached in a fresh folder: the first pass asks the app, the second reads the cache."""
    os.environ["RAGVET_CACHE_DIR"] = tempfile.mkdtemp(prefix="ragvet-http-cache-")
    server = search_app(docs)
    spec = {
        "kind": "http",
        "url": f"http://127.0.0.1:{server.server_address[1]}/search",
        "body": {"q": "{question}", "k": "{k}", "filter": "{filter}"},
        "response": {"hits": "hits", "doc_id": "doc_id", "start": "start", "end": "end", "score": "score"},
    }
    try:
        for attempt in ("asked", "from the cache"):
            rows, figures = timed_run(cases, [], spec, docs)
            print(f"http {attempt}: {figures}")
    finally:
        server.shutdown()
    run: dict[str, list[dict]] = {}
    for row in rows:
        run.setdefault(row["case_id"], []).append(row)
    split = {case_id: entry["split"] for case_id, entry in read_json(Path("data/split.json"))["cases"].items()}
    texts = {doc_id: doc.text for doc_id, doc in docs.items()}
    table = read_case_table(Path("data/validated/cases.parquet"))
    results = evaluate_run(table, passage_table([r["chunk_id"] for r in rows]), run, split, [5], 1.0, texts, False)
    ours = read_json(Path("metrics/sentences-600-bm25.json"))["eval"]["metrics"]
    for name in ("evidence_recall@5", "claim_availability@5", "recall@5"):
        values = [r["metrics"][name] for r in results if r["split"] == "eval" and r["metrics"][name] is not None]
        mean = round(sum(values) / len(values), 3) if values else None
        print(f"http line passages {name}: {mean} over {len(values)} eval cases; sentences-600-bm25: {ours[name]}")


def main() -> None:
    cases = read_cases(Path("data/validated/cases.jsonl"))
    chunks = read_chunks(Path("data/chunks/sentences-600.jsonl"))
    docs = {doc.doc_id: doc for doc in read_docs(Path("data/validated/corpus.jsonl"))}
    pgvector_against_dense(cases, chunks)
    http_foreign_passages(cases, docs)


if __name__ == "__main__":
    main()
