"""BM25 at scale: ragvet's retrieve stage against raw bm25s on a million generated chunks.

    python benchmarks/bm25_scale.py [--chunks 1000000] [--cases 10000] [--rounds 1]

Generates (once, cached in ``--workdir``) a chunk table of ``--chunks`` chunks of
40-80 words drawn from a Zipf vocabulary of 100,000 pseudo-words (exponent 1.1,
as in English text) and ``--cases`` questions of 3-8 words, 10% of them with a
metadata filter. Each side runs in a fresh process, so its peak RSS is its own:

* **ragvet**: read the chunk JSONL as columns (``read_chunk_texts``), tokenise,
  index, score, filter and rank with chunk-id ties to ``depth`` 100, as the
  ``retrieve`` stage does for the bm25 kind;
* **bm25s**: read the chunk texts from the same JSONL, then bm25s as its README
  uses it (``tokenize`` to ids, ``index``, ``retrieve(k=100)``), no filter.

Prints the times with their phases, the ratio (target <= 1.15), each side's peak
RSS, and how many of the top-10 chunk ids agree between the two (ties may
order differently; filtered cases are left out of the comparison).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SPEC = {"kind": "bm25", "k1": 1.2, "b": 0.75, "lowercase": True, "stopwords": "en", "stemmer": "none"}
DEPTH = 100
LETTERS = np.array(list("etaoinshrdlcumwfgypbvkjxqz"))


def vocabulary(size: int, rng: np.random.Generator) -> np.ndarray:
    """Distinct pseudo-words of 3-10 letters (frequent letters more often)."""
    weights = 1.0 / np.arange(1, len(LETTERS) + 1)
    words: set[str] = set()
    while len(words) < size:
        for length in rng.integers(3, 11, size - len(words)):
            words.add("".join(rng.choice(LETTERS, length, p=weights / weights.sum())))
    return np.array(sorted(words))


def generate(workdir: Path, n_chunks: int, n_cases: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    words = vocabulary(100_000, rng)
    rng.shuffle(words)
    ranks = np.arange(1, len(words) + 1)
    zipf = 1.0 / ranks**1.1
    zipf /= zipf.sum()
    workdir.mkdir(parents=True, exist_ok=True)
    with open(workdir / "chunks.jsonl.tmp", "w") as out:
        for block in range(0, n_chunks, 10_000):
            count = min(10_000, n_chunks - block)
            lengths = rng.integers(40, 81, count)
            drawn = words[rng.choice(len(words), lengths.sum(), p=zipf)]
            bounds = np.concatenate(([0], np.cumsum(lengths)))
            for i in range(count):
                number = block + i
                doc = number // 10
                text = " ".join(drawn[bounds[i] : bounds[i + 1]])
                row = {"chunk_id": f"d{doc:07d}#{number % 10}", "doc_id": f"d{doc:07d}", "end": len(text),
                       "metadata": {"team": f"t{doc % 5}"}, "ordinal": number % 10, "start": 0,
                       "text": text}  # fmt: skip
                out.write(json.dumps(row, separators=(",", ":")) + "\n")
    os.replace(workdir / "chunks.jsonl.tmp", workdir / "chunks.jsonl")
    # Questions favour mid-frequency words, as real questions name topics rather than function words.
    question_p = zipf * np.minimum(ranks, 200) ** 1.1
    question_p /= question_p.sum()
    with open(workdir / "cases.jsonl", "w") as out:
        for number in range(n_cases):
            question = " ".join(words[rng.choice(len(words), rng.integers(3, 9), p=question_p)])
            flt = {"team": f"t{number % 5}"} if number % 10 == 0 else {}
            out.write(json.dumps({"id": f"q{number:06d}", "question": question, "filter": flt}) + "\n")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def read_questions(workdir: Path) -> list[dict]:
    with open(workdir / "cases.jsonl") as handle:
        return [json.loads(line) for line in handle]


def measure_ragvet(workdir: Path) -> dict:
    sys.path.insert(0, str(HERE.parent))
    from ragvet.retrieval.kinds import retrieve
    from ragvet.schema import Case
    from ragvet.storage.tables import read_chunk_texts

    start = time.perf_counter()
    chunks = read_chunk_texts(workdir / "chunks.jsonl")
    cases = [Case(q["id"], q["question"], filter=q["filter"]) for q in read_questions(workdir)]
    loaded = time.perf_counter()
    rows = retrieve(cases, chunks, SPEC, DEPTH)
    done = time.perf_counter()
    top = {}
    for row in rows:
        if row["rank"] <= 10:
            top.setdefault(row["case_id"], []).append(row["chunk_id"])
    (workdir / "top-ragvet.json").write_text(json.dumps(top))
    return {"seconds": done - start, "phases": {"load": loaded - start, "retrieve": done - loaded},
            "rss_mb": peak_rss_mb(), "rows": len(rows)}  # fmt: skip


def measure_bm25s(workdir: Path) -> dict:
    import bm25s

    start = time.perf_counter()
    ids, texts = [], []
    with open(workdir / "chunks.jsonl") as handle:
        for line in handle:
            row = json.loads(line)
            ids.append(row["chunk_id"])
            texts.append(row["text"])
    questions = read_questions(workdir)
    loaded = time.perf_counter()
    index = bm25s.BM25(k1=SPEC["k1"], b=SPEC["b"])
    index.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    indexed = time.perf_counter()
    queries = bm25s.tokenize([q["question"] for q in questions], stopwords="en", show_progress=False)
    results, _ = index.retrieve(queries, k=DEPTH, show_progress=False)
    done = time.perf_counter()
    top = {q["id"]: [ids[i] for i in results[n, :10]] for n, q in enumerate(questions)}
    (workdir / "top-bm25s.json").write_text(json.dumps(top))
    return {"seconds": done - start,
            "phases": {"load": loaded - start, "index": indexed - loaded, "retrieve": done - indexed},
            "rss_mb": peak_rss_mb()}  # fmt: skip


def run_side(side: str, workdir: Path) -> dict:
    command = [sys.executable, __file__, "--measure", side, "--workdir", str(workdir)]
    output = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(output.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds; the best time of each counts")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--measure", choices=["ragvet", "bm25s"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    workdir = args.workdir or Path(os.environ.get("TMPDIR", "/tmp")) / f"ragvet-bench-bm25-{args.chunks}-{args.cases}"
    if args.measure:
        print(json.dumps({"ragvet": measure_ragvet, "bm25s": measure_bm25s}[args.measure](workdir)))
        return
    if not (workdir / "cases.jsonl").exists():
        started = time.perf_counter()
        generate(workdir, args.chunks, args.cases, args.seed)
        print(f"generated {workdir} in {time.perf_counter() - started:.0f} s")
    best: dict[str, dict] = {}
    for _ in range(args.rounds):
        for side in ("ragvet", "bm25s"):
            result = run_side(side, workdir)
            if side not in best or result["seconds"] < best[side]["seconds"]:
                best[side] = result

    pages = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    versions = ", ".join(f"{name} {metadata.version(name)}" for name in ("numpy", "scipy", "bm25s"))
    print(f"\n{os.cpu_count()} cores, {pages / 2**30:.1f} GiB RAM, Python {platform.python_version()}; {versions}")
    print(f"{args.chunks:,} chunks, {args.cases:,} cases, depth {DEPTH}, {SPEC}; best of {args.rounds} round(s)\n")
    print(f"{'side':<10}{'seconds':>10}{'peak RSS MB':>14}  phases")
    for side, result in best.items():
        phases = ", ".join(f"{name} {value:.1f}" for name, value in result["phases"].items())
        print(f"{side:<10}{result['seconds']:>10.1f}{result['rss_mb']:>14.0f}  {phases}")
    ratio = best["ragvet"]["seconds"] / best["bm25s"]["seconds"]
    print(f"\nragvet / bm25s: {ratio:.2f} (target <= 1.15)")
    ours = json.loads((workdir / "top-ragvet.json").read_text())
    theirs = json.loads((workdir / "top-bm25s.json").read_text())
    unfiltered = [q["id"] for n, q in enumerate(read_questions(workdir)) if not q["filter"]]
    shared = sum(len(set(ours.get(q, [])) & set(theirs[q])) for q in unfiltered)
    total = sum(len(theirs[q]) for q in unfiltered)
    print(f"top-10 overlap with bm25s on unfiltered cases: {shared / max(total, 1):.4f}")


if __name__ == "__main__":
    main()
