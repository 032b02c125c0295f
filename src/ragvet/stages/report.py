"""Stage ``report``: one document comparing every configuration with its baseline
(the committed baseline, or a git revision's results with ``--against``), fit for
a pull-request comment, and the data for ``dvc plots``.

As a DVC stage it writes ``metrics/report.md``, ``metrics/plots/`` and ``data/moves.csv``
(each gated case's moves, for ``dvc plots``; DVC's cache keeps it), rendering the
verdict the verdict stage decided (``--verdict data/verdict.json``) rather than deciding
it again. By hand, ``ragvet report --against origin/main --format md|html`` prints (or
``--out`` writes) the same document against another revision, deciding that verdict
through the gate's own :func:`ragvet.gating.decision.decide`; ``--comment`` adds the
hidden marker CI uses to find and update its one pull-request comment. The html page
ends with the case explorer (:mod:`ragvet.reporting.explorer`), which also reads the
runs and chunks of both sides (:mod:`ragvet.gating.retrieved`).

Every comparison reads the two per-case tables a batch of cases at a time
(:class:`ragvet.gating.compare.Pairing`, :func:`ragvet.reporting.moves.move_frames`; a
revision's table fetched into a temporary folder first, :func:`ragvet.gating.baselines.fetched`),
so the markdown report and the moves CSV never hold a table. The html page holds what it
shows: the explorer's first :data:`ragvet.reporting.explorer.EXPLORER_CASES` cases (newly
missed and found first), their cases and top k, read as the files are scanned; the
baseline's slice chart is tallied a batch of cases at a time.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer

from ragvet.errors import InputError, Problem, user_errors
from ragvet.gating.baselines import Revision, baselines_for, current_path, fetched, latency_pairs
from ragvet.gating.compare import split_fingerprints
from ragvet.gating.decision import decide, read_verdict
from ragvet.gating.freshness import refuse_stale
from ragvet.gating.retrieved import retrieved_at, retrieved_here, unavailable
from ragvet.gating.side_by_side import comparable_metrics, side_by_side
from ragvet.inputs.params import settled, stage_params
from ragvet.reporting.cases import case_details, listed_cases
from ragvet.reporting.charts import report_figures
from ragvet.reporting.comparisons import compare_configs, compared_metrics, report_pairings
from ragvet.reporting.document import COMMENT_LIMIT, Contents, render_report
from ragvet.reporting.explorer import EXPLORER_CASES, explorer_data, explorer_ids, explorer_section
from ragvet.reporting.judged import judged_references, judged_warnings
from ragvet.reporting.latency_page import render_latency
from ragvet.reporting.moves import RANK, first_moves, move_frames, moves_lines
from ragvet.reporting.page import render_html
from ragvet.reporting.plots import budget_rows, csv_text, plot_rows, slice_rows
from ragvet.reporting.summaries import summary_k
from ragvet.settings import Budget, Gate, Judged
from ragvet.storage.atomic import outputs_together, remove_output, write_lines
from ragvet.storage.files import each_jsonl_of, read_json, read_jsonl, write_text
from ragvet.storage.records import split_outline
from ragvet.storage.results import per_case_path

PLOT_FILES = ("at_k.csv", "budget.csv", "slices.csv")  # what the report writes into --plots, as dvc.yaml's plots name


class Format(StrEnum):
    md = "md"
    html = "html"


def _written(folder: Path, configs: list[str], what: str) -> dict[str, dict]:
    """What evaluate wrote for each configuration (``<folder>/<config>.json``), read
    rather than recomputed from the per-case tables: the same figures, at no cost."""
    paths = {config: folder / f"{config}.json" for config in configs}
    missing = [path for path in paths.values() if not path.is_file()]
    if missing:
        raise InputError([Problem(str(path), f"{what} not found", "run dvc repro first") for path in missing])
    return {config: read_json(path) for config, path in paths.items()}


def _current(configs: list[str], cases_dir: Path, metrics: list[str] | None) -> dict[str, Path]:
    """Each configuration's per-case table, its columns checked: the comparisons read it a batch at a time."""
    paths = {config: current_path(cases_dir, config, metrics) for config in configs}
    missing = [config for config, found in paths.items() if found is None]
    if missing:
        fix = "run dvc repro first"
        raise InputError(
            [Problem(str(per_case_path(cases_dir, c)), "per-case results not found", fix) for c in missing]
        )
    return paths  # type: ignore[return-value]


def _case_info(cases: Path, corpus: Path, comparisons: list[dict]) -> dict[str, dict]:
    """Questions and evidence of the newly missed and found cases only, their lines alone decoded."""
    ids = listed_cases(comparisons)
    if not ids:
        return {}
    texts = {doc["doc_id"]: doc["text"] for doc in read_jsonl(corpus)}
    return case_details(each_jsonl_of(cases, "id", ids), texts, ids)


def _moving(comparisons: list[dict], rows: dict[str, Path], bases: dict, gated: list[str]) -> list[tuple]:
    """``(comparison, current table, baseline table)`` of each gated configuration compared."""
    return [(c, rows.get(c["config"]), bases[c["config"]][1]) for c in comparisons if c["config"] in gated]


def _explorer(
    settings: dict,
    gate: Gate,
    moving: list[tuple],
    cases: Path,
    corpus: Path,
    against: Revision | None,
    baseline: Path,
) -> str:
    """The case explorer's section of the html page: the gated configurations' moves (the
    first :data:`EXPLORER_CASES` of each, :func:`first_moves`), with each side's top ``k``
    of the cases shown (the baseline's only from a revision, its runs and chunks fetched
    into its folder: a baseline folder keeps no runs)."""
    metrics = list(gate.metrics)
    k = next((c["k"] for c, _, _ in moving), summary_k(settings["ks"]))
    firsts = {c["config"]: first_moves(move_frames(c, cur, base, metrics), EXPLORER_CASES) for c, cur, base in moving}
    moves = {config: rows for config, (rows, _) in firsts.items()}
    ids = explorer_ids(moves)
    shown = set(ids)
    here = {c: retrieved_here(c, settings["configs"][c]["chunking"], k, shown) for c in moves}
    if against is not None:
        there = retrieved_at(against.name, list(moves), k, against.folder, shown)
    else:
        why = f"the committed baseline ({baseline}) keeps per-case results, not runs: compare --against a revision"
        there = dict.fromkeys(moves, unavailable(why))
    texts = {doc["doc_id"]: doc["text"] for doc in read_jsonl(corpus)}
    sides = {c: (there[c], here[c]) for c in moves}
    listed = max((count for _, count in firsts.values()), default=0)
    label = against.name if against is not None else str(baseline)
    questions = each_jsonl_of(cases, "id", shown)  # only the shown cases' lines decoded
    data = explorer_data(
        questions, texts, moves, sides, ["first_rank", *metrics], settings["slices"], k, label, ids, listed
    )
    return explorer_section(data)


def write_plots(plots: Path, settings: dict, summaries: dict, slices: dict) -> None:
    """The ``dvc plots`` data: metrics against k, the budget points, the slice bars."""
    ks, k, budget = settings["ks"], summary_k(settings["ks"]), Budget.from_params(settings)
    files = dict(
        zip(
            PLOT_FILES,
            (
                plot_rows(summaries, ks),
                budget_rows(summaries, k, budget.values, budget.label),
                slice_rows(slices, k),
            ),
            strict=True,
        )
    )
    for stale in plots.glob("*.csv") if plots.exists() else []:
        if stale.name not in files:
            remove_output(stale)
    for name, data in files.items():
        write_text(plots / name, csv_text(data))


def _contents(
    settings: dict,
    gate: Gate,
    summaries: dict,
    comparisons: list[dict],
    decided: dict,
    rows: dict[str, Path],
    bases: dict,
    against: str | None,
    cases: Path,
    corpus: Path,
) -> Contents:
    """What the markdown report says: every configuration beside the first gated one (the
    configuration a change is measured by), the judged-answer warnings, the listed cases."""
    judging = Judged.from_params(settings)
    first = list(gate.configs)[0]
    table = side_by_side(rows, first, comparable_metrics(summary_k(settings["ks"])), gate)
    references = judged_references(summaries, first, bases, against)
    warnings = judged_warnings(summaries, references, judging.metric, judging.max_drop)
    info = _case_info(cases, corpus, comparisons)
    return Contents(summaries, comparisons, decided, info, settings["ks"], table, warnings)


def _figures(settings: dict, summaries: dict, slices: dict, bases: dict) -> list[tuple[str, str]]:
    """The html page's charts, each configuration beside its baseline."""
    base_tables = {name: pair[1] for name, pair in bases.items() if pair[1] is not None}
    base_summaries = {name: pair[0] for name, pair in bases.items() if pair[0] is not None}
    return report_figures(settings, summaries, base_summaries, slices, base_tables)


def _latency_page(summaries: dict, latency_dir: Path, ks: list[int]) -> str:
    """The latency page of the configurations whose retrieve stage left a latency record."""
    timed = {c: latency_dir / f"{c}.json" for c in summaries}
    found = {c: read_json(path) for c, path in timed.items() if path.is_file()}
    return render_latency(summaries, found, summary_k(ks))


@user_errors
def main(
    cases_dir: Path = typer.Option(Path("metrics/cases"), help="Folder of per-case tables, one per configuration."),
    summaries_dir: Path = typer.Option(
        Path("metrics"), help="Folder of the metrics JSON evaluate wrote, <config>.json."
    ),
    slices_dir: Path = typer.Option(Path("metrics/slices"), help="Folder of per-slice JSON, one per configuration."),
    split: Path = typer.Option(Path("data/split.json"), help="Frozen split JSON."),
    baseline: Path = typer.Option(Path("metrics/baseline"), help="Committed baseline folder."),
    cases: Path = typer.Option(Path("data/validated/cases.jsonl"), help="Validated cases (questions, evidence)."),
    corpus: Path = typer.Option(Path("data/validated/corpus.jsonl"), help="Validated corpus (evidence text)."),
    against: str | None = typer.Option(None, help="Compare with this git revision's committed results instead."),
    format: Format = typer.Option(
        Format.md, "--format", help="md (a PR comment) or html (self-contained, with plots)."
    ),
    comment: bool = typer.Option(False, help="Start with the hidden marker CI uses to update its one PR comment."),
    out: Path | None = typer.Option(None, help="Report to write; printed when omitted."),
    plots: Path | None = typer.Option(None, help="Folder for the dvc plots CSVs."),
    moves: Path | None = typer.Option(
        None, help="CSV of each gated case's first evidence rank and evidence recall, baseline beside current."
    ),
    latency_dir: Path | None = typer.Option(
        None, help="Folder of the retrieve stages' latency records, <config>.json (.ragvet/latency under DVC)."
    ),
    latency_out: Path | None = typer.Option(None, help="Latency page to write (outside DVC and git: it varies)."),
    verdict: Path | None = typer.Option(
        None, help="Render the verdict the verdict stage wrote (data/verdict.json) instead of deciding it."
    ),
    budget: Path | None = typer.Option(
        None, help="The settings stage's budget.json (dvc.yaml's dep), checked against the params."
    ),
    judged: Path | None = typer.Option(
        None, help="The settings stage's judged.json (dvc.yaml's dep), checked against the params."
    ),
    params: Path = typer.Option(Path("params.yaml")),
) -> None:
    """Write the report of every configuration against the baseline.

    The verdict, paired deltas with confidence intervals, moved slices, newly missed and
    found cases, and the context budget."""
    if verdict is not None and against is not None:
        fix = "drop --verdict: against a revision the report decides the verdict itself"
        raise InputError([Problem("ragvet report", "--verdict is the committed baseline's verdict", fix)])
    settings = stage_params(params, ["configs", "retrievers", "ks", "gate", "slices", "budget", "judged"])
    for key, path in (("budget", budget), ("judged", judged)):
        if path is not None:
            settled(path, key, settings)
    gate = Gate.from_params(settings)
    summary_paths = [summaries_dir / f"{config}.json" for config in sorted(settings["configs"])]
    read = [cases_dir, slices_dir, split, cases, corpus, *summary_paths, *([verdict] if verdict else [])]
    refuse_stale(read, "the report")
    fingerprints = split_fingerprints(split_outline(split).record)
    side_metrics = comparable_metrics(summary_k(settings["ks"]))
    # the html charts' slice tables take every metric
    metrics = None if format is Format.html else [*compared_metrics(settings["ks"], gate), *side_metrics]
    rows = _current(sorted(settings["configs"]), cases_dir, metrics)
    summaries = _written(summaries_dir, sorted(settings["configs"]), "metrics JSON")
    slices = _written(slices_dir, sorted(settings["configs"]), "slice table")
    configs = sorted(settings["configs"]) if against else list(gate.configs)
    ranked = format is Format.html or moves is not None  # the moves read each case's first relevant rank
    with fetched(against) as revision:  # a revision's tables, removed once the report is written
        bases = baselines_for(configs, baseline, revision, metrics, extra=(RANK,) if ranked else ())
        pairings = report_pairings(configs, settings["ks"], gate)  # each config's tables, read once for both uses
        if verdict is not None:
            decided = read_verdict(verdict)  # the verdict stage decided it once: rendered here, never decided again
        else:
            p95_limit = gate.max_p95_rise if latency_dir is not None else None
            timed = latency_pairs(p95_limit, list(gate.configs), baseline, latency_dir, against)
            depth = max(settings["ks"])  # what moved at the deepest k, as the verdict stage measures it
            sides = (rows, bases, summaries_dir)
            decided = decide(gate, cases_dir, split, baseline, against, timed, *sides, depth=depth, pairings=pairings)
        current = {c: rows[c] for c in configs if c in rows}
        comparisons = compare_configs(current, bases, fingerprints, settings["ks"], gate, against, pairings=pairings)
        contents = _contents(settings, gate, summaries, comparisons, decided, rows, bases, against, cases, corpus)
        text = render_report(contents, against, comment, COMMENT_LIMIT if comment else None)
        moving = _moving(comparisons, rows, bases, list(gate.configs))
        if format is Format.html:
            explorer = _explorer(settings, gate, moving, cases, corpus, revision, baseline)
            text = render_html(text, _figures(settings, summaries, slices, bases), explorer)
        plot_files = [plots / name for name in PLOT_FILES] if plots is not None else []
        with outputs_together(out, latency_out, moves, *plot_files):  # the report and its plot data change together
            if out is not None:
                write_text(out, text)
            if plots is not None:
                write_plots(plots, settings, summaries, slices)
            if moves is not None:  # each comparison's evidence_recall@k, what the dvc plots CSV holds
                found = (move_frames(c, cur, base, [f"evidence_recall@{c['k']}"]) for c, cur, base in moving)
                write_lines(moves, moves_lines(found))
            if latency_out is not None and latency_dir is not None:
                write_text(latency_out, _latency_page(summaries, latency_dir, settings["ks"]))
    if out is None:
        typer.echo(text, nl=False)
    else:
        typer.echo(f"report: {len(summaries)} configurations -> {out}")
