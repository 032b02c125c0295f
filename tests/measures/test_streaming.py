"""Evaluation one batch of cases at a time (src/ragvet/measures/streaming.py, tally.py):
the same per-case table, summary and slice tables, byte for byte, at any batch size,
and the exact sums behind them equal to ``math.fsum``."""

from __future__ import annotations

import hashlib
import json
import math
import random

import numpy as np
import polars as pl
import pytest
from builders import measuring

import ragvet.storage.records as records
import ragvet.storage.results as results
from ragvet.errors import InputError
from ragvet.measures.evaluation import evaluate_table
from ragvet.measures.streaming import evaluated_batches
from ragvet.measures.summary import Summaries, slice_table, summarise
from ragvet.measures.tally import ExactColumns, ExactSum, exact_total
from ragvet.schema import Case, Chunk, Claim, EvidenceUnit
from ragvet.storage.columns import ChunkTable
from ragvet.storage.files import write_json
from ragvet.storage.pipelining import ahead
from ragvet.storage.records import split_membership
from ragvet.storage.results import read_results, round_results, write_result_batches
from ragvet.storage.tables import read_case_table, read_run_table, run_batches, write_case_table, write_run

KS = [1, 3, 10]
N_CASES = 700
ROWS = 64  # row groups in the test: 11 of them, the last one shorter


def test_exact_sum_is_fsum_where_a_float_sum_loses_digits():
    values = np.asarray([1e16, 1.0, -1e16, 0.1, 0.2, 0.3])
    assert sum(values.tolist()) != math.fsum(values.tolist())  # the naive sum drops the 1.0
    total = ExactSum()
    for part in (values[:2], values[2:3], values[3:]):
        total.add(part)
    assert total.value() == math.fsum(values.tolist()) == 1.6
    assert total.mean() == 1.6 / 6 and total.count == 6
    assert ExactSum().mean() is None and exact_total(np.zeros(0)) == 0


def test_exact_sum_of_rounded_values_equals_fsum_in_any_split():
    rng = np.random.default_rng(3)
    for trial in range(50):
        values = np.round(rng.random(int(rng.integers(1, 3000))) ** int(rng.integers(1, 9)), 6)
        values = -values if trial % 5 == 0 else values
        cut = sorted(rng.integers(0, len(values), 3).tolist())
        parts = np.split(values, cut)
        total = ExactSum()
        for part in reversed(parts):  # another order too
            total.add(part)
        assert total.value() == math.fsum(values.tolist())


def test_exact_columns_keep_every_column_exact_as_batches_widen_their_exponents():
    """Batches whose exponents lie below, above and between the ones seen, and a column
    added later: every column's total is fsum's, its count the values it was given."""
    batches = [
        np.asarray([[0.5, np.nan], [0.25, 3.0]]),
        np.asarray([[1e-300, 1e300], [np.nan, -1e300]]),
        np.asarray([[7.0, 0.1], [0.2, 0.3]]),
    ]
    sums = ExactColumns(2)
    for batch in batches:
        sums.add(batch)
    sums.widen(3)
    sums.add(np.asarray([[1.0, 1.0, 0.125]]))
    whole = np.vstack([np.column_stack([b, np.full(len(b), np.nan)]) for b in batches] + [[[1.0, 1.0, 0.125]]])
    for column, total in enumerate(sums.totals()):
        values = whole[:, column][~np.isnan(whole[:, column])].tolist()
        assert ExactSum(total, len(values)).value() == math.fsum(values)
    assert sums.counts.tolist() == [6, 6, 1]
    assert ExactSum(sums.totals()[1], 6).value() == 4.4  # a float sum in row order loses the 3.0 to 1e300


def test_summaries_of_batches_equal_the_whole_when_judgements_come_later():
    """The judgements metrics first appear in the second batch: its means are over the
    cases that have them, every other mean over all answerable cases, as for one frame."""
    first = pl.DataFrame(
        {"case_id": ["a", "b"], "split": "eval", "answerable": [True, False], "metrics.recall@1": [0.5, 1.0]}
    )
    second = pl.DataFrame(
        {
            "case_id": ["c", "d"],
            "split": "eval",
            "answerable": [True, None],
            "metrics.recall@1": [0.25, 1.0],
            "metrics.judged@1": [0.75, None],
        }
    )
    batched = Summaries([1]).add(first).add(second).summary()
    assert batched == Summaries([1]).add(pl.concat([first, second], how="diagonal")).summary()
    result = batched["eval"]
    assert result["metrics"]["recall@1"] == (0.5 + 0.25 + 1.0) / 3  # the null answerable is answerable
    assert result["metrics"]["judged@1"] == 0.75 and result["counted"]["judged@1"] == 1
    assert result["denominators"]["cases"] == 3 and result["denominators"]["abstention_cases"] == 1


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """700 generated cases over 30 docs of 10 chunks, a run of depth 12 written as the
    retrieve stage writes it (numbered), a tenth abstention cases, some without a run."""
    rng = random.Random(5)
    root = tmp_path_factory.mktemp("streaming")
    texts = {f"d{d:02d}": "".join(rng.choice("ab c") for _ in range(200)) for d in range(30)}
    chunks = [
        Chunk(f"{doc}#{o}", doc, o, o * 20, o * 20 + 25 if o < 9 else 200, texts[doc][o * 20 : o * 20 + 25])
        for doc in texts
        for o in range(10)
    ]
    cases, rows = [], []
    for n in range(N_CASES):
        case_id = f"q{n:04d}"
        answerable = n % 10 != 0
        units = ()
        if answerable:
            doc = rng.choice(sorted(texts))
            start = rng.randrange(0, 180)
            units = (EvidenceUnit(doc, start, start + rng.randrange(1, 60)), EvidenceUnit(rng.choice(sorted(texts))))
        claims = (Claim("c", units[:1]),) if answerable and n % 3 else ()
        tags = {"kind": rng.choice("xyz")} if n % 4 else {}
        cases.append(Case(case_id, "?", answerable, units, claims, tags))
        if n % 17:
            for rank, chunk in enumerate(rng.sample(chunks, 12), start=1):
                rows.append({"case_id": case_id, "rank": rank, "chunk_id": chunk.chunk_id, "score": 1.0 / rank})
    write_case_table(root / "cases.parquet", [case.to_row() for case in cases])
    write_run(root / "run.parquet", rows, [c.case_id for c in cases], [c.chunk_id for c in chunks])
    split = {case.case_id: "eval" if n % 3 else "dev" for n, case in enumerate(cases)}
    return root, ChunkTable.from_chunks(chunks), texts, split


def streamed(project, batch: int, tmp_path) -> tuple[str, str, pl.DataFrame]:
    """The per-case table's bytes' digest, the summary and slices as JSON, evaluated ``batch``
    cases at a time, read, scored, tallied and written in threads a batch apart as the stage does."""
    root, chunks, texts, split = project
    batched = run_batches(root / "run.parquet", root / "cases.parquet", chunks.chunk_ids, batch)
    assert batched is not None  # numbered for these cases and chunks
    tag_keys, pairs = batched
    tallied = Summaries(KS, 0.5, (), ["kind"])

    def tallying(frames):
        for frame in frames:
            tallied.add(frame)
            yield frame

    out = tmp_path / f"cases-{batch}.parquet"
    frames = ahead(evaluated_batches(ahead(pairs), chunks, lambda ids: split, texts, measuring(KS), tag_keys))
    write_result_batches(out, ahead(tallying(frames)))
    figures = json.dumps([tallied.summary(), tallied.slice_table()], sort_keys=True)
    return hashlib.sha256(out.read_bytes()).hexdigest(), figures, read_results(out)


def test_the_same_bytes_at_any_batch_size_and_the_figures_of_the_whole_table(project, tmp_path, monkeypatch):
    monkeypatch.setattr(results, "ROW_GROUP_ROWS", ROWS)
    outputs = {batch: streamed(project, batch, tmp_path) for batch in (9, 64, 250, N_CASES)}
    digests = {digest for digest, _, _ in outputs.values()}
    assert len(digests) == 1, digests
    assert len({figures for _, figures, _ in outputs.values()}) == 1
    root, chunks, texts, split = project
    cases = read_case_table(root / "cases.parquet")
    run = read_run_table(root / "run.parquet", chunks.chunk_ids, cases.case_ids)
    whole = round_results(evaluate_table(cases, chunks, run, split, texts, measuring(KS)))
    table = outputs[9][2]
    assert table.height == N_CASES and table.equals(whole.select(sorted(whole.columns)))
    figures = json.dumps([summarise(whole, KS, 0.5), slice_table(whole, ["kind"], KS)], sort_keys=True)
    assert outputs[9][1] == figures
    assert json.loads(figures)[0]["eval"]["denominators"]["cases"] > 0


def test_a_table_of_one_row_group_is_written_as_a_whole_table_is(project, tmp_path):
    """Up to ROW_GROUP_ROWS rows, the bytes of ``write_results`` (the sample's tables stay as they were)."""
    digest, _, table = streamed(project, 100, tmp_path)
    results.write_results(tmp_path / "whole.parquet", table)
    assert hashlib.sha256((tmp_path / "whole.parquet").read_bytes()).hexdigest() == digest


def test_a_large_split_record_is_read_in_blocks_in_id_order(tmp_path, monkeypatch):
    """Past LARGE_SPLIT bytes the record is scanned a block at a time (blocks of 50 bytes
    cut entries), giving what the whole record gives; a case the record lacks is a
    problem at the file."""
    ids = ["a", 'b"q', "c\\d", "caf\u00e9", "zz"]
    record = {
        "cases": {
            case_id: {"fingerprint": f"f{n}", "split": "eval" if n % 2 else "dev"} for n, case_id in enumerate(ids)
        },
        "fingerprints": {"corpus": "c", "dev_split": "d", "eval_split": "e"},
    }
    write_json(tmp_path / "split.json", record)
    whole, lookup = split_membership(tmp_path / "split.json")
    monkeypatch.setattr(records, "LARGE_SPLIT", 0)
    fingerprints, scan = split_membership(tmp_path / "split.json")
    assert isinstance(scan, records._SplitScan)
    monkeypatch.setattr(records, "_BLOCK", 50)
    assert fingerprints == whole == record["fingerprints"]
    assert (
        {**scan(ids[:2]), **scan(ids[2:3]), **scan(ids[3:])}
        == lookup(ids)
        == {case_id: entry["split"] for case_id, entry in record["cases"].items()}
    )
    with pytest.raises(InputError, match="case b has no split entry"):
        records._SplitScan(tmp_path / "split.json", "fix")(["a", "b"])
    skipping = records._SplitScan(tmp_path / "split.json", "fix")  # a case table may lack some cases
    assert {**skipping(["a", "c\\d"]), **skipping(["zz"])} == {"a": "dev", "c\\d": "dev", "zz": "dev"}


def test_a_numbered_run_out_of_case_order_is_a_problem_at_the_run(project, tmp_path):
    """A run numbered for the cases but not in case order cannot be read beside the case
    batches: the problem names the run and the row, not a wrong figure."""
    root, chunks, _, _ = project
    run = pl.read_parquet(root / "run.parquet")
    shuffled = tmp_path / "run.parquet"
    metadata = pl.read_parquet_metadata(root / "run.parquet")
    run.reverse().write_parquet(shuffled, metadata=metadata)
    _, pairs = run_batches(shuffled, root / "cases.parquet", chunks.chunk_ids, 100)
    with pytest.raises(InputError) as raised:
        list(ahead(pairs))  # raised in the reading thread, raised here
    (problem,) = raised.value.problems
    assert problem.where == str(shuffled) and "not in case order" in problem.what
    assert "near row 13" in problem.what  # reversed: the last case's 12 rows, then an earlier case's
