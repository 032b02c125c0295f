"""Where a comparison's two sides come from: the committed baseline folder, the
current per-case results, or another git revision's results (from git or DVC).

This is all of the verdict's, the gate's and the report's file and git I/O; the
comparison itself (:mod:`ragvet.gating.compare`) is pure, so they compare the same way.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import numpy as np
import polars as pl

from ragvet.errors import InputError, Problem, raise_if
from ragvet.gating.paired import NO_IDS, Digest, id_digest
from ragvet.measures.latency import accepted_latency
from ragvet.schema import DEV, EVAL
from ragvet.storage.atomic import outputs_together, remove_output, write_copy, write_parquet
from ragvet.storage.files import read_json, write_json
from ragvet.storage.pipelining import ahead
from ragvet.storage.placement import dvc_pointer, tables_in_dvc, track_with_dvc
from ragvet.storage.progress import progress_bar
from ragvet.storage.rankings import (
    BATCH_ROWS,
    NUMBERED_COLUMNS,
    RANKING_COLUMNS,
    RowIds,
    case_batches,
    first_rows,
    in_rank_order,
    numbering,
)
from ragvet.storage.records import SplitOutline, listed_ids, object_problems
from ragvet.storage.results import (
    SUFFIX,
    cases_dir,
    column,
    in_id_order,
    per_case_path,
    read_results,
    row_group_writer,
)
from ragvet.storage.tables import RUN_METADATA, parquet_slices, run_path
from ragvet.text.values import is_int, is_number, kind_of

Summary = dict[str, Any]
# What a comparison reads of each per-case table (ragvet.gating.compare) besides the metrics
# it compares: at 100,000 cases and nine tables, the other metrics, the counts, missed
# evidence and reviews are left on disk (reading every metric took 5 times as long).
COMPARED = ("case_id", "split", "answerable", "tags")


def compared_columns(metrics: Sequence[str] | None, extra: Sequence[str] = ()) -> tuple[str, ...]:
    """:data:`COMPARED`, the columns of ``metrics`` (every metric when None) and ``extra``,
    as :func:`ragvet.storage.results.read_results` takes them."""
    metric_columns = ["metrics"] if metrics is None else [column("metrics", metric) for metric in metrics]
    return (*COMPARED, *metric_columns, *extra)


def read_baseline_dir(
    baseline: Path, config: str, metrics: Sequence[str] | None = None
) -> tuple[dict | None, Path | None]:
    """The committed baseline of one configuration (its summary, and its per-case table's
    path once the columns a comparison of ``metrics`` reads, :func:`compared_columns`, are
    checked there: a comparison reads it a batch of cases at a time), or (None, None) if
    there is none.

    A baseline whose per-case tables DVC tracks (``cases.dvc`` beside them) but
    which are not in the work tree is an error: the comparison would otherwise
    say "no baseline" when the fix is one ``dvc pull``.
    """
    summary, cases = baseline / f"{config}.json", per_case_path(cases_dir(baseline), config)
    if summary.exists() and not cases.exists() and dvc_pointer(cases_dir(baseline)).exists():
        raise InputError(
            [
                Problem(
                    str(cases),
                    f"the baseline's per-case table is tracked by DVC ({dvc_pointer(cases_dir(baseline))}) "
                    "but not in the work tree",
                    f"run `dvc pull {dvc_pointer(cases_dir(baseline))}` (or `dvc checkout` when the cache has it)",
                )
            ]
        )
    if not (summary.exists() and cases.exists()):
        return None, None
    found = checked_summary(str(summary), read_json(summary), baseline_fix(summary, cases))
    read_results(cases, columns=compared_columns(metrics), rows=0)
    return found, cases


def baseline_fix(*paths: Path | str) -> str:
    """How to mend a committed baseline file ragvet did not write."""
    return (
        f"restore the baseline as `ragvet baseline accept` wrote it (git checkout -- {' '.join(map(str, paths))}), "
        "or accept the current results deliberately: `ragvet baseline accept`"
    )


# The figures of each split of a summary, and what each of their values must be.
_FIGURES = {
    "metrics": "a finite number, or null when no case counted",
    "denominators": "a whole number of at least 0",
    "counted": "a whole number of at least 0",
}


def checked_summary(where: str, summary: Any, fix: str) -> Summary:
    """A baseline's metrics summary, refused (exit 2) unless it has the shape evaluate writes."""
    raise_if(object_problems(where, summary, "a summary", fix, ("fingerprints", EVAL, DEV)))
    raise_if(_value_problems(where, summary, fix))
    return summary


def _value_problems(where: str, summary: Summary, fix: str) -> list[Problem]:
    """Why a summary's figures are not what evaluate writes: the fingerprints text, and per
    split :data:`_FIGURES` objects of the values :func:`_is_figure` allows. A text metric
    or count parses, then crashes the comparison or prints as a figure in the report."""
    problems = [
        Problem(where, f"`fingerprints.{name}` must be text, got {kind_of(value)}", fix)
        for name, value in (summary.get("fingerprints") or {}).items()
        if not isinstance(value, str)
    ]
    for split, section in ((split, section) for split in (EVAL, DEV) for section in _FIGURES):
        figures = (summary.get(split) or {}).get(section)
        if figures is not None and not isinstance(figures, dict):
            problems.append(Problem(where, f"`{split}.{section}` must be an object, got {kind_of(figures)}", fix))
            continue
        wrong = sorted(key for key, value in (figures or {}).items() if not _is_figure(section, value))
        if wrong:
            example = figures[wrong[0]]
            what = f"`{split}.{section}` holds {kind_of(example)} {example!r} for {listed_ids(wrong)}"
            problems.append(Problem(where, f"{what}: each must be {_FIGURES[section]}", fix))
    return problems


def _is_figure(section: str, value: Any) -> bool:
    """A metric's mean is a finite number or null; a count is a whole number of at least 0."""
    if section == "metrics":
        return value is None or is_number(value)
    return is_int(value) and value >= 0


def checked_latency(where: str, record: Any, fix: str) -> dict:
    """A latency record, refused unless its p95 is a finite number (or null) and its
    machine an object: a NaN p95 compared as a "+nan%" rise and passed the check."""
    problems = object_problems(where, record, "a latency record", fix, ("machine",))
    p95 = record.get("p95_ms") if not problems else None
    if p95 is not None and not is_number(p95):
        what = f"`p95_ms` must be a finite number of milliseconds or null, got {kind_of(p95)} {p95!r}"
        problems.append(Problem(where, what, fix))
    raise_if(problems)
    return record


_ONCE = "a comparison pairs each case once"


def baseline_problems(
    config: str, summary: Summary, table: pl.DataFrame | Path, baseline: Path, split: SplitOutline
) -> list[Problem]:
    """Why the committed baseline of ``config`` is not what ``ragvet baseline accept`` wrote.

    The gate pairs the cases both tables hold, so rows deleted from the baseline table
    (the cases a change broke) or duplicated there would silently change what it compares.
    The table must hold each case once, as many eval-split cases as its summary counts
    (``eval.denominators``), and, when the summary's eval split fingerprint is the
    current split's (``split``, data/split.json), exactly that split's eval cases.
    A table's file is read a batch of ids at a time (:func:`_eval_digest`); only a table
    not in id order, to name its doubled cases, or one whose cases differ, to name them, whole."""
    where, summary_path = str(per_case_path(cases_dir(baseline), config)), baseline / f"{config}.json"
    fix = baseline_fix(where, summary_path)
    once, digest = _eval_digest(table)
    problems, held = [], None
    if not once:  # not as evaluate writes it: name the doubled cases
        ids = _ids_splits(table)
        doubled = ids.group_by("case_id").len().filter(pl.col("len") > 1).sort("case_id").iter_rows()
        problems += [
            Problem(where, f"the baseline table holds case {case_id} {count} times: {_ONCE}", fix)
            for case_id, count in doubled
        ]
        held = ids["case_id"].filter(ids["split"] == EVAL).unique()
        digest = id_digest([held])
    denominators = (summary.get(EVAL) or {}).get("denominators") or {}
    if denominators:
        counted = int(denominators.get("cases", 0)) + int(denominators.get("abstention_cases", 0))
        if digest[0] != counted:
            what = f"the baseline table holds {digest[0]} eval-split cases, and its summary {summary_path} counts"
            problems.append(Problem(where, f"{what} {counted}", fix))
    fingerprint = (summary.get("fingerprints") or {}).get("eval_split")
    if fingerprint == split.record["fingerprints"].get("eval_split"):
        differs = _membership_problem(digest, table if held is None else held, split)
        if differs is not None:
            what = f"its summary's eval split fingerprint is the current split's, and {differs}"
            problems.append(Problem(where, what, fix))
    return problems


def _ids_splits(table: pl.DataFrame | Path) -> pl.DataFrame:
    """``case_id`` and ``split`` of a baseline table, whole."""
    return (table if isinstance(table, pl.DataFrame) else read_results(table, columns=())).select("case_id", "split")


def _held(table: pl.DataFrame | Path | pl.Series) -> pl.Series:
    """The eval-split case ids of a baseline table, whole (``table`` itself when they were read already)."""
    if isinstance(table, pl.Series):
        return table
    ids = _ids_splits(table)
    return ids["case_id"].filter(ids["split"] == EVAL)


def _eval_digest(table: pl.DataFrame | Path) -> tuple[bool, Digest]:
    """Whether the table's case ids ascend (each case once, as evaluate writes them), and
    :func:`ragvet.gating.paired.id_digest` of its eval-split ids; a file read a batch at a time."""
    batches = [table] if isinstance(table, pl.DataFrame) else parquet_slices(table, BATCH_ROWS, ["case_id", "split"])
    once, last, digest = True, None, NO_IDS
    for frame in batches:
        ids = frame["case_id"]
        once = once and in_id_order(ids if last is None else pl.concat([pl.Series([last], dtype=ids.dtype), ids]))
        last = ids[-1] if len(ids) else last
        digest = id_digest([ids.filter(frame["split"] == EVAL)], digest)
    return once, digest


def _membership_problem(digest: Digest, table: pl.DataFrame | Path | pl.Series, split: SplitOutline) -> str | None:
    """What the eval cases of ``table`` (their :func:`ragvet.gating.paired.id_digest`, ``digest``) lack of the
    split's eval cases, and hold that it has not; None when they are the same cases. The
    sets are compared by their size and the sum of their ids' 64-bit hashes first, so an
    intact table is checked in a pass over the split's entries; only a difference holds
    both sets, to name it."""
    if digest == id_digest(_batches(split.eval_ids())):
        return None
    wanted, have = set(split.eval_ids()), set(_held(table).to_list())
    missing, extra = sorted(wanted - have), sorted(have - wanted)
    if not (missing or extra):
        return None
    parts = [f"it lacks {len(missing)} of that split's eval cases ({listed_ids(missing)})"] if missing else []
    parts += [f"it holds {len(extra)} eval cases the split has not ({listed_ids(extra)})"] if extra else []
    return "; ".join(parts)


def _batches(ids: Iterable[str], size: int = 1 << 16) -> Iterator[pl.Series]:
    """``ids`` as string Series of up to ``size`` ids."""
    batch: list[str] = []
    for case_id in ids:
        batch.append(case_id)
        if len(batch) == size:
            yield pl.Series(batch, dtype=pl.String)
            batch = []
    yield pl.Series(batch, dtype=pl.String)


def integrity_problems(baselines: Mapping[str, tuple], baseline: Path, split: SplitOutline) -> list[Problem]:
    """:func:`baseline_problems` of every committed baseline there is."""
    return [
        problem
        for config, (summary, table) in sorted(baselines.items())
        if summary is not None and table is not None
        for problem in baseline_problems(config, summary, table, baseline, split)
    ]


def baselines_for(
    configs: list[str],
    baseline: Path,
    against: Revision | None,
    metrics: Sequence[str] | None = None,
    extra: Sequence[str] = (),
) -> dict[str, tuple]:
    """``{config: (summary, table)}`` from a git revision's results, their tables fetched
    into its folder (:func:`fetched`; :func:`tables_at`), or from the
    committed baseline folder (:func:`read_baseline_dir`); ``(None, None)`` where there
    is none. Either way the table is its Parquet file's path, once the columns a
    comparison of ``metrics`` reads (:func:`compared_columns`, and of a revision's also
    the ``extra`` ones) are checked there: a comparison reads it a batch of cases at a time."""
    if against is not None:
        found = tables_at(against.name, configs, Path.cwd(), against.folder, compared_columns(metrics, extra))
        return {config: found[config] or (None, None) for config in configs}
    return {config: read_baseline_dir(baseline, config, metrics) for config in configs}


def latency_path(folder: Path, config: str) -> Path:
    """A configuration's latency record in a folder of them: ``.ragvet/latency`` (what the
    retrieve stage measured) or ``metrics/baseline/latency`` (what the baseline accepted)."""
    return folder / f"{config}.json"


def baseline_latency_dir(baseline: Path) -> Path:
    """The accepted latency records inside a baseline folder."""
    return baseline / "latency"


def baseline_rankings_dir(baseline: Path) -> Path:
    """The accepted top-k rankings: inside the per-case tables' folder, so that they are
    kept where those are (git, or DVC with ``cases.dvc``) and move with them."""
    return cases_dir(baseline) / "rankings"


def baseline_ranking_path(baseline: Path, config: str) -> Path:
    """A configuration's accepted top-k ranking (:func:`baseline_rankings_dir`)."""
    return baseline_rankings_dir(baseline) / f"{config}{SUFFIX}"


RANKING_SCHEMA = {"case_id": pl.String, "rank": pl.Int32, "chunk_id": pl.String}  # a kept ranking's columns
NUMBERS_SCHEMA = {"case": pl.Int32, "chunk": pl.Int32}  # and, of a numbered run, its numbers


def ranking_of(run: Path, depth: int) -> Iterator[pl.DataFrame]:
    """The first ``depth`` ranks of every case of a retrieve stage's run, as
    ``case_id, rank, chunk_id`` sorted by case and rank, then the run's ``case`` and
    ``chunk`` numbers when it has them (:func:`ragvet.storage.rankings.numbering`), a batch
    of whole cases at a time (:func:`ragvet.storage.rankings.case_batches`: a run not in
    case order is refused): what a baseline keeps of a run to tell later how far a change
    moved each case's top k (:mod:`ragvet.measures.overlap`).

    A numbered run is read by its integers, and the ids only of the rows kept
    (:class:`ragvet.storage.rankings.RowIds`): in rank order, as the retrieve stage writes
    it, those are each case's first ``depth`` rows, kept without a sort; a batch in any
    other order has all its ids read and is sorted by them, as a run without numbers is."""
    if numbering(run) is None:
        for frame in case_batches(run, run.as_posix(), list(RANKING_SCHEMA)):
            yield _first_ranks(frame.cast(RANKING_SCHEMA), depth)
        return
    schema, ids, start = RANKING_SCHEMA | NUMBERS_SCHEMA, RowIds(run, run.as_posix()), 0
    for frame in case_batches(run, run.as_posix(), NUMBERED_COLUMNS, key="case"):
        numbers = [frame[name].to_numpy() for name in NUMBERED_COLUMNS]
        ranked = in_rank_order(*numbers)
        rows = first_rows(numbers[0], depth) if ranked else np.arange(frame.height)
        kept = pl.concat([ids.take(start + rows), frame[rows]], how="horizontal").select(list(schema)).cast(schema)
        start += frame.height
        yield kept if ranked else _first_ranks(kept, depth)


def _first_ranks(frame: pl.DataFrame, depth: int) -> pl.DataFrame:
    """The first ``depth`` rows of each case of ``frame`` once sorted by ``case_id, rank, chunk_id``."""
    ranked = frame.sort(list(RANKING_COLUMNS))
    return ranked.filter(pl.int_range(pl.len()).over("case_id") < depth)


def write_ranking(path: Path, run: Path, depth: int) -> None:
    """Keep :func:`ranking_of` ``run`` at ``path``, a row group at a time, the next one
    found in a thread while this one is written (:func:`ragvet.storage.pipelining.ahead`);
    with the run's numbering in its metadata when it has one: a later run numbered alike
    is then paired with it by numbers (:mod:`ragvet.gating.movement`). A ranking without
    them is paired by its ids: the same figures, read slower."""
    numbered = numbering(run)
    schema = RANKING_SCHEMA | (NUMBERS_SCHEMA if numbered is not None else {})
    metadata = None if numbered is None else {RUN_METADATA: numbered}
    whole = functools.partial(write_parquet, metadata=metadata) if metadata else write_parquet
    with row_group_writer(path, whole, pl.DataFrame(schema=schema), metadata) as write:
        for frame in progress_bar(ahead(ranking_of(run, depth)), desc=f"keep {run.stem}'s ranking", unit=" batches"):
            write(frame)


def latency_pairs(
    limit: float | None, configs: list[str], baseline: Path, latency_dir: Path, against: str | None
) -> dict[str, tuple[dict | None, dict | None]] | None:
    """``{config: (baseline record, current record)}`` for the gate's latency check:
    the current record from ``latency_dir``; the baseline's from the committed baseline
    folder, or as ``against`` committed it (one read for all). None where there is
    none, and nothing read when the check is off (``limit`` None): a baseline without
    latency records would send every gate ``--against`` to the DVC remote for them."""
    if limit is None:
        return None
    accepted = {config: latency_path(baseline_latency_dir(baseline), config).as_posix() for config in configs}
    found = files_at(against, list(accepted.values()), Path.cwd()) if against else {}
    pairs = {}
    for config, path in accepted.items():
        if against:
            text = found[path]
            base = None if text is None else _summary_at(against, path, text.decode("utf-8"))
        else:
            base = read_json(Path(path)) if Path(path).is_file() else None
        if base is not None:
            base = checked_latency(f"{against}:{path}" if against else path, base, baseline_fix(path))
        current = latency_path(latency_dir, config)
        measured = None
        if current.is_file():
            measured = checked_latency(
                str(current), read_json(current), f"measure it again: `dvc repro -f -s retrieve@{config}`"
            )
        pairs[config] = (base, measured)
    return pairs


def current_table(folder: Path, config: str, metrics: Sequence[str] | None = None) -> pl.DataFrame | None:
    """What a comparison of ``metrics`` reads of one configuration's per-case table in
    ``folder`` (``metrics/cases``; :func:`compared_columns`), or None if evaluate has
    not written it."""
    path = per_case_path(folder, config)
    return read_results(path, columns=compared_columns(metrics)) if path.exists() else None


def current_path(folder: Path, config: str, metrics: Sequence[str] | None = None) -> Path | None:
    """One configuration's per-case table in ``folder``, its columns checked as
    :func:`current_table` checks them, for a comparison to read a batch at a time; None
    if evaluate has not written it."""
    path = per_case_path(folder, config)
    if not path.exists():
        return None
    read_results(path, columns=compared_columns(metrics), rows=0)
    return path


def current_chunkings(summaries_dir: Path, configs: Iterable[str]) -> dict[str, str | None]:
    """The chunking fingerprint each configuration's current summary (``metrics/<config>.json``)
    records, None where there is no summary or it records none: what the gate compares with
    the baseline's to know whether chunk-level metrics can be compared."""
    found: dict[str, str | None] = {}
    for config in configs:
        path = Path(summaries_dir) / f"{config}.json"
        summary = checked_summary(str(path), read_json(path), "run `dvc repro`") if path.is_file() else {}
        found[config] = (summary.get("fingerprints") or {}).get("chunking")
    return found


def rebaselined(configs: list[str], baseline: Path, folder: Path, against: str | None) -> list[str]:
    """The configurations whose committed baseline holds exactly their current
    per-case results: this change ran ``ragvet baseline accept`` (or is back at
    the accepted state), so a comparison with another revision (``against``) may
    accept its moves. Without a revision nothing can be accepted, and nothing is read."""
    if against is None:
        return []
    return [
        config
        for config in configs
        if _same_table(per_case_path(folder, config), per_case_path(cases_dir(baseline), config))
    ]


def _same_table(current: Path, accepted: Path) -> bool:
    """Both tables exist and hold the same values: the same bytes (``baseline accept``
    copies them), else equal once read."""
    if not (current.is_file() and accepted.is_file()):
        return False
    return current.read_bytes() == accepted.read_bytes() or read_results(current).equals(read_results(accepted))


def accept_baseline(
    metrics_dir: Path,
    configs: list[str],
    project: Path = Path("."),
    latency: Path | None = None,
    runs: tuple[Path, int] | None = None,
) -> list[Path]:
    """Copy the current results of the gated configs into ``metrics/baseline/``.

    With ``latency`` (the folder of the retrieve stages' records, given while the
    gate's p95 check is on), each one's latency record too,
    without its per-case timings (:func:`ragvet.measures.latency.accepted_latency`),
    into ``metrics/baseline/latency/``; with it off, none is kept there. With ``runs``
    (the retrieve stages' folder and the depth, the largest k), each one's top-k ranking
    (:func:`baseline_ranking_path`), against which a later run's movement is measured.

    Every source is checked before anything is written, so a missing result never
    leaves a half-updated baseline. Baseline files of configurations that are no
    longer gated are removed, so a stale baseline cannot linger in the PR. Files
    are copied byte for byte: the summary is canonical JSON, the table canonical
    Parquet. Where the project keeps per-case tables in DVC (:func:`tables_in_dvc`),
    the baseline's tables go there too (``dvc add``), and git gets their small
    ``cases.dvc`` pointer.
    """
    metrics_dir = Path(metrics_dir)
    baseline_dir = metrics_dir / "baseline"
    pairs: list[tuple[Path, Path]] = []
    problems: list[Problem] = []
    for config in sorted(set(configs)):
        for src, dst in (
            (metrics_dir / f"{config}.json", baseline_dir / f"{config}.json"),
            (per_case_path(cases_dir(metrics_dir), config), per_case_path(cases_dir(baseline_dir), config)),
        ):
            if src.is_file():
                pairs.append((src, dst))
            else:
                problems.append(
                    Problem(str(src), f"results of gated configuration {config} not found", "run dvc repro first")
                )
    timed: list[tuple[Path, Path]] = []
    for config in sorted(set(configs)) if latency is not None else []:
        src = latency_path(latency, config)
        timed.append((src, latency_path(baseline_latency_dir(baseline_dir), config)))
        if not src.is_file():
            problems.append(Problem(str(src), f"latency of gated configuration {config} not found", "run dvc repro"))
    ranked: list[tuple[Path, Path]] = []
    for config in sorted(set(configs)) if runs is not None else []:
        src = run_path(runs[0], config)
        ranked.append((src, baseline_ranking_path(baseline_dir, config)))
        if not src.is_file():
            fix = f"run `dvc repro` (or `dvc checkout {src.as_posix()}` when the DVC cache has it)"
            problems.append(Problem(str(src), f"the run of gated configuration {config} is not in the work tree", fix))
    if problems:
        raise InputError(problems)
    records = [(accepted_latency(read_json(src)), dst) for src, dst in timed]
    keep = set(configs)
    written = [dst for _, dst in pairs] + [dst for _, dst in timed] + [dst for _, dst in ranked]
    with outputs_together(*written):  # never a new summary beside an old per-case table
        for src, dst in pairs:
            write_copy(dst, src)
        for record, dst in records:
            write_json(dst, record)
        for src, dst in ranked:
            write_ranking(dst, src, runs[1])
        kept_latency = keep if latency is not None else set()
        for stale in sorted(baseline_latency_dir(baseline_dir).glob("*.json")):
            if stale.stem not in kept_latency:
                remove_output(stale)
        tables = (cases_dir(baseline_dir), baseline_rankings_dir(baseline_dir))
        for folder, suffix in ((baseline_dir, ".json"), *((table, SUFFIX) for table in tables)):
            if folder.is_dir():
                for stale in sorted(folder.glob(f"*{suffix}")):
                    if stale.is_file() and stale.name[: -len(suffix)] not in keep:
                        remove_output(stale)
    if tables_in_dvc(project):
        written.append(track_with_dvc(project, cases_dir(baseline_dir)))
    return written


def _git(
    repo: Path, *args: str, binary: bool = False, into: BinaryIO | None = None, given: bytes | str | None = None
) -> subprocess.CompletedProcess:
    """``git *args`` in ``repo``, ``given`` on its input; its output as text, as bytes when
    ``binary`` (``given`` is then bytes too), or written straight into the file ``into``.
    A missing git is an error with the fix, for every git call here."""
    text = {} if binary or into else {"text": True, "encoding": "utf-8"}
    out = {"stdout": into, "stderr": subprocess.PIPE} if into else {"capture_output": True}
    try:
        return subprocess.run(["git", *args], cwd=repo, check=False, input=given, **out, **text)
    except FileNotFoundError:
        raise InputError(
            [Problem(str(repo), "git is not installed", "install git to compare with a revision")]
        ) from None


def _check_revision(rev: str, repo: Path) -> None:
    """Fail clearly when ``rev`` is not a commit here; a shallow clone is named as
    the likely cause, since CI checkouts fetch one commit by default."""
    if _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").returncode == 0:
        return
    if _git(repo, "rev-parse", "--git-dir").returncode != 0:
        raise InputError([Problem(str(repo), "not inside a git repository", f"run from a git clone that has {rev!r}")])
    shallow = _git(repo, "rev-parse", "--is-shallow-repository").stdout.strip() == "true"
    if shallow:
        fix = (
            "this clone is shallow, so it lacks that history: fetch it with `git fetch --unshallow origin` "
            "(in GitHub Actions, actions/checkout with `fetch-depth: 0`)"
        )
    else:
        fix = "pass a commit, branch or tag that exists (git log --oneline; git fetch origin for origin/...)"
    raise InputError([Problem(str(repo), f"git revision {rev!r} does not exist", fix)])


def _summary_at(rev: str, path: str, text: str) -> Summary:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(
            [
                Problem(
                    f"{rev}:{path}:{err.lineno}",
                    f"malformed JSON: {err.msg}",
                    "compare with a revision with intact results",
                )
            ]
        ) from None


def file_at(rev: str, path: str, repo: Path) -> bytes | None:
    """The bytes of ``path`` (relative to the DVC project ``repo``) as ``rev`` has it:
    from git when committed there, else through DVC (this cache, else the default
    remote); None when that revision has no such file.

    This is how every reader of another revision's tables gets them, wherever
    they live (docs/storage.md). A file DVC tracks at ``rev`` whose object
    neither the cache nor the remote holds is an error naming the object, the
    remote, and the fix.
    """
    return files_at(rev, [path], repo)[path]


def files_at(rev: str, paths: Sequence[str], repo: Path) -> dict[str, bytes | None]:
    """:func:`file_at` for several paths of one revision, through one DVC filesystem
    (opening one costs a second or two)."""
    found: dict[str, bytes | None] = dict(_git_blobs(rev, paths, repo))
    return {**_from_dvc(rev, [path for path in paths if path not in found], repo, _dvc_bytes), **found}


def _dvc_bytes(fs: Any, path: str) -> bytes:
    """A DVC-tracked file's bytes, held: for the small files (summaries, params, latency records)."""
    with fs.open(path, mode="rb") as handle:
        return handle.read()


def fetch_file(rev: str, path: str, repo: Path, folder: Path) -> Path | None:
    """``path`` (relative to the DVC project ``repo``) as ``rev`` has it, copied to the
    same path under ``folder`` (:func:`fetched`'s) without being held: git's blob
    streamed into it (``git cat-file blob``), else DVC's object (``get_file``: this cache,
    else the default remote); None when that revision has no such file. The errors of
    :func:`file_at`. A per-case table or a run of millions of cases is read from there a
    batch at a time. A path outside the project (absolute, or through ``..``) is no
    file of the revision's."""
    return fetch_files(rev, [path], repo, folder)[path]


def fetch_files(rev: str, paths: Sequence[str], repo: Path, folder: Path) -> dict[str, Path | None]:
    """:func:`fetch_file` for several paths of one revision, through one DVC filesystem."""
    found: dict[str, Path | None] = {}
    for path in paths:
        if Path(path).is_absolute() or ".." in Path(path).parts:
            found[path] = None
            continue
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb") as handle:
            done = _git(repo, "cat-file", "blob", f"{rev}:./{path}", into=handle)
        if done.returncode == 0:
            found[path] = target
        else:
            target.unlink()

    def copied(fs: Any, path: str) -> Path:
        fs.get_file(path, str(folder / path))
        return folder / path

    return {**_from_dvc(rev, [path for path in paths if path not in found], repo, copied), **found}


T = TypeVar("T")


def _from_dvc(rev: str, paths: Sequence[str], repo: Path, take: Callable[[Any, str], T]) -> dict[str, T | None]:
    """``take(fs, path)`` of each of ``paths`` DVC tracks at ``rev``, through one DVC
    filesystem on the work tree's default remote; None where ``rev`` has no such file
    (and for every path outside a DVC project). An object neither the cache nor the
    remote holds is an error (:func:`_missing_object`)."""
    if not paths:
        return {}
    from dvc.exceptions import NotDvcRepoError  # deferred: DVC's import costs a second
    from dvc.fs import DVCFileSystem  # deferred, as above

    found: dict[str, T | None] = {}
    md5, remote, path = "?", None, paths[0]
    try:
        remote, settings = _work_tree_remote(repo)
        # The work tree's remote, not REV's: REV may predate it, and credentials live in config.local.
        chosen = {"remote": remote, "remote_config": settings} if remote else {}
        fs = DVCFileSystem(repo=str(repo), rev=rev, **chosen)
        for path in paths:
            if not fs.exists(path):
                found[path] = None
                continue
            md5 = (fs.info(path).get("dvc_info") or {}).get("md5", "?")
            found[path] = take(fs, path)
    except NotDvcRepoError:
        return dict.fromkeys(paths)
    except FileNotFoundError:
        raise InputError([_missing_object(rev, path, md5, remote)]) from None
    return found


@dataclass(frozen=True)
class Revision:
    """A git revision compared with, and the folder its files are fetched into (:func:`fetched`)."""

    name: str
    folder: Path


@contextmanager
def revision_folder(rev: str) -> Iterator[Revision]:
    """``rev`` with a temporary folder for the files a comparison reads of it (:func:`fetch_file`),
    removed when the comparison ends, also on error, so nothing is left half-written; a
    problem found in one of its files names it ``REV:path``."""
    with tempfile.TemporaryDirectory(prefix="ragvet-revision-") as folder:
        try:
            yield Revision(rev, Path(folder))
        except InputError as err:
            raise InputError(_renamed(err.problems, f"{folder}{os.sep}", f"{rev}:")) from None


@contextmanager
def fetched(rev: str | None) -> Iterator[Revision | None]:
    """:func:`revision_folder` for a comparison that may have no revision (None then)."""
    if rev is None:
        yield None
        return
    with revision_folder(rev) as revision:
        yield revision


def _renamed(problems: Iterable[Problem], prefix: str, name: str) -> list[Problem]:
    """``problems`` with ``prefix`` (a fetched file's folder) in their text read as ``name``."""
    return [Problem(*(text.replace(prefix, name) for text in (p.where, p.what, p.fix))) for p in problems]


def folder_at(rev: str, folder: str, repo: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative to ``repo``) as ``rev`` has it, by its path
    relative to ``folder``: committed to git there, else tracked by DVC (read as
    :func:`file_at` reads one). Empty when ``rev`` has no such folder."""
    listed = _git(repo, "ls-tree", "-r", "-z", "--name-only", rev, "--", folder, binary=True)
    if listed.returncode != 0:
        what = listed.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["unknown revision"]
        raise InputError([Problem(f"--from {rev}", f"git cannot read that revision: {what[0]}", _REV_FIX)])
    paths = [path for path in listed.stdout.decode("utf-8").split("\0") if path]
    if not paths:
        paths = _dvc_paths(rev, folder, repo)
    found = files_at(rev, paths, repo) if paths else {}
    prefix = folder.rstrip("/") + "/"
    return {path.removeprefix(prefix): data for path, data in sorted(found.items()) if data is not None}


_REV_FIX = "name a commit, branch or tag of this repository, e.g. --from HEAD~1 or --from main"


def _dvc_paths(rev: str, folder: str, repo: Path) -> list[str]:
    """The files DVC tracks under ``folder`` at ``rev`` (a folder added with ``dvc add``)."""
    from dvc.exceptions import NotDvcRepoError  # deferred: DVC's import costs a second
    from dvc.fs import DVCFileSystem  # deferred, as above

    try:
        fs = DVCFileSystem(repo=str(repo), rev=rev)
        if not fs.isdir(folder):
            return []
        return sorted(str(path).removeprefix("/") for path in fs.find(folder))
    except NotDvcRepoError:
        return []


def _git_blobs(rev: str, paths: Sequence[str], repo: Path) -> dict[str, bytes]:
    """The paths (relative to ``repo``) that git holds at ``rev``, with their bytes, read by
    one ``git cat-file --batch``: a process per file would cost a corpus of thousands
    seconds. A name the batch protocol cannot carry (a newline in it) is read on its own."""
    found: dict[str, bytes] = {}
    for path in (path for path in paths if "\n" in path):
        done = _git(repo, "show", f"{rev}:./{path}", binary=True)
        if done.returncode == 0:
            found[path] = done.stdout
    batch = [path for path in paths if "\n" not in path]
    prefix = _git(repo, "rev-parse", "--show-prefix")
    if not batch or prefix.returncode != 0:
        return found
    names = "".join(f"{rev}:{prefix.stdout.strip()}{path}\n" for path in batch)
    done = _git(repo, "cat-file", "--batch", binary=True, given=names.encode())
    out, at = done.stdout, 0
    for path in batch if done.returncode == 0 else ():
        header_end = out.index(b"\n", at)
        header, at = out[at:header_end].split(), header_end + 1
        if len(header) != 3:  # "<name> missing" (or ambiguous): no content follows
            continue
        size = int(header[2])
        if header[1] == b"blob":
            found[path] = out[at : at + size]
        at += size + 1  # the content, then its newline
    return found


def _work_tree_remote(repo: Path) -> tuple[str | None, dict]:
    """The default DVC remote configured here (all config levels), and its settings."""
    from dvc.repo import Repo  # deferred: DVC's import costs a second

    with Repo(str(repo)) as dvc_repo:
        remote = dvc_repo.config["core"].get("remote")
        return remote, dict(dvc_repo.config["remote"].get(remote, {})) if remote else {}


def _missing_object(rev: str, path: str, md5: str, remote: str | None) -> Problem:
    """Why DVC could not bring ``path`` at ``rev``: no remote, or a remote without the object."""
    where = f"{rev}:{path}"
    if not remote:
        return Problem(
            where,
            f"DVC tracks it (object {md5}), this DVC cache lacks it, and no default DVC remote is configured",
            f"add the remote it was pushed to (`dvc remote add -d NAME URL`); where {rev} was produced, run `dvc push`",
        )
    return Problem(
        where,
        f"DVC object {md5} is neither in this DVC cache nor on the remote {remote!r}",
        f"run `dvc push` where {rev} was produced (its cache holds the object), then retry",
    )


def tables_at(
    rev: str, configs: Iterable[str], repo: Path, folder: Path, columns: Sequence[str] | None = None
) -> dict[str, tuple[Summary, Path] | None]:
    """Summary and per-case table of each configuration as committed at ``rev``, the
    table fetched into ``folder`` (:func:`fetched`; :func:`fetch_file`: git or DVC, never
    held whole) and its ``columns`` checked there as the committed baseline folder's
    are (:func:`read_baseline_dir`; every column by default), for a comparison to read
    a batch at a time; None for a configuration that revision has no results for (a new one).

    These are the *results* of that revision (``metrics/<config>.json`` and its
    per-case table), not its baseline folder: ``--against REV`` asks "did this
    change regress relative to REV?". An unknown revision, a clone too shallow to
    have it, and a revision with no ragvet results at all are errors; paths are
    relative to ``repo`` (``./``), so the DVC project may be a subfolder of the git
    repository.
    """
    repo = Path(repo)
    _check_revision(rev, repo)
    table_dir = cases_dir(Path("metrics"))
    if all(_git(repo, "cat-file", "-e", f"{rev}:./{path}").returncode != 0 for path in (table_dir, "dvc.lock")):
        raise InputError(
            [
                Problem(
                    f"{rev}:{table_dir.as_posix()}",
                    "that revision has no ragvet results (no per-case tables, no dvc.lock committed)",
                    "compare with a revision where `dvc repro` ran and its results were committed",
                )
            ]
        )
    results: dict[str, tuple[Summary, Path] | None] = {}
    for config in sorted(set(configs)):
        summary_path, cases_path = f"metrics/{config}.json", per_case_path(table_dir, config).as_posix()
        summary = _git(repo, "show", f"{rev}:./{summary_path}")
        table = fetch_file(rev, cases_path, repo, folder) if summary.returncode == 0 else None
        if table is None:
            results[config] = None
            continue
        read_results(table, where=f"{rev}:{cases_path}", columns=columns, rows=0)
        where, fix = f"{rev}:{summary_path}", "compare with a revision with intact results"
        results[config] = (checked_summary(where, _summary_at(rev, summary_path, summary.stdout), fix), table)
    return results


def read_results_at(
    rev: str, configs: Iterable[str], repo: Path, columns: Sequence[str] | None = None
) -> dict[str, tuple[Summary, pl.DataFrame] | None]:
    """:func:`tables_at`, each table read whole (its ``columns``; all of them by default):
    for the readers that hold it anyway (a reproduction check, the experiments' table)."""
    with revision_folder(rev) as revision:
        found = tables_at(rev, configs, repo, revision.folder, columns)
        return {
            config: None if pair is None else (pair[0], read_results(pair[1], columns=columns))
            for config, pair in found.items()
        }


def _experiments(repo: Path) -> tuple[str, list[tuple[str, str]]]:
    """The baseline commit of `dvc exp show` and its experiments, ``(name, sha)``
    sorted by name: what the user sees in that table."""
    try:
        done = subprocess.run(
            ["dvc", "exp", "show", "--json"], cwd=repo, capture_output=True, text=True, encoding="utf-8", check=False
        )
    except FileNotFoundError:
        raise InputError([Problem(str(repo), "dvc is not installed", "install ragvet's requirements")]) from None
    if done.returncode != 0:
        raise InputError(
            [Problem(str(repo), f"`dvc exp show --json` failed: {done.stderr.strip()}", "run it from a DVC project")]
        )
    entries = [entry for entry in json.loads(done.stdout or "[]") if entry.get("rev") != "workspace"]
    if not entries:
        raise InputError([Problem(str(repo), "no commit to compare experiments with", "commit the project first")])
    baseline = entries[0]
    found = [
        (run.get("name") or run["rev"][:7], run["rev"])
        for group in baseline.get("experiments") or []
        for run in group.get("revs") or []
    ]
    return baseline["rev"], sorted(found)


def experiment_results(config: str, repo: Path) -> tuple[str, dict[str, pl.DataFrame | None], dict[str, dict | None]]:
    """``(baseline name, rows, fingerprints)`` of ``config`` at the experiments'
    baseline commit and in each experiment of `dvc exp show`, keyed by name.

    Experiments are commits (``refs/exps/...``), so their committed per-case tables
    are read like any revision's. No experiment is an error: there is nothing to
    compare.
    """
    base_rev, runs = _experiments(repo)
    if not runs:
        raise InputError(
            [
                Problem(
                    str(repo),
                    "`dvc exp show` lists no experiments",
                    "run some first, e.g. `dvc exp run --temp -S ...` (docs/pipeline.md)",
                )
            ]
        )
    baseline = f"{config}@{base_rev[:7]}"
    rows: dict[str, pl.DataFrame | None] = {}
    fingerprints: dict[str, dict | None] = {}
    for name, rev in [(baseline, base_rev), *runs]:
        found = read_results_at(rev, [config], repo)[config]
        rows[name] = found[1] if found else None
        fingerprints[name] = found[0].get("fingerprints") if found else None
    return baseline, rows, fingerprints


def missing_latency(
    pairs: dict[str, tuple[dict | None, dict | None]], latency_dir: Path, baseline: Path, against: str | None
) -> list[Problem]:
    """A problem for each latency record the p95 check lacks: with the check on, a
    missing record must stop the gate (exit 2), since passing would claim a latency
    comparison that never happened. A record is missing here when DVC restored the run
    (run cache, ``dvc pull``) instead of measuring it, or it was retrieved on another clone."""
    problems = []
    for config, (base, current) in sorted(pairs.items()):
        if current is None:
            problems.append(
                Problem(
                    str(latency_path(latency_dir, config)),
                    f"gate.latency.max_p95_rise is on but no latency was measured here for {config} "
                    "(DVC restored its run rather than running it, or it never ran in this clone)",
                    f"measure it: `dvc repro -f -s retrieve@{config}`, then run the gate again",
                )
            )
        if base is None:
            where = latency_path(baseline_latency_dir(baseline), config).as_posix()
            problems.append(
                Problem(
                    f"{against}:{where}" if against else where,
                    f"gate.latency.max_p95_rise is on but the baseline has no latency record for {config}",
                    "record it on this machine with `ragvet baseline accept` (and commit it), or set "
                    "gate.latency.max_p95_rise: null",
                )
            )
    return problems
