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

from ragvet.errors import InputError, Problem, raise_if
from ragvet.storage.files import iter_jsonl, text_lines
from ragvet.text.values import SURROGATE_FIX, is_int, is_number, kind_of, lone_surrogate, surrogate_what

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


def checked_rank_score(where: str, rank: object, score: object) -> tuple[int | None, float | None] | Problem:
    """A line's rank and score, checked: a rank is a whole number ≥ 1 (``0`` would
    divide by zero in ``1 / rank``, a negative one would invert the order, ``true``
    is not a number), and a score is finite (NaN sorts nowhere and ``1e400`` is
    infinity): each is refused at its line rather than silently dropped."""
    if rank is not None and not (is_int(rank) and rank >= 1):
        return Problem(where, f"rank must be a whole number ≥ 1, got {kind_of(rank)} {rank!r}", RANK_FIX)
    if score is not None and not is_number(score):
        return Problem(where, f"score must be a finite number, got {kind_of(score)} {score!r}", SCORE_FIX)
    return rank, None if score is None else float(score)


RANK_FIX = "number the ranks 1, 2, 3, ... from the best item down"
SCORE_FIX = "write a finite score (higher is better); for an item without one, leave it out of the run"


def _number(text: str) -> int | float | str:
    """A TREC column as a number when it reads as one, else the text itself."""
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            pass
    return text


def read_trec_run(path: Path) -> list[RunEntry]:
    """A TREC run names whatever it ranks as ``docno``; ragvet treats an id with
    ``#`` as a chunk id and anything else as a doc id."""
    entries, problems = [], []
    for number, line in text_lines(path, problems):
        fields = line.split()
        where = f"{path}:{number}"
        if len(fields) != 6:
            problems.append(
                Problem(
                    where,
                    f"a TREC run line has 6 columns (qid Q0 docno rank score tag), this one has {len(fields)}",
                    "write one ranked item per line, separated by whitespace",
                )
            )
            continue
        qid, _, item, rank, score, _ = fields
        checked = checked_rank_score(where, _number(rank), _number(score))
        if isinstance(checked, Problem):
            problems.append(checked)
        else:
            entries.append(RunEntry(number, qid, item, "chunk" if "#" in item else "doc", checked[1], checked[0]))
    raise_if(problems)
    return entries


def _jsonl_entry(path: Path, number: int, row: object) -> RunEntry | Problem:
    where = f"{path}:{number}"
    if not isinstance(row, dict) or "case_id" not in row:
        return Problem(
            where, "a run line needs case_id", 'write {"case_id", "chunk_id" or "doc_id", "score" or "rank"}'
        )
    found = lone_surrogate(row)
    if found is not None:
        return Problem(where, surrogate_what(found), SURROGATE_FIX)
    ids = [key for key in ("chunk_id", "doc_id") if key in row]
    if len(ids) != 1:
        return Problem(where, "a run line needs exactly one of chunk_id or doc_id", "keep one of the two")
    score, rank = row.get("score"), row.get("rank")
    if score is None and rank is None:
        return Problem(where, "a run line needs a score or a rank", "add score (higher is better) or rank (1 is best)")
    checked = checked_rank_score(where, rank, score)
    if isinstance(checked, Problem):
        return checked
    located = {key: row[key] for key in PASSAGE_LOCATORS if key in row}
    if located and ids[0] == "doc_id":
        passage = {"doc_id": row["doc_id"], **located}
        return RunEntry(number, str(row["case_id"]), str(row["doc_id"]), "passage", checked[1], checked[0], passage)
    level = "chunk" if ids[0] == "chunk_id" else "doc"
    return RunEntry(number, str(row["case_id"]), str(row[ids[0]]), level, checked[1], checked[0])


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
