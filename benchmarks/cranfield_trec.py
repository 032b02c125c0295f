"""Cranfield through ``ragvet import trec``: ragvet's BM25 figures beside pytrec_eval's.

    python benchmarks/cranfield_trec.py ../shared/datasets/cranfield [--keep DIR]

Cranfield (the SMART distribution) is close to TREC but not quite, so a small
adapter here, not in the product, writes TREC files first:

* ``cran.qry`` -> topics ``qid<TAB>text``. The qid is the query's *ordinal
  position* (1..225), because that is what ``cranqrel`` uses, not the ``.I``
  number (001..365 with gaps).
* ``cran.all.1400`` -> docs JSONL ``{doc_id, title, text}``: ``.T`` is the title
  and the text is everything after the record's first ``.W`` line, field-marker
  lines dropped (a few records are scrambled, with ``.A``/``.B``/``.W`` lines
  inside the abstract; their words are kept). Docs 471 and 995 have no text at
  all: they are written as they are, and ``ragvet import`` skips and counts them,
  together with the one judgement of doc 995 (query 125).
* ``cranqrel`` (``qid docid grade``) -> TREC qrels ``qid 0 docid grade``. Grades
  run 1 (complete answer) to 4 (minimum interest) and all count as relevant
  (``--min-grade 1``); each query's one grade ``-1`` ("no interest") is below 1,
  so the importer counts it as not relevant.

Then, in a temporary project: one chunk per document (chunking ``document``), and
two configurations, BM25 with and without stemming, each retrieved via
:func:`ragvet.retrieval.kinds.retrieve`, scored via
:func:`ragvet.measures.evaluation.evaluate_table`, and exported by ``ragvet export run`` /
``export qrels``, which pytrec_eval scores. The run has tied BM25 scores, so the export
writes rank-derived scores (see :mod:`ragvet.formats.exporting`); the last column shows
what trec_eval reports from the raw tied scores instead.

Cranfield's qrels judge only a few docs per query (the grade -1 ones included), so
most of a top 10 is unjudged: ``judged@k`` is printed per configuration, beside
ir_measures' ``Judged@k`` of the exported run against the TREC qrels (every grade).
Times are printed for information only.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ir_measures
import pytrec_eval

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ragvet.chunking import chunk_corpus  # noqa: E402
from ragvet.inputs.cases import load_cases  # noqa: E402
from ragvet.inputs.corpus import load_corpus  # noqa: E402
from ragvet.measures.evaluation import evaluate_table  # noqa: E402
from ragvet.measures.summary import summarise  # noqa: E402
from ragvet.retrieval.kinds import retrieve  # noqa: E402
from ragvet.settings import Measuring  # noqa: E402
from ragvet.storage.results import result_rows, results_frame  # noqa: E402
from ragvet.storage.tables import run_path as run_file  # noqa: E402
from ragvet.storage.tables import write_cases, write_chunks, write_run  # noqa: E402

KS = [1, 5, 10, 20]
MEASURING = Measuring(tuple(KS), 1.0)
DEPTH = 100
BM25 = {"kind": "bm25", "k1": 1.2, "b": 0.75, "lowercase": True, "stopwords": "en", "stemmer": "english"}
CONFIGS = {"cranfield-bm25": BM25, "cranfield-bm25-nostem": {**BM25, "stemmer": "none"}}
CHUNKING = "document"


# --- the adapter: SMART records -> TREC files ----------------------------------------


MARKERS = (".T", ".A", ".B", ".W")


def smart_records(path: Path) -> list[tuple[str, list[str]]]:
    """``(id, lines)`` for each ``.I <id>`` record of a SMART file."""
    records: list[tuple[str, list[str]]] = []
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.startswith(".I "):
            records.append((line[3:].strip(), []))
        elif records:
            records[-1][1].append(line)
    return records


def field(lines: list[str], marker: str) -> list[str]:
    """The lines after ``marker`` up to the next marker line."""
    if marker not in lines:
        return []
    start = lines.index(marker) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].rstrip() in MARKERS), len(lines))
    return lines[start:end]


def abstract(lines: list[str]) -> str:
    """Everything after the first ``.W`` line, marker lines dropped: scrambled records keep their words."""
    if ".W" not in lines:
        return ""
    return "\n".join(line for line in lines[lines.index(".W") + 1 :] if line.rstrip() not in MARKERS).strip("\n")


def convert(cranfield: Path, out: Path) -> tuple[Path, Path, Path]:
    """Write ``topics.tsv``, ``qrels.txt`` and ``docs.jsonl`` for ``ragvet import trec``."""
    out.mkdir(parents=True, exist_ok=True)
    topics = out / "topics.tsv"
    queries = smart_records(cranfield / "cran.qry")
    topics.write_text(
        "".join(
            f"{ordinal}\t{' '.join(' '.join(field(lines, '.W')).split())}\n"
            for ordinal, (_, lines) in enumerate(queries, 1)
        )
    )
    docs = out / "docs.jsonl"
    rows = []
    for doc_id, lines in smart_records(cranfield / "cran.all.1400"):
        title = " ".join(" ".join(field(lines, ".T")).split()) or None
        rows.append({"doc_id": doc_id, "title": title, "text": abstract(lines)})
    docs.write_text("".join(json.dumps(row) + "\n" for row in rows))
    qrels = out / "qrels.txt"
    lines = []
    for line in (cranfield / "cranqrel").read_text().split("\n"):
        if line.strip():
            qid, doc_id, grade = line.split()
            lines.append(f"{qid} 0 {doc_id} {grade}\n")
    qrels.write_text("".join(lines))
    return topics, qrels, docs


# --- pytrec_eval on the exported files -------------------------------------------------


def trec_eval_means(qrels_path: Path, run_path: Path) -> dict[str, float]:
    """Means over the qrels' queries; a query with nothing retrieved scores 0."""
    with open(qrels_path) as q, open(run_path) as r:
        qrels, run = pytrec_eval.parse_qrel(q), pytrec_eval.parse_run(r)
    cut = ",".join(map(str, KS))
    measures = {f"recall.{cut}", f"ndcg_cut.{cut}", f"P.{cut}", f"success.{cut}", "recip_rank"}
    results = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    names = {"mrr": "recip_rank"}
    for k in KS:
        names |= {f"recall@{k}": f"recall_{k}", f"hit@{k}": f"success_{k}"}
        names |= {f"precision@{k}": f"P_{k}", f"ndcg@{k}": f"ndcg_cut_{k}"}
    return {
        ours: math.fsum(results.get(q, {}).get(theirs, 0.0) for q in qrels) / len(qrels)
        for ours, theirs in names.items()
    }


def ir_measures_judged(trec_qrels: Path, run_path: Path, cases: list[str]) -> dict[int, dict[str, float]]:
    """ir_measures' ``Judged@k`` per case, of the exported run (one chunk ``<doc>#0`` per
    doc, so the doc id is the chunk id's prefix) against the TREC qrels of every grade."""
    qrels = list(ir_measures.read_trec_qrels(str(trec_qrels)))
    run = [
        ir_measures.ScoredDoc(d.query_id, d.doc_id.rsplit("#", 1)[0], d.score)
        for d in ir_measures.read_trec_run(str(run_path))
    ]
    measures = [ir_measures.Judged @ k for k in KS]
    found: dict[int, dict[str, float]] = {k: {} for k in KS}
    for metric in ir_measures.judged.iter_calc(measures, qrels, run):
        found[metric.measure["cutoff"]][metric.query_id] = metric.value
    return {k: {case: values[case] for case in cases} for k, values in found.items()}


def ragvet(*args: str | Path) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "ragvet.cli", *map(str, args)], capture_output=True, text=True, cwd=ROOT
    )
    if done.returncode != 0:
        raise SystemExit(f"ragvet {' '.join(map(str, args))} failed:\n{done.stdout}{done.stderr}")
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cranfield", type=Path, help="Folder with cran.all.1400, cran.qry and cranqrel.")
    parser.add_argument("--keep", type=Path, help="Work in this folder and keep it (default: a temporary one).")
    args = parser.parse_args()
    cranfield = args.cranfield.resolve()
    with tempfile.TemporaryDirectory(prefix="ragvet-cranfield-") as scratch:
        work = (args.keep or Path(scratch)).resolve()
        clock = time.perf_counter()
        topics, qrels, docs = convert(cranfield, work / "trec")
        corpus_dir, cases_path = work / "data/corpus", work / "data/cases.jsonl"
        imported = ragvet(
            "import", "trec", "--topics", topics, "--qrels", qrels, "--docs", docs,
            "--out-corpus", corpus_dir, "--out-cases", cases_path, "--force",
        )  # fmt: skip
        t_import = time.perf_counter() - clock
        print(f"$ ragvet import trec ...  ({t_import:.1f} s, adapter included)")
        print("\n".join("  " + line for line in imported.stdout.splitlines()[:-1]))

        corpus = load_corpus(corpus_dir)
        cases = load_cases(cases_path, {doc.doc_id: doc for doc in corpus})
        chunks = chunk_corpus(corpus, {"strategy": CHUNKING})
        write_cases(work / "data/validated/cases.jsonl", cases)
        write_chunks(work / f"data/chunks/{CHUNKING}.jsonl", chunks)
        qrels_path = work / "qrels.txt"
        exported = ragvet(
            "export", "qrels", "--chunking", CHUNKING, "--cases", work / "data/validated/cases.jsonl",
            "--chunks-dir", work / "data/chunks", "--out", qrels_path,
        )  # fmt: skip
        print(f"$ ragvet export qrels: {exported.stderr.strip()}")
        judged_rows = []
        for config, retriever in CONFIGS.items():
            ours, run_path = evaluate_config(work, config, retriever, cases, chunks, corpus)
            judged_rows.append((config, ours, ir_measures_judged(qrels, run_path, ours["ids"])))
        print(f"\n{'config':<24}" + "".join(f"{f'judged@{k}':>11}" for k in KS) + f"{'cases':>7}")
        worst = 0.0
        for config, ours, theirs in judged_rows:
            means = [ours["summary"]["metrics"][f"judged@{k}"] for k in KS]
            print(f"{config:<24}" + "".join(f"{m:>11.6f}" for m in means) + f"{len(ours['ids']):>7}")
            peer = [math.fsum(theirs[k].values()) / len(theirs[k]) for k in KS]
            print(f"{'  ir_measures Judged@k':<24}" + "".join(f"{m:>11.6f}" for m in peer))
            for k in KS:
                for case, value in zip(ours["ids"], ours["judged"][k]):
                    worst = max(worst, abs(value - theirs[k][case]))
        over = f"{len(KS)} cutoffs and {len(CONFIGS)} configurations"
        print(f"max |ragvet - ir_measures| per case over {over} = {worst:.1e}")


def evaluate_config(work: Path, config: str, retriever: dict, cases, chunks, corpus) -> tuple[dict, Path]:
    """Retrieve, score and export one configuration; print ragvet's figures beside
    pytrec_eval's. Returns ragvet's eval summary with each case's judged@k, and the run file."""
    clock = time.perf_counter()
    rows = retrieve(cases, chunks, retriever, DEPTH)
    by_case: dict[str, list[dict]] = {}
    for row in rows:
        by_case.setdefault(row["case_id"], []).append(row)
    per_case = result_rows(
        evaluate_table(
            cases, chunks, by_case, {c.case_id: "eval" for c in cases}, {d.doc_id: d.text for d in corpus}, MEASURING
        )
    )
    ours = summarise(results_frame(per_case), KS, None)["eval"]
    t_eval = time.perf_counter() - clock
    stemmer = retriever["stemmer"]
    print(
        f"\n{config} (stemmer {stemmer}): {len(chunks)} chunks ({CHUNKING}), BM25 depth {DEPTH}, "
        f"{len(rows)} ranked chunks, {ours['denominators']['cases']} cases  ({t_eval:.1f} s)"
    )
    write_run(run_file(work / "data/runs", config), rows, [c.case_id for c in cases], [c.chunk_id for c in chunks])
    run_path, raw_path = work / f"run-{config}.txt", work / f"run-{config}-raw.txt"
    exported = ragvet("export", "run", "--config", config, "--runs-dir", work / "data/runs", "--out", run_path)
    print(f"$ ragvet export run: {exported.stderr.strip()}")
    ragvet(
        "export", "run", "--config", config, "--runs-dir", work / "data/runs", "--scores", "score", "--out", raw_path
    )
    theirs = trec_eval_means(work / "qrels.txt", run_path)
    raw = trec_eval_means(work / "qrels.txt", raw_path)
    print(f"{'metric':<14}{'ragvet':>10}{'pytrec_eval':>13}{'|diff|':>10}{'raw tied scores':>18}")
    worst = 0.0
    for name in theirs:
        diff = abs(ours["metrics"][name] - theirs[name])
        worst = max(worst, diff)
        print(f"{name:<14}{ours['metrics'][name]:>10.6f}{theirs[name]:>13.6f}{diff:>10.1e}{raw[name]:>18.6f}")
    print(f"max |ragvet - pytrec_eval| = {worst:.1e} over {len(theirs)} figures")
    worst_raw = max(abs(ours["metrics"][name] - raw[name]) for name in raw)
    print(f"(from the raw tied scores, trec_eval's own tie order would give max |diff| = {worst_raw:.1e})")
    ids = [row["case_id"] for row in per_case]
    judged = {k: [row["metrics"][f"judged@{k}"] for row in per_case] for k in KS}
    return {"summary": ours, "ids": ids, "judged": judged}, run_path


if __name__ == "__main__":
    main()
