"""What each side of a comparison retrieved, for the HTML report's case explorer: a
configuration's top k chunks per case, from the work tree's run and chunks (the
candidate) or as a git revision has them (the baseline, through git or DVC).

A run and its chunks are DVC outputs, kept in the DVC cache rather than in git. A
revision whose run neither the cache nor the remote holds, or a baseline folder (it
keeps per-case results and top-k rankings, not chunks), leaves that side unavailable with the reason why:
the explorer says so beside the other side, and the report is still written.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

import orjson
import polars as pl
import yaml

from ragvet.errors import InputError
from ragvet.gating.baselines import fetch_files, files_at
from ragvet.schema import Chunk
from ragvet.storage.tables import run_path

RUNS, CHUNKS = Path("data/runs"), Path("data/chunks")  # where dvc.yaml's retrieve and chunk stages write


@dataclass(frozen=True)
class Retrieved:
    """One side's first ``k`` chunks per case: ``top`` maps a case id to its
    ``(chunk_id, score)`` pairs, best first, and ``chunks`` holds every chunk named
    there. ``top`` is None when the side is unavailable, and ``unavailable`` says why."""

    top: dict[str, list[tuple[str, float]]] | None
    chunks: dict[str, Chunk]
    unavailable: str | None = None


def unavailable(reason: str) -> Retrieved:
    """A side whose run could not be read, with the reason the explorer shows."""
    return Retrieved(None, {}, reason)


def chunking_of(params: dict, config: str) -> str | None:
    """The chunking a configuration of ``params`` (params.yaml, read) names, None when it has no such configuration."""
    entry = (params.get("configs") or {}).get(config)
    return entry.get("chunking") if isinstance(entry, dict) else None


def top_k(run: Path, k: int, cases: Collection[str] | None = None) -> dict[str, list[tuple[str, float]]]:
    """The first ``k`` ranks of every case (of ``cases`` only, when given) of a retrieve
    stage's run (Parquet), as :attr:`Retrieved.top` holds them. The filter is applied as
    the file is scanned, so a run of ten million cases is never held."""
    wanted = pl.col("rank") <= k
    if cases is not None:
        wanted &= pl.col("case_id").is_in(pl.Series(list(cases), dtype=pl.String))
    scan = pl.scan_parquet(run).select("case_id", "rank", "chunk_id", "score")
    frame = scan.filter(wanted).collect().sort(["case_id", "rank"])
    top: dict[str, list[tuple[str, float]]] = {}
    for case_id, _, chunk_id, score in frame.iter_rows():
        top.setdefault(case_id, []).append((chunk_id, float(score)))
    return top


def named_chunks(lines: Iterable[bytes], wanted: set[str]) -> dict[str, Chunk]:
    """The chunks of a chunk table (JSONL lines) whose ids are ``wanted``."""
    found = {}
    for line in lines:
        if line.strip():
            row = orjson.loads(line)
            if row.get("chunk_id") in wanted:
                found[row["chunk_id"]] = Chunk.from_row({**row, "token_starts": None})
    return found


def _retrieved(run: Path, chunks: Path, k: int, cases: Collection[str] | None) -> Retrieved:
    top = top_k(run, k, cases)
    wanted = {chunk_id for pairs in top.values() for chunk_id, _ in pairs}
    with open(chunks, "rb") as handle:
        return Retrieved(top, named_chunks(handle, wanted))


def retrieved_here(
    config: str, chunking: str, k: int, cases: Collection[str] | None = None, project: Path = Path(".")
) -> Retrieved:
    """The candidate side: the work tree's run of ``config`` (of ``cases`` only, when given)
    and its chunking's chunks."""
    run, chunks = run_path(project / RUNS, config), project / CHUNKS / f"{chunking}.jsonl"
    missing = [path for path in (run, chunks) if not path.is_file()]
    if missing:
        return unavailable(f"{missing[0]} is not in the work tree (run `dvc repro`, or `dvc checkout` it)")
    return _retrieved(run, chunks, k, cases)


def _params_at(rev: str, project: Path) -> dict:
    """``rev``'s params.yaml, read; empty when it has none or it does not parse (every side then unavailable)."""
    text = files_at(rev, ["params.yaml"], project)["params.yaml"]
    try:
        params = yaml.safe_load(text.decode("utf-8")) if text else {}
    except (yaml.YAMLError, UnicodeDecodeError):
        return {}
    return params if isinstance(params, dict) else {}


def retrieved_at(
    rev: str,
    configs: Iterable[str],
    k: int,
    folder: Path,
    cases: Collection[str] | None = None,
    project: Path = Path("."),
) -> dict[str, Retrieved]:
    """The baseline side at ``rev`` (of ``cases`` only, when given): each configuration's
    run and chunks as that revision has them (its own params.yaml names the chunking),
    fetched into ``folder`` (:func:`ragvet.gating.baselines.fetched`), unavailable where
    that revision lacks them or DVC cannot bring them."""
    params = _params_at(rev, project)
    found = {}
    for config in configs:
        chunking = chunking_of(params, config)
        if chunking is None:
            found[config] = unavailable(f"{rev}'s params.yaml has no configuration {config}")
            continue
        paths = [run_path(RUNS, config).as_posix(), (CHUNKS / f"{chunking}.jsonl").as_posix()]
        try:
            fetched = fetch_files(rev, paths, project, folder)  # one DVC filesystem for both
        except InputError as err:
            problem = err.problems[0]
            found[config] = unavailable(f"{problem.where}: {problem.what} (fix: {problem.fix})")
            continue
        run, chunks = fetched[paths[0]], fetched[paths[1]]
        if run is None or chunks is None:
            found[config] = unavailable(f"{rev} has no {paths[0] if run is None else paths[1]}")
            continue
        found[config] = _retrieved(run, chunks, k, cases)
    return found
