"""The stages as a user runs them, at 100,000 cases: evaluate, verdict and report
against a pytrec_eval script, whole processes, same data.

    python benchmarks/stages.py [--cases 100000] [--depth 100] [--rounds 2] [--configs 8]

Reuses ``evaluation.py``'s generated data (chunks, Parquet case table and run,
TREC run and qrels; generated once into ``--workdir``) and adds what the
pipeline's other stages would have written: the validated corpus, a frozen
split (70% eval) and a params.yaml. Then, each side a fresh process timed from
outside (wall clock, and the child's own peak RSS from ``wait4``):

* **evaluate**: ``ragvet evaluate`` with the options dvc.yaml passes:
  read, score, write the per-case Parquet table, the slices, the metrics JSON
  and the dev-split abstention sweep;
* **pytrec_eval script**: parse the TREC run and qrels, evaluate ``recall``,
  ``success``, ``P``, ``ndcg_cut`` at every k and ``recip_rank``, ``json.dump``
  the per-query results;
* **verdict** and **report**: ``ragvet verdict`` / ``ragvet report --verdict`` over
  ``--configs`` configurations (copies of the evaluated one, all gated) and a
  baseline accepted from them, as dvc.yaml runs them: the verdict stage decides the
  gate's verdict, the report renders it beside its own comparisons (the gate stage
  after them only prints the verdict, and is not timed). Equal to the results, the
  baseline gives paired deltas of 0, whose bootstrap intervals need no draw (the
  usual case of configurations a change did not touch); ``--changed-baseline``
  halves every 10th case's figures in it, so every interval is drawn (2,000
  resamples of each paired metric and slice).

After one untimed evaluate run (the results compared) and one untimed verdict run
(the verdict the report renders; every timed run writes the same bytes), every round runs each
side once, the order rotated from round to round (the first process to touch
memory after a pause pays for fresh pages, and the load of a shared machine
moves); the best of ``--rounds`` counts, and the load averages are printed.
Before timing, it checks that the vectorised rounding the evaluate stage writes
with equals ``round_floats`` on every float of the unrounded per-case table (the
rounding contract), and prints how many it compared. Peak RSS comes from a small
launcher process (``LAUNCHER``), not from this one.
Targets: evaluate <= 0.5x the script; verdict and report each <= evaluate; every
stage's peak RSS <= 1.5 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import evaluation  # the sibling benchmark: data generation and machine facts

HERE = Path(__file__).resolve().parent
RSS_LIMIT_MB = 1536

PYTREC_SCRIPT = """
import json, sys
import pytrec_eval
ks = sys.argv[3].split(",")
measures = {f"{m}.{','.join(ks)}" for m in ("recall", "success", "P", "ndcg_cut")} | {"recip_rank"}
with open(sys.argv[1]) as handle:
    qrels = pytrec_eval.parse_qrel(handle)
with open(sys.argv[2]) as handle:
    run = pytrec_eval.parse_run(handle)
results = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
with open(sys.argv[4], "w") as out:
    json.dump(results, out)
"""


def write_pipeline_inputs(workdir: Path, ks: list[int], n_configs: int) -> list[str]:
    """The corpus, split, params and thresholds the evaluate, verdict and report stages read."""
    import polars as pl

    chunks = pl.read_ndjson(workdir / "chunks.jsonl", schema={"doc_id": pl.String, "end": pl.Int64})
    lengths = chunks.group_by("doc_id").agg(pl.col("end").max()).sort("doc_id")
    with open(workdir / "corpus.jsonl", "w") as out:
        for doc_id, length in lengths.iter_rows():
            out.write(json.dumps({"doc_id": doc_id, "metadata": {}, "text": "x" * length, "title": None}) + "\n")
    shutil.copy(workdir / "cases.jsonl", workdir / "validated-cases.jsonl")
    ids = pl.read_parquet(workdir / "cases.parquet", columns=["id"])["id"].to_list()
    split = {"cases": {case_id: {"split": "eval" if n % 10 < 7 else "dev"} for n, case_id in enumerate(ids)}}
    split["fingerprints"] = {"eval_split": "e" * 64, "dev_split": "d" * 64, "corpus": "c" * 64}
    (workdir / "split.json").write_text(json.dumps(split, sort_keys=True))
    configs = [f"cfg-{n}" for n in range(n_configs)]
    params = {
        "configs": {config: {"chunking": "fixed", "retriever": "bm25"} for config in configs},
        "chunking": {"fixed": {"strategy": "fixed", "unit": "chars", "window": 300, "overlap": 50}},  # named, checked
        "retrievers": {"bm25": {"kind": "bm25"}},
        "ks": ks,
        "evidence": {"span_coverage": 1.0},
        "slices": ["bucket"],
        "gate": {
            "configs": configs,
            "metrics": [f"recall@{max(ks)}", f"evidence_recall@{max(ks)}", "mrr"],
            "max_drop": 0.02,
            "min_slice_cases": 8,
            "slice_max_drop": 0.1,
            "slice_metric": f"evidence_recall@{max(ks)}",
            "require_significance": False,
            "bootstrap": {"resamples": 2000, "seed": 1, "confidence": 0.95},
        },
    }
    (workdir / "params.yaml").write_text(json.dumps(params))  # JSON is YAML
    (workdir / "answers").mkdir(exist_ok=True)
    return configs


def evaluate_command(config: str) -> list[str]:
    """The evaluate stage as dvc.yaml runs it (the generated data's file names)."""
    return [
        sys.executable, "-m", "ragvet.cli", "evaluate", config, "--run", "run.parquet", "--chunks", "chunks.jsonl",
        "--corpus", "corpus.jsonl", "--cases", "cases.parquet", "--split", "split.json",
        "--metrics", f"metrics/{config}.json", "--per-case", f"metrics/cases/{config}.parquet",
        "--slices", f"metrics/slices/{config}.json", "--answers", "answers", "--thresholds", "abstention.yaml",
        "--sweep", f"metrics/abstention/{config}.json",
    ]  # fmt: skip


# Runs the command and reports its wall time, exit code and peak RSS (from wait4) on its
# last stderr line. Through this small process, because Linux carries the peak RSS of the
# process that forks over exec into the child's ru_maxrss: spawned from this script
# (which holds the generated data), every side reported this script's 1.8 GB peak.
LAUNCHER = """
import json, os, subprocess, sys, time
start = time.perf_counter()
child = subprocess.Popen(sys.argv[1:])
_, status, usage = os.wait4(child.pid, 0)
seconds = time.perf_counter() - start
print(json.dumps([seconds, os.waitstatus_to_exitcode(status), usage.ru_maxrss]), file=sys.stderr)
"""


def timed(command: list[str], cwd: Path) -> dict:
    """Wall seconds and the child's own peak RSS; raises with its output when it fails."""
    done = subprocess.run([sys.executable, "-c", LAUNCHER, *command], cwd=cwd, capture_output=True, text=True)
    *err, last = done.stderr.splitlines() or [""]
    seconds, code, rss_kb = json.loads(last)
    if code not in (0, 1):  # the gate exits 1 on a failed verdict
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout}\n" + "\n".join(err))
    return {"seconds": seconds, "rss_mb": rss_kb / 1024}


def check_rounding(workdir: Path, ks: list[int]) -> int:
    """Every float of the unrounded per-case table, rounded both ways; returns how many."""
    import numpy as np

    sys.path.insert(0, str(HERE.parent))
    from ragvet.measures.evaluation import evaluate_table
    from ragvet.settings import Measuring
    from ragvet.storage.files import round_floats
    from ragvet.storage.results import round_array
    from ragvet.storage.tables import read_case_table, read_chunk_table, read_docs, read_run_table

    chunks = read_chunk_table(workdir / "chunks.jsonl")
    cases = read_case_table(workdir / "cases.parquet")
    run = read_run_table(workdir / "run.parquet", chunks.chunk_ids, cases.case_ids)
    split = dict.fromkeys(cases.case_ids, "eval")
    texts = {doc.doc_id: doc.text for doc in read_docs(workdir / "corpus.jsonl")}
    frame = evaluate_table(cases, chunks, run, split, texts, Measuring(tuple(ks), 1.0))
    compared = 0
    for name, dtype in frame.schema.items():
        if dtype.is_float():
            values = frame[name].fill_null(float("nan")).to_numpy()
            expected = np.asarray([round_floats(float(v)) for v in values], dtype=np.float64)
            if not np.array_equal(round_array(values), expected, equal_nan=True):
                raise SystemExit(f"rounding differs from round_floats in column {name}")
            compared += len(values)
    return compared


def change_baseline(folder: Path) -> None:
    """Every 10th case's float metrics halved in each baseline table: the deltas are
    no longer all 0, so the verdict and the report draw every bootstrap interval."""
    import polars as pl

    from ragvet.storage.results import read_results, write_results

    for path in sorted(folder.glob("*.parquet")):
        table = read_results(path).with_row_index("row")
        floats = [name for name, dtype in table.schema.items() if name.startswith("metrics.") and dtype.is_float()]
        halved = [pl.when(pl.col("row") % 10 == 0).then(pl.col(n) * 0.5).otherwise(pl.col(n)).alias(n) for n in floats]
        write_results(path, table.with_columns(halved).drop("row"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    evaluation.data_arguments(parser)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--configs", type=int, default=8)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument(
        "--changed-baseline", action="store_true",
        help="halve every float metric of every 10th case in the baseline, so every paired bootstrap runs",
    )  # fmt: skip
    args = parser.parse_args()
    key = f"{args.cases}-{args.depth}-{args.docs}-{args.chunks_per_doc}-{args.seed}"
    workdir = args.workdir or Path(os.environ.get("TMPDIR", "/tmp")) / f"ragvet-bench-evaluation-{key}"
    if not (workdir / "qrels.trec").exists():
        evaluation.generate(workdir, args.cases, args.depth, args.docs, args.chunks_per_doc, args.seed)
    if not (workdir / "run.parquet").exists() or not (workdir / "cases.parquet").exists():
        evaluation.write_parquet_tables(workdir)
    configs = write_pipeline_inputs(workdir, args.ks, args.configs)
    print(f"rounding: {check_rounding(workdir, args.ks):,} per-case floats, vectorised == round_floats")
    (workdir / "pytrec_script.py").write_text(PYTREC_SCRIPT)
    script = [sys.executable, "pytrec_script.py", "qrels.trec", "run.trec", ",".join(map(str, args.ks)), "peer.json"]

    timed(evaluate_command(configs[0]), workdir)  # untimed: the results the verdict and report compare
    metrics = workdir / "metrics"
    summary = json.loads((metrics / f"{configs[0]}.json").read_text())
    for config in configs[1:]:  # the other configurations: the same results under their names
        (metrics / f"{config}.json").write_text(json.dumps(dict(summary, config=config)))
        for folder, suffix in (("cases", ".parquet"), ("slices", ".json"), ("abstention", ".json")):
            shutil.copy(metrics / folder / f"{configs[0]}{suffix}", metrics / folder / f"{config}{suffix}")
    from ragvet.gating.baselines import accept_baseline  # what `ragvet baseline accept` runs

    accept_baseline(metrics, configs)
    if args.changed_baseline:
        change_baseline(metrics / "baseline" / "cases")
    verdict = [sys.executable, "-m", "ragvet.cli", "verdict", "--cases-dir", "metrics/cases", "--split", "split.json",
               "--baseline", "metrics/baseline", "--out", "metrics/gate.json", "--verdict", "verdict.json"]  # fmt: skip
    timed(verdict, workdir)  # untimed: the verdict the report renders
    report = [sys.executable, "-m", "ragvet.cli", "report", "--cases-dir", "metrics/cases",
              "--summaries-dir", "metrics", "--slices-dir", "metrics/slices", "--split", "split.json",
              "--baseline", "metrics/baseline", "--verdict", "verdict.json",
              "--cases", "validated-cases.jsonl", "--corpus", "corpus.jsonl", "--out", "metrics/report.md",
              "--plots", "metrics/plots"]  # fmt: skip
    # Every side once per round, the order rotated from round to round, so that each meets
    # the same load and the same fresh-page cost (evaluate and verdict rewrite the same bytes).
    sides = {"evaluate": evaluate_command(configs[0]), "pytrec_eval script": script}
    sides |= {"verdict": verdict, "report": report}
    best: dict[str, dict] = {}
    loads = [os.getloadavg()[0]]
    for number in range(args.rounds):
        names = list(sides)
        for side in names[number % len(names) :] + names[: number % len(names)]:
            result = timed(sides[side], workdir)
            if side not in best or result["seconds"] < best[side]["seconds"]:
                best[side] = result
            loads.append(os.getloadavg()[0])

    print(f"\n{evaluation.machine()}")
    print(f"{args.cases:,} cases x depth {args.depth}, k in {args.ks}; verdict and report over {args.configs} "
          f"configurations plus the {'changed' if args.changed_baseline else 'equal'} baseline; best of "
          f"{args.rounds}, each a fresh process, interleaved; 1-minute load average {min(loads):.1f} to "
          f"{max(loads):.1f}\n")  # fmt: skip
    print(f"{'side':<22}{'seconds':>10}{'peak RSS MB':>14}")
    for side, result in best.items():
        print(f"{side:<22}{result['seconds']:>10.2f}{result['rss_mb']:>14.0f}")
    evaluate, peer = best["evaluate"]["seconds"], best["pytrec_eval script"]["seconds"]
    print(f"\nevaluate / pytrec_eval script: {evaluate / peer:.3f} (target <= 0.5)")
    for side in ("verdict", "report"):
        print(f"{side} / evaluate: {best[side]['seconds'] / evaluate:.3f} (target <= 1)")
    worst = max(best[side]["rss_mb"] for side in ("evaluate", "verdict", "report"))
    print(f"largest stage peak RSS: {worst:.0f} MB (target <= {RSS_LIMIT_MB})")
    size = (metrics / "cases" / f"{configs[0]}.parquet").stat().st_size
    print(f"per-case table: {size / 1e6:.1f} MB of Parquet per configuration")


if __name__ == "__main__":
    main()
