"""A chunk file streamed in chunk_id order whatever its order: through the heap when it can
order the file, else merge-sorted on disk, the same rows either way, and a pipe that the heap
cannot order refused at its line."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path

import pytest

from ragvet.errors import InputError, Problem
from ragvet.storage import tables
from ragvet.storage.tables import chunk_rows_by_id

# Ordinals 0..25 of document m in chunk_id order, by hand: "m#10" sorts before "m#2".
M_ORDER = [0, 1, *range(10, 20), 2, *range(20, 26), *range(3, 10)]


def line(chunk_id: str, text: str, metadata: dict | None = None) -> str:
    return json.dumps({"chunk_id": chunk_id, "doc_id": chunk_id[0], "text": text, "metadata": metadata or {}}) + "\n"


@pytest.fixture
def long_document(tmp_path: Path) -> Path:
    """Documents a (2 chunks), m (26) and z (2) as the chunk stage writes them, in ordinal
    order; m's even chunks are from 2024. Line 3 + k is m#k: m#10, on line 13, sorts before
    m#6, which a heap of 3 rows has given by then."""
    path = tmp_path / "chunks.jsonl"
    rows = [line(f"a#{o}", f"a {o}") for o in range(2)]
    rows += [line(f"m#{o}", f"m {o}", {"year": 2024 - o % 2}) for o in range(26)]
    path.write_text("".join(rows + [line(f"z#{o}", f"z {o}") for o in range(2)]))
    return path


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch) -> Path:
    """The folder temporary folders are made in, empty."""
    folder = tmp_path / "scratch"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_a_document_longer_than_the_window_comes_back_sorted_through_runs_merged_in_passes(
    long_document, scratch, monkeypatch
):
    """30 rows in runs of 3: 10 runs, merged at once (fan-in 256: 10 runs written) or 2 at a
    time (10 -> 5 -> 3 -> 2 runs, 20 written, never more than 2 read at once). Every output is
    the by-hand order, which is ``sorted`` of the rows."""
    written, reading, most = [], [0], [0]
    write_run, read_run = tables._write_run, tables._read_run

    def counted_write(path, rows):
        written.append(path.name)
        return write_run(path, rows)

    def counted_read(path):
        reading[0] += 1
        most[0] = max(most[0], reading[0])
        try:
            yield from read_run(path)
        finally:
            reading[0] -= 1

    monkeypatch.setattr(tables, "_write_run", counted_write)
    monkeypatch.setattr(tables, "_read_run", counted_read)
    expected = [("a#0", "a 0", (False,)), ("a#1", "a 1", (False,))]
    expected += [(f"m#{o}", f"m {o}", (o % 2 == 0,)) for o in M_ORDER]
    expected += [("z#0", "z 0", (False,)), ("z#1", "z 1", (False,))]
    filters = [{"year": 2024}]
    assert list(chunk_rows_by_id(long_document, window=3, filters=filters)) == expected
    assert (len(written), most[0]) == (10, 10)
    written.clear()
    most[0] = 0
    assert list(chunk_rows_by_id(long_document, window=3, filters=filters, fan_in=2)) == expected
    assert (len(written), most[0]) == (20, 2)
    assert [(c, t) for c, t, _ in expected] == sorted((c, t) for c, t, _ in chunk_rows_by_id(long_document))
    assert list(scratch.iterdir()) == []


def test_rows_are_given_once_and_the_heap_is_used_when_it_orders_the_file(tmp_path, scratch):
    """Window 2, lines b c d a: a heap gives b at line 3 and then meets a, so rows given are not
    the smallest and cannot be resumed after; the file is sorted on disk before any row is given.
    A file whose chunks stand at most 2 from their place goes through the heap, no folder made."""
    path = tmp_path / "chunks.jsonl"
    for ending in ("\n", ""):  # the line out of reach is the file's last, with or without its newline
        path.write_text("".join(line(c, c.upper()) for c in "bcda")[:-1] + ending)
        rows = chunk_rows_by_id(path, window=2)
        assert next(rows) == ("a", "A", ())
        assert [folder.name.startswith("ragvet-chunk-sort-") for folder in scratch.iterdir()] == [True]
        assert list(rows) == [("b", "B", ()), ("c", "C", ()), ("d", "D", ())]
        assert list(scratch.iterdir()) == []
    path.write_text("".join(line(c, c) for c in "bacedf"))
    rows = chunk_rows_by_id(path, window=2)
    assert next(rows) == ("a", "a", ())
    assert list(scratch.iterdir()) == []
    assert [row[0] for row in rows] == ["b", "c", "d", "e", "f"]


def test_a_bad_line_past_the_out_of_window_line_is_named_and_the_folder_is_removed(long_document, scratch):
    """The heap's pass stops at line 13; the sort's pass meets line 32 (after a blank line 31),
    which lacks its text. A sort abandoned after one row leaves no folder either."""
    with open(long_document, "a") as handle:
        handle.write('\n{"chunk_id": "z#2"}\n')
    with pytest.raises(InputError) as raised:
        list(chunk_rows_by_id(long_document, window=3))
    assert raised.value.problems == [
        Problem(f"{long_document}:32", "not a chunk row with chunk_id and text", "re-run the chunk stage")
    ]
    assert list(scratch.iterdir()) == []
    long_document.write_text("".join(long_document.read_text().splitlines(keepends=True)[:30]))
    rows = chunk_rows_by_id(long_document, window=3)
    assert next(rows) == ("a#0", "a 0", ())
    rows.close()
    assert list(scratch.iterdir()) == []


def test_a_pipe_the_heap_cannot_order_is_refused_at_its_line(long_document, tmp_path, scratch):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    def writer():
        try:
            with open(fifo, "w") as handle:
                handle.write(long_document.read_text())
        except BrokenPipeError:
            pass

    thread = threading.Thread(target=writer)
    thread.start()
    with pytest.raises(InputError) as raised:
        list(chunk_rows_by_id(fifo, window=3))
    thread.join(timeout=10)
    assert raised.value.problems == [
        Problem(
            f"{fifo}:13",
            "chunk 'm#10' sorts more than 3 chunks before where it stands in a pipe",
            "give the chunk file as a file, which can be read twice and sorted on disk, or sort it by chunk_id",
        )
    ]
    assert list(scratch.iterdir()) == []


def test_a_chunk_id_twice_comes_back_twice_in_text_order_on_either_path(tmp_path, scratch):
    """The reader gives every row, duplicates too (the retrieve stage's ChunkPass refuses them):
    window 2, d/y b c d/x goes through the heap; c/y d e c/x does not (c/x sorts before c/y,
    given at line 3) and is sorted on disk."""
    path = tmp_path / "chunks.jsonl"
    path.write_text(line("d", "y") + line("b", "b") + line("c", "c") + line("d", "x"))
    rows = chunk_rows_by_id(path, window=2)
    assert (next(rows), list(scratch.iterdir())) == (("b", "b", ()), [])
    assert list(rows) == [("c", "c", ()), ("d", "x", ()), ("d", "y", ())]
    path.write_text(line("c", "y") + line("d", "d") + line("e", "e") + line("c", "x"))
    rows = chunk_rows_by_id(path, window=2)
    assert (next(rows), len(list(scratch.iterdir()))) == (("c", "x", ()), 1)
    assert list(rows) == [("c", "y", ()), ("d", "d", ()), ("e", "e", ())]
