"""Streaming a chunk file in chunk_id order (``chunk_rows_by_id``, as the ``engine: ray``
flat search reads it): seconds and peak RSS, for a file the sorting heap orders and for one
document of more chunks than the heap holds, which is sorted on disk.

    python benchmarks/chunk_sort.py --one-document 200000      # writes the file, prints its path
    flock /tmp/bench.lock /usr/bin/time -v python benchmarks/chunk_sort.py FILE [--src PATH] [--repeat 3]

Each repeat is a full pass over the rows (best of ``--repeat`` is printed), then one more
pass hashes them (sha256 of ``chunk_id NUL text`` lines), so two checkouts' streams can be
compared; ``--check`` also sorts every row in memory and says whether the stream is that
order. ``--src`` runs another checkout's ``src``. Generated files live under
``/tmp/ragvet-chunk-sort`` and are reused.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import sys
import time
from pathlib import Path

DATA = Path("/tmp/ragvet-chunk-sort")
WORDS = "cat dog rain spain market sun river bread train music garden winter".split()


def one_document(count: int) -> Path:
    """One document of ``count`` short chunks in ordinal order, as the chunk stage writes it."""
    path = DATA / f"one-document-{count}.jsonl"
    if not path.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        with open(f"{path}.tmp", "w") as handle:
            for i in range(count):
                text = f"{WORDS[i % 12]} and {WORDS[(i * 5) % 12]} by the {WORDS[(i * 7) % 12]}, number {i}"
                row = {"chunk_id": f"book#{i}", "doc_id": "book", "ordinal": i, "start": 0, "end": len(text)}
                handle.write(json.dumps({**row, "text": text, "metadata": {}}) + "\n")
        os.replace(f"{path}.tmp", path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("file", nargs="?")
    parser.add_argument("--one-document", type=int, help="write one document of this many chunks")
    parser.add_argument("--src", help="a checkout's src folder to run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--check", action="store_true", help="compare with every row sorted in memory")
    args = parser.parse_args()
    if args.one_document:
        print(one_document(args.one_document))
        return
    if args.src:
        sys.path.insert(0, str(Path(args.src).resolve()))
    from ragvet.errors import InputError
    from ragvet.storage.tables import chunk_rows_by_id

    path = Path(args.file)
    seconds = []
    try:
        for _ in range(args.repeat):
            start = time.perf_counter()
            rows = sum(1 for _ in chunk_rows_by_id(path))
            seconds.append(time.perf_counter() - start)
    except InputError as err:
        print(f"refused: {err.problems[0]}")
        return
    digest = hashlib.sha256()
    for chunk_id, text, _ in chunk_rows_by_id(path):
        digest.update(f"{chunk_id}\0{text}\n".encode())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{rows} rows in {min(seconds):.2f} s (best of {args.repeat}), sha256 {digest.hexdigest()[:16]}")
    print(f"peak RSS before --check {peak:.0f} MB")
    if args.check:
        print("sorted in memory:", list(chunk_rows_by_id(path)) == sorted(chunk_rows_by_id(path, 1 << 62)))


if __name__ == "__main__":
    main()
