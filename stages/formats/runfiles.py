"""Reading a production system's ranked output: a TREC run file or JSONL.

TREC lines are ``qid Q0 docno rank score tag``. JSONL lines are
``{case_id, chunk_id | doc_id, score | rank}``, or a foreign passage (the
production system's own chunk): ``{case_id, doc_id, start, end, score | rank}``
or ``{case_id, doc_id, text, score | rank}``. Every malformed line is reported
with its line number; nothing is guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stages.errors import InputError, Problem, raise_if
from stages.storage.files import iter_jsonl

PASSAGE_LOCATORS = ("start", "end", "text", "occurrence")  # with doc_id, a line names a foreign passage


@dataclass(frozen=True)
class RunEntry:
    """One ranked item of an external run. ``level`` is ``chunk``, ``doc`` or
    ``passage``; a passage's locating keys are in ``passage``."""

    line: int
    case_id: str
    item_id: str
    level: str
    score: float | None
    rank: int | None
    passage: dict | None = None


def run_format(path: Path, declared: str | None) -> str:
    """``trec`` or ``jsonl``: declared in params, else from the suffix."""
    if declared:
        return declared
    return "jsonl" if path.suffix.lower() == ".jsonl" else "trec"


def read_trec_run(path: Path) -> list[RunEntry]:
    """A TREC run names whatever it ranks as ``docno``; ragvet treats an id with
    ``#`` as a chunk id and anything else as a doc id."""
    entries, problems = [], []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 6:
            problems.append(
                Problem(
                    f"{path}:{number}",
                    f"a TREC run line has 6 columns (qid Q0 docno rank score tag), this one has {len(fields)}",
                    "write one ranked item per line, separated by whitespace",
                )
            )
            continue
        qid, _, item, rank, score, _ = fields
        try:
            entries.append(RunEntry(number, qid, item, "chunk" if "#" in item else "doc", float(score), int(rank)))
        except ValueError:
            problems.append(
                Problem(f"{path}:{number}", f"rank {rank!r} or score {score!r} is not a number", "fix the columns")
            )
    raise_if(problems)
    return entries


def _jsonl_entry(path: Path, number: int, row: object) -> RunEntry | Problem:
    where = f"{path}:{number}"
    if not isinstance(row, dict) or "case_id" not in row:
        return Problem(
            where, "a run line needs case_id", 'write {"case_id", "chunk_id" or "doc_id", "score" or "rank"}'
        )
    ids = [key for key in ("chunk_id", "doc_id") if key in row]
    if len(ids) != 1:
        return Problem(where, "a run line needs exactly one of chunk_id or doc_id", "keep one of the two")
    score, rank = row.get("score"), row.get("rank")
    if score is None and rank is None:
        return Problem(where, "a run line needs a score or a rank", "add score (higher is better) or rank (1 is best)")
    if (score is not None and not isinstance(score, (int, float))) or (rank is not None and not isinstance(rank, int)):
        return Problem(where, "score must be a number and rank an integer", "fix the value")
    located = {key: row[key] for key in PASSAGE_LOCATORS if key in row}
    if located and ids[0] == "doc_id":
        passage = {"doc_id": row["doc_id"], **located}
        return RunEntry(number, str(row["case_id"]), str(row["doc_id"]), "passage", score, rank, passage)
    level = "chunk" if ids[0] == "chunk_id" else "doc"
    return RunEntry(number, str(row["case_id"]), str(row[ids[0]]), level, score, rank)


def read_jsonl_run(path: Path) -> list[RunEntry]:
    results = [_jsonl_entry(path, number, row) for number, row in iter_jsonl(path)]
    raise_if([result for result in results if isinstance(result, Problem)])
    return [result for result in results if isinstance(result, RunEntry)]


def read_external_run(path: Path, declared_format: str | None = None) -> list[RunEntry]:
    """Every entry of a run file, after checking it is one level (chunks or docs)."""
    if not path.is_file():
        raise InputError([Problem(str(path), "run file not found", "fix `path` of the run_file retriever")])
    fmt = run_format(path, declared_format)
    entries = read_jsonl_run(path) if fmt == "jsonl" else read_trec_run(path)
    levels = {entry.level for entry in entries}
    if len(levels) > 1:
        raise InputError(
            [
                Problem(
                    str(path),
                    f"the run mixes {' and '.join(sorted(levels))} lines",
                    "rank one kind of item: chunk ids, doc ids, or passages ({doc_id, start, end} or {doc_id, text})",
                )
            ]
        )
    if len({entry.score is None for entry in entries}) > 1:
        raise InputError(
            [Problem(str(path), "some lines give a score and others only a rank", "give every line a score, or none")]
        )
    return entries


def entry_score(entry: RunEntry) -> float:
    """The score that orders an entry: its own, or ``1 / rank`` for a rank-only
    line, so rank 1 ranks first and every score stays positive."""
    return float(entry.score) if entry.score is not None else 1.0 / entry.rank
