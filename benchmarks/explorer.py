"""The HTML report's case explorer at scale: page weight, the time to build its data, and
in headless Chromium (the system browser, driven by Playwright) the time to first render
and to choose a case, filter a slice, search and sort, on seeded synthetic cases.

    python benchmarks/explorer.py [--sizes 181 100000] [--page report.html ...]

``--page`` measures pages already written (``ragvet report --against REV --format html``).
Each size is one gated configuration with the sample's six guarded metrics, three slices,
top 5 per side, chunks of 300 characters over documents of 3,000.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from ragvet.gating.retrieved import Retrieved
from ragvet.reporting.explorer import explorer_data, explorer_section
from ragvet.reporting.page import render_html
from ragvet.schema import Chunk

METRICS = [
    "recall@5",
    "evidence_recall@5",
    "claim_availability@5",
    "evidence_recall_budget@512",
    "mrr",
    "unsupported_answer",
]
COLUMNS = ["first_rank", *METRICS]
SLICES = ["phrasing", "doc_type", "year"]
WORDS = "leave policy expense travel security laptop office remote pension holiday claim limit approval".split()
K, CHUNK, DOC = 5, 300, 3000


def synthetic(n: int, seed: int = 7) -> dict:
    """What the report hands :func:`explorer_data` for ``n`` cases: 5% newly missed, 2% newly found."""
    rng = random.Random(seed)
    docs = max(1, n // 20)
    texts = {f"doc-{d:06d}": " ".join(rng.choice(WORDS) for _ in range(DOC // 6))[:DOC] for d in range(docs)}
    chunks = {
        f"{doc}#{o}": Chunk(f"{doc}#{o}", doc, o, o * CHUNK, (o + 1) * CHUNK, text[o * CHUNK : (o + 1) * CHUNK])
        for doc, text in texts.items()
        for o in range(DOC // CHUNK)
    }
    names = sorted(chunks)
    ids, cases, moves, base, cur = [], [], [], {}, {}
    for i in range(n):
        case_id, doc = f"case-{i:06d}", f"doc-{rng.randrange(docs):06d}"
        start = rng.randrange(DOC - 80)
        ref = {"doc": doc, "start": start, "end": start + 60}
        tags = {"phrasing": rng.choice(["keyword", "question"]), "doc_type": rng.choice(["policy", "faq", "guide"]),
                "year": rng.choice(["2024", "2025", "2026"])}  # fmt: skip
        question = " ".join(rng.choice(WORDS) for _ in range(8)) + "?"
        cases.append({"id": case_id, "question": question, "tags": tags, "evidence": [ref],
                      "claims": [{"text": question, "evidence": [ref]}]})  # fmt: skip
        roll = rng.random()
        status = "newly missed" if roll < 0.05 else "newly found" if roll < 0.07 else "unchanged"
        hit = f"{doc}#{start // CHUNK}"
        others = [c for c in rng.sample(names, K + 1) if c != hit][: K - 1]
        b_rank = None if status == "newly found" else rng.randrange(1, K + 1)
        c_rank = None if status == "newly missed" else rng.randrange(1, K + 1)
        for side, rank in ((base, b_rank), (cur, c_rank)):
            top = list(others) + ([rng.choice(names)] if rank is None else [])
            if rank is not None:
                top.insert(rank - 1, hit)
            side[case_id] = [(c, round(10 - r * 0.37, 4)) for r, c in enumerate(top[:K])]
        row = {
            "config": "cfg",
            "case_id": case_id,
            "status": status,
            "baseline_first_rank": b_rank,
            "first_rank": c_rank,
        }
        for m in METRICS:
            row[f"baseline_{m}"], row[m] = round(rng.random(), 6), round(rng.random(), 6)
        moves.append(row)
        ids.append(case_id)
    sides = {"cfg": (Retrieved(base, chunks), Retrieved(cur, chunks))}
    return {"cases": cases, "texts": texts, "moves": {"cfg": moves}, "sides": sides}


# Timed in the page: each action dispatched as a reviewer's input would, to its synchronous end.
ACTIONS = {
    "choose a case": "document.querySelector('#rx-body tr.rx-row').click()",
    "filter a slice": "const s = document.getElementById('rx-slice'); s.selectedIndex = 1;"
    " s.dispatchEvent(new Event('change'))",
    "search": "const i = document.getElementById('rx-search'); i.value = 'leave'; i.dispatchEvent(new Event('input'))",
    "sort by a metric": "document.querySelector('#rx-head th:nth-child(7)').click()",
    "scroll 1,000 rows": "const t = document.getElementById('rx-table'); t.scrollTop = 24000;"
    " t.dispatchEvent(new Event('scroll'))",
}


def measure(page_path: Path) -> dict:
    """Size, time to first render (navigation start to the explorer's ready mark), and each action's time."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        started = time.perf_counter()
        page.goto(page_path.as_uri(), wait_until="load", timeout=300_000)
        page.wait_for_function("performance.getEntriesByName('ragvet-explorer-ready').length > 0", timeout=300_000)
        wall = time.perf_counter() - started
        ready = page.evaluate("performance.getEntriesByName('ragvet-explorer-ready')[0].startTime")
        heap = page.evaluate("performance.memory ? performance.memory.usedJSHeapSize : null")
        times = {
            name: page.evaluate(
                f"() => {{ const started = performance.now(); {{ {code}; }} return performance.now() - started; }}"
            )
            for name, code in ACTIONS.items()
        }
        browser.close()
    return {"bytes": page_path.stat().st_size, "ready_ms": ready, "wall_s": wall, "heap": heap, "actions": times}


def report(label: str, found: dict, build: float | None) -> None:
    heap = f"{found['heap'] / 2**20:.0f} MB" if found["heap"] else "?"
    built = f"{build:.2f} s" if build is not None else "-"
    print(
        f"| {label} | {found['bytes'] / 2**20:.2f} MB | {built} | {found['ready_ms']:.0f} ms | "
        f"{found['wall_s']:.2f} s | {heap} | "
        + ", ".join(f"{name} {ms:.0f} ms" for name, ms in found["actions"].items())
        + " |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[181, 100_000])
    parser.add_argument("--page", type=Path, nargs="*", default=[])
    args = parser.parse_args()
    print(f"Python {sys.version.split()[0]}")
    print("| page | size | data built | first render (navigation to ready) | load to ready, wall | JS heap | actions |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for path in args.page:
        report(path.name, measure(path), None)
    with tempfile.TemporaryDirectory() as folder:
        for n in args.sizes:
            made = synthetic(n)
            started = time.perf_counter()
            data = explorer_data(made["cases"], made["texts"], made["moves"], made["sides"], COLUMNS, SLICES, K, "main")
            section = explorer_section(data)
            build = time.perf_counter() - started
            sizes = {key: len(json.dumps(value, separators=(",", ":"))) / 2**20 for key, value in data.items()}
            print("  data block MB by key: " + ", ".join(f"{k} {v:.1f}" for k, v in sizes.items() if v >= 0.05))
            path = Path(folder) / f"explorer-{n}.html"
            path.write_text(render_html("# Gate: FAILED\n", [], section), encoding="utf-8")
            report(f"{n:,} synthetic cases", measure(path), build)


if __name__ == "__main__":
    main()
