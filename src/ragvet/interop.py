"""``ragvet import`` and ``ragvet export``: BEIR, TREC and SQuAD in; TREC runs and qrels out.

Thin commands over the importers (:mod:`ragvet.formats.beir`, ``trec``, ``squad``) and
:mod:`ragvet.formats.exporting`. An import
writes its rows to a temporary folder, runs them through the pipeline's own
validator (:func:`ragvet.schema.collect_corpus`, :func:`ragvet.schema.collect_cases`)
and moves them into place only when there is no problem, so a failed import
writes nothing. ``--force`` replaces a corpus folder only when it holds documents
alone, never a project, and the cases file only together with the corpus. Output is
sorted and canonical: the same input gives byte-identical files.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

import typer

from ragvet.errors import InputError, Problem, raise_if, user_errors
from ragvet.formats.beir import import_beir
from ragvet.formats.exporting import SCORE_MODES, trec_qrels_lines, trec_run_lines
from ragvet.formats.imported import Imported
from ragvet.formats.logs import LOG_SUFFIXES, LogImport
from ragvet.formats.squad import import_squad
from ragvet.formats.trec import import_trec
from ragvet.inputs.cases import cases_target_problems, cases_text, collect_cases
from ragvet.inputs.corpus import CORPUS_SUFFIXES, collect_corpus
from ragvet.schema import SPLITS
from ragvet.storage.atomic import UMASK, atomic_output, outputs_together, write_text
from ragvet.storage.files import write_jsonl
from ragvet.storage.records import read_split_record
from ragvet.storage.tables import iter_run_rows, read_cases, read_chunks, run_path

import_app = typer.Typer(
    no_args_is_help=True,
    help="Convert a BEIR folder, TREC topics and qrels, a SQuAD file or a search log into ragvet's inputs.",
)
export_app = typer.Typer(
    no_args_is_help=True,
    help="Write a run or the chunk-level qrels as TREC files, for trec_eval, pytrec_eval or ranx.",
)

_WHERE = re.compile(r"^(?P<file>.*?):(?P<line>\d+)(?P<rest>.*)$", re.DOTALL)
_CASE_LABEL = re.compile(r"\(case (?P<id>.+)\)$")

OUT_CORPUS = typer.Option(Path("data/corpus"), help="Corpus folder to write corpus.jsonl into.")
OUT_CASES = typer.Option(Path("data/cases/cases.yaml"), help="Cases file to write (.yaml/.yml, or .jsonl).")
FORCE = typer.Option(
    False,
    "--force",
    help="Replace a corpus folder of documents only (*.jsonl, *.md, *.txt) and an existing cases file.",
)
MIN_GRADE = typer.Option(1, help="The lowest grade that counts as relevant (grades ≤ 0 never do).")
ABSTAIN = typer.Option(
    False, "--abstain-unjudged", help="Import queries with no relevant doc as abstention cases instead of skipping."
)


# --- import -------------------------------------------------------------------------


def _relocate(problem: Problem, imported: Imported, temp_corpus: Path, temp_cases: Path, suffix: str) -> Problem:
    """A validator problem found in the converted files, moved to the user's file and line."""
    what = f"{problem.what} (in the converted data)"
    match = _WHERE.match(problem.where)
    if match and match["file"] == str(temp_corpus / "corpus.jsonl"):
        row = int(match["line"]) - 1
        if 0 <= row < len(imported.docs):
            doc_id = imported.docs[row]["doc_id"]
            return Problem(f"{imported.doc_sources.get(doc_id, '?')} (doc {doc_id})", what, problem.fix)
    if match and match["file"] == str(temp_cases):
        label = _CASE_LABEL.search(match["rest"])
        case_id = label["id"] if label else None
        if case_id is None and suffix == ".jsonl" and 0 < int(match["line"]) <= len(imported.cases):
            case_id = imported.cases[int(match["line"]) - 1]["id"]
        if case_id is not None:
            return Problem(f"{imported.case_sources.get(case_id, '?')} (case {case_id})", what, problem.fix)
    where = problem.where.replace(str(temp_corpus), "the imported corpus").replace(str(temp_cases), "the cases")
    return Problem(where, what, problem.fix)


SHOWN_ENTRIES = 5  # what a refusal lists of a folder's non-documents; the walk stops there
PLACEHOLDERS = frozenset({".gitkeep"})  # empty files that keep a folder in git: no one's data


def not_documents(folder: Path, limit: int = SHOWN_ENTRIES) -> list[str]:
    """Up to ``limit`` entries of ``folder`` that are not corpus documents (``*.jsonl``,
    ``*.md``, ``*.txt`` outside hidden folders, as :func:`collect_corpus` reads them):
    hidden files and folders (``.git/``), other files (``params.yaml``), links to folders.
    A hidden folder is named, not entered, so a project's ``.git`` costs one entry."""
    found: list[str] = []
    for root, dirs, files in os.walk(folder):
        here = Path(root).relative_to(folder)
        for name in sorted(dirs):
            if name.startswith(".") or (Path(root) / name).is_symlink():
                found.append(f"{(here / name).as_posix()}/")
        dirs[:] = sorted(name for name in dirs if not name.startswith(".") and not (Path(root) / name).is_symlink())
        for name in sorted(files):
            hidden = name.startswith(".") and name not in PLACEHOLDERS
            if hidden or (name not in PLACEHOLDERS and Path(name).suffix.lower() not in CORPUS_SUFFIXES):
                found.append((here / name).as_posix())
        if len(found) >= limit:
            break
    return sorted(found)[:limit]


def _corpus_folder_problems(out_corpus: Path, force: bool) -> list[Problem]:
    """Why ``out_corpus`` may not become the new corpus: a file, a folder holding what is no
    document (``--force`` would delete it with the old corpus: a project, its ``.git``),
    a non-empty folder without ``--force``, or the folder the command runs in (or one
    above it), which the swap would rename away from under it."""
    if out_corpus.exists() and not out_corpus.is_dir():
        return [Problem(str(out_corpus), "--out-corpus is a file, not a folder", "give a folder")]
    if not out_corpus.is_dir():
        return []
    problems = []
    if Path.cwd().resolve().is_relative_to(out_corpus.resolve()):
        problems.append(
            Problem(
                str(out_corpus),
                f"the corpus folder holds the folder ragvet runs in ({Path.cwd()}); the import replaces the "
                "corpus folder by a rename, which would move the current folder away",
                "give --out-corpus a folder below this one, e.g. data/corpus",
            )
        )
    foreign = not_documents(out_corpus)
    if foreign:
        what = "--force would replace the whole folder" if force else "the corpus folder is not empty"
        more = ", ..." if len(foreign) == SHOWN_ENTRIES else ""
        problems.append(
            Problem(
                str(out_corpus),
                f"{what}, and it holds what is not a document: {', '.join(foreign)}{more}",
                "give --out-corpus a folder of documents only (*.jsonl, *.md, *.txt), or a new one, e.g. "
                "data/corpus; ragvet never deletes other files",
            )
        )
    elif any(out_corpus.iterdir()) and not force:
        problems.append(
            Problem(
                str(out_corpus),
                "the corpus folder is not empty; importing would mix the new docs with the old ones",
                "pass --force to replace its content, or choose another --out-corpus",
            )
        )
    return problems


def _check_targets(out_corpus: Path, out_cases: Path, force: bool) -> None:
    problems = cases_target_problems(out_cases, force, "--out-cases") + _corpus_folder_problems(out_corpus, force)
    if out_cases.resolve().is_relative_to(out_corpus.resolve()):
        problems.append(
            Problem(str(out_cases), "the cases file is inside the corpus folder", "write it outside --out-corpus")
        )
    raise_if(problems)


def _swap_in(new: Path, target: Path, aside: Path) -> None:
    """Put the folder ``new`` at ``target``, the old one moved to ``aside``; when either
    rename fails, the old folder is back where it was and the problem names ``target``."""
    moved = False
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            os.replace(target, aside)
            moved = True
        os.replace(new, target)
    except OSError as err:
        if moved:
            os.replace(aside, target)
        reason = err.strerror or str(err)
        raise InputError(
            [Problem(str(target), f"cannot put the new corpus in place: {reason}", "fix that, then import again")]
        ) from None


def write_imported(imported: Imported, out_corpus: Path, out_cases: Path, force: bool = False) -> None:
    """Validate ``imported`` exactly as the pipeline's validate stage would, then
    write ``<out_corpus>/corpus.jsonl`` and ``out_cases``; on any problem raise
    :class:`InputError` (at the user's file and line) with nothing written.

    ``force`` replaces the corpus folder's content, which must be documents only
    (:func:`not_documents`), and the cases file. Both or neither: the new cases file
    waits beside its target until the new corpus is in place, and a corpus that
    cannot be put there leaves the old one and the old cases file as they were.
    """
    _check_targets(out_corpus, out_cases, force)
    suffix = out_cases.suffix.lower()
    text = cases_text(imported.cases, suffix)
    # The work folder sits in the nearest existing folder on the way to --out-corpus, so that
    # the final rename stays on one file system and a failed import creates no folder at all.
    base = next(parent for parent in out_corpus.absolute().parents if parent.is_dir())
    temp = Path(tempfile.mkdtemp(prefix=".ragvet-import-", dir=base))
    try:
        temp_corpus, temp_cases = temp / "corpus", temp / f"cases{suffix}"
        temp_corpus.mkdir()
        write_jsonl(temp_corpus / "corpus.jsonl", imported.docs)
        write_text(temp_cases, text)
        docs, problems = collect_corpus(temp_corpus)
        _, case_problems = collect_cases(temp_cases, {doc.doc_id: doc for doc in docs}, {})
        problems += case_problems
        if problems:
            raise InputError(_relocate(p, imported, temp_corpus, temp_cases, suffix) for p in problems)
        temp_corpus.chmod(0o777 & ~UMASK)
        with outputs_together(out_cases):  # the cases file's rename waits for the corpus swap
            write_text(out_cases, text)
            _swap_in(temp_corpus, out_corpus.absolute(), temp / "replaced")
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def _report(imported: Imported, out_corpus: Path, out_cases: Path) -> None:
    counts = imported.counts
    typer.echo(f"documents: {counts['documents']}")
    typer.echo(f"cases: {counts['cases']} ({counts['abstention_cases']} abstention)")
    typer.echo(f"evidence units: {counts['evidence_units']}")
    typer.echo(f"judged docs: {counts['judged_docs']} (every grade, for judged@k)")
    typer.echo(f"skipped: {counts['skipped']}")
    for reason, count in sorted(imported.skipped.items()):
        typer.echo(f"  {reason}: {count}")
    typer.echo(f"wrote {out_corpus / 'corpus.jsonl'} and {out_cases}")


@import_app.command("beir")
@user_errors
def import_beir_command(
    folder: Path = typer.Argument(..., help="BEIR folder with corpus.jsonl, queries.jsonl and qrels/<split>.tsv."),
    split: str = typer.Option("test", help="Which qrels/<split>.tsv to import."),
    min_grade: int = MIN_GRADE,
    abstain_unjudged: bool = ABSTAIN,
    out_corpus: Path = OUT_CORPUS,
    out_cases: Path = OUT_CASES,
    force: bool = FORCE,
) -> None:
    """Import a BEIR dataset: graded qrels become document evidence, titles are kept.

    Queries judged only in another split's qrels are skipped. BM25 indexes the
    doc text only: the title is kept as the doc's title, not prepended.
    """
    imported = import_beir(folder, split, min_grade, abstain_unjudged)
    write_imported(imported, out_corpus, out_cases, force)
    _report(imported, out_corpus, out_cases)


@import_app.command("trec")
@user_errors
def import_trec_command(
    topics: Path = typer.Option(..., help="Topics: SGML-ish <top> blocks, or `qid<TAB>text` lines."),
    qrels: Path = typer.Option(..., help="Qrels: `qid iter docno rel` lines."),
    docs: Path = typer.Option(..., help="Docs: JSONL {doc_id|docno|_id, text, title?} or a folder of .txt files."),
    field: str = typer.Option("title", help="The topic field used as the question: title or desc."),
    min_grade: int = MIN_GRADE,
    abstain_unjudged: bool = ABSTAIN,
    out_corpus: Path = OUT_CORPUS,
    out_cases: Path = OUT_CASES,
    force: bool = FORCE,
) -> None:
    """Import TREC topics, qrels and docs: judged docs become document evidence."""
    imported = import_trec(topics, qrels, docs, field, min_grade, abstain_unjudged)
    write_imported(imported, out_corpus, out_cases, force)
    _report(imported, out_corpus, out_cases)


@import_app.command("squad")
@user_errors
def import_squad_command(
    file: Path = typer.Argument(..., help="A SQuAD v1.1 or v2.0 JSON file."),
    out_corpus: Path = OUT_CORPUS,
    out_cases: Path = OUT_CASES,
    force: bool = FORCE,
) -> None:
    """Import SQuAD: each paragraph is a doc `<title>/<index>`, each answer span evidence.

    The spans of several annotators become one unit `{any: [...]}`, satisfied by
    any of them; `is_impossible` questions become abstention cases.
    """
    imported = import_squad(file)
    write_imported(imported, out_corpus, out_cases, force)
    _report(imported, out_corpus, out_cases)


def _log_targets(log: Path, outputs: dict[str, Path | None], force: bool) -> None:
    """The log is readable as JSONL or Parquet, and each output a new ``.jsonl`` file
    (or, with ``--force``, one to replace), none of them the same file."""
    problems = []
    if log.suffix.lower() not in LOG_SUFFIXES:
        problems.append(Problem(str(log), "a log must end in .jsonl or .parquet", "rename it, or convert it"))
    elif not log.is_file():
        problems.append(Problem(str(log), "log file not found", "check the path"))
    given = {name: path for name, path in outputs.items() if path is not None}
    for name, path in given.items():
        option = f"--out-{name}"
        if path.suffix.lower() != ".jsonl":
            problems.append(Problem(str(path), f"{option} must end in .jsonl", "rename it"))
        elif path.is_dir() or any(parent.is_file() for parent in path.parents):
            problems.append(Problem(str(path), f"{option} is a folder or lies under a file", "give a file path"))
        elif path.exists() and not force:
            problems.append(Problem(str(path), f"{option} exists", "pass --force to replace it"))
    resolved = [path.resolve() for path in [log, *given.values()]]
    if len(set(resolved)) < len(resolved):
        problems.append(Problem(str(log), "the log and each output must be different files", "give other paths"))
    raise_if(problems)


def write_log_import(conversion: LogImport, outputs: dict[str, Path | None]) -> None:
    """Stream the conversion's lines into the outputs, committed together only when the
    whole log was read without a problem; on any problem, raise it with nothing written."""
    given = {name: path for name, path in outputs.items() if path is not None}
    with outputs_together(*given.values()), ExitStack() as stack:
        handles = {
            name: stack.enter_context(
                open(stack.enter_context(atomic_output(path)), "w", encoding="utf-8", newline="\n")
            )
            for name, path in given.items()
        }
        for name, line in conversion.lines():
            if name in handles:
                handles[name].write(line)
        raise_if(conversion.problems)


@import_app.command("log")
@user_errors
def import_log_command(
    log: Path = typer.Argument(..., help="A search log: .jsonl (one object per line) or .parquet."),
    min_grade: int = MIN_GRADE,
    chunking: str | None = typer.Option(None, help="The chunking that made the log's chunk ids (for their evidence)."),
    out_cases: Path = typer.Option(Path("data/cases/cases.jsonl"), help="Cases file to write (.jsonl)."),
    out_run: Path = typer.Option(Path("data/external/log-run.jsonl"), help="Run file to write, for `kind: run_file`."),
    out_unlabelled: Path | None = typer.Option(
        None, help="Write the queries without a relevant result here, as a per-query log (.jsonl)."
    ),
    force: bool = typer.Option(False, "--force", help="Replace existing output files."),
) -> None:
    """Import a production search log: the queries whose clicks or grades name a relevant
    passage become cases, and what each returned a run file for `kind: run_file`; the
    other queries are counted, or written to --out-unlabelled as a log to label.

    A grade is a result's grade; a click without one is grade 1; a result neither clicked
    nor graded ranked above the query's lowest click is grade 0 (skip-above), one below it
    is unjudged. Read streaming, in bounded memory; a bad row is refused at its line.
    """
    outputs = {"cases": out_cases, "run": out_run, "unlabelled": out_unlabelled}
    _log_targets(log, outputs, force)
    conversion = LogImport(log, min_grade, chunking)
    write_log_import(conversion, outputs)
    counts = conversion.counts
    typer.echo(f"queries: {counts['queries']} ({counts['results']} returned passages, {conversion.layout} rows)")
    typer.echo(
        f"cases: {counts['cases']} ({counts['evidence units']} evidence units, {counts['judged docs']} judged docs)"
    )
    unlabelled = {key.removeprefix("unlabelled: "): n for key, n in sorted(counts.items()) if key.startswith("unlabel")}
    where = "" if out_unlabelled is None else f", written to {out_unlabelled}"
    typer.echo(f"unlabelled queries: {sum(unlabelled.values())} (not cases: a case needs a relevant passage{where})")
    for reason, count in unlabelled.items():
        typer.echo(f"  {reason}: {count}")
    written = ", ".join(str(path) for path in outputs.values() if path is not None)
    typer.echo(f"wrote {written}")


# --- export -------------------------------------------------------------------------


def _emit(lines: list[str], out: Path | None) -> None:
    text = "".join(line + "\n" for line in lines)
    if out is None:
        sys.stdout.write(text)
    else:
        write_text(out, text)


def _need(path: Path, what: str) -> None:
    if not path.is_file():
        raise_if([Problem(str(path), f"{what} not found", "run `dvc repro` first, or give its path")])


def read_run_rows(path: Path) -> list[dict]:
    """Run rows ``{case_id, rank, chunk_id, score}``; every malformed line is a problem."""
    _need(path, "run")
    rows, problems = [], []
    for where, _, row in iter_run_rows(path):
        ok = (
            isinstance(row, dict)
            and isinstance(row.get("case_id"), str)
            and isinstance(row.get("chunk_id"), str)
            and isinstance(row.get("rank"), int)
            and isinstance(row.get("score"), (int, float))
            and not isinstance(row.get("score"), bool)
        )
        if not ok:
            problems.append(Problem(where, "a run row needs case_id, rank, chunk_id and a numeric score", "re-run it"))
            continue
        rows.append(row)
    raise_if(problems)
    return rows


@export_app.command("run")
@user_errors
def export_run(
    config: str = typer.Option(..., help="A configuration name from params.configs."),
    fmt: str = typer.Option("trec", "--format", help="Output format: trec (`qid Q0 docno rank score tag`)."),
    runs_dir: Path = typer.Option(Path("data/runs"), help="Folder of <config>.parquet runs."),
    scores: str = typer.Option("auto", help="auto | score | rank: which scores to write (see above)."),
    out: Path | None = typer.Option(None, help="File to write; standard output when omitted."),
) -> None:
    """Write a configuration's run as a TREC run file, tagged with the config name.

    With --scores auto, the retriever's scores are written when they strictly
    decrease down every case's ranking; when the run has tied scores, each score
    becomes `max_rank + 1 - rank` instead, because trec_eval breaks ties by docno
    descending while ragvet breaks them by chunk id ascending: only then do the
    tools rank exactly as ragvet did.
    """
    if fmt != "trec":
        raise_if([Problem("--format", f"unknown format {fmt!r}", "use --format trec")])
    if scores not in SCORE_MODES:
        raise_if([Problem("--scores", f"unknown scores {scores!r}", f"use one of: {', '.join(SCORE_MODES)}")])
    rows = read_run_rows(run_path(runs_dir, config))
    lines, mode = trec_run_lines(rows, config, scores)
    _emit(lines, out)
    note = " (rank-derived: the run has tied scores)" if mode == "rank" and scores == "auto" else ""
    cases = len({row["case_id"] for row in rows})
    typer.echo(f"exported {len(lines)} ranked chunks for {cases} cases; scores: {mode}{note}", err=True)


@export_app.command("qrels")
@user_errors
def export_qrels(
    chunking: str = typer.Option(..., help="A chunking name from params.chunking."),
    cases: Path = typer.Option(Path("data/validated/cases.jsonl"), help="Validated cases.jsonl."),
    chunks_dir: Path = typer.Option(Path("data/chunks"), help="Folder of <chunking>.jsonl chunks."),
    split: str = typer.Option("all", help="all | eval | dev: which cases (eval/dev read --split-file)."),
    split_file: Path = typer.Option(Path("data/split.json"), help="The frozen split."),
    out: Path | None = typer.Option(None, help="File to write; standard output when omitted."),
) -> None:
    """Write the chunk-level qrels `qid 0 chunk_id 1`: every chunk overlapping a case's evidence.

    It is the same projection the evaluate stage scores against; abstention
    cases have no line. Use --split eval to check the eval figures of
    metrics/<config>.json.
    """
    if split not in ("all", *SPLITS):
        raise_if([Problem("--split", f"unknown split {split!r}", "use all, eval or dev")])
    chunk_path = chunks_dir / f"{chunking}.jsonl"
    _need(cases, "validated cases")
    _need(chunk_path, f"chunks of chunking {chunking!r}")
    members = None
    if split != "all":
        _need(split_file, "split file")
        entries = read_split_record(split_file)["cases"]
        members = {cid for cid, entry in entries.items() if entry["split"] == split}
    lines = trec_qrels_lines(read_cases(cases), read_chunks(chunk_path, token_starts=False), members)
    _emit(lines, out)
    typer.echo(f"exported {len(lines)} relevant chunks for {len({line.split()[0] for line in lines})} cases", err=True)
