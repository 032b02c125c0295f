import pytest

from stages.errors import InputError
from stages.files import write_jsonl
from stages.tables import read_run


def write_run(tmp_path, rows):
    path = tmp_path / "run.jsonl"
    write_jsonl(path, [dict(zip(("case_id", "rank", "chunk_id", "score"), row)) for row in rows])
    return path


def test_run_is_grouped_by_case_and_sorted_by_rank(tmp_path):
    path = write_run(tmp_path, [("q1", 2, "a#1", 1.0), ("q1", 1, "a#0", 2.0), ("q2", 1, "a#1", 0.5)])
    run = read_run(path, {"a#0", "a#1"}, {"q1", "q2"})
    assert [row["chunk_id"] for row in run["q1"]] == ["a#0", "a#1"]
    assert [row["chunk_id"] for row in run["q2"]] == ["a#1"]


def test_duplicate_chunk_ids_unknown_chunks_and_cases_are_all_reported(tmp_path):
    path = write_run(
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
