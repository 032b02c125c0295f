"""A paired sample held by what the gate's figures need of it, not by its cases.

A paired comparison's figures are functions of little: the means are the exact sums
of each side over n, the wins, ties and losses are three counts, and the bootstrap
interval and the permutation p-value read only the cases whose delta is not 0 (with n,
the seed and the resamples: :mod:`ragvet.gating.bootstrap`,
:mod:`ragvet.gating.significance`). So a :class:`PairedSample` keeps n, the exact sums,
the counts and the *moved* cases only (their positions among the n paired cases, their
ids and deltas), and memory grows with the cases a change moved, not with the cases.

:class:`PairedBuilder` makes one from batches of paired rows in case-id order, so one
whole table and many row groups give the same sample, bit for bit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from ragvet.measures.tally import ExactSum, exact_totals
from ragvet.storage.atomic import ROW_GROUP_ROWS
from ragvet.storage.files import FLOAT_PLACES

# Seeds of the two 64-bit polars hashes whose sums (with the count) name a paired case set.
HASH_SEEDS = (0, 1)
_WRAP = 1 << 64


Digest = tuple[int, ...]  # an id set's count, then the wrapped sum of its ids' hashes under each seed
NO_IDS: Digest = (0,) * (1 + len(HASH_SEEDS))


def id_digest(parts: Iterable[pl.Series], start: Digest = NO_IDS) -> Digest:
    """``start`` with the ids of ``parts`` added: their number, and per seed of
    :data:`HASH_SEEDS` the sum modulo 2**64 of their 64-bit polars hashes. The same for the
    same ids in any order and any batching, so two sets are compared in one pass each."""
    count, *sums = start
    for part in parts:
        count += len(part)
        names = part.cast(pl.String)
        hashed = [int(names.hash(seed).to_numpy().sum(dtype=np.uint64)) for seed in HASH_SEEDS]
        sums = [(total + part_sum) % _WRAP for total, part_sum in zip(sums, hashed)]
    return (count, *sums)


@dataclass(frozen=True)
class PairedSample:
    """One metric's paired cases (a finite value on both sides), by their moved cases.

    ``rises`` and ``falls`` count the deltas that, rounded to the places the verdict
    keeps, are above and below 0; the other ``n - rises - falls`` are ties. ``digest``
    (the count and the wrapped sums of each case id's hash under :data:`HASH_SEEDS`)
    names the case set, so samples over the same cases share their draws without
    holding the ids (a collision needs two 64-bit sums to agree at once)."""

    n: int
    base_total: int  # exact sums (ragvet.measures.tally.exact_totals): means as the summaries make them
    cur_total: int
    rises: int
    falls: int
    positions: np.ndarray  # int64, ascending: the moved cases' positions among the n paired cases
    ids: pl.Series  # their case ids
    deltas: np.ndarray  # their deltas cur - base, none 0
    digest: Digest

    def means(self) -> tuple[float | None, float | None]:
        """``(baseline, current)``: each side's exact sum over n (:class:`ExactSum`), None when n is 0."""
        return ExactSum(self.base_total, self.n).mean(), ExactSum(self.cur_total, self.n).mean()


@dataclass
class PairedBuilder:
    """A :class:`PairedSample` made a batch at a time (:meth:`add`), in case-id order."""

    n: int = 0
    totals: list[int] = field(default_factory=lambda: [0, 0])
    rises: int = 0
    falls: int = 0
    digest: Digest = NO_IDS
    positions: list[np.ndarray] = field(default_factory=list)
    ids: list[pl.Series] = field(default_factory=list)
    deltas: list[np.ndarray] = field(default_factory=list)

    def add(self, ids: pl.Series | Sequence[str], base: np.ndarray, cur: np.ndarray) -> PairedBuilder:
        """Add the next rows (ascending case ids, after every row added before), each case's
        two values; a case without a finite value on both sides (None is NaN here, NaN and
        infinities are no value) is not paired. A long batch is added a row group at a time,
        so the temporaries stay that size whatever the caller holds."""
        names = ids if isinstance(ids, pl.Series) else pl.Series("case_id", list(ids), dtype=pl.String)
        base, cur = np.asarray(base, dtype=np.float64), np.asarray(cur, dtype=np.float64)
        for start in range(0, len(names), ROW_GROUP_ROWS):
            stop = start + ROW_GROUP_ROWS
            self._add_part(names.slice(start, ROW_GROUP_ROWS), base[start:stop], cur[start:stop])
        return self

    def _add_part(self, names: pl.Series, base: np.ndarray, cur: np.ndarray) -> None:
        kept = np.isfinite(base) & np.isfinite(cur)
        names, base, cur = names.filter(pl.Series(kept)), base[kept], cur[kept]
        deltas = cur - base
        sums, _ = exact_totals(np.column_stack([base, cur]))
        self.totals = [total + part for total, part in zip(self.totals, sums)]
        rounded = deltas.round(FLOAT_PLACES)
        self.rises += int((rounded > 0).sum())
        self.falls += int((rounded < 0).sum())
        self.digest = id_digest([names], self.digest)
        moved = np.flatnonzero(deltas != 0)
        self.positions.append(moved.astype(np.int64) + self.n)
        self.ids.append(names.gather(moved))
        self.deltas.append(deltas[moved])
        self.n += len(deltas)

    def sample(self) -> PairedSample:
        return PairedSample(
            n=self.n,
            base_total=self.totals[0],
            cur_total=self.totals[1],
            rises=self.rises,
            falls=self.falls,
            positions=np.concatenate([np.zeros(0, np.int64), *self.positions]),
            ids=pl.concat([pl.Series("case_id", [], dtype=pl.String), *self.ids]),
            deltas=np.concatenate([np.zeros(0), *self.deltas]),
            digest=self.digest,
        )


def moved_rows(deltas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(positions, rows)`` of a dense n x m deltas matrix: the rows some column moved
    (a delta not 0), ascending, and those rows. What the bootstrap and the permutation
    test read of it: a row no column moved adds 0 to every sum."""
    positions = np.flatnonzero(deltas.any(axis=1))
    return positions, np.ascontiguousarray(deltas[positions])


def moved_union(samples: Sequence[PairedSample]) -> tuple[np.ndarray, pl.Series, np.ndarray]:
    """``(positions, ids, rows)`` of samples over the same cases: the positions some sample
    moved, ascending, their ids, and each sample's deltas there as a column (0 where it
    did not move): :func:`moved_rows` of the samples' dense deltas matrix, never built."""
    held = [pl.DataFrame({"position": s.positions, "case_id": s.ids}) for s in samples]
    empty = pl.DataFrame(schema={"position": pl.Int64, "case_id": pl.String})
    union = pl.concat([empty, *held]).unique("position", keep="any").sort("position")
    positions = union["position"].to_numpy()
    rows = np.zeros((len(positions), len(samples)), dtype=np.float64)
    for j, sample in enumerate(samples):
        rows[np.searchsorted(positions, sample.positions), j] = sample.deltas
    return positions, union["case_id"], rows
