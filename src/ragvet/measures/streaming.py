"""Per-case evaluation one batch of cases at a time, so that a run of millions of cases
is scored in bounded memory: each batch is scored by the engine
(:func:`ragvet.measures.evaluation.evaluate_table`) exactly as a whole table would be,
then any further per-batch columns are added, and the rows are rounded as the
per-case table holds them.

Every per-case value depends on its own case alone, so the rows do not depend on
the batches; the sums over them are kept exactly (:mod:`ragvet.measures.tally`) and
the table is written in row groups of a fixed size
(:func:`ragvet.storage.results.write_result_batches`), so no output depends on the
batch size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import polars as pl

from ragvet.measures.evaluation import evaluate_table
from ragvet.settings import Measuring
from ragvet.storage.columns import CaseTable, ChunkTable, RunTable
from ragvet.storage.results import column, round_results

BATCH_CASES = 10_000  # cases scored at once: about 250 MB of engine arrays at depth 100

# A per-batch column producer: the batch's cases and run rows to more columns of its
# rows (in the batch's case order), e.g. a comparison with another configuration's run.
Producer = Callable[[CaseTable, RunTable], Sequence[pl.Series]]


def evaluated_batches(
    batches: Iterable[tuple[CaseTable, RunTable]],
    chunks: ChunkTable,
    split_of: Callable[[Sequence[str]], Mapping[str, str]],
    texts: Mapping[str, str],
    measuring: Measuring,
    tag_keys: Sequence[str],
    chunk_level: bool = True,
    producers: Sequence[Producer] = (),
) -> Iterator[pl.DataFrame]:
    """The per-case table's rows, one rounded frame per batch of ``batches`` (cases in
    case_id order with their run rows), each case in the split ``split_of`` gives for
    the batch's case ids (asked in order, as a split record read in blocks needs),
    every frame with the same columns:
    ``tag_keys`` are every tag key of all the cases, null where a batch has none.
    The engine's columns come first, then each producer's."""
    tags = [column("tags", key) for key in tag_keys]
    for cases, run in batches:
        frame = evaluate_table(cases, chunks, run, split_of(cases.case_ids), texts, measuring, chunk_level)
        extra = [series for producer in producers for series in producer(cases, run)]
        missing = [pl.lit(None, dtype=pl.String).alias(name) for name in tags if name not in frame.columns]
        yield round_results(frame.with_columns(*extra, *missing))
