"""overlap@k, topk_changed@k and RBO_EXT (ragvet.measures.overlap) at scale, against the `rbo`
package (changyaochen/rbo), which computes RBO_EXT one pair of lists at a time in Python.

Seeded synthetic top-10 rankings: a baseline of distinct chunk numbers per case, and a
candidate that keeps it (60% of cases), reorders it (20%), or swaps in 1-5 new chunks
(20%), some lists shorter than 10. Reported: the kernels' time per million cases at each
size in batches of ``--batch`` cases (the way a streaming evaluation calls them) and the
process's peak RSS, ``moved_at()`` from two run frames (the polars pairing the verdict uses),
and the peer's time per million on a subset with the largest difference between the two.

The `rbo` package declares numpy<2, so it is not in requirements-dev.lock: install it beside
the project without its dependencies and point at it,

    pip install --no-deps --target /tmp/rbo_peer rbo==0.1.3 tqdm
    python benchmarks/overlap.py --rbo-path /tmp/rbo_peer
"""

from __future__ import annotations

import argparse
import platform
import resource
import sys
import time

import numpy as np
import polars as pl

from ragvet.measures.overlap import moved_at, movement, rbo_ext

K, P = 10, 0.9


def rankings(cases: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Baseline and candidate ``cases x K`` matrices, -1 padded, as the docstring describes."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 1 << 40, size=(cases, K), dtype=np.int64) + np.arange(K)[None, :]
    short = rng.random(cases) < 0.1
    lengths = np.where(short, rng.integers(0, K, size=cases), K)
    base[np.arange(K)[None, :] >= lengths[:, None]] = -1
    cand = base.copy()
    kind = rng.random(cases)
    reorder = (kind >= 0.6) & (kind < 0.8)
    cand[reorder] = np.sort(cand[reorder], axis=1)[:, ::-1]  # another order, the -1s still last
    swap = kind >= 0.8
    positions = rng.integers(0, K, size=(cases, 5))
    count = rng.integers(1, 6, size=cases)
    for j in range(5):
        rows = swap & (j < count) & (cand[np.arange(cases), positions[:, j]] >= 0)
        cand[rows, positions[rows, j]] = (1 << 41) + np.nonzero(rows)[0] * 8 + j
    return base, cand


def kernels(base: np.ndarray, cand: np.ndarray, batch: int) -> float:
    """Seconds for the three figures (:func:`movement`) over every batch."""
    start = time.perf_counter()
    for at in range(0, len(base), batch):
        movement(base[at : at + batch], cand[at : at + batch], K, P)
    return time.perf_counter() - start


def frames(base: np.ndarray, cand: np.ndarray) -> tuple[pl.DataFrame, pl.DataFrame]:
    def frame(matrix: np.ndarray) -> pl.DataFrame:
        rows, ranks = np.nonzero(matrix >= 0)
        return pl.DataFrame(
            {
                "case_id": pl.Series(rows).cast(pl.String).str.zfill(9),
                "rank": ranks + 1,
                "chunk_id": pl.Series(matrix[rows, ranks]).cast(pl.String),
            }
        )

    return frame(base), frame(cand)


def peer(base: np.ndarray, cand: np.ndarray) -> tuple[float, float]:
    """Seconds of the `rbo` package over the rows, and its largest difference from ragvet's."""
    from rbo import RankingSimilarity

    lists = [([x for x in b if x >= 0], [x for x in c if x >= 0]) for b, c in zip(base.tolist(), cand.tolist())]
    start = time.perf_counter()
    theirs = np.array([RankingSimilarity(b, c).rbo_ext(p=P) for b, c in lists])
    seconds = time.perf_counter() - start
    return seconds, float(np.abs(theirs - rbo_ext(base, cand, P)).max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 10_000_000])
    parser.add_argument("--batch", type=int, default=1_000_000)
    parser.add_argument("--peer-cases", type=int, default=20_000)
    parser.add_argument("--rbo-path", help="a folder holding the rbo package (see the docstring)")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, python {platform.python_version()}, numpy {np.__version__}")
    print("| cases | kernels s | s per 1M cases | moved_at() from frames s |")
    print("|---|---|---|---|")
    per_million = None
    for size in args.sizes:
        base, cand = rankings(size, seed=size)
        seconds = kernels(base, cand, args.batch)
        from_frames = "–"
        if size <= 1_000_000:
            sides = frames(base, cand)
            start = time.perf_counter()
            moved_at(*sides, [K], P)
            from_frames = f"{time.perf_counter() - start:.2f}"
        per_million = seconds / size * 1e6
        print(f"| {size:,} | {seconds:.2f} | {per_million:.2f} | {from_frames} |")
        del base, cand
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process: {peak:.0f} MiB (batch {args.batch:,} cases)")
    if args.rbo_path:
        sys.path.insert(0, args.rbo_path)
        base, cand = rankings(args.peer_cases, seed=7)
        seconds, difference = peer(base, cand)
        theirs = seconds / args.peer_cases * 1e6
        print(
            f"rbo package, {args.peer_cases:,} cases: {theirs:.1f} s per 1M cases, largest difference {difference:.2e}"
        )
        print(f"ratio, rbo package / ragvet kernels (at the last size): {theirs / per_million:.0f}x")


if __name__ == "__main__":
    main()
