"""Fusion speed: ragvet's hand-written RRF / weighted fusion against ranx.fuse,
on the same generated runs, measured in the same process.

    python benchmarks/fusion.py [--cases 2000] [--depth 100]

ranx compiles its fusion with numba on first use; the first call is reported
apart from the warm calls. Absolute times are noise on shared machines: read the
ratios.
"""

from __future__ import annotations

import argparse
import random
import time

from ragvet.retrieval.fusion import reciprocal_rank_fusion, weighted_fusion


def make_runs(cases: int, depth: int, seed: int = 7) -> list[dict[str, dict[str, float]]]:
    rng = random.Random(seed)
    runs = []
    for _ in range(2):
        run = {}
        for case in range(cases):
            ids = rng.sample(range(depth * 3), depth)
            run[f"q{case}"] = {f"d{i}": rng.random() * 10 for i in ids}
        runs.append(run)
    return runs


def ragvet_fuse(runs: list[dict[str, dict[str, float]]], method: str) -> dict[str, dict[str, float]]:
    fused = {}
    for case in runs[0]:
        members = [run[case] for run in runs]
        if method == "rrf":
            rankings = [sorted(m, key=lambda key, m=m: (-m[key], key)) for m in members]
            fused[case] = reciprocal_rank_fusion(rankings, 60)
        else:
            fused[case] = weighted_fusion(members, [0.5, 0.5], "min-max")
    return fused


def ranx_fuse(runs, method: str):
    from ranx import Run, fuse

    ranx_runs = [Run(run) for run in runs]
    if method == "rrf":
        return fuse(ranx_runs, method="rrf", params={"k": 60})
    return fuse(ranx_runs, norm="min-max", method="wsum", params={"weights": [0.5, 0.5]})


def timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--depth", type=int, default=100)
    args = parser.parse_args()
    runs = make_runs(args.cases, args.depth)
    print(f"{args.cases} cases x 2 members x depth {args.depth}")
    for method in ("rrf", "weighted"):
        first = timed(ranx_fuse, runs, method)
        ranx_warm = min(timed(ranx_fuse, runs, method) for _ in range(3))
        ours = min(timed(ragvet_fuse, runs, method) for _ in range(3))
        print(
            f"{method:9s} ragvet {ours:7.3f}s | ranx first call {first:7.3f}s, warm {ranx_warm:7.3f}s | "
            f"ragvet / ranx warm = {ours / ranx_warm:5.2f}, ragvet / ranx first = {ours / first:5.3f}"
        )


if __name__ == "__main__":
    main()
