"""Evaluation at millions of cases in bounded memory: ragvet's evaluate stage against DuckDB,
Polars streaming and pytrec_eval doing recall@k and MRR on the same run.

    flock /tmp/bench.lock python benchmarks/streaming.py --workdir /tmp/ragvet-streaming \\
        --sizes 100000 1000000 10000000 [--depth 100] [--pytrec-max 100000]

Generates once per size (numpy, cached in ``--workdir``; never in the repository) what the
evaluate stage reads, as the pipeline's own stages write it: a chunking of 65,536 chunks
(2,048 docs of 32 windows of 500 characters every 400), the validate stage's Parquet case
table (a tenth abstention cases; one or two evidence spans per case, each inside one chunk;
a tag of five values), the split record (the split stage's format: 70% eval) and the
retrieve stage's Parquet run (``case_id, rank, chunk_id, score`` and the ids' numbers, with
their digests), ``depth`` chunks per case, in row groups of a million rows, each relevant
chunk retrieved with probability 0.6 at a uniform rank and 2% of the cases with no row.
The relevant (case, chunk) pairs go to ``qrels.parquet`` for the SQL and dataframe peers,
and, up to ``--pytrec-max`` cases, the run and qrels as TREC text files for pytrec_eval.

Each measurement is one fresh process, timed from outside with its peak RSS (``wait4``):

* **ragvet**: ``ragvet evaluate`` as dvc.yaml runs it (summary, per-case table, slices,
  abstention sweep): every metric of the design at ks 1, 3, 5, 10, and MRR;
* **duckdb**: one SQL query over the run and qrels Parquet files: recall@k at the same ks
  and MRR per case, then their means (2 threads);
* **polars**: the same as a lazy query collected by the streaming engine;
* **pytrec_eval**: ``parse_qrel`` + ``parse_run`` + ``evaluate`` for ``recall`` at the ks and
  ``recip_rank``, at the sizes up to ``--pytrec-max``.

The tools alternate (ragvet first in odd rounds, last in even) so that the machine's load
falls on all of them. Each peer's means are checked against ragvet's summary (recall@k and
MRR over the answerable cases): they agree within 5e-7 (ragvet rounds each case's value
to 6 places) or the benchmark stops.

At the ``--gate-sizes``, the verdict, the report (markdown and the moves CSV, as dvc.yaml
runs it) and the report's html page against a moved baseline (:func:`moved_baseline`); at
the ``--against-sizes`` (after those), ``ragvet gate --against HEAD~1`` in a git repository
whose previous commit holds the moved baseline's results and whose last the evaluate stage's
(:func:`against_repo`), the tables committed to git or tracked by DVC, each timed beside the
gate against the committed baseline folder in the same run: their ``gate.json`` must be the
same bytes, or the benchmark stops. At the ``--verify-sizes``, ``ragvet verify --against
HEAD`` in a repository whose HEAD holds the evaluate stage's results and run and whose work
tree those recomputed with float noise, two near ties, two real swaps and a dropped case
(:func:`verify_repo`, under ``--verify-root``), with this interpreter and each of
``--verify-python`` (another checkout's): the same output, or the benchmark stops.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import stages  # the sibling benchmark: its launcher reads a fresh process's own peak RSS

CHUNKS_PER_DOC, N_DOCS, STEP, WIDTH = 32, 2048, 400, 500
N_CHUNKS = CHUNKS_PER_DOC * N_DOCS  # 2**16: an odd stride walks distinct chunks
KS = [1, 3, 5, 10]  # as benchmarks/evaluation.py; MRR runs down the whole depth
CASES_PER_GROUP = 10_000  # run row groups: 10,000 cases x depth rows
CASE_GROUP = 1 << 16  # case table row groups
SEED = 7
AGAINST = ("gate --against (git)", "gate --against (dvc)", "gate (baseline folder)")  # --against-sizes' measures


def chunk_ids() -> list[str]:
    return sorted(f"d{d:05d}#{o}" for d in range(N_DOCS) for o in range(CHUNKS_PER_DOC))


def case_id(n: int) -> str:
    return f"q{n:09d}"


def digest(ids) -> str:
    """:func:`ragvet.storage.tables.ids_digest`, fed one id at a time (:class:`~ragvet.storage.tables.IdsDigest`)."""
    from ragvet.storage.tables import IdsDigest

    summed = IdsDigest()
    for one in ids:
        summed.add(one)
    return summed.hexdigest()


def write_static(workdir: Path) -> None:
    """Corpus, chunks and params: the same at every size (corpus and chunks written once)."""
    write_params(workdir)
    if (workdir / "chunks.jsonl").exists():
        return
    rng = np.random.default_rng(SEED)
    letters = np.frombuffer(b"abcdefgh ", np.uint8)
    length = (CHUNKS_PER_DOC - 1) * STEP + WIDTH
    with open(workdir / "corpus.jsonl", "w") as corpus, open(workdir / "chunks.jsonl", "w") as chunks:
        for d in range(N_DOCS):
            text = letters[rng.integers(0, len(letters), length)].tobytes().decode()
            corpus.write(json.dumps({"doc_id": f"d{d:05d}", "metadata": {}, "text": text, "title": None}) + "\n")
            for o in range(CHUNKS_PER_DOC):
                start, end = o * STEP, o * STEP + WIDTH
                row = {"chunk_id": f"d{d:05d}#{o}", "doc_id": f"d{d:05d}", "ordinal": o, "start": start, "end": end}
                chunks.write(json.dumps({**row, "metadata": {}, "text": text[start:end]}) + "\n")


def write_params(workdir: Path) -> None:
    params = {
        "configs": {"bench": {"chunking": "fixed", "retriever": "bm25"}},
        "chunking": {"fixed": {"strategy": "fixed", "unit": "chars", "window": WIDTH, "overlap": WIDTH - STEP}},
        "retrievers": {"bm25": {"kind": "bm25"}},
        "ks": KS,
        "evidence": {"span_coverage": 1.0},
        "slices": ["tenant"],
        "gate": {
            "configs": ["bench"],
            "metrics": ["recall@10", "evidence_recall@10", "mrr"],
            "max_drop": 0.02,
            "min_slice_cases": 8,
            "slice_max_drop": 0.1,
            "slice_metric": "evidence_recall@10",
            "require_significance": False,
            "bootstrap": {"resamples": 1000, "seed": 1, "confidence": 0.95},
        },
    }
    (workdir / "params.yaml").write_text(json.dumps(params))
    (workdir / "answers").mkdir(exist_ok=True)


def generate(folder: Path, n_cases: int, depth: int, pytrec: bool) -> None:
    """The case table, split record, run and qrels of ``n_cases`` (see the module's docstring)."""
    import polars as pl
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED + n_cases)
    names = chunk_ids()
    number = {name: n for n, name in enumerate(names)}
    chunk_of = np.asarray([number[f"d{d:05d}#{o}"] for d in range(N_DOCS) for o in range(CHUNKS_PER_DOC)])
    chunk_dictionary = pa.array(names, pa.string())
    metadata = {"ragvet.run": json.dumps({"cases": digest(map(case_id, range(n_cases))), "chunks": digest(names)})}
    schema = pa.schema(
        [
            ("case_id", pa.dictionary(pa.int32(), pa.string())),
            ("rank", pa.int32()),
            ("chunk_id", pa.dictionary(pa.int32(), pa.string())),
            ("score", pa.float64()),
            ("case", pa.int32()),
            ("chunk", pa.int32()),
        ],
        metadata=metadata,
    )
    run = pq.ParquetWriter(folder / "run.parquet", schema, compression="zstd")
    qrels = pq.ParquetWriter(folder / "qrels.parquet", pa.schema([("case", pa.int32()), ("chunk", pa.int32())]))
    case_table: pq.ParquetWriter | None = None
    trec_run = open(folder / "run.trec", "w") if pytrec else None
    trec_qrels = open(folder / "qrels.trec", "w") if pytrec else None
    split = open(folder / "split.json", "w")
    split.write('{\n  "cases": {')
    for first in range(0, n_cases, CASES_PER_GROUP):
        n = min(CASES_PER_GROUP, n_cases - first)
        cases = np.arange(first, first + n)
        ids = [case_id(c) for c in cases.tolist()]
        answerable = rng.random(n) >= 0.1
        two = answerable & (rng.random(n) < 0.5)
        doc = rng.integers(0, N_DOCS, (n, 2))
        ordinal = rng.integers(0, CHUNKS_PER_DOC, (n, 2))
        ordinal[:, 1] = np.where(ordinal[:, 1] == ordinal[:, 0], (ordinal[:, 0] + 1) % CHUNKS_PER_DOC, ordinal[:, 1])
        doc[:, 1] = np.where(two, doc[:, 0], doc[:, 1])  # a second span in the same doc, another chunk
        start = ordinal * STEP + WIDTH - STEP + rng.integers(0, STEP - (WIDTH - STEP) - 50, (n, 2))
        end = start + rng.integers(1, 50, (n, 2))  # inside the chunk's own stretch: one relevant chunk
        relevant = chunk_of[doc * CHUNKS_PER_DOC + ordinal]
        units = [
            [
                {
                    "claim": -1,
                    "targets": [{"doc": f"d{doc[i, u]:05d}", "start": int(start[i, u]), "end": int(end[i, u])}],
                }
                for u in range(1 + int(two[i]))
            ]
            if answerable[i]
            else []
            for i in range(n)
        ]
        tenant = rng.integers(0, 5, n)
        frame = pl.DataFrame(
            {
                "id": ids,
                "answerable": answerable,
                "tags": [f'{{"tenant": "t{t}"}}' for t in tenant.tolist()],
                "claims": np.zeros(n, np.int32),
                "units": units,
            },
            schema={
                "id": pl.String,
                "answerable": pl.Boolean,
                "tags": pl.String,
                "claims": pl.Int32,
                "units": pl.List(
                    pl.Struct(
                        {
                            "claim": pl.Int32,
                            "targets": pl.List(pl.Struct({"doc": pl.String, "start": pl.Int64, "end": pl.Int64})),
                        }
                    )
                ),
            },
        ).to_arrow()
        if case_table is None:
            case_table = pq.ParquetWriter(folder / "cases.parquet", frame.schema)
        case_table.write_table(frame, row_group_size=CASE_GROUP)
        # The run: a distinct walk over the chunks, then each relevant chunk swapped in at a uniform rank.
        base, stride = rng.integers(0, N_CHUNKS, n), 2 * rng.integers(0, N_CHUNKS // 2, n) + 1
        matrix = (base[:, None] + np.arange(depth)[None, :] * stride[:, None]) % N_CHUNKS
        for u in range(2):
            placed = answerable & (rng.random(n) < 0.6) & ((u == 0) | two)
            rank = rng.integers(0, depth, n)
            rows = np.flatnonzero(placed)
            target = relevant[rows, u]
            there = matrix[rows] == target[:, None]
            has = there.any(axis=1)
            old = matrix[rows, rank[rows]]
            matrix[rows[has], there[has].argmax(axis=1)] = old[has]  # swap: the row stays distinct
            matrix[rows, rank[rows]] = target
        kept = rng.random(n) >= 0.02
        case_rows = np.repeat(np.flatnonzero(kept), depth)
        chunk = matrix[kept].reshape(-1).astype(np.int32)
        ranks = np.tile(np.arange(1, depth + 1, dtype=np.int32), int(kept.sum()))
        table = pa.table(
            {
                "case_id": pa.DictionaryArray.from_arrays(pa.array(case_rows, pa.int32()), pa.array(ids, pa.string())),
                "rank": ranks,
                "chunk_id": pa.DictionaryArray.from_arrays(pa.array(chunk, pa.int32()), chunk_dictionary),
                "score": (depth + 1 - ranks).astype(np.float64),
                "case": (case_rows + first).astype(np.int32),
                "chunk": chunk,
            },
            schema=schema,
        )
        run.write_table(table, row_group_size=len(table) or 1)
        own = [np.flatnonzero(answerable), np.flatnonzero(two)]
        pairs = np.concatenate([np.stack([r + first, relevant[r, u]], 1) for u, r in enumerate(own)])
        pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
        qrels.write_table(pa.table({"case": pairs[:, 0].astype(np.int32), "chunk": pairs[:, 1].astype(np.int32)}))
        splits = np.where(rng.random(n) < 0.7, "eval", "dev")
        split.write(
            ",".join(
                f'\n    "{i}": {{\n      "fingerprint": "{c:016x}",\n      "split": "{s}"\n    }}'
                for i, c, s in zip(ids, cases.tolist(), splits.tolist())
            )
            + ("," if first + n < n_cases else "")
        )
        if pytrec:
            for row, c, r in zip(case_rows.tolist(), chunk.tolist(), ranks.tolist()):
                trec_run.write(f"{ids[row]} Q0 {names[c]} {r} {depth + 1 - r} bench\n")
            for c, k in pairs.tolist():
                trec_qrels.write(f"{case_id(c)} 0 {names[k]} 1\n")
    fingerprints = {"corpus": "c" * 64, "dev_split": "d" * 64, "eval_split": "e" * 64}
    split.write('\n  },\n  "fingerprints": ' + json.dumps(fingerprints, indent=2).replace("\n", "\n  ") + "\n}\n")
    for handle in (run, qrels, case_table, split, trec_run, trec_qrels):
        if handle is not None:
            handle.close()
    (folder / "done").write_text("")


DUCKDB = """
import duckdb, json, sys
folder, ks = sys.argv[1], json.loads(sys.argv[2])
db = duckdb.connect()
db.execute("SET threads = 2")
db.execute("SET enable_progress_bar = false")
hits = ", ".join(f"count(r.rank) FILTER (WHERE r.rank <= {k}) / n.relevant AS r{k}" for k in ks)
means = ", ".join(f"avg(r{k})" for k in ks)
row = db.execute(f'''
WITH q AS (SELECT * FROM read_parquet('{folder}/qrels.parquet')),
n AS (SELECT "case", count(*) AS relevant FROM q GROUP BY "case"),
r AS (SELECT run."case", run.rank FROM read_parquet('{folder}/run.parquet') run
      JOIN q ON run."case" = q."case" AND run.chunk = q.chunk),
per AS (SELECT n."case", {hits}, coalesce(1.0 / min(r.rank), 0) AS mrr
        FROM n LEFT JOIN r ON n."case" = r."case" GROUP BY n."case", n.relevant)
SELECT {means}, avg(mrr), count(*) FROM per''').fetchone()
print(json.dumps({**{f"recall@{k}": v for k, v in zip(ks, row)}, "mrr": row[len(ks)], "cases": row[-1]}))
"""

POLARS = """
import polars as pl, json, sys
folder, ks = sys.argv[1], json.loads(sys.argv[2])
q = pl.scan_parquet(f"{folder}/qrels.parquet")
n = q.group_by("case").agg(pl.len().alias("relevant"))
r = pl.scan_parquet(f"{folder}/run.parquet").select("case", "chunk", "rank").join(q, on=["case", "chunk"])
hits = [(pl.col("rank") <= k).sum().alias(f"h{k}") for k in ks]
per = n.join(
    r.group_by("case").agg(*hits, pl.col("rank").min().alias("first")), on="case", how="left"
).select(
    *[(pl.col(f"h{k}").fill_null(0) / pl.col("relevant")).alias(f"recall@{k}") for k in ks],
    (1.0 / pl.col("first")).fill_null(0.0).alias("mrr"),
)
row = per.select(*[pl.col(c).mean() for c in [*(f"recall@{k}" for k in ks), "mrr"]], pl.len().alias("cases"))
print(json.dumps(row.collect(engine="streaming").to_dicts()[0]))
"""

PYTREC = """
import pytrec_eval, json, sys
folder, ks = sys.argv[1], json.loads(sys.argv[2])
with open(f"{folder}/qrels.trec") as handle:
    qrels = pytrec_eval.parse_qrel(handle)
with open(f"{folder}/run.trec") as handle:
    run = pytrec_eval.parse_run(handle)
measures = {"recall." + ",".join(map(str, ks)), "recip_rank"}
per = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
cases = [c for c in qrels]  # a case missing from the run scores 0, as in the other tools
means = {f"recall@{k}": sum(per.get(c, {}).get(f"recall_{k}", 0.0) for c in cases) / len(cases) for k in ks}
means["mrr"] = sum(per.get(c, {}).get("recip_rank", 0.0) for c in cases) / len(cases)
print(json.dumps({**means, "cases": len(cases)}))
"""


def timed(command: list[str], cwd: Path, codes: tuple[int, ...] = (0,)) -> dict:
    """Wall seconds, peak RSS (the child's own, through stages.py's launcher) and stdout of one
    fresh process, which must exit with one of ``codes``."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        subprocess.run([sys.executable, "-c", stages.LAUNCHER, *command], cwd=cwd, stdout=out, stderr=err, check=False)
        out.seek(0), err.seek(0)
        text, problems = out.read().decode(), err.read().decode()
    *lines, last = problems.splitlines() or [""]
    seconds, code, rss_kb = json.loads(last)
    if code not in codes:
        raise SystemExit(f"{' '.join(command)} failed:\n{text}\n" + "\n".join(lines)[-3000:])
    return {"seconds": seconds, "rss_mb": rss_kb / 1024, "out": text}


def ragvet_command(folder: Path, batch: int | None) -> list[str]:
    """The evaluate stage as dvc.yaml runs it, on the generated files."""
    return [
        sys.executable, "-m", "ragvet.cli", "evaluate", "bench", "--run", f"{folder}/run.parquet",
        "--chunks", "chunks.jsonl", "--corpus", "corpus.jsonl", "--cases", f"{folder}/cases.parquet",
        "--split", f"{folder}/split.json", "--metrics", f"{folder}/out/bench.json",
        "--per-case", f"{folder}/out/cases/bench.parquet", "--slices", f"{folder}/out/slices/bench.json",
        "--answers", "answers", "--thresholds", "abstention.yaml", "--sweep", f"{folder}/out/abstention/bench.json",
        *(["--batch-cases", str(batch)] if batch else []),
    ]  # fmt: skip


def moved_baseline(folder: Path) -> None:
    """The baseline the verdict and report compare with (untimed): ``ragvet baseline accept``
    of the evaluate stage's results, then every 10th case's float metrics halved, so that a
    tenth of the cases moved and every paired bootstrap runs. Also the validated cases as
    JSONL, which the report reads for the questions, written from the case table."""
    import polars as pl

    from ragvet.gating.baselines import accept_baseline
    from ragvet.storage.results import write_result_batches

    out = folder / "out"
    accept_baseline(out, ["bench"], project=Path(__file__).resolve().parents[1])  # its dvc.yaml: tables in git
    table = out / "baseline" / "cases" / "bench.parquet"
    moved = table.with_suffix(".moved")

    def halved():
        for frame in pl.scan_parquet(table).with_row_index("row").collect_batches(chunk_size=CASE_GROUP):
            floats = [n for n, t in frame.schema.items() if n.startswith("metrics.") and t.is_float()]
            half = [
                pl.when(pl.col("row") % 10 == 0).then(pl.col(n) * 0.5).otherwise(pl.col(n)).alias(n) for n in floats
            ]
            yield frame.with_columns(half).drop("row")

    write_result_batches(moved, halved())
    moved.replace(table)
    with open(folder / "cases.jsonl", "w") as handle:
        for frame in pl.scan_parquet(folder / "cases.parquet").collect_batches(chunk_size=CASE_GROUP):
            for row in frame.iter_rows(named=True):
                evidence = [unit["targets"][0] for unit in row["units"]]
                case = {"id": row["id"], "question": f"question {row['id']}", "answerable": row["answerable"]}
                case |= {"evidence": evidence, "claims": [], "tags": json.loads(row["tags"]), "filter": {}}
                handle.write(json.dumps(case, sort_keys=True) + "\n")


def gate_commands(folder: Path) -> dict[str, list[str]]:
    """The verdict and report stages as dvc.yaml runs them (the report's markdown and the moves
    CSV of every case), against the moved baseline, and the report's html page (its case
    explorer) from the same verdict."""
    out = folder / "out"
    verdict = [sys.executable, "-m", "ragvet.cli", "verdict", "--cases-dir", f"{out}/cases",
               "--split", f"{folder}/split.json", "--baseline", f"{out}/baseline", "--out", f"{out}/gate.json",
               "--verdict", f"{out}/verdict.json", "--summaries-dir", str(out)]  # fmt: skip
    report = [sys.executable, "-m", "ragvet.cli", "report", "--cases-dir", f"{out}/cases",
              "--summaries-dir", str(out), "--slices-dir", f"{out}/slices", "--split", f"{folder}/split.json",
              "--baseline", f"{out}/baseline", "--verdict", f"{out}/verdict.json",
              "--cases", f"{folder}/cases.jsonl", "--corpus", "corpus.jsonl", "--plots", f"{out}/plots"]  # fmt: skip
    markdown = [*report, "--out", f"{out}/report.md", "--moves", f"{out}/moves.csv"]
    return {
        "verdict": verdict,
        "report": markdown,
        "report html": [*report, "--out", f"{out}/report.html", "--format", "html"],
    }


def against_repo(folder: Path, kind: str) -> Path:
    """A git repository (``<folder>/against-<kind>``, built once) whose ``HEAD~1`` holds the
    moved baseline's results (``metrics/bench.json``, ``metrics/cases/bench.parquet``) and
    whose ``HEAD`` the evaluate stage's, the tables committed to git (``kind`` git) or
    tracked by ``dvc add`` (``kind`` dvc, the objects in the repository's DVC cache)."""
    repo, out = folder / f"against-{kind}", folder / "out"
    if (repo / ".git").is_dir():
        return repo
    (repo / "metrics" / "cases").mkdir(parents=True)
    dvc = [str(Path(sys.executable).parent / "dvc")]

    def run(*args: str) -> None:
        subprocess.run(args, cwd=repo, check=True, capture_output=True)

    run("git", "init", "-q", "-b", "main")
    if kind == "dvc":
        run(*dvc, "init", "-q")
        (repo / "dvc.lock").touch()  # what marks a revision with ragvet results when git holds no table
    for source, message in ((out / "baseline", "the moved baseline's results"), (out, "the evaluate stage's")):
        (repo / "metrics" / "bench.json").write_bytes((source / "bench.json").read_bytes())
        (repo / "metrics" / "cases" / "bench.parquet").write_bytes((source / "cases" / "bench.parquet").read_bytes())
        if kind == "dvc":
            run(*dvc, "add", "-q", "metrics/cases")
        run("git", "add", "-A")
        run("git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-q", "-m", message)
    return repo


def against_commands(folder: Path) -> dict[str, tuple[list[str], Path]]:
    """``ragvet gate --against HEAD~1`` in each :func:`against_repo`, and the gate against
    the committed baseline folder; each writes ``out/gate-<name>.json``. Command and folder."""
    gate = [sys.executable, "-m", "ragvet.cli", "gate", "--split", f"{folder}/split.json"]
    gate += ["--params", str(folder.parent / "params.yaml")]
    commands = {
        f"gate --against ({kind})": (
            [*gate, "--against", "HEAD~1", "--out", f"{folder}/out/gate-{kind}.json"],
            against_repo(folder, kind),
        )
        for kind in ("git", "dvc")
    }
    folder_gate = [*gate, "--baseline", f"{folder}/out/baseline", "--out", f"{folder}/out/gate-folder.json"]
    return {**commands, "gate (baseline folder)": (folder_gate, against_repo(folder, "git"))}


NOISE = 3e-5  # what --verify-sizes' recomputation moves every score by: float noise, within verify's 1e-4


def verify_cases(n_cases: int) -> dict[str, list[int]]:
    """The cases :func:`verify_repo` changes, by what it does to them: two near ties, two
    real swaps, and one case the recomputation drops."""
    half = n_cases // 2
    return {"tie": [3, half + 3], "swap": [7, half + 7], "dropped": [n_cases // 3]}


def _rewritten_run(source: Path, target: Path, change) -> None:
    """``source`` (a retrieve stage's run) rewritten a batch of a million rows at a time by
    ``change`` (a frame to a frame), its schema and metadata (the ids' numbering) kept."""
    import polars as pl
    import pyarrow.parquet as parquet

    reader = parquet.ParquetFile(source)
    target.parent.mkdir(parents=True, exist_ok=True)
    with parquet.ParquetWriter(target, reader.schema_arrow, compression="zstd") as writer:
        for batch in reader.iter_batches(batch_size=CASES_PER_GROUP * 100):
            frame = change(pl.from_arrow(batch))
            writer.write_table(frame.to_arrow().cast(reader.schema_arrow))


def verify_repo(folder: Path, root: Path) -> Path:
    """A git repository (``<root>/<folder's name>``, built once) for ``ragvet verify --against
    HEAD``: HEAD commits the evaluate stage's results (summary, per-case table, slices) and
    its run, that run tracked by DVC as the pipeline keeps runs, with the second chunk of
    each "tie" case (:func:`verify_cases`) scored 1e-4 below the first; the work tree holds
    that run recomputed: every score moved by :data:`NOISE`, the first two chunks of the
    "tie" cases (a near tie) and of the "swap" cases (a real change) swapped, the "dropped"
    case gone, and the per-case table with the same noise on its top-1 scores and without
    that case, beside the committed summary and slices (which no longer match it)."""
    import polars as pl
    import yaml

    from ragvet.project import template_text
    from ragvet.storage.results import write_result_batches

    repo, out, changed = root / folder.name, folder / "out", verify_cases(int(folder.name.split("x")[0]))
    if (repo / ".git").is_dir():
        return repo
    (repo / "metrics" / "cases").mkdir(parents=True)
    (repo / "metrics" / "slices").mkdir()
    dvc = str(Path(sys.executable).parent / "dvc")

    def run(*args: str) -> None:
        subprocess.run(args, cwd=repo, check=True, capture_output=True)

    def ids(name: str) -> list[str]:
        return [case_id(n) for n in changed[name]]

    def committed(frame: pl.DataFrame) -> pl.DataFrame:
        tie = pl.col("case_id").cast(pl.String).is_in(ids("tie")) & (pl.col("rank") == 2)
        return frame.with_columns(pl.when(tie).then(pl.col("score").max().over("case_id") - 1e-4).otherwise("score"))

    def recomputed(frame: pl.DataFrame) -> pl.DataFrame:
        swapped = pl.col("case_id").cast(pl.String).is_in(ids("tie") + ids("swap"))
        rank = pl.when(swapped & (pl.col("rank") <= 2)).then(3 - pl.col("rank")).otherwise("rank").alias("rank")
        kept = frame.filter(~pl.col("case_id").cast(pl.String).is_in(ids("dropped")))
        return kept.with_columns(rank.cast(pl.Int32), pl.col("score") + NOISE)

    run("git", "init", "-q", "-b", "main")
    run(dvc, "init", "-q")
    bundled = yaml.safe_load(template_text("params.yaml"))
    params = {key: bundled[key] for key in ("depth", "split")} | json.loads((folder.parent / "params.yaml").read_text())
    (repo / "params.yaml").write_text(yaml.safe_dump(params))  # the sections verify requires, the benchmark's own
    (repo / "metrics" / "bench.json").write_bytes((out / "bench.json").read_bytes())
    (repo / "metrics" / "slices" / "bench.json").write_bytes((out / "slices" / "bench.json").read_bytes())
    (repo / "metrics" / "cases" / "bench.parquet").write_bytes((out / "cases" / "bench.parquet").read_bytes())
    _rewritten_run(folder / "run.parquet", repo / "data" / "runs" / "bench.parquet", committed)
    run(dvc, "add", "-q", "data/runs")
    run("git", "add", "-A")
    run("git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-q", "-m", "results")
    runs = repo / "data" / "runs" / "bench.parquet"
    _rewritten_run(runs, runs.with_suffix(".new"), recomputed)
    runs.with_suffix(".new").replace(runs)

    def noisy():
        table = pl.scan_parquet(out / "cases" / "bench.parquet").filter(~pl.col("case_id").is_in(ids("dropped")))
        for frame in table.collect_batches(chunk_size=CASE_GROUP):
            yield frame.with_columns(pl.col("top1_score") + NOISE)

    write_result_batches(repo / "metrics" / "cases" / "new.parquet", noisy())
    (repo / "metrics" / "cases" / "new.parquet").replace(repo / "metrics" / "cases" / "bench.parquet")
    return repo


def verify_command(python: str) -> list[str]:
    """``ragvet verify --against HEAD`` run by ``python`` (another checkout's: ``--verify-python``)."""
    return [python, "-m", "ragvet.cli", "verify", "--against", "HEAD"]


def peer_command(script: str, folder: Path) -> list[str]:
    return [sys.executable, "-c", script, str(folder), json.dumps(KS)]


def check(ragvet: dict, peer: dict, name: str) -> float:
    """The largest difference between ragvet's eval+dev means and a peer's (over every answerable case)."""
    worst = 0.0
    for metric in [*(f"recall@{k}" for k in KS), "mrr"]:
        worst = max(worst, abs(ragvet[metric] - peer[metric]))
    if worst > 5e-7:  # ragvet's per-case values are rounded to 6 places, the peers' are not
        raise SystemExit(f"{name} differs from ragvet by {worst}: {peer} against {ragvet}")
    return worst


def ragvet_means(folder: Path) -> dict:
    """Means over every answerable case (both splits) from the per-case table ragvet wrote."""
    import polars as pl

    table = pl.scan_parquet(folder / "out/cases/bench.parquet").filter(pl.col("answerable"))
    names = [*(f"recall@{k}" for k in KS), "mrr"]
    row = table.select([pl.col(f"metrics.{n}").mean().alias(n) for n in names]).collect(engine="streaming")
    return row.to_dicts()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ragvet-streaming"))
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--pytrec-max", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--batch", type=int, default=None, help="ragvet's --batch-cases (its default when absent)")
    parser.add_argument("--generate-only", action="store_true", help="write the data of --sizes and stop")
    parser.add_argument("--gate-sizes", type=int, nargs="*", default=[], help="sizes to run verdict and report at")
    parser.add_argument(
        "--against-sizes", type=int, nargs="*", default=[], help="sizes to run the gate --against a revision at"
    )
    parser.add_argument("--verify-sizes", type=int, nargs="*", default=[], help="sizes to run ragvet verify at")
    parser.add_argument(
        "--verify-root", type=Path, default=Path("/tmp/verify-bench"), help="where --verify-sizes' repositories go"
    )
    parser.add_argument(
        "--verify-python",
        nargs="*",
        default=[],
        help="other interpreters (another checkout's venv) whose verify runs beside this one's, its output the same",
    )
    args = parser.parse_args()
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    write_static(workdir)
    for size in args.sizes:
        folder = workdir / f"{size}x{args.depth}"
        if not (folder / "done").exists():
            start = time.perf_counter()
            generate(folder, size, args.depth, size <= args.pytrec_max)
            print(f"generated {size:,} cases x {args.depth} in {time.perf_counter() - start:.0f} s", flush=True)
    if args.generate_only:
        return
    idle = timed([sys.executable, "-c", "import ragvet.stages.evaluate"], workdir)["rss_mb"]
    print(f"interpreter with the evaluate stage's imports: {idle:.0f} MB; python {sys.version.split()[0]}", flush=True)
    results: dict[tuple[int, str], list[dict]] = {}
    for round_ in range(args.rounds):
        for size in args.sizes:
            folder = workdir / f"{size}x{args.depth}"
            tools = ["ragvet", "duckdb", "polars"] + (["pytrec_eval"] if size <= args.pytrec_max else [])
            for tool in tools if round_ % 2 == 0 else tools[::-1]:
                if tool == "ragvet":
                    command = ragvet_command(folder, args.batch)
                else:
                    command = peer_command({"duckdb": DUCKDB, "polars": POLARS, "pytrec_eval": PYTREC}[tool], folder)
                measured = timed(command, workdir)
                if tool != "ragvet":
                    measured["diff"] = check(ragvet_means(folder), json.loads(measured["out"]), tool)
                results.setdefault((size, tool), []).append(measured)
                print(f"{size:>11,} {tool:<12} {measured['seconds']:8.1f} s {measured['rss_mb']:7.0f} MB", flush=True)
            if size in args.gate_sizes:  # after ragvet's evaluate: its results against a moved baseline
                if round_ == 0:
                    moved_baseline(folder)
                for stage, command in gate_commands(folder).items():
                    measured = timed(command, workdir)
                    results.setdefault((size, stage), []).append(measured)
                    print(
                        f"{size:>11,} {stage:<12} {measured['seconds']:8.1f} s {measured['rss_mb']:7.0f} MB", flush=True
                    )
            if size in args.against_sizes:  # after the gate sizes: the moved baseline, committed to a revision
                for stage, (command, repo) in against_commands(folder).items():
                    measured = timed(command, repo, codes=(0, 1))  # 1: the gate failed, as a moved baseline may
                    results.setdefault((size, stage), []).append(measured)
                    print(f"{size:>11,} {stage:<24} {measured['seconds']:8.1f} s {measured['rss_mb']:7.0f} MB")
                written = {(folder / "out" / f"gate-{name}.json").read_bytes() for name in ("git", "dvc", "folder")}
                if len(written) != 1:
                    raise SystemExit(f"at {size:,} the gate --against a revision differs from the baseline folder's")
    for size in args.verify_sizes:  # the evaluate stage's results at that size, recomputed with noise
        repo = verify_repo(workdir / f"{size}x{args.depth}", args.verify_root.resolve())
        said = set()
        for python in [sys.executable, *args.verify_python]:
            measured = timed(verify_command(python), repo, codes=(1,))  # 1: a real change is in it
            said.add(measured["out"])
            figures = f"{measured['seconds']:8.1f} s {measured['rss_mb']:7.0f} MB"
            print(f"{size:>11,} verify ({python}) {figures}", flush=True)
        if len(said) != 1:
            raise SystemExit(f"at {size:,} verify says different things with different interpreters")
        print(next(iter(said)), flush=True)
    print("\n| cases x depth | tool | seconds | peak RSS MB | ragvet / tool (time) | max diff of means |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for size in args.sizes:
        base = min(m["seconds"] for m in results[size, "ragvet"])
        folder_gate = min((m["seconds"] for m in results.get((size, "gate (baseline folder)"), [])), default=None)
        for tool in ("ragvet", "duckdb", "polars", "pytrec_eval", "verdict", "report", "report html", *AGAINST):
            if (size, tool) not in results:
                continue
            best = min(results[size, tool], key=lambda m: m["seconds"])
            ratio = "" if tool in ("ragvet", "verdict", "report", "report html") else f"{base / best['seconds']:.2f}"
            if tool in AGAINST:  # the gate --against a revision: its time over the baseline folder's
                ratio = f"{best['seconds'] / folder_gate:.2f} (of the folder's)"
            diff = f"{best['diff']:.1e}" if "diff" in best else ""
            figures = f"{best['seconds']:.1f} | {best['rss_mb']:.0f} | {ratio} | {diff}"
            print(f"| {size:,} x {args.depth} | {tool} | {figures} |")


if __name__ == "__main__":
    main()
