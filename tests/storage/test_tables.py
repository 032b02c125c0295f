import gc
import hashlib
import json

import numpy as np
import polars as pl
import pyarrow.parquet as parquet
import pytest

from ragvet.errors import InputError
from ragvet.schema import Case, Chunk, Claim, EvidenceUnit
from ragvet.storage.atomic import ROW_GROUP_ROWS
from ragvet.storage.columns import TokenStarts
from ragvet.storage.files import each_jsonl, each_jsonl_of, write_jsonl
from ragvet.storage.rankings import case_batches
from ragvet.storage.tables import (
    RUN_METADATA,
    ChunkMetadata,
    IdsDigest,
    ids_digest,
    iter_run_rows,
    parquet_slices,
    read_case_table,
    read_chunk_table,
    read_chunks,
    read_run,
    read_run_table,
    write_case_table,
    write_cases,
    write_chunks,
    write_run,
    write_run_frame,
)

RUN_COLUMNS = ("case_id", "rank", "chunk_id", "score")


def write_jsonl_run(tmp_path, rows):
    path = tmp_path / "run.jsonl"
    write_jsonl(path, [dict(zip(("case_id", "rank", "chunk_id", "score"), row)) for row in rows])
    return path


def test_run_is_grouped_by_case_and_sorted_by_rank(tmp_path):
    path = write_jsonl_run(tmp_path, [("q1", 2, "a#1", 1.0), ("q1", 1, "a#0", 2.0), ("q2", 1, "a#1", 0.5)])
    run = read_run(path, {"a#0", "a#1"}, {"q1", "q2"})
    assert [row["chunk_id"] for row in run["q1"]] == ["a#0", "a#1"]
    assert [row["chunk_id"] for row in run["q2"]] == ["a#1"]


def test_duplicate_chunk_ids_unknown_chunks_and_cases_are_all_reported(tmp_path):
    path = write_jsonl_run(
        tmp_path, [("q1", 1, "a#0", 2.0), ("q1", 2, "a#0", 1.0), ("q1", 3, "zz#9", 0.5), ("ghost", 1, "a#0", 1.0)]
    )
    with pytest.raises(InputError) as err:
        read_run(path, {"a#0"}, {"q1"})
    whats = [(p.where.rsplit("/", 1)[1], p.what) for p in err.value.problems]
    assert whats == [
        ("run.jsonl:2 (case q1)", "duplicate chunk id 'a#0' (already at line 1)"),
        ("run.jsonl:3 (case q1)", "unknown chunk id 'zz#9'"),
        ("run.jsonl:4 (case ghost)", "unknown case id"),
    ]


CHUNKS = [f"d#{i}" for i in range(12)]  # chunk_id order puts d#10 and d#11 before d#2
ROWS = [  # out of order on purpose: the writer sorts by (case_id, rank)
    {"case_id": "q2", "rank": 1, "chunk_id": "d#10", "score": 0.1234567},
    {"case_id": "q1", "rank": 2, "chunk_id": "d#2", "score": 1.0},
    {"case_id": "q1", "rank": 1, "chunk_id": "d#11", "score": 2.0},
]


def test_parquet_run_carries_the_contract_columns_and_ids_numbered_in_sorted_order(tmp_path):
    path = tmp_path / "run.parquet"
    write_run(path, ROWS, ["q3", "q2", "q1"], reversed(CHUNKS))
    frame = pl.read_parquet(path)
    assert frame.columns == [*RUN_COLUMNS, "case", "chunk"]
    assert frame.rows() == [
        ("q1", 1, "d#11", 2.0, 0, 3),  # sorted ids: d#0, d#1, d#10, d#11, d#2, ...
        ("q1", 2, "d#2", 1.0, 0, 4),
        ("q2", 1, "d#10", 0.123457, 1, 2),  # rounded to 6 places, as JSON output is
    ]
    numbering = json.loads(pl.read_parquet_metadata(path)[RUN_METADATA])
    assert numbering == {"cases": ids_digest(["q1", "q2", "q3"]), "chunks": ids_digest(sorted(CHUNKS))}
    again = tmp_path / "again.parquet"
    write_run(again, list(reversed(ROWS)), ["q1", "q2", "q3"], CHUNKS)
    assert again.read_bytes() == path.read_bytes()  # same inputs, same bytes, whatever their order
    assert [row for _, _, row in iter_run_rows(path)][0] == {**ROWS[2], "case": 0, "chunk": 3}


def test_the_digest_summed_an_id_at_a_time_or_a_batch_at_a_time_is_the_digest_of_the_list():
    ids = ["", "d#0", "d#1", "", "d#10"]  # empty ids: only the separators tell them apart
    for split in range(len(ids) + 1):
        digest = IdsDigest()
        for one in ids[:split]:
            digest.add(one)
        digest.extend(ids[split:])
        assert (digest.count, digest.hexdigest()) == (5, ids_digest(ids))
    assert ids_digest(["a", "b"]) == hashlib.blake2b(b"a\nb", digest_size=16).hexdigest()
    assert ids_digest(["a", "b"]) != ids_digest(["ab"]) != ids_digest(["a\nb", ""])
    assert IdsDigest().hexdigest() == ids_digest([])


def test_a_run_whose_chunk_numbers_and_digest_are_given_is_the_bytes_of_one_numbered_by_the_list(tmp_path):
    numbering = IdsDigest()
    numbering.extend(sorted(CHUNKS))
    numbered = [{**row, "chunk": sorted(CHUNKS).index(row["chunk_id"])} for row in ROWS]
    write_run(tmp_path / "given.parquet", numbered, ["q3", "q2", "q1"], numbering)
    write_run(tmp_path / "listed.parquet", ROWS, ["q3", "q2", "q1"], CHUNKS)
    assert (tmp_path / "given.parquet").read_bytes() == (tmp_path / "listed.parquet").read_bytes()
    write_run(tmp_path / "given.jsonl", numbered, ["q1", "q2"], numbering)
    write_run(tmp_path / "listed.jsonl", ROWS, ["q1", "q2"], CHUNKS)
    assert (tmp_path / "given.jsonl").read_bytes() == (tmp_path / "listed.jsonl").read_bytes()
    with pytest.raises(ValueError, match="names a case or chunk that is not among those given"):
        write_run(tmp_path / "past.parquet", [{**numbered[0], "chunk": 12}], ["q2"], numbering)


def test_a_run_written_as_jsonl_keeps_only_the_contract_columns(tmp_path):
    path = tmp_path / "run.jsonl"
    write_run(path, ROWS, ["q1", "q2"], CHUNKS)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [list(row) for row in rows] == [sorted(RUN_COLUMNS)] * 3
    assert [(row["case_id"], row["rank"]) for row in rows] == [("q1", 1), ("q1", 2), ("q2", 1)]


def test_the_run_table_is_the_same_through_numbers_joins_or_jsonl(tmp_path):
    sorted_chunks = sorted(CHUNKS)
    write_run(tmp_path / "run.parquet", ROWS, ["q1", "q2", "q3"], CHUNKS)
    write_run(tmp_path / "run.jsonl", ROWS, ["q1", "q2", "q3"], CHUNKS)
    numbered = read_run_table(tmp_path / "run.parquet", sorted_chunks, ["q1", "q2", "q3"])
    assert not numbered.distinct  # the file's own numbers: repeats are left to the engine to drop and count
    other_chunks = [*sorted_chunks, "e#0"]  # another chunking's numbering: the ids are joined again
    joined = read_run_table(tmp_path / "run.parquet", other_chunks, ["q1", "q2", "q3"])
    from_jsonl = read_run_table(tmp_path / "run.jsonl", other_chunks, ["q1", "q2", "q3"])
    assert joined.distinct and from_jsonl.distinct
    for table in (numbered, joined, from_jsonl):
        assert table.case_ids == ["q1", "q2", "q3"]
        assert table.case.tolist() == [0, 0, 1] and table.rank.tolist() == [1, 2, 1]
        assert [sorted_chunks[c] for c in table.chunk.tolist()] == ["d#11", "d#2", "d#10"]
        assert table.score.tolist() == [2.0, 1.0, 0.123457]


def test_parquet_run_problems_name_the_row(tmp_path):
    path = tmp_path / "run.parquet"
    rows = [*ROWS, {"case_id": "q1", "rank": 3, "chunk_id": "d#2", "score": 0.5}]
    write_run(path, rows, ["q1", "q2"], CHUNKS)
    with pytest.raises(InputError) as err:
        read_run_table(path, sorted(CHUNKS[:11]), ["q1"])  # d#11 and case q2 are not in these lists
    whats = [(p.where.rsplit("/", 1)[1], p.what) for p in err.value.problems]
    assert whats == [
        ("run.parquet row 1 (case q1)", "unknown chunk id 'd#11'"),
        ("run.parquet row 3 (case q1)", "duplicate chunk id 'd#2' (already at row 2)"),
        ("run.parquet row 4 (case q2)", "unknown case id"),
    ]


def test_an_unreadable_parquet_run_is_a_problem_naming_it(tmp_path):
    path = tmp_path / "run.parquet"
    path.write_bytes(b"PAR1 not really")
    with pytest.raises(InputError) as err:
        read_run_table(path, CHUNKS, ["q1"])
    (problem,) = err.value.problems
    assert problem.where == str(path) and problem.what.startswith("not a readable Parquet run")


def test_case_table_reads_cases_out_of_order_through_the_validating_reader(tmp_path):
    path = tmp_path / "cases.jsonl"
    cases = [Case("b", "?", True, (EvidenceUnit("d", 1, 4),), tags={"kind": "x"}), Case("a", "?", False)]
    write_cases(path, cases)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(reversed(lines)) + "\n")  # b before a: not as validate writes
    table = read_case_table(path)
    assert table.case_ids == ["a", "b"] and table.answerable == [False, True]
    assert table.tags.to_dict(as_series=False) == {"kind": [None, "x"]}
    assert table.evidence.unit_case.tolist() == [1] and table.evidence.target_end.tolist() == [4]


EVIDENCE_COLUMNS = ("unit_case", "unit_claim", "claim_case", "target_unit", "target_start", "target_end")


def test_parquet_case_table_holds_what_the_jsonl_reader_builds(tmp_path):
    span, doc = EvidenceUnit("d", 3, 9), EvidenceUnit("e")
    choice = EvidenceUnit.any_of([EvidenceUnit("d", 0, 2), EvidenceUnit("e", 5, 7)])
    cases = [
        Case("c", "?", True, (choice, doc), (Claim("x", (doc,)), Claim("y", (span, choice))), {"t": "1"}),
        Case("a", "?", False, tags={"kind": "abstain"}),
        Case("b", "?", True, (span,)),
    ]
    write_cases(tmp_path / "cases.jsonl", cases)
    write_case_table(tmp_path / "cases.parquet", [case.to_row() for case in cases])
    columns = read_case_table(tmp_path / "cases.parquet")
    rows = read_case_table(tmp_path / "cases.jsonl")
    assert columns.case_ids == rows.case_ids == ["a", "b", "c"]
    assert columns.answerable == rows.answerable == [False, True, True]
    assert columns.tags.equals(rows.tags)
    assert rows.tags.to_dict(as_series=False) == {"kind": ["abstain", None, None], "t": [None, None, "1"]}
    evidence = columns.evidence
    assert evidence.n_cases == 3 and evidence.target_doc == rows.evidence.target_doc
    for name in EVIDENCE_COLUMNS:
        assert getattr(evidence, name).tolist() == getattr(rows.evidence, name).tolist(), name
    # By hand: units b:span, c:choice, c:doc, claim 0 (c's x) cites doc, claim 1 (c's y) cites span and choice.
    assert evidence.unit_case.tolist() == [1, 2, 2, 2, 2, 2]
    assert evidence.unit_claim.tolist() == [-1, -1, -1, 0, 1, 1]
    assert evidence.claim_case.tolist() == [2, 2]
    assert evidence.target_unit.tolist() == [0, 1, 1, 2, 3, 4, 5, 5]
    assert evidence.target_doc == ["d", "d", "e", "e", "e", "d", "d", "e"]
    assert evidence.target_start.tolist() == [3, 0, 5, -1, -1, 3, 0, 5]
    again = tmp_path / "again.parquet"
    write_case_table(again, [case.to_row() for case in reversed(cases)])
    assert again.read_bytes() == (tmp_path / "cases.parquet").read_bytes()


def test_an_unreadable_case_table_is_a_problem_naming_it(tmp_path):
    path = tmp_path / "cases.parquet"
    path.write_text("{}")
    with pytest.raises(InputError) as err:
        read_case_table(path)
    (problem,) = err.value.problems
    assert problem.where == str(path) and problem.what.startswith("not a readable Parquet case table")
    assert "validate" in problem.fix


def test_a_run_naming_a_chunk_outside_the_chunking_is_refused_and_nothing_is_written(tmp_path):
    path = tmp_path / "run.parquet"
    with pytest.raises(ValueError, match="not among those given"):
        write_run(path, ROWS, ["q1", "q2"], ["d#2"])  # d#10 and d#11 are not in this chunking
    assert list(tmp_path.iterdir()) == []


def test_reading_cases_gives_the_garbage_collector_back_even_when_the_fast_reader_fails(tmp_path):
    path = tmp_path / "cases.jsonl"
    write_cases(path, [Case("b", "?"), Case("a", "?", False)])
    assert gc.isenabled()
    assert read_case_table(path).case_ids == ["a", "b"] and gc.isenabled()
    path.write_text('{"id": "a",\n')  # broken JSON: the fast reader gives up, the validating one names the line
    with pytest.raises(InputError, match="cases.jsonl:1"):
        read_case_table(path)
    assert gc.isenabled()
    gc.disable()
    try:
        write_cases(path, [Case("a", "?")])
        read_case_table(path)
        assert not gc.isenabled()  # a caller's choice to keep it off is kept
    finally:
        gc.enable()


def test_chunk_readers_of_a_token_chunking_agree_and_retrievers_get_no_token_starts(tmp_path):
    path = tmp_path / "chunks.jsonl"
    chunks = [Chunk("d#1", "d", 1, 13, 15, "Hi"), Chunk("d#0", "d", 0, 0, 12, "Hello world.", {"y": 1.0})]
    write_chunks(path, chunks, TokenStarts(np.array([0, 1, 4]), np.array([0, 0, 6, 11], np.int32)))  # in given order
    assert path.read_text().splitlines() == [
        '{"chunk_id":"d#0","doc_id":"d","end":12,"metadata":{"y":1.0},"ordinal":0,"start":0,'
        '"text":"Hello world.","token_starts":[0,6,11]}',
        '{"chunk_id":"d#1","doc_id":"d","end":15,"metadata":{},"ordinal":1,"start":13,"text":"Hi","token_starts":[0]}',
    ]
    assert [c.token_starts for c in read_chunks(path)] == [(0, 6, 11), (0,)]
    assert read_chunks(path, token_starts=False) == chunks[::-1]
    table = read_chunk_table(path)
    assert (table.token_bounds.tolist(), table.token_offsets.tolist()) == ([0, 3, 4], [0, 6, 11, 0])
    assert table.token_offsets.dtype == np.int64


def test_a_run_past_one_row_group_is_written_in_groups_a_batch_reader_decodes_one_at_a_time(tmp_path):
    """700 cases x 100 ranks = 70,000 rows: a group of 65,536 and one of 4,464; 100 rows: one
    group, the bytes a one-group write gives."""

    def run(cases: int) -> tuple[pl.DataFrame, list[str], list[str]]:
        case_ids, chunk_ids = [f"q{n:04d}" for n in range(cases)], [f"d#{n}" for n in range(100)]
        frame = pl.DataFrame(
            {
                "case_id": [c for c in case_ids for _ in range(100)],
                "rank": [r for _ in case_ids for r in range(1, 101)],
                "chunk_id": [chunk_ids[r] for _ in case_ids for r in range(100)],
                "score": [1.0 / r for _ in case_ids for r in range(1, 101)],
            }
        )
        return frame, case_ids, chunk_ids

    frame, case_ids, chunk_ids = run(700)
    write_run_frame(tmp_path / "big.parquet", frame, case_ids, chunk_ids)
    groups = parquet.ParquetFile(tmp_path / "big.parquet").metadata
    assert ROW_GROUP_ROWS == 65_536
    assert [groups.row_group(i).num_rows for i in range(groups.num_row_groups)] == [65_536, 4_464]
    assert pl.read_parquet(tmp_path / "big.parquet").select(frame.columns).equals(frame)

    small, case_ids, chunk_ids = run(1)
    write_run_frame(tmp_path / "small.parquet", small, case_ids, chunk_ids)
    one = pl.read_parquet(tmp_path / "small.parquet")
    metadata = pl.read_parquet_metadata(tmp_path / "small.parquet")
    one.write_parquet(tmp_path / "one.parquet", row_group_size=len(one), metadata=metadata)
    assert (tmp_path / "small.parquet").read_bytes() == (tmp_path / "one.parquet").read_bytes()


def test_each_jsonl_reads_a_value_a_line_and_stops_at_the_first_bad_line_naming_it(tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_bytes(b'{"id": "a"}\n\n\xc2\xa0\n{"id": "b"}\n')  # a blank line, and one of a no-break space
    assert list(each_jsonl(path)) == [{"id": "a"}, {"id": "b"}]
    path.write_bytes(b'{"id": "a"}\n{"id": \n')
    with pytest.raises(InputError) as bad:
        list(each_jsonl(path))
    assert bad.value.problems[0].where == f"{path}:2"
    path.write_bytes(b'{"id": "a"}\n{"id": "\xff"}\n')
    with pytest.raises(InputError) as undecodable:
        list(each_jsonl(path))
    assert undecodable.value.problems[0].where == f"{path}:2"


LINES = [
    '{"answerable":true,"filter":{"id":"c"},"id":"a","question":"q a"}',  # a nested pair of a wanted value
    '{"id": "b", "tags": {"t": "d"}}',  # json.dumps' spacing; d, a wanted id, as a value
    "",
    '{"id":"say \\"hi\\" \\\\ there","n":1}',  # escaped as dumps_line writes it
    '{"id": "caf\\u00e9"}',  # escaped as json.dumps writes non-ASCII
    '{"id" :\t"d", "filter": {"id": "d"}}',  # other spacing; the line's own value nested again
    '{"id":"café","n":2}',
    '{"id":"c"}',
]


def test_each_jsonl_of_decodes_the_lines_of_the_wanted_ids_alone_at_any_block_size(tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(LINES), encoding="utf-8")  # the last line without its newline
    every = list(each_jsonl(path))
    for wanted in ({"a"}, {"c", "d"}, {'say "hi" \\ there', "café"}, {"b", "x"}, set(), {v["id"] for v in every}):
        expected = [value for value in every if value["id"] in wanted]
        for block in (1, 7, 40, 1 << 24):
            assert list(each_jsonl_of(path, "id", wanted, block=block)) == expected, (wanted, block)
    assert [v.get("n") for v in each_jsonl_of(path, "id", {"café"})] == [None, 2]  # both lines, by value
    assert list(each_jsonl_of(path, "id", {"c"})) == [{"id": "c"}]  # not the line of the nested "c"
    assert list(each_jsonl_of(path, "id", {"d"})) == [{"id": "d", "filter": {"id": "d"}}]  # once


def test_each_jsonl_of_names_a_bad_wanted_line_and_skips_bad_lines_it_does_not_decode(tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_bytes(b'{"id":"a"}\n{"id":"b",\n\n{"id":"c","q":"\xff"}\n{"id":"d"}\n')
    assert list(each_jsonl_of(path, "id", {"a", "d"}, block=5)) == [{"id": "a"}, {"id": "d"}]
    for wanted, line in (("b", 2), ("c", 4)):
        for block in (5, 1 << 24):
            with pytest.raises(InputError) as bad:
                list(each_jsonl_of(path, "id", {wanted}, block=block))
            assert bad.value.problems[0].where == f"{path}:{line}"


def test_a_table_corrupt_past_its_schema_is_a_problem_at_the_file_in_any_slice(tmp_path):
    """A data page damaged in the middle of the file: the schema still reads, the slice
    that reaches the page fails, and the reader stops at the file (exit 2), as a ranking
    read a batch of cases at a time does at the name it is given."""
    path = tmp_path / "cases.parquet"
    values = np.random.default_rng(1).random(20_000)
    pl.DataFrame({"case_id": [f"q{i:06d}" for i in range(20_000)], "x": values}).write_parquet(
        path, compression="zstd", row_group_size=5_000
    )
    damaged = bytearray(path.read_bytes())
    middle = len(damaged) // 2
    damaged[middle : middle + 400] = bytes(400)
    path.write_bytes(bytes(damaged))
    assert pl.read_parquet_schema(path) == {"case_id": pl.String, "x": pl.Float64}
    with pytest.raises(InputError) as raised:
        list(parquet_slices(path, 4_000, ["case_id", "x"]))
    (problem,) = raised.value.problems
    assert problem.where == str(path) and problem.what.startswith("not a readable Parquet table (")
    with pytest.raises(InputError) as raised:
        list(case_batches(path, "metrics/baseline/cases/x.parquet", ["case_id", "x"]))
    assert raised.value.problems[0].where == "metrics/baseline/cases/x.parquet"


def test_a_case_table_of_no_cases_reads_as_no_cases(tmp_path):
    """The batched reader's empty batch: no ids, no tag column, no evidence."""
    write_case_table(tmp_path / "cases.parquet", [])
    table = read_case_table(tmp_path / "cases.parquet")
    assert table.case_ids == [] and table.tags.width == 0 and table.evidence.n_cases == 0


def test_the_chunk_table_is_in_chunk_id_order_with_each_chunks_token_starts_and_a_broken_line_is_named(tmp_path):
    """The chunk stage writes d#2 before d#10; chunk_id order puts d#10 first, its starts with it."""
    path = tmp_path / "chunks.jsonl"
    chunks = [Chunk("d#2", "d", 2, 0, 5, "a b c", {}, (0, 2, 4)), Chunk("d#10", "d", 10, 6, 9, "d e", {}, (0, 2))]
    write_jsonl(path, [chunk.to_row() for chunk in chunks])
    table = read_chunk_table(path)
    assert (table.chunk_ids, table.ordinals.tolist(), table.starts.tolist()) == (["d#10", "d#2"], [10, 2], [6, 0])
    assert (table.token_bounds.tolist(), table.token_offsets.tolist()) == ([0, 2, 5], [0, 2, 0, 2, 4])
    write_jsonl(path, [{**chunks[0].to_row(), "token_starts": None}, chunks[1].to_row()])
    assert read_chunk_table(path).token_bounds is None  # a chunk without starts: the budget counts characters
    path.write_text(path.read_text() + '{"chunk_id": "d#3",\n')
    with pytest.raises(InputError, match="chunks.jsonl:3"):
        read_chunk_table(path)


def test_chunk_metadata_taken_in_id_order_holds_only_the_rows_read_ahead_and_names_a_bad_line(tmp_path):
    """A document of 12 chunks in the chunk stage's order (d#0 ... d#11), then e#0: taken in
    chunk_id order (d#0, d#1, d#10, d#11, d#2, ...), d#10 reads d#2 to d#9 ahead and holds those
    8 until they are taken; each value as the file has it (1.0 stays a float, no metadata is {})."""
    path = tmp_path / "chunks.jsonl"
    rows = [{"chunk_id": f"d#{i}", "text": "t", "metadata": {"i": i, "w": 1.0}} for i in range(12)]
    rows.append({"chunk_id": "e#0", "text": "t"})
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    metadata = ChunkMetadata(path)
    assert [metadata.take(c) for c in ("d#0", "d#1")] == [{"i": 0, "w": 1.0}, {"i": 1, "w": 1.0}]
    assert metadata.take("d#10") == {"i": 10, "w": 1.0} and sorted(metadata.held) == [f"d#{i}" for i in range(2, 10)]
    assert metadata.take("d#11") == {"i": 11, "w": 1.0} and len(metadata.held) == 8
    assert [metadata.take(f"d#{i}")["i"] for i in range(2, 10)] == list(range(2, 10)) and metadata.held == {}
    assert metadata.take("e#0") == {}
    with pytest.raises(InputError) as raised:  # taken once each: a second take is a chunk no longer in the file
        metadata.take("d#3")
    assert raised.value.problems[0].where == str(path)
    assert raised.value.problems[0].what == "chunk 'd#3' is not in the file any more: it changed while it was read"
    metadata.close()
    with open(path, "a") as handle:
        handle.write(json.dumps({"chunk_id": "f#0", "text": "t", "metadata": ["not", "a", "mapping"]}) + "\n")
    metadata = ChunkMetadata(path)
    with pytest.raises(InputError) as raised:
        metadata.take("f#0")
    assert [(p.where, p.what) for p in raised.value.problems] == [
        (f"{path}:14", "not a chunk row with chunk_id and a metadata mapping")
    ]
