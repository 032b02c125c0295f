"""Reading and writing the pipeline's intermediate tables (validated corpus and
cases, chunks, runs, per-case results). One place, so every stage agrees on the
formats and every row is sorted the same way."""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import heapq
import itertools
import json
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, TypeVar

import numpy as np
import orjson
import polars as pl

from ragvet.errors import InputError, Problem, raise_if
from ragvet.schema import Case, Chunk, Doc, matches_filter
from ragvet.storage.atomic import ROW_GROUP_ROWS, write_parquet
from ragvet.storage.columns import CaseTable, ChunkTable, ChunkTexts, RunTable, TokenStarts
from ragvet.storage.files import each_jsonl, iter_jsonl, read_jsonl, round_floats, write_jsonl

T = TypeVar("T")


def write_docs(path: Path, docs: Iterable[Doc]) -> None:
    write_jsonl(path, (doc.to_row() for doc in sorted(docs, key=lambda d: d.doc_id)))


def read_docs(path: Path) -> list[Doc]:
    """The validated corpus, a line at a time: read whole, its bytes and their text would
    double the texts' memory while they are parsed."""
    with gc_paused():
        return [Doc.from_row(row) for row in each_jsonl(path)]


def write_cases(path: Path, cases: Iterable[Case]) -> None:
    write_jsonl(path, (case.to_row() for case in sorted(cases, key=lambda c: c.case_id)))


def read_cases(path: Path) -> list[Case]:
    return [Case.from_row(row) for row in read_jsonl(path)]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a reader builds many small
    containers: each thousand allocations would otherwise trigger a pass over
    every object made so far (4x the parse time at 100,000 cases). Parsed rows
    hold no cycles, so nothing is left for the collector to find."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def case_table_schema() -> dict[str, pl.DataType]:
    """The columns of the evaluator's case table: a case's evidence units, then
    the units its claims cite (``claim`` is the claim's number in the case, -1
    for the case's own evidence), each with its targets: one span or doc, or
    the alternatives of an ``any`` unit (a doc-level target has no offsets)."""
    target = pl.Struct({"doc": pl.String, "start": pl.Int64, "end": pl.Int64})
    unit = pl.Struct({"claim": pl.Int32, "targets": pl.List(target)})
    return {"id": pl.String, "answerable": pl.Boolean, "tags": pl.String, "claims": pl.Int32, "units": pl.List(unit)}


def judged_schema() -> pl.DataType:
    """The case table's optional ``judged`` column: each judged doc with its grade,
    null for a case without a judged set."""
    return pl.List(pl.Struct({"doc": pl.String, "grade": pl.Int64}))


def write_case_table(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """Validated case rows (:meth:`Case.to_row`) as Parquet, one row per case in
    case_id order (see :func:`case_table_schema`; tags as canonical JSON). The
    ``judged`` column (:func:`judged_schema`) is written only when some case has a
    judged set, so the table of cases without one is the same bytes as before.

    The validate stage writes it beside cases.jsonl so that the evaluate stage
    of every configuration reads the evidence as columns instead of parsing and
    walking the JSON again (most of its reading time at 100,000 cases).
    """

    def unit(row: dict[str, Any], claim: int) -> dict[str, Any]:
        targets = row.get("any") or (row,)
        return {"claim": claim, "targets": [{key: t.get(key) for key in ("doc", "start", "end")} for t in targets]}

    records = []
    judged: list[dict[str, int] | None] = []
    for row in sorted(rows, key=lambda r: r["id"]):
        claims = row.get("claims") or ()
        units = [unit(u, -1) for u in row.get("evidence") or ()]
        units += [unit(u, number) for number, claim in enumerate(claims) for u in claim["evidence"]]
        tags = json.dumps(row.get("tags") or {}, sort_keys=True, ensure_ascii=False)
        records.append(
            {
                "id": row["id"],
                "answerable": row.get("answerable", True),
                "tags": tags,
                "claims": len(claims),
                "units": units,
            }
        )
        judged.append(row.get("judged"))
    frame = pl.DataFrame(records, schema=case_table_schema())
    if any(grades is not None for grades in judged):
        entries = [
            None if grades is None else [{"doc": d, "grade": g} for d, g in sorted(grades.items())] for grades in judged
        ]
        frame = frame.with_columns(pl.Series("judged", entries, dtype=judged_schema()))
    write_parquet(path, frame, row_group_size=ROW_GROUP_ROWS)


def read_case_table(path: Path) -> CaseTable:
    """The validated cases as the evaluation engine reads them (ids, answerable,
    tags and the evidence as columns), from the validate stage's Parquet case
    table or from a cases JSONL.

    JSONL lines go straight to the columns, one at a time, without a
    :class:`Case` per row. A JSONL file that does not read so (or is not in
    case_id order, as validate writes it) goes through :func:`read_cases`,
    which names the line that is wrong.
    """
    if path.suffix == ".parquet":
        return CaseTable.from_frame(_read_parquet(path, "case table", "the validate stage"))

    def rows(handle):
        for line in handle:
            if line.strip():
                yield orjson.loads(line)

    try:
        with open(path, "rb") as handle, gc_paused():
            return CaseTable.from_rows(rows(handle))
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError, OSError):
        return CaseTable.from_cases(read_cases(path))


def _read_parquet(path: Path, what: str, stage: str) -> pl.DataFrame:
    """A Parquet file ragvet wrote; one that does not read is a problem naming it."""
    try:
        return pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError) as err:
        problem = f"not a readable Parquet {what} ({type(err).__name__}: {str(err).splitlines()[0][:200]})"
        raise InputError([Problem(str(path), problem, f"re-run {stage} (dvc repro)")]) from None


def write_chunks(path: Path, chunks: Sequence[Chunk], token_starts: TokenStarts | None = None) -> None:
    """The chunks in (doc_id, ordinal) order. ``token_starts``, the starts of ``chunks``
    in the order given, stay compact until each chunk's own line is written."""
    order = sorted(range(len(chunks)), key=lambda i: (chunks[i].doc_id, chunks[i].ordinal))
    if token_starts is None:
        write_jsonl(path, (chunks[i].to_row() for i in order))
    else:
        write_jsonl(path, (dataclasses.replace(chunks[i], token_starts=token_starts.of(i)).to_row() for i in order))


def read_chunks(path: Path, token_starts: bool = True) -> list[Chunk]:
    """Every chunk row as a :class:`Chunk`.

    Without ``token_starts`` (the budget's, which retrievers and id lists never read),
    each line is parsed and its starts dropped before the next one, so they never cost
    a Python int per token all at once. A file that does not read so is read whole by
    :func:`read_jsonl`, which names the line that is wrong.
    """
    if not token_starts:
        chunks = _picked_rows(path, lambda row: Chunk.from_row(_without_token_starts(row)))
        if chunks is not None:
            return chunks
    return [Chunk.from_row(row if token_starts else _without_token_starts(row)) for row in read_jsonl(path)]


def _picked_rows(path: Path, pick: Callable[[dict[str, Any]], T]) -> list[T] | None:
    """``pick`` of every row of a chunk file, parsed a line at a time, each line's value
    dropped once picked (the collector paused: no cycles); None when a line does not read
    so, and the caller's validating reader (:func:`read_jsonl`) then names that line."""
    try:
        with open(path, "rb") as handle, gc_paused():
            return [pick(orjson.loads(line)) for line in handle if line.strip()]
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError, OSError):
        return None


def _without_token_starts(row: dict[str, Any]) -> dict[str, Any]:
    row.pop("token_starts", None)
    return row


def chunk_metadata(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """The ``(chunk_id, metadata)`` of each chunk row of a chunk file, in the file's order, one
    line read at a time (``{}`` for a row without metadata, as :meth:`Chunk.from_row` reads it);
    a line that is no chunk row or whose metadata is no mapping is an error naming its line."""
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield _id_and_metadata(line, f"{path}:{number}")


def _id_and_metadata(line: bytes, where: str) -> tuple[str, dict[str, Any]]:
    """A chunk row's id and metadata mapping; anything else an error at ``where``."""
    try:
        row = orjson.loads(line)
        metadata = row.get("metadata") or {}
        chunk_id = str(row["chunk_id"])
    except (orjson.JSONDecodeError, KeyError, AttributeError):
        metadata = None
    if not isinstance(metadata, dict):
        what = "not a chunk row with chunk_id and a metadata mapping"
        raise InputError([Problem(where, what, "re-run the chunk stage")])
    return chunk_id, metadata


class ChunkMetadata:
    """The metadata of a chunk file's chunks, each taken once, in an order near the file's (chunk_id
    order: the file is the chunk stage's, in (doc_id, ordinal) order): the file is read forward as
    far as the chunk asked for, and the metadata of the chunks read on the way is held until they
    are asked for. Taken in chunk_id order, it holds about one document's chunks at a time, not
    the chunking's: ``d#10`` is asked for before ``d#2``, so ``d#2`` to ``d#9`` wait (a file far
    from chunk_id order makes it hold more, up to every chunk's metadata)."""

    def __init__(self, path: Path):
        self.path = path
        self.rows = chunk_metadata(path)
        self.held: dict[str, dict[str, Any]] = {}

    def take(self, chunk_id: str) -> dict[str, Any]:
        """The metadata of ``chunk_id``; a chunk the rest of the file does not hold is an error."""
        while chunk_id not in self.held:
            found = next(self.rows, None)
            if found is None:
                what = f"chunk {chunk_id!r} is not in the file any more: it changed while it was read"
                raise InputError([Problem(str(self.path), what, "run the stage again once the chunk stage is done")])
            self.held[found[0]] = found[1]
        return self.held.pop(chunk_id)

    def close(self) -> None:
        """Close the file (a generator left open keeps it until it is collected)."""
        self.rows.close()


def read_chunk_texts(path: Path) -> ChunkTexts:
    """The chunk ids, texts and metadata BM25 reads, one line at a time, without a
    :class:`Chunk` per row (a million of them with their metadata dicts cost a
    gigabyte more than the index).

    Rows need every field :func:`read_chunks` needs; a file that does not read
    so goes through :func:`read_chunks`, which names the line that is wrong.
    orjson rather than polars: polars re-encodes nested metadata and turns 1.0
    into 1, which a filter compares as a different string.
    """

    def rows(handle):
        for line in handle:
            if line.strip():
                row = orjson.loads(line)
                if not {"chunk_id", "doc_id", "ordinal", "start", "end", "text"} <= row.keys():
                    raise KeyError("a chunk row lacks a field")
                yield row["chunk_id"], row["text"], dict(row.get("metadata") or {})

    try:
        with open(path, "rb") as handle:
            return ChunkTexts.from_rows(rows(handle))
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError, OSError):
        return ChunkTexts.from_chunks(read_chunks(path))


SORT_WINDOW = 65_536  # chunks :func:`chunk_rows_by_id` holds to put a file back in chunk_id order
MERGE_FAN_IN = 256  # sorted runs one merge of :func:`chunk_rows_by_id` reads at once (its open files)

ChunkRow = tuple[str, str, tuple[bool, ...]]


def chunk_texts_by_id(path: Path, window: int = SORT_WINDOW) -> Iterator[tuple[str, str]]:
    """The ``(chunk_id, text)`` pairs of a chunk file in (chunk_id, text) order
    (:func:`chunk_rows_by_id` without filters)."""
    for chunk_id, text, _ in chunk_rows_by_id(path, window):
        yield chunk_id, text


def chunk_rows_by_id(
    path: Path, window: int = SORT_WINDOW, filters: Sequence[dict[str, Any]] = (), fan_in: int = MERGE_FAN_IN
) -> Iterator[ChunkRow]:
    """The ``(chunk_id, text, admitted)`` rows of a chunk file in (chunk_id, text, admitted) order
    (``sorted`` of every row), one line read at a time, holding at most ``window + 1`` rows
    whatever the file's length or order. ``admitted`` says, for each of ``filters``, whether it admits the
    chunk's metadata (:func:`ragvet.schema.matches_filter`); the metadata is parsed only when
    there are filters. A line that is no chunk row is an error naming its line, with the fix.

    The chunk stage writes a document's chunks in ordinal order, which chunk_id order is not
    (``d#10`` sorts before ``d#2``): a chunk is out of place by at most about its document's
    chunk count. A heap of ``window`` rows puts such a file back in order, each row given as
    soon as the heap is full and a line comes; a line that sorts before a row already given
    (a document of more than ``window`` chunks) means the heap cannot. Rows once given cannot
    be taken back, and those given need not be the smallest (window 2, lines b c d a: b is
    given before a comes), so the choice is made before the first row is given. A file of at
    most ``window`` rows is sorted whole, as the heap would give it. A longer one goes on
    through the heap without giving anything; if every line came within its reach, it is
    read again through the heap, else merge-sorted on disk (:func:`_merge_sorted`: ``window``
    rows held, then one row and one read buffer of each of at most ``fan_in`` runs). Either
    way the rows come in ``sorted`` order, and every line of a file is read (a line that is no
    chunk row stops it) before its first row is given. A pipe cannot be read twice: it goes
    through the heap as it comes, and a line out of the heap's reach is an error.
    """
    with open(path, "rb") as handle:
        lines = _chunk_rows(handle, path, filters)
        head = [row for _, row in itertools.islice(lines, window + 1)]
        if len(head) <= window:
            head.sort()
            yield from head
            return
        # The heap gives its first row at the head's last, so no head row is checked (line 0);
        # the generator's list iterator lets the list go once the heap holds its rows.
        lines = itertools.chain(((0, row) for row in head), lines)
        del head
        if handle.seekable():
            ordered = _heap_orders(lines, window)
            handle.seek(0)
            lines = _chunk_rows(handle, path, filters)
            if not ordered:
                with tempfile.TemporaryDirectory(prefix="ragvet-chunk-sort-") as folder:
                    yield from _merge_sorted(lines, window, fan_in, Path(folder))
                return
        try:
            yield from _heap_sorted(lines, window)
        except _OutOfWindow as out:  # a pipe: a file the heap cannot order is merge-sorted above
            what = f"chunk {out.row[0]!r} sorts more than {window:,} chunks before where it stands in a pipe"
            fix = "give the chunk file as a file, which can be read twice and sorted on disk, or sort it by chunk_id"
            raise InputError([Problem(f"{path}:{out.number}", what, fix)]) from None


def _chunk_rows(handle: IO[bytes], path: Path, filters: Sequence[dict[str, Any]]) -> Iterator[tuple[int, ChunkRow]]:
    """Each chunk row of ``handle`` from where it stands, with its line number (counted from there)."""
    for number, line in enumerate(handle, start=1):
        if not line.strip():
            continue
        try:
            row = orjson.loads(line)
            metadata = dict(row.get("metadata") or {}) if filters else {}
            yield number, (str(row["chunk_id"]), str(row["text"]), tuple(matches_filter(metadata, f) for f in filters))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            raise InputError(
                [Problem(f"{path}:{number}", "not a chunk row with chunk_id and text", "re-run the chunk stage")]
            ) from None


class _OutOfWindow(Exception):
    """A chunk row that sorts before a row the heap has already given, at line ``number``."""

    def __init__(self, number: int, row: ChunkRow):
        super().__init__(number, row)
        self.number, self.row = number, row


def _heap_sorted(rows: Iterable[tuple[int, ChunkRow]], window: int) -> Iterator[ChunkRow]:
    """``rows`` in order through a heap of ``window`` rows, each given when the heap is full and a
    row comes; :class:`_OutOfWindow` at a row that sorts before one given."""
    heap: list[ChunkRow] = []
    given: ChunkRow | None = None
    for number, row in rows:
        if given is not None and row < given:
            raise _OutOfWindow(number, row)
        if len(heap) < window:
            heapq.heappush(heap, row)
        else:
            given = heapq.heappushpop(heap, row)
            yield given
    while heap:
        yield heapq.heappop(heap)


def _heap_orders(lines: Iterable[tuple[int, ChunkRow]], window: int) -> bool:
    """Whether a heap of ``window`` rows puts ``lines`` in order, read through it, nothing given
    to anyone. A line that is no chunk row stops it with its error."""
    try:
        for _ in _heap_sorted(lines, window):
            pass
        return True
    except _OutOfWindow:
        return False


def _merge_sorted(rows: Iterator[tuple[int, ChunkRow]], window: int, fan_in: int, folder: Path) -> Iterator[ChunkRow]:
    """``rows`` in order, sorted on disk in ``folder``: cut into sorted runs of ``window`` rows,
    merged ``fan_in`` runs at a time into longer runs until at most ``fan_in`` are left, which
    the last merge gives (``heapq.merge``: one row of each run held). A row is a JSON line of
    its three fields, which read back as the same strings and booleans."""
    runs: list[Path] = []
    fan_in = max(fan_in, 2)  # a pass of one run each would never end
    while batch := sorted(row for _, row in itertools.islice(rows, window)):
        runs.append(_write_run(folder / f"{len(runs)}.jsonl", batch))
    made = len(runs)
    while len(runs) > fan_in:
        groups = [runs[start : start + fan_in] for start in range(0, len(runs), fan_in)]
        runs = []
        for group in groups:
            runs.append(_write_run(folder / f"{made}.jsonl", heapq.merge(*map(_read_run, group))))
            made += 1
            for run in group:
                run.unlink()
    yield from heapq.merge(*map(_read_run, runs))


def _write_run(path: Path, rows: Iterable[ChunkRow]) -> Path:
    with open(path, "wb") as handle:
        handle.writelines(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE) for row in rows)
    return path


def _read_run(path: Path) -> Iterator[ChunkRow]:
    with open(path, "rb") as handle:
        for line in handle:
            chunk_id, text, admitted = orjson.loads(line)
            yield chunk_id, text, tuple(admitted)


def read_chunk_table(path: Path) -> ChunkTable:
    """The chunk columns the evaluation engine reads (no text), in chunk_id order: the
    numbering a Parquet run's ``chunk`` column uses.

    A line at a time, each row's text dropped as soon as it is parsed and its token starts
    kept as one int64 array (polars' JSON reader holds the whole file with its texts: twice
    the RSS at 65,536 chunks of 500 characters). A file that does not parse as chunk rows,
    or lists a chunk twice, goes through :func:`read_chunks`, which names the line that is wrong.
    """
    rows = _picked_rows(path, _table_row)
    if rows is not None:
        rows.sort(key=lambda row: row[0])
    if rows is None or any(a[0] == b[0] for a, b in zip(rows, rows[1:])):
        return ChunkTable.from_chunks(read_chunks(path))
    ids, docs, ordinals, starts, ends, tokens = zip(*rows) if rows else ((),) * 6
    numbers = [np.array(column, dtype=np.int64) for column in (ordinals, starts, ends)]
    if not tokens or any(t is None for t in tokens):
        return ChunkTable(list(ids), list(docs), *numbers)
    bounds = np.concatenate(([0], np.cumsum([len(t) for t in tokens], dtype=np.int64)))
    return ChunkTable(list(ids), list(docs), *numbers, bounds, np.concatenate(tokens))


def _table_row(row: dict[str, Any]) -> tuple[str, str, int, int, int, np.ndarray | None]:
    """One chunk row's :class:`ChunkTable` fields; a ``TypeError`` for a field of the wrong type."""
    ids, numbers = (row["chunk_id"], row["doc_id"]), (row["ordinal"], row["start"], row["end"])
    if not all(isinstance(value, str) for value in ids) or not all(type(value) is int for value in numbers):
        raise TypeError("a chunk row's field has the wrong type")
    starts = row.get("token_starts")
    return (*ids, *numbers, None if starts is None else np.array(starts, dtype=np.int64))


RunRow = dict
RUN_METADATA = "ragvet.run"  # the Parquet key-value entry naming what a run's numbers count


def run_schema() -> dict[str, pl.DataType]:
    """The run contract's columns and their types (polars loads only when called)."""
    return {"case_id": pl.String, "rank": pl.Int32, "chunk_id": pl.String, "score": pl.Float64}


class IdsDigest:
    """The fingerprint of an id list, order included (:func:`ids_digest`), summed as the ids
    come (one at a time, or a batch), with their count: a stream of sorted ids is numbered
    by this alone, without the list (blake2b of the ids joined by newlines)."""

    def __init__(self) -> None:
        self.count = 0
        self._hash = hashlib.blake2b(digest_size=16)

    def add(self, one: str) -> None:
        self._hash.update(("\n" + one if self.count else one).encode())
        self.count += 1

    def extend(self, ids: Sequence[str]) -> None:
        if len(ids):
            self._hash.update((("\n" if self.count else "") + "\n".join(ids)).encode())
            self.count += len(ids)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def ids_digest(ids: Sequence[str]) -> str:
    """A fingerprint of an id list, order included (:class:`IdsDigest`; ``[]`` and ``[""]`` alike).

    A Parquet run records the digests of the sorted case ids and sorted chunk ids
    its ``case`` and ``chunk`` columns number; a reader holding lists with the same
    digests can use those numbers as they are, without interning millions of
    strings again (a hash join costs more than the rest of the scoring).
    """
    digest = IdsDigest()
    digest.extend(list(ids))
    return digest.hexdigest()


def run_path(runs: Path, config: str) -> Path:
    """Where the retrieve stage writes a configuration's run (dvc.yaml names the same path)."""
    return runs / f"{config}.parquet"


def write_run(
    path: Path,
    rows: Sequence[RunRow],
    case_ids: Iterable[str],
    chunk_ids: Iterable[str] | IdsDigest,
    foreign: bool = False,
) -> None:
    """The retrieve stage's run rows to ``path`` (see :func:`write_run_frame`),
    scores rounded as JSON output rounds them. A ``foreign`` run ranks foreign
    passages (``chunk_ids`` are then its passage ids): its metadata says so.
    With ``chunk_ids`` an :class:`IdsDigest`, each row carries its own ``chunk`` number."""
    columns = {
        "case_id": [row["case_id"] for row in rows],
        "rank": [row["rank"] for row in rows],
        "chunk_id": [row["chunk_id"] for row in rows],
        "score": [round_floats(float(row["score"])) for row in rows],
    }
    schema = run_schema()
    if isinstance(chunk_ids, IdsDigest):
        columns["chunk"], schema["chunk"] = [row["chunk"] for row in rows], pl.Int32
    write_run_frame(path, pl.DataFrame(columns, schema=schema), case_ids, chunk_ids, foreign)


def write_run_frame(
    path: Path,
    frame: pl.DataFrame,
    case_ids: Iterable[str],
    chunk_ids: Iterable[str] | IdsDigest,
    foreign: bool = False,
) -> None:
    """A run as Parquet (JSONL when ``path`` ends in ``.jsonl``), sorted by
    (case_id, rank); equal ranks keep their order.

    Parquet columns: ``case_id, rank, chunk_id, score``, then ``case`` and
    ``chunk``: each id's number among the sorted ``case_ids`` and ``chunk_ids``
    (all those of the cases file and the chunking, not only the retrieved
    ones), whose digests go in the file's metadata. ``chunk_ids`` may instead be
    the :class:`IdsDigest` of the sorted chunk ids, the numbers then given in the
    frame's own ``chunk`` column (a chunking too large to list). An id outside them,
    or a given number outside the count, is a ``ValueError``: the retrievers only
    return chunks of the chunking.
    """
    schema = run_schema()
    given = isinstance(chunk_ids, IdsDigest)
    frame = frame.select([*schema, *(["chunk"] if given else [])]).cast(schema)
    frame = frame.sort("case_id", "rank", maintain_order=True)
    if path.suffix == ".jsonl":
        write_jsonl(path, frame.select(list(schema)).iter_rows(named=True))
        return
    cases = sorted(set(case_ids))
    if isinstance(chunk_ids, IdsDigest):
        frame = _number_ids(frame, cases).select([*schema, "case", "chunk"])
        count, chunks_digest = chunk_ids.count, chunk_ids.hexdigest()
    else:
        chunks = sorted(set(chunk_ids))
        frame = _number_ids(frame, cases, chunks)
        count, chunks_digest = len(chunks), ids_digest(chunks)
    unknown = pl.col("case").is_null() | ~pl.col("chunk").is_between(0, count - 1).fill_null(False)
    if frame.select(unknown.any()).item():
        raise ValueError(f"{path}: the run names a case or chunk that is not among those given")
    numbering = {"cases": ids_digest(cases), "chunks": chunks_digest, **({"foreign": True} if foreign else {})}
    write_parquet(
        path, frame, row_group_size=ROW_GROUP_ROWS, metadata={RUN_METADATA: json.dumps(numbering, sort_keys=True)}
    )


def _number_ids(frame: pl.DataFrame, cases: Sequence[str], chunk_ids: Sequence[str] | None = None) -> pl.DataFrame:
    """``frame`` with ``case`` and ``chunk`` columns: the row numbers of its ids in
    ``cases`` and ``chunk_ids`` (null for an unknown id; no ``chunk`` without ``chunk_ids``).
    Hash joins intern ids faster than an Enum cast."""
    for name, ids in (("case", cases), ("chunk", chunk_ids)):
        if ids is None:
            continue
        numbers = pl.DataFrame({f"{name}_id": list(ids), name: pl.int_range(len(ids), dtype=pl.Int32, eager=True)})
        frame = frame.join(numbers, on=f"{name}_id", how="left", maintain_order="left")
    return frame


def foreign_passage_ids(path: Path) -> list[str] | None:
    """The passage ids of a run that ranks foreign passages (its metadata says so),
    sorted; None for a run of the chunking's chunks or a JSONL run."""
    if path.suffix != ".parquet":
        return None
    try:
        metadata = json.loads(pl.read_parquet_metadata(path).get(RUN_METADATA, "{}"))
    except (pl.exceptions.PolarsError, OSError, ValueError):
        return None  # read_run_table names the unreadable file
    if not metadata.get("foreign"):
        return None
    return sorted(set(pl.read_parquet(path, columns=["chunk_id"])["chunk_id"].to_list()))


def iter_run_rows(path: Path) -> Iterator[tuple[str, str, Any]]:
    """Every row of a run file as ``(where, position, row)``: ``path:7`` and
    ``line 7`` in a JSONL run, ``path row 7`` and ``row 7`` in the retrieve
    stage's Parquet. A file that does not read is a problem naming it."""
    if path.suffix != ".parquet":
        for line, row in iter_jsonl(path):
            yield f"{path}:{line}", f"line {line}", row
        return
    frame = _read_parquet(path, "run", "the retrieve stage")
    for number, row in enumerate(frame.iter_rows(named=True), start=1):
        yield f"{path} row {number}", f"row {number}", row


def read_run(path: Path, chunk_ids: set[str], case_ids: set[str]) -> dict[str, list[RunRow]]:
    """A run grouped by case and sorted by rank; every problem is collected.

    A chunk id twice for one case is an error, not something to dedupe quietly:
    ragvet's own retrievers never do it, so it means the run came from a
    retriever with a bug that recall would otherwise hide.
    """
    problems: list[Problem] = []
    by_case: dict[str, list[RunRow]] = defaultdict(list)
    seen: dict[tuple[str, str], str] = {}
    for where, position, row in iter_run_rows(path):
        if not isinstance(row, dict) or not {"case_id", "rank", "chunk_id", "score"} <= set(row):
            problems.append(Problem(where, "a run row needs case_id, rank, chunk_id and score", "re-run dvc repro"))
            continue
        case_id, chunk_id = row["case_id"], row["chunk_id"]
        if case_id not in case_ids:
            problems.append(Problem(f"{where} (case {case_id})", "unknown case id", "re-run the retrieve stage"))
        if chunk_id not in chunk_ids:
            problems.append(
                Problem(f"{where} (case {case_id})", f"unknown chunk id {chunk_id!r}", "run against the right chunking")
            )
        if (case_id, chunk_id) in seen:
            problems.append(
                Problem(
                    f"{where} (case {case_id})",
                    f"duplicate chunk id {chunk_id!r} (already at {seen[case_id, chunk_id]})",
                    "make the retriever return each chunk at most once per case",
                )
            )
        seen[case_id, chunk_id] = position
        by_case[case_id].append(row)
    raise_if(problems)
    return {case_id: sorted(rows, key=lambda r: r["rank"]) for case_id, rows in by_case.items()}


def _numbered_run(path: Path, chunk_ids: Sequence[str], cases: Sequence[str]) -> RunTable | None:
    """A Parquet run's own ``case`` and ``chunk`` numbers, when they number exactly
    ``cases`` and ``chunk_ids`` (the digests match only if both lists are the
    writer's, sorted) and every one is in range; else None.

    Only four numeric columns are read: no string of the run is touched.
    """
    try:
        numbering = json.loads(pl.read_parquet_metadata(path).get(RUN_METADATA, "{}"))
        if [numbering.get("cases"), numbering.get("chunks")] != [ids_digest(cases), ids_digest(chunk_ids)]:
            return None
        frame = pl.read_parquet(path, columns=["case", "chunk", "rank", "score"])
    except (pl.exceptions.PolarsError, OSError, ValueError):
        return None
    in_range = frame.select(
        pl.col("case").is_between(0, len(cases) - 1).all() & pl.col("chunk").is_between(0, len(chunk_ids) - 1).all()
    ).item()
    if frame.null_count().sum_horizontal().item() or not in_range:
        return None
    columns = [frame[name].to_numpy() for name in ("case", "chunk", "rank", "score")]
    return RunTable(list(cases), *columns)


def read_run_table(path: Path, chunk_ids: Sequence[str], case_ids: Sequence[str]) -> RunTable:
    """A run as interned columns (:class:`ragvet.storage.columns.RunTable`), with the checks
    of :func:`read_run`: every row complete, known case and chunk ids, no chunk
    twice for one case.

    A Parquet run numbered for these very ids is used as it is (its chunks repeat
    within a case only if the file was made by hand, and the engine then drops
    and counts the repeats, as the design says). Any other run parses in C
    (polars) without a Python object per row, and its ids are interned by hash
    joins. When any check fails, :func:`read_run` reads the file again and names
    every row that is wrong.
    """
    cases = sorted(set(case_ids))
    if path.suffix == ".parquet":
        numbered = _numbered_run(path, chunk_ids, cases)
        if numbered is not None:
            return numbered
    try:
        if path.suffix == ".parquet":
            frame = pl.read_parquet(path, columns=list(run_schema())).cast(run_schema())
        else:
            frame = pl.read_ndjson(path, schema=run_schema())
        frame = _number_ids(frame, cases, chunk_ids).drop("case_id", "chunk_id")
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError):
        frame = None
    clean = (
        frame is not None
        and not frame.null_count().sum_horizontal().item()
        and frame.select((pl.col("case").cast(pl.Int64) * len(chunk_ids) + pl.col("chunk")).n_unique()).item()
        == len(frame)
    )
    if not clean:  # a problem somewhere: the validating reader finds and names each one
        rows = read_run(path, set(chunk_ids), set(case_ids))
        return RunTable.from_mapping(rows, {chunk_id: row for row, chunk_id in enumerate(chunk_ids)})
    return RunTable(
        cases,
        frame["case"].to_numpy(),
        frame["chunk"].to_numpy(),
        frame["rank"].to_numpy(),
        frame["score"].to_numpy(),
        distinct=True,
    )


# Run rows read at once by :func:`run_batches`: a slice decodes only the pages it needs, so a
# quarter of a million rows reads as fast as a million and holds 70 MB less.
RUN_BATCH_ROWS = 1 << 18


UNREADABLE_FIX = "re-run the stage that wrote it (dvc repro); a baseline's: `ragvet baseline accept`"


def parquet_slices(
    path: Path | bytes,
    rows: int,
    columns: Sequence[str] | None = None,
    where: str | None = None,
    text: Sequence[str] = (),
) -> Iterator[pl.DataFrame]:
    """A Parquet file's rows (at ``path``, or its bytes) ``rows`` at a time (only ``columns``), at least one frame.
    Each slice is its own read, which opens only the row groups it needs: polars'
    ``collect_batches`` reads ahead of a slow consumer without bound (700 MB of a run
    while the engine scored its first batches). The ``text`` columns the file stores as
    categories are read as strings (:func:`text_scan`). A file that cannot be read, whole or
    in any slice, stops with the problem at ``where`` (default: the path), exit 2."""
    try:
        scan = text_scan(path, text)
        scan = scan if columns is None else scan.select(columns)
        total = parquet_rows(path)
        for start in range(0, max(total, 1), rows):
            yield scan.slice(start, rows).collect()
    except (OSError, pl.exceptions.PolarsError) as err:
        raise unreadable(where or (str(path) if isinstance(path, Path) else "Parquet table"), err) from None


def parquet_rows(path: Path | bytes) -> int:
    """How many rows a Parquet file holds, from its footer alone."""
    return pl.scan_parquet(path).select(pl.len()).collect().item()


def unreadable(where: str, err: Exception | str) -> InputError:
    """The error (exit 2) for a Parquet table at ``where`` a reader failed on, naming the first line of its error."""
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return InputError([Problem(where, f"not a readable Parquet table ({first})", UNREADABLE_FIX)])


def text_scan(path: Path | bytes, text: Sequence[str]) -> pl.LazyFrame:
    """A scan of the Parquet file that reads its ``text`` columns stored as categories as
    plain strings: polars keeps every category it decodes in one mapping for the whole
    process, never shrunk, so reading a run's ten million case ids as categories grew a
    pass over it by a gigabyte."""
    schema = pl.read_parquet_schema(path) if text else {}
    read = {name: pl.String if name in text and dtype == pl.Categorical else dtype for name, dtype in schema.items()}
    if read == schema:
        return pl.scan_parquet(path)
    return pl.scan_parquet(path, schema=read, cast_options=pl.ScanCastOptions(categorical_to_string="allow"))


def _case_order(path: Path) -> tuple[str, list[str]] | None:
    """The digest of a Parquet case table's ids (:func:`ids_digest`) and its tag keys,
    read one batch at a time; None when its ids are not strictly ascending (then no
    run can number them in row order)."""
    digest = IdsDigest()
    last: str | None = None
    tags: set[str] = set()
    for frame in parquet_slices(path, RUN_BATCH_ROWS, ["id", "tags"]):
        ids = frame["id"]
        if ids.null_count() or (len(ids) > 1 and not (ids.slice(1) > ids.slice(0, len(ids) - 1)).all()):
            return None
        if last is not None and len(ids) and not ids[0] > last:
            return None
        if len(ids):
            digest.extend(ids.to_list())
            last = ids[-1]
        for text in frame["tags"].unique().to_list():
            tags.update(orjson.loads(text))
    return digest.hexdigest(), sorted(tags)


def run_batches(
    run: Path, cases: Path, chunk_ids: Sequence[str], batch_cases: int
) -> tuple[list[str], Iterator[tuple[CaseTable, RunTable]]] | None:
    """The validate stage's Parquet case table and a Parquet run numbered for exactly
    its cases and ``chunk_ids``, read together ``batch_cases`` cases at a time: each
    batch's :class:`CaseTable` and its run rows (case numbers within the batch). With
    it, every tag key of the cases (a batch may lack some). None when the run is not
    so numbered (:func:`read_run_table` then reads it whole and checks every row).

    Memory: one batch of cases and at most one batch of run rows beyond them. The run
    must list its rows in case order, as the retrieve stage writes it; a row out of
    order or out of range stops with the problem at the run.
    """
    if run.suffix != ".parquet" or cases.suffix != ".parquet":
        return None
    try:
        numbering = json.loads(pl.read_parquet_metadata(run).get(RUN_METADATA, "{}"))
        order = _case_order(cases)
    except (pl.exceptions.PolarsError, OSError, ValueError):
        return None
    if order is None or [numbering.get("cases"), numbering.get("chunks")] != [order[0], ids_digest(chunk_ids)]:
        return None
    return order[1], _aligned(run, cases, len(chunk_ids), batch_cases)


def _aligned(run: Path, cases: Path, n_chunks: int, batch_cases: int) -> Iterator[tuple[CaseTable, RunTable]]:
    """Each batch of cases with the run rows whose case numbers it holds (see :func:`run_batches`)."""
    names = ["case", "chunk", "rank", "score"]
    rows = (frame for frame in parquet_slices(run, RUN_BATCH_ROWS, names) if frame.height)
    held: list[list[np.ndarray]] = []  # run rows read and not yet handed out, as numpy columns
    first, read = 0, 0
    for frame in parquet_slices(cases, batch_cases):  # no case: one empty batch
        table = CaseTable.from_frame(frame)
        end = first + len(table.case_ids)
        while not held or held[-1][0][-1] < end:
            more = next(rows, None)
            if more is None:
                break
            _check_run_rows(run, more, read, held[-1][0][-1] if held else 0, n_chunks)
            read += more.height
            held.append([more[name].to_numpy() for name in names])
        joined = [np.concatenate(parts) for parts in zip(*held)] if held else _no_rows()
        cut = int(np.searchsorted(joined[0], end))
        held = [[part[cut:].copy() for part in joined]] if cut < len(joined[0]) else []  # frees the batch's rows
        numbers = [part[:cut] for part in joined] if cut else _no_rows()
        yield table, RunTable(table.case_ids, numbers[0] - first, *numbers[1:])
        first = end
    if held or next(rows, None) is not None:
        raise InputError([Problem(str(run), "the run names cases past the case table's last", _RUN_FIX)])


_RUN_FIX = "re-run the retrieve stage (dvc repro), which writes the run in case order and numbered for the cases"


def _no_rows() -> list[np.ndarray]:
    return [np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64)]


def _check_run_rows(run: Path, frame: pl.DataFrame, read: int, after: int, n_chunks: int) -> None:
    """One batch of a numbered run's rows: complete, chunk numbers in range, case
    numbers non-decreasing from ``after`` (``read`` rows came before, for the message)."""
    case = frame["case"].to_numpy()
    flaws = frame.null_count().sum_horizontal().item() or not frame["chunk"].is_between(0, n_chunks - 1).all()
    steps = np.diff(case, prepend=after)
    if flaws or (steps < 0).any():
        row = read + 1 + (int(np.argmax(steps < 0)) if (steps < 0).any() else 0)
        problem = f"rows not in case order, incomplete or numbering an unknown chunk (near row {row})"
        raise InputError([Problem(str(run), problem, _RUN_FIX)])
