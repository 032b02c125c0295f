"""The chunking counted as it streams past: packed masks sliced by position, the pass's count,
digest and masks, and the rows a chunk file streams with what each filter admits."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ragvet.errors import InputError, Problem
from ragvet.retrieval import chunk_positions
from ragvet.retrieval.chunk_positions import ChunkPass, MaskBuilder, PositionMask
from ragvet.storage.tables import chunk_rows_by_id, ids_digest


def test_a_mask_slice_is_the_bits_of_those_positions_across_byte_bounds():
    # positions 0..10: 1 0 1 1 0 0 1 0 | 1 1 0 -> bytes 0b10110010 = 178, 0b11000000 = 192
    mask = PositionMask(bytes([178, 192]), 11)
    assert mask.slice(0, 11).tolist() == [True, False, True, True, False, False, True, False, True, True, False]
    assert mask.slice(6, 10).tolist() == [True, False, True, True]  # the slice straddles the byte bound
    assert mask.slice(3, 4).tolist() == [True]
    assert mask.slice(8, 8).tolist() == []


def test_a_mask_built_across_pack_blocks_is_the_bits_appended(monkeypatch):
    monkeypatch.setattr(chunk_positions, "PACK_BLOCK", 8)
    bits = [True, False, False, True, True, True, False, True, False, True, True]
    builder = MaskBuilder()
    for bit in bits:
        builder.append(bit)
    mask = builder.mask()
    assert (mask.packed, mask.size) == (bytes([0b10011101, 0b01100000]), 11)
    assert mask.slice(5, 11).tolist() == bits[5:]


def test_a_pass_counts_digests_and_masks_the_rows_and_refuses_an_id_twice():
    tally = ChunkPass(2, "chunks.jsonl")
    rows = [("a", "x", (True, False)), ("b", "y", (False, False)), ("c", "z", (True, True))]
    assert list(tally.pairs(rows)) == [("a", "x"), ("b", "y"), ("c", "z")]
    assert (tally.ids.count, tally.ids.hexdigest()) == (3, ids_digest(["a", "b", "c"]))
    assert [m.slice(0, 3).tolist() for m in tally.masks()] == [[True, False, True], [False, False, True]]
    with pytest.raises(InputError) as raised:
        list(ChunkPass(0, "chunks.jsonl").pairs([("a", "x", ()), ("a", "y", ())]))
    assert raised.value.problems == [
        Problem("chunks.jsonl", "chunk id 'a' appears twice", "re-run the chunk stage: each chunk id once")
    ]


def test_a_chunk_file_streams_in_id_order_with_each_filters_verdict_and_a_bad_line_is_named(tmp_path):
    path = tmp_path / "chunks.jsonl"
    lines = [
        {"chunk_id": "d#2", "text": "two", "metadata": {"year": 2024, "team": "hr"}},
        {"chunk_id": "d#10", "text": "ten", "metadata": {"year": "2025"}},
        {"chunk_id": "d#1", "text": "one"},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    filters = [{"year": [2024, 2025]}, {"team": "hr"}]
    assert list(chunk_rows_by_id(path, filters=filters)) == [
        ("d#1", "one", (False, False)),  # no metadata: no filter admits it
        ("d#10", "ten", (True, False)),
        ("d#2", "two", (True, True)),
    ]
    assert list(chunk_rows_by_id(path)) == [("d#1", "one", ()), ("d#10", "ten", ()), ("d#2", "two", ())]
    with open(path, "a") as handle:
        handle.write(json.dumps({"chunk_id": "d#3", "text": "three", "metadata": ["not", "a", "mapping"]}) + "\n")
    with pytest.raises(InputError) as raised:
        list(chunk_rows_by_id(path, filters=filters))
    assert raised.value.problems == [
        Problem(f"{path}:4", "not a chunk row with chunk_id and text", "re-run the chunk stage")
    ]
    assert np.array(list(chunk_rows_by_id(path)), dtype=object)[:, 0].tolist() == ["d#1", "d#10", "d#2", "d#3"]


def test_a_pass_with_nothing_to_search_counts_every_row_and_hands_nothing_on():
    rows = [("a", "x", ()), ("b", "y", ()), ("c", "z", ())]
    idle = ChunkPass(0, "chunks.jsonl")
    assert idle.pairs_to_search(iter(rows), wanted=False) is None
    assert (idle.ids.count, idle.ids.hexdigest()) == (3, ids_digest(["a", "b", "c"]))  # the run's numbering
    empty = ChunkPass(0, "chunks.jsonl")
    assert empty.pairs_to_search(iter([]), wanted=True) is None and empty.ids.count == 0
    searched = ChunkPass(0, "chunks.jsonl")
    assert list(searched.pairs_to_search(iter(rows), wanted=True)) == [("a", "x"), ("b", "y"), ("c", "z")]
    assert searched.ids.count == 3
