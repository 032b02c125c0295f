"""The numpy column tables that evaluation and BM25 read instead of one object per row.

At 100,000 cases or a million chunks a Python object per row costs more time and
memory than the work itself, so the readers in :mod:`ragvet.storage.tables` build these
tables straight from the files, and :mod:`ragvet.measures.engine` and
:mod:`ragvet.retrieval.bm25` compute over their columns.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from ragvet.schema import Case, Chunk, matches_filter


@dataclass(frozen=True)
class ChunkTable:
    """The columns of a chunking the engine reads: ids, docs and character offsets.

    Row ``i`` is chunk number ``i``; rows are in chunk_id order, the numbering
    the retrieve stage's runs use (:func:`ragvet.storage.tables.write_run`).
    """

    chunk_ids: list[str]
    doc_ids: list[str]
    ordinals: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    # The budget tokenizer's token starts (Chunk.token_starts), flat, relative to each
    # chunk's start: chunk i's are token_offsets[token_bounds[i]:token_bounds[i + 1]].
    # None when the budget counts characters.
    token_bounds: np.ndarray | None = None
    token_offsets: np.ndarray | None = None

    @classmethod
    def from_chunks(cls, chunks: Sequence[Chunk]) -> ChunkTable:
        chunks = sorted(chunks, key=lambda c: c.chunk_id)
        return cls(
            [c.chunk_id for c in chunks],
            [c.doc_id for c in chunks],
            np.fromiter((c.ordinal for c in chunks), np.int64, len(chunks)),
            np.fromiter((c.start for c in chunks), np.int64, len(chunks)),
            np.fromiter((c.end for c in chunks), np.int64, len(chunks)),
            *token_columns([c.token_starts for c in chunks]),
        )

    def __len__(self) -> int:
        return len(self.chunk_ids)

    def index(self) -> dict[str, int]:
        return {chunk_id: row for row, chunk_id in enumerate(self.chunk_ids)}

    @functools.cached_property
    def doc_numbers(self) -> tuple[dict[str, int], np.ndarray]:
        """Each doc's number (the docs in sorted order) and each chunk's doc number: found
        once per table, since every batch of a run scored in batches asks for them."""
        number = {doc_id: n for n, doc_id in enumerate(sorted(set(self.doc_ids)))}
        return number, np.fromiter((number[doc_id] for doc_id in self.doc_ids), np.int64, len(self.doc_ids))

    @functools.cached_property
    def doc_order(self) -> tuple[np.ndarray, np.ndarray]:
        """The chunk rows sorted by (doc number, ordinal), and each doc's ``[first, last)``
        positions in that order as ``bounds[doc], bounds[doc + 1]``: once per table."""
        number, chunk_doc = self.doc_numbers
        order = np.lexsort((self.ordinals, chunk_doc))
        return order, np.searchsorted(chunk_doc[order], np.arange(len(number) + 1))


@dataclass(frozen=True)
class TokenStarts:
    """Many texts' token starts in two flat integer arrays, the layout of :class:`ChunkTable`'s
    token columns: text ``i``'s are ``offsets[bounds[i]:bounds[i + 1]]``.

    The chunk stage holds every chunk's starts at once; as tuples of Python ints they cost
    about 36 bytes a token (a 25 MB document: about a gigabyte), here 4 (8 past 2**31).
    """

    bounds: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.bounds) - 1

    def of(self, index: int) -> tuple[int, ...]:
        """Text ``index``'s starts as :attr:`ragvet.schema.Chunk.token_starts` holds them."""
        return tuple(self.offsets[self.bounds[index] : self.bounds[index + 1]].tolist())


def token_columns(starts: Sequence[Sequence[int] | None]) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``(token_bounds, token_offsets)`` of :class:`ChunkTable` from each chunk's token
    starts; ``(None, None)`` when no chunk has them (the budget counts characters)."""
    if not starts or any(s is None for s in starts):
        return None, None
    lengths = np.fromiter((len(s) for s in starts), np.int64, len(starts))
    bounds = np.concatenate(([0], np.cumsum(lengths)))
    return bounds, np.fromiter((o for s in starts for o in s), np.int64, int(bounds[-1]))


@dataclass(frozen=True)
class RunTable:
    """A run as columns: one entry per retrieved row, ids interned to numbers.

    ``case`` indexes ``case_ids``; ``chunk`` indexes the chunk table. The rows may
    come in any order; ranks order them within a case (ties keep file order).
    ``distinct`` promises that no case lists a chunk twice (a reader that checked
    it says so), which spares :func:`rank_matrix` its search for repeats.
    """

    case_ids: list[str]
    case: np.ndarray
    chunk: np.ndarray
    rank: np.ndarray
    score: np.ndarray
    distinct: bool = False

    @classmethod
    def from_mapping(cls, run: Mapping[str, Sequence[dict]], chunk_index: Mapping[str, int]) -> RunTable:
        """From ``{case_id: [{"chunk_id", "score", ...}, ...]}``, each list best first
        (its order is the ranking). An unknown chunk id raises ``KeyError``."""
        case_ids = sorted(run)
        case, chunk, rank, score = [], [], [], []
        distinct = True
        for number, case_id in enumerate(case_ids):
            distinct = distinct and len({row["chunk_id"] for row in run[case_id]}) == len(run[case_id])
            for position, row in enumerate(run[case_id], start=1):
                if row["chunk_id"] not in chunk_index:
                    raise KeyError(f"retrieved chunk {row['chunk_id']!r} is not in the chunking")
                case.append(number)
                chunk.append(chunk_index[row["chunk_id"]])
                rank.append(position)
                score.append(row["score"])
        return cls(
            case_ids,
            np.asarray(case, np.int64),
            np.asarray(chunk, np.int64),
            np.asarray(rank, np.int64),
            np.asarray(score, np.float64),
            distinct,
        )

    def by_case(self, case_ids: Collection[str], chunk_ids: Sequence[str]) -> dict[str, list[dict]]:
        """The rows of ``case_ids`` as ``{case_id: [{"chunk_id", "rank", "score"}, ...]}``
        in rank order, for the per-case code that reads a run that way (recorded answers)."""
        wanted = np.asarray([case_id in case_ids for case_id in self.case_ids], bool)
        rows = np.flatnonzero(wanted[self.case]) if len(self.case) else np.zeros(0, np.int64)
        rows = rows[np.lexsort((self.rank[rows], self.case[rows]))]
        grouped: dict[str, list[dict]] = {}
        for row in rows.tolist():
            grouped.setdefault(self.case_ids[self.case[row]], []).append(
                {"chunk_id": chunk_ids[self.chunk[row]], "rank": int(self.rank[row]), "score": float(self.score[row])}
            )
        return grouped


@dataclass(frozen=True)
class EvidenceTable:
    """Every case's evidence units and claims as flat columns, before projection.

    Units are numbered over all cases: a case's evidence units (``unit_claim ==
    -1``) and the units cited by its claims (``unit_claim`` = the claim's number).
    A *target* is one span or doc that can make its unit available on its own: a
    unit with alternatives (``{any: [...]}``) has several, any other unit one.
    ``target_start == -1`` marks a whole-doc target.
    """

    n_cases: int
    unit_case: np.ndarray
    unit_claim: np.ndarray
    claim_case: np.ndarray
    target_unit: np.ndarray
    target_doc: list[str]
    target_start: np.ndarray
    target_end: np.ndarray

    @classmethod
    def from_cases(cls, cases: Sequence[Case]) -> EvidenceTable:
        return cls.from_rows([case.to_row() for case in cases])

    @classmethod
    def from_rows(cls, rows: Iterable[dict[str, Any]]) -> EvidenceTable:
        """From validated case rows (:meth:`ragvet.schema.Case.to_row`): plain dicts,
        so that 100,000 cases cost no object per unit; any iterable, so that a
        reader can stream them. A malformed row raises ``KeyError`` or ``TypeError``."""
        unit_case: list[int] = []
        unit_claim: list[int] = []
        claim_case: list[int] = []
        target_unit: list[int] = []
        target_doc: list[str] = []
        target_start: list[int] = []
        target_end: list[int] = []

        def add(unit: dict[str, Any], case: int, claim: int) -> None:
            for target in unit.get("any") or (unit,):
                target_unit.append(len(unit_case))
                target_doc.append(target["doc"])
                target_start.append(target.get("start", -1))
                target_end.append(target.get("end", -1))
            unit_case.append(case)
            unit_claim.append(claim)

        n_cases = 0
        for row, case in enumerate(rows):
            n_cases = row + 1
            for unit in case.get("evidence") or ():
                add(unit, row, -1)
            for claim in case.get("claims") or ():
                for unit in claim["evidence"]:
                    add(unit, row, len(claim_case))
                claim_case.append(row)
        return cls(
            n_cases,
            np.asarray(unit_case, np.int64),
            np.asarray(unit_claim, np.int64),
            np.asarray(claim_case, np.int64),
            np.asarray(target_unit, np.int64),
            target_doc,
            np.asarray(target_start, np.int64),
            np.asarray(target_end, np.int64),
        )

    def labels(self, units: np.ndarray) -> pl.Series:
        """Each unit's label, as :meth:`ragvet.schema.EvidenceUnit.label` writes it: its
        targets (they follow unit order) joined by `` | ``, a span as ``doc[start:end]``.
        Built in polars columns, with no Python string per label."""
        units = np.asarray(units, np.int64)
        firsts = np.searchsorted(self.target_unit, units)
        counts = np.searchsorted(self.target_unit, units + 1) - firsts
        targets = np.repeat(firsts - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
        frame = pl.DataFrame(
            {
                "unit": np.repeat(np.arange(len(units)), counts),
                "doc": pl.Series(self.target_doc, dtype=pl.String).gather(targets),
                "start": self.target_start[targets],
                "end": self.target_end[targets],
            }
        )
        start, doc = pl.col("start"), pl.col("doc")
        label = pl.when(start < 0).then(doc).otherwise(pl.format("{}[{}:{}]", doc, start, pl.col("end")))
        if (counts == 1).all():  # no alternatives: a unit's label is its one target's
            return frame.select(label.alias("label"))["label"]
        joined = frame.group_by("unit", maintain_order=True).agg(label.str.join(" | ").alias("label"))
        every = pl.DataFrame({"unit": np.arange(len(units))})
        return every.join(joined, on="unit", how="left", maintain_order="left")["label"].fill_null("")

    def case_labels(self, units: np.ndarray) -> tuple[np.ndarray, pl.Series]:
        """The case and label of each of ``units`` (:meth:`labels`), a label once per
        case: alternatives of one doc can give one unit's label twice."""
        cases, labels = self.unit_case[units], self.labels(units)
        first = pl.select(pl.struct(pl.Series("case", cases), labels).is_first_distinct()).to_series().to_numpy()
        return cases[first], labels.filter(first)


@dataclass(frozen=True)
class Judgements:
    """The cases' judged sets (:attr:`ragvet.schema.Case.judged`) as flat columns:
    case number ``case[i]`` judged doc ``doc[i]`` (any grade). ``has[c]`` says whether
    case ``c`` carries a judged set at all (a native case does not)."""

    has: np.ndarray
    case: np.ndarray
    doc: list[str]

    @classmethod
    def from_sets(cls, sets: Sequence[Mapping[str, int] | None]) -> Judgements | None:
        """From each case's judged set or None; None when no case has one."""
        if all(judged is None for judged in sets):
            return None
        lengths = [len(judged or ()) for judged in sets]
        return cls(
            np.asarray([judged is not None for judged in sets], bool),
            np.repeat(np.arange(len(sets), dtype=np.int64), lengths),
            [doc for judged in sets for doc in sorted(judged or ())],
        )


def _tag_columns(tags: Sequence[Mapping[str, str]]) -> pl.DataFrame:
    """Each case's tags as :attr:`CaseTable.tags` holds them."""
    keys = sorted({key for mapping in tags for key in mapping})
    return pl.DataFrame([pl.Series(key, [mapping.get(key) for mapping in tags], dtype=pl.String) for key in keys])


def _tag_frame(texts: pl.Series) -> pl.DataFrame:
    """Each case's tags, given as canonical JSON text, as :attr:`CaseTable.tags` holds them
    (no case: no column)."""
    decoded = texts.str.json_decode(infer_schema_length=None)
    found = decoded.struct.unnest() if decoded.dtype == pl.Struct else pl.DataFrame()
    return found.select(pl.col(name).cast(pl.String) for name in sorted(found.columns))


@dataclass(frozen=True)
class CaseTable:
    """What evaluation reads of the validated cases, in case_id order: the ids,
    the fields a per-case row carries, the evidence as columns, and the judged
    sets (None when no case has one)."""

    case_ids: list[str]
    answerable: list[bool]
    tags: pl.DataFrame  # a String column per tag key, keys sorted; null where a case lacks the key
    evidence: EvidenceTable
    judged: Judgements | None = None

    @classmethod
    def from_cases(cls, cases: Sequence[Case]) -> CaseTable:
        return cls.from_rows(case.to_row() for case in sorted(cases, key=lambda c: c.case_id))

    @classmethod
    def from_rows(cls, rows: Iterable[dict[str, Any]]) -> CaseTable:
        """From validated case rows in case_id order (as the validate stage writes
        them), read once: a reader can stream them. A malformed row raises
        ``KeyError`` or ``TypeError``; rows out of order raise ``ValueError``."""
        case_ids: list[str] = []
        answerable: list[bool] = []
        tags: list[dict[str, str]] = []
        judged: list[dict[str, int] | None] = []

        def noted(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
            for row in rows:
                if case_ids and not case_ids[-1] < row["id"]:
                    raise ValueError(f"case {row['id']!r} is out of case_id order")
                case_ids.append(row["id"])
                answerable.append(row.get("answerable", True))
                tags.append(dict(row.get("tags") or {}))
                judged.append(row.get("judged"))
                yield row

        evidence = EvidenceTable.from_rows(noted(rows))
        return cls(case_ids, answerable, _tag_columns(tags), evidence, Judgements.from_sets(judged))

    @classmethod
    def from_frame(cls, frame: Any) -> CaseTable:
        """From the validate stage's Parquet case table (:func:`ragvet.storage.tables.write_case_table`),
        a polars frame with one row per case: every column is flattened in C, so
        100,000 cases cost no Python object per unit or target."""
        n_cases = len(frame)
        units = frame["units"].explode(empty_as_null=False)
        unit_case = np.repeat(np.arange(n_cases), frame["units"].list.len().to_numpy())
        n_claims = frame["claims"].to_numpy().astype(np.int64)
        local_claim = units.struct.field("claim").to_numpy().astype(np.int64)
        first_claim = np.cumsum(n_claims) - n_claims  # each case's first claim number over all cases
        targets = units.struct.field("targets")
        flat = targets.explode(empty_as_null=False)
        return cls(
            frame["id"].to_list(),
            frame["answerable"].to_list(),
            _tag_frame(frame["tags"]),
            EvidenceTable(
                n_cases,
                unit_case,
                np.where(local_claim < 0, -1, first_claim[unit_case] + local_claim),
                np.repeat(np.arange(n_cases), n_claims),
                np.repeat(np.arange(len(units)), targets.list.len().to_numpy()),
                flat.struct.field("doc").to_list(),
                flat.struct.field("start").fill_null(-1).cast(pl.Int64).to_numpy(),
                flat.struct.field("end").fill_null(-1).cast(pl.Int64).to_numpy(),
            ),
            _frame_judgements(frame),
        )


def _frame_judgements(frame: Any) -> Judgements | None:
    """The judged sets of a Parquet case table: its ``judged`` column, present only
    when some case has one (:func:`ragvet.storage.tables.write_case_table`)."""
    if "judged" not in frame.columns:
        return None
    judged = frame["judged"]
    lengths = judged.list.len().fill_null(0).to_numpy().astype(np.int64)
    return Judgements(
        judged.is_not_null().to_numpy(),
        np.repeat(np.arange(len(frame), dtype=np.int64), lengths),
        judged.explode(empty_as_null=False).drop_nulls().struct.field("doc").to_list(),
    )


@dataclass
class ChunkTexts:
    """What BM25 and metadata filters read of a chunking, as columns sorted by chunk_id.

    At a million chunks a :class:`Chunk` per row (with its metadata dict) costs
    more memory than the BM25 index, so this keeps the ids, the texts only until
    they are tokenised (:meth:`release_texts`), and each *distinct* metadata
    mapping once: chunks of one doc share theirs, and a filter is then tested
    once per distinct mapping instead of once per chunk.
    """

    chunk_ids: list[str]
    texts: list[str] | None
    metadata: list[dict[str, Any]]
    metadata_of: np.ndarray  # row i's metadata is metadata[metadata_of[i]]

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[str, str, dict[str, Any]]]) -> ChunkTexts:
        """From ``(chunk_id, text, metadata)`` in any order; equal chunk ids keep their order."""
        ids: list[str] = []
        texts: list[str] = []
        codes: list[int] = []
        distinct: dict[str, tuple[int, dict[str, Any]]] = {}
        for chunk_id, text, metadata in rows:
            ids.append(chunk_id)
            texts.append(text)
            # repr keeps 1, 1.0, True and "1" apart, as str() in matches_filter does
            codes.append(distinct.setdefault(repr(sorted(metadata.items())), (len(distinct), metadata))[0])
        order = sorted(range(len(ids)), key=ids.__getitem__)
        return cls(
            [ids[i] for i in order],
            [texts[i] for i in order],
            [metadata for _, metadata in distinct.values()],
            np.asarray(codes, dtype=np.int64)[np.asarray(order, dtype=np.int64)],
        )

    @classmethod
    def from_chunks(cls, chunks: Sequence[Chunk]) -> ChunkTexts:
        return cls.from_rows((chunk.chunk_id, chunk.text, chunk.metadata) for chunk in chunks)

    def release_texts(self) -> list[str]:
        """The texts, forgotten here: once the caller has tokenised them they can be freed."""
        texts, self.texts = self.texts, None
        if texts is None:
            raise ValueError("the chunk texts were released already")
        return texts

    def allowed(self, flt: dict[str, Any]) -> np.ndarray:
        """Which chunks a metadata filter admits (all, for no filter), as :func:`allowed_mask`."""
        if not flt:
            return np.ones(len(self.chunk_ids), dtype=bool)
        admitted = np.array([matches_filter(metadata, flt) for metadata in self.metadata], dtype=bool)
        return admitted[self.metadata_of]
