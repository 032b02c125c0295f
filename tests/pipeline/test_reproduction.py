"""`ragvet verify`: a recomputed result reproduces the committed one within float noise,
and nothing else passes. Rows and rankings are written by hand; the end-to-end tests
drive DVC's own CLI across two clones that share only a local-folder remote."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import polars as pl
import pytest
import yaml
from builders import invoke
from repos import ROOT, commit_all, copy_repo, edit_params, ragvet, sh, untune

from ragvet.gating.reproduction import (
    EPSILON,
    RUN_COLUMNS,
    CaseComparison,
    check_config,
    ranking_difference,
    ranking_outcomes,
    rankings,
    render,
    row_differences,
    slices_differences,
    summary_differences,
    verify_results,
)
from ragvet.measures.summary import config_summary, slice_table
from ragvet.project import template_text
from ragvet.settings import Budget
from ragvet.storage import results
from ragvet.storage.files import dumps
from ragvet.storage.rankings import case_batches, numbering
from ragvet.storage.tables import write_run_frame

ROW = {
    "case_id": "q1",
    "split": "eval",
    "first_relevant_rank": 2,
    "metrics": {"recall@1": 0.0, "recall@3": 1.0, "mrr": 0.5},
    "counts": {"retrieved": 3},
    "top1_score": 0.612345,
}


def row(**changes) -> dict:
    return {**ROW, **changes}


# --------------------------------------------------------------------------- rows


def test_a_score_may_move_within_epsilon_and_nothing_else_may():
    assert row_differences(ROW, row(top1_score=0.612345 + 0.9 * EPSILON)) == ([], pytest.approx(0.9 * EPSILON))
    assert row_differences(ROW, row(top1_score=0.612345 + 1.1 * EPSILON))[0] == ["top1_score"]
    assert row_differences(ROW, row(top1_score=None))[0] == ["top1_score"]
    assert row_differences(row(top1_score=None), row(top1_score=None)) == ([], 0.0)
    moved = row(metrics={"recall@1": 1.0, "recall@3": 1.0, "mrr": 1.0}, first_relevant_rank=1)
    assert row_differences(ROW, moved)[0] == ["first_relevant_rank", "metrics.mrr", "metrics.recall@1"]
    # a rank-derived value gets no tolerance at all, however small the change
    assert row_differences(ROW, row(metrics={**ROW["metrics"], "mrr": 0.5 + 1e-9}))[0] == ["metrics.mrr"]


# --------------------------------------------------------------------------- rankings


def test_equal_rankings_and_scores_within_epsilon_are_equal():
    assert ranking_difference([("a", 0.9), ("b", 0.5)], [("a", 0.90004), ("b", 0.49997)]) is None
    assert ranking_difference([], []) is None


def test_two_chunks_within_two_epsilon_may_swap():
    committed = [("a", 0.50000), ("b", 0.49995)]
    recomputed = [("b", 0.50001), ("a", 0.49996)]  # a moved 4e-5, b 6e-5: both within 1e-4
    assert ranking_difference(committed, recomputed) is None


def test_a_real_swap_is_refused_and_named():
    assert ranking_difference([("a", 0.9), ("b", 0.8)], [("b", 0.9), ("a", 0.8)]) == "a scored 0.900000, now 0.800000"
    # same scores, but an order no near tie explains (a run need not be sorted by score: plugins, run files)
    assert ranking_difference([("a", 0.5003), ("b", 0.5)], [("b", 0.5), ("a", 0.5003)]) == (
        "b moved above a (scores 0.500000 and 0.500300)"
    )


def test_a_chunk_may_cross_the_depth_cut_only_at_the_cut():
    at_cut = ranking_difference([("a", 0.9), ("b", 0.5)], [("a", 0.9), ("c", 0.50005)])
    assert at_cut is None
    far = ranking_difference([("a", 0.9), ("b", 0.5)], [("c", 0.95), ("a", 0.9)])
    assert far == "c entered or left the ranking with score 0.950000, not at the cut"


# --------------------------------------------------------------------------- configurations


def test_a_changed_case_is_a_near_tie_only_when_the_runs_show_one():
    committed_rows, recomputed_rows = [ROW, row(case_id="q2")], [ROW, row(case_id="q2", first_relevant_rank=1)]
    tie = (
        {"q1": [("a", 0.7)], "q2": [("x", 0.5), ("y", 0.49999)]},
        {"q1": [("a", 0.7)], "q2": [("y", 0.5), ("x", 0.5)]},
    )
    near = check_config("c", committed_rows, recomputed_rows, tie)
    assert (near.reproduced, near.near_ties, near.differences, near.cases) == (True, ["q2"], [], 2)

    real = ({"q1": [("a", 0.7)], "q2": [("x", 0.9), ("y", 0.4)]}, {"q1": [("a", 0.7)], "q2": [("y", 0.9), ("x", 0.4)]})
    refused = check_config("c", committed_rows, recomputed_rows, real)
    assert refused.differences == ["case q2: x scored 0.900000, now 0.400000; first_relevant_rank changed"]

    blind = check_config("c", committed_rows, recomputed_rows, None)
    assert blind.differences == ["case q2: first_relevant_rank changed (committed run not available)"]
    assert not blind.reproduced and not blind.rankings_checked


def test_missing_tables_cases_and_unexplained_changes_are_differences():
    assert check_config("c", None, [ROW], None).differences == ["no committed per-case table"]
    extra = check_config("c", [ROW], [ROW, row(case_id="q9")], None)
    assert extra.differences == ["case q9: only in the recomputed table"]
    same_run = ({"q1": [("a", 0.7)]}, {"q1": [("a", 0.7)]})
    odd = check_config("c", [ROW], [row(counts={"retrieved": 2})], same_run)
    assert odd.differences == ["case q1: counts.retrieved changed, though its ranking did not"]


# --------------------------------------------------------------------------- end to end

# Another CPU, as far as torch is concerned: its portable kernels instead of AVX2.
OTHER_CPU = {"ATEN_CPU_CAPABILITY": "default"}
# MiniLM over whole documents: the sample's fewest chunks, each cut at the model's 256 tokens,
# so the cheapest dense run of its corpus (14k tokens to encode with the questions; 26k on headings-1200).
DENSE = "whole-dense"
GATED = "sentences-600-bm25"
RESULTS = [("cases", "parquet"), ("slices", "json"), ("abstention", "json")]  # evaluate's outputs beside the summary


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def locked_md5(repo: Path, stage: str, out: str) -> str:
    lock = yaml.safe_load((repo / "dvc.lock").read_text())
    return next(o["md5"] for o in lock["stages"][stage]["outs"] if o["path"] == out)


def gated_and_dense(params: dict) -> None:
    """The sample's gated BM25 configuration and one dense configuration, nothing else."""
    sample = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["chunking"]["whole"] = {"strategy": "document"}
    params["retrievers"]["minilm"] = sample["retrievers"]["minilm"]
    params["configs"] = {GATED: params["configs"][GATED], DENSE: {"chunking": "whole", "retriever": "minilm"}}
    params["gate"]["max_drop"] = params["gate"]["slice_max_drop"] = 1.0  # these tests are not about the gate


@pytest.fixture(scope="module")
def clones(sample_repo: Path, tmp_path_factory) -> tuple[Path, Path]:
    """Clone A is a copy of the session's reproduced sample, pushed as it is to a local-folder
    remote, then a second commit that keeps its gated BM25 configuration, adds a dense one,
    reproduced and pushed; clone B is a git clone of A that shares nothing else with it: no
    DVC cache, no embedding cache."""
    pytest.importorskip("sentence_transformers", reason="needs the dense extra")
    root = tmp_path_factory.mktemp("clones")
    a = copy_repo(sample_repo, root / "a")
    sh(a, "dvc", "remote", "add", "-d", "shared", str(root / "remote"))
    commit_all(a, "a remote for the team")
    sh(a, "dvc", "push")
    dropped = [config for config in yaml.safe_load((a / "params.yaml").read_text())["configs"] if config != GATED]
    edit_params(a, gated_and_dense)
    for config in dropped:  # the committed results of the configurations left out, which no stage writes now
        paths = [f"metrics/{config}.json", *(f"metrics/{kind}/{config}.{suffix}" for kind, suffix in RESULTS)]
        sh(a, "git", "rm", "-q", "--ignore-unmatch", *paths)
    # The sample's tuned threshold would be refused once bm25 changes (its spec is fingerprinted).
    untune(a)
    sh(a, "dvc", "repro")
    commit_all(a, "a dense configuration")
    sh(a, "dvc", "push")
    b = root / "b"
    sh(root, "git", "clone", "-q", str(a), str(b))
    return a, b


def test_an_old_commit_comes_back_byte_for_byte_through_the_remote_on_other_kernels(clones):
    """The sample's own commit, whose three BM25 configurations the newer commit dropped."""
    _, b = clones
    sh(b, "git", "checkout", "-q", "HEAD~1")
    sh(b, "dvc", "pull", **OTHER_CPU)
    out = sh(b, "dvc", "repro", **OTHER_CPU).stdout
    assert "Running stage" not in out  # nothing recomputed: every output came from the remote
    assert sh(b, "git", "status", "--porcelain").stdout == ""
    for config in ("fixed-300-bm25", "headings-1200-bm25"):
        run = f"data/runs/{config}.parquet"
        assert md5(b / run) == locked_md5(b, f"retrieve@{config}", run)
        assert (b / "metrics" / f"{config}.json").is_file()
    sh(b, "git", "checkout", "-q", "main")


def test_recomputed_on_other_kernels_the_results_are_byte_for_byte(clones):
    """The default portable precision: a cold embedding cache, another CPU's kernels, one thread."""
    _, b = clones
    sh(b, "dvc", "pull")
    run = f"data/runs/{DENSE}.parquet"
    committed = locked_md5(b, f"retrieve@{DENSE}", run)
    done = sh(b, "dvc", "repro", "-f", "-s", f"retrieve@{DENSE}", OMP_NUM_THREADS="1", **OTHER_CPU)
    assert re.search(r"embeddings: 0 cached, \d+ computed", done.stdout)  # really re-encoded
    assert md5(b / run) == committed
    sh(b, "dvc", "repro", "-s", f"evaluate@{DENSE}")
    assert sh(b, "git", "status", "--porcelain").stdout == ""
    done = ragvet(b, "verify", "--against", "HEAD", check=True)
    assert f"reproduced {DENSE}: 181 cases, identical rankings at every k except 0 near-tie" in done.stdout
    assert "(largest move 0.0e+00)" in done.stdout


def test_fast_precision_on_other_kernels_is_reproduced_within_tolerance(clones):
    """precision: fast encodes in float32: its scores differ from the committed portable ones in
    the last digits, and ragvet verify tells that noise from a change."""
    _, b = clones
    sh(b, "dvc", "pull")  # the chunks it retrieves from, whichever test of the module ran first
    edit_params(b, lambda params: params["retrievers"]["minilm"].update(precision="fast"))
    run = f"data/runs/{DENSE}.parquet"
    committed = locked_md5(b, f"retrieve@{DENSE}", run)
    sh(b, "dvc", "repro", "-s", f"retrieve@{DENSE}", **OTHER_CPU)
    assert md5(b / run) != committed  # float32 noise reached the scores
    sh(b, "dvc", "repro", "-s", f"evaluate@{DENSE}")
    done = ragvet(b, "verify", "--against", "HEAD", check=True)
    (line,) = [line for line in done.stdout.splitlines() if line.startswith(f"reproduced {DENSE}: ")]
    assert line.startswith(f"reproduced {DENSE}: 181 cases, identical rankings at every k")
    assert "(largest move 0.0e+00)" not in line
    assert done.stdout.rstrip().endswith("reproduced: 2 configuration(s) against HEAD")
    sh(b, "git", "checkout", "-q", "--", ".")  # params.yaml, dvc.lock and the committed results
    sh(b, "dvc", "checkout")


def test_a_slice_table_this_clone_cannot_get_is_a_check_left_undone_and_said_so(clones, tmp_path):
    """The slice tables live in the DVC cache: a clone whose cache and remote lack the
    committed one still verifies the rest, and names the check it could not make."""
    _, b = clones
    sh(b, "dvc", "pull")
    slices = f"metrics/slices/{GATED}.json"
    md5 = locked_md5(b, f"evaluate@{GATED}", slices)
    (b / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]).unlink()
    sh(b, "dvc", "remote", "add", "--local", "-d", "empty", str(tmp_path / "empty"))
    try:
        done = ragvet(b, "verify", "--against", "HEAD", check=True)
    finally:
        sh(b, "dvc", "remote", "remove", "--local", "empty")
    assert (
        f"  HEAD's slice table not checked: DVC object {md5} is neither in this DVC cache nor on the remote "
        "'empty'; `dvc pull` brings it"
    ) in done.stdout.splitlines()
    assert f"reproduced {GATED}: 181 cases, identical rankings at every k" in done.stdout
    assert sh(b, "git", "status", "--porcelain").stdout == ""


def test_a_changed_ranking_that_is_no_near_tie_is_refused(clones):
    a, _ = clones
    edit_params(a, lambda params: params["retrievers"]["bm25"].update(k1=0.1, b=0.0))
    for stage in (f"retrieve@{GATED}", f"evaluate@{GATED}"):
        sh(a, "dvc", "repro", "-s", stage)
    done = ragvet(a, "verify", "--against", "HEAD")
    assert done.returncode == 1
    assert f"DIFFERS {GATED}" in done.stdout and f"reproduced {DENSE}" in done.stdout
    assert "  differs: case " in done.stdout
    assert done.stdout.rstrip().endswith("NOT reproduced: 2 configuration(s) against HEAD")


# --------------------------------------------------------------------------- S3-compatible remote


def test_an_s3_compatible_remote_carries_the_outputs_to_a_fresh_clone(work_repo, s3_server, tmp_path):
    pytest.importorskip("dvc_s3", reason="the S3 remote needs dvc-s3 (requirements-dev.lock)")
    credentials = s3_server.credentials
    sh(work_repo, "dvc", "remote", "add", "-d", "team", "s3://ragvet/cache")
    sh(work_repo, "dvc", "remote", "modify", "team", "endpointurl", s3_server.url)
    commit_all(work_repo, "share outputs through S3")
    sh(work_repo, "dvc", "push", **credentials)
    clone = tmp_path / "clone"
    sh(tmp_path, "git", "clone", "-q", str(work_repo), str(clone))
    sh(clone, "dvc", "pull", **credentials)
    assert "Running stage" not in sh(clone, "dvc", "repro", **credentials).stdout
    assert sh(clone, "git", "status", "--porcelain").stdout == ""
    run = "data/runs/sentences-600-bm25.parquet"
    assert md5(clone / run) == md5(work_repo / run)
    assert credentials["AWS_SECRET_ACCESS_KEY"] not in (clone / ".dvc" / "config").read_text()


# --------------------------------------------------------------------------- summaries

SAMPLE_CONFIG = "sentences-600-bm25"  # the template's one configuration
SPEC = {"chunking": "sentences-600", "retriever": "bm25"}


def scored_rows() -> list[dict]:
    """25 eval cases, 17 of them found (recall@5 0.68), tagged by topic; and one dev case."""
    rows = [
        {
            "case_id": f"q{n:02d}",
            "split": "eval",
            "answerable": True,
            "first_relevant_rank": 1 if n < 17 else None,
            "top1_score": 0.5,
            "tags": {"topic": "leave" if n % 2 else "travel"},
            "metrics": {"recall@5": 1.0 if n < 17 else 0.0, "mrr": 1.0 if n < 17 else 0.0},
        }
        for n in range(25)
    ]
    return [*rows, {**rows[0], "case_id": "zz-dev", "split": "dev"}]


def written_figures(table, settings: dict) -> tuple[dict, dict]:
    """The summary and slice table evaluate writes from ``table``, as read back from JSON."""
    ks, budgets, fingerprints = settings["ks"], Budget.from_params(settings).values, {"eval_split": "e", "corpus": "c"}
    summary = config_summary(SAMPLE_CONFIG, SPEC, table, ks, None, fingerprints, None, budgets)
    return json.loads(dumps(summary)), json.loads(dumps(slice_table(table, settings["slices"], ks, budgets)))


def test_a_summary_or_slice_its_per_case_table_does_not_give_is_a_difference():
    """verify compared per-case tables only: a metrics JSON saying recall 0.999 beside a
    per-case table giving 0.68 was reproduced."""
    settings = {"ks": [5], "slices": ["topic"]}
    table = results.results_frame(scored_rows())
    summary, slices = written_figures(table, settings)
    assert summary["eval"]["metrics"]["recall@5"] == 0.68
    assert summary_differences(SAMPLE_CONFIG, table, summary, settings, "metrics/c.json") == []
    assert slices_differences(table, slices, settings, "metrics/slices/c.json") == []

    summary["eval"]["metrics"]["recall@5"] = 0.999
    slices["eval"]["topic"]["leave"]["metrics"]["mrr"] = 1.0
    assert summary_differences(SAMPLE_CONFIG, table, summary, settings, "metrics/c.json") == [
        "metrics/c.json: eval.metrics.recall@5 is 0.999, its per-case table gives 0.68"
    ]
    assert slices_differences(table, slices, settings, "metrics/slices/c.json") == [
        "metrics/slices/c.json: eval.topic.leave.metrics.mrr is 1.0, its per-case table gives 0.666667"
    ]


def test_verify_refuses_a_commit_whose_summary_its_per_case_table_does_not_give(tmp_path, monkeypatch):
    """End to end, on a commit of hand-written results: tables equal, summary forged."""
    repo = tmp_path / "repo"
    (repo / "metrics" / "cases").mkdir(parents=True)
    (repo / "metrics" / "slices").mkdir()
    (repo / "params.yaml").write_text(template_text("params.yaml"))
    settings = yaml.safe_load(template_text("params.yaml"))
    table = results.results_frame(scored_rows())
    results.write_results(repo / "metrics" / "cases" / f"{SAMPLE_CONFIG}.parquet", table)
    summary, slices = written_figures(table, settings)
    summary["eval"]["metrics"]["recall@5"] = 0.999
    (repo / "metrics" / f"{SAMPLE_CONFIG}.json").write_text(dumps(summary))
    (repo / "metrics" / "slices" / f"{SAMPLE_CONFIG}.json").write_text(dumps(slices))
    sh(repo, "git", "init", "-q", "-b", "main")
    commit_all(repo, "results with a forged summary")
    monkeypatch.chdir(repo)
    result = invoke("verify", "--against", "HEAD", code=None)
    assert result.exit_code == 1, result.output
    assert f"DIFFERS {SAMPLE_CONFIG}" in result.output
    assert (
        f"differs: metrics/{SAMPLE_CONFIG}.json: eval.metrics.recall@5 is 0.999, its per-case table gives 0.68"
        in result.output
    )
    assert f"differs: HEAD:metrics/{SAMPLE_CONFIG}.json: eval.metrics.recall@5 is 0.999" in result.output


# --------------------------------------------------------------------------- batches

TIE, CHANGED = "q03", "q07"  # a near tie, and a real change of ranking and row


def ranked(
    case_id: str, scores: tuple[float, ...], chunks: str = "abc", ranks: tuple[int, ...] = (1, 2, 3)
) -> list[dict]:
    """Run rows of one case: ``chunks`` with their ``scores`` and ``ranks``, in that row order."""
    return [
        {"case_id": case_id, "rank": rank, "chunk_id": f"{case_id}-{chunk}", "score": score}
        for rank, chunk, score in zip(ranks, chunks, scores, strict=True)
    ]


def committed_project(repo: Path, settings: dict, reverse: bool, numbered: bool = False) -> None:
    """A commit of results by hand (26 cases, each ranking three chunks), their figures what the
    table gives; then a work tree recomputed with float noise (every score +3e-5), a near tie
    (TIE's second and third chunks, 5e-5 apart, swap ranks, their rows left in place), a real
    change (CHANGED's top two chunks swap, and its row moves), q24 dropped, q99 added, and a
    forged eval recall@5 in its summary; its run's rows in reverse case order when ``reverse``
    (not as the retrieve stage writes them); both runs numbered alike when ``numbered``, as
    the retrieve stage numbers them (:func:`numbered_run`)."""
    rows = scored_rows()
    for folder in ("metrics/cases", "metrics/slices", "data/runs"):
        (repo / folder).mkdir(parents=True, exist_ok=True)
    (repo / "params.yaml").write_text(yaml.safe_dump(settings))

    def write(rows: list[dict], run: list[dict], forged: float | None = None) -> None:
        table = results.results_frame(rows)
        results.write_results(repo / "metrics" / "cases" / f"{SAMPLE_CONFIG}.parquet", table)
        summary, slices = written_figures(table, settings)
        if forged is not None:
            summary["eval"]["metrics"]["recall@5"] = forged
        (repo / "metrics" / f"{SAMPLE_CONFIG}.json").write_text(dumps(summary))
        (repo / "metrics" / "slices" / f"{SAMPLE_CONFIG}.json").write_text(dumps(slices))
        path = repo / "data" / "runs" / f"{SAMPLE_CONFIG}.parquet"
        numbered_run(path, run) if numbered else pl.DataFrame(run).write_parquet(path)

    run = [
        r
        for row in rows
        for r in ranked(row["case_id"], (0.9, 0.50005, 0.5) if row["case_id"] == TIE else (0.9, 0.5, 0.1))
    ]
    write(rows, run)
    sh(repo, "git", "init", "-q", "-b", "main")
    commit_all(repo, "the committed results")
    moved = [
        {**row, "first_relevant_rank": 2, "metrics": {**row["metrics"], "mrr": 0.5}}
        if row["case_id"] == CHANGED
        else row
        for row in rows
        if row["case_id"] != "q24"
    ]
    moved = sorted([*moved, {**rows[20], "case_id": "q99"}], key=lambda row: row["case_id"])
    recomputed = []
    for row in moved:
        case_id = row["case_id"]
        if case_id == TIE:
            recomputed += ranked(case_id, (0.90003, 0.50001, 0.50002), ranks=(1, 3, 2))  # c above b, rows a b c
        elif case_id == CHANGED:
            recomputed += ranked(case_id, (0.90003, 0.50003, 0.10003), "bac")
        else:
            recomputed += ranked(case_id, (0.90003, 0.50003, 0.10003))
    write(moved, recomputed[::-1] if reverse else recomputed, forged=0.999)


def numbered_run(path: Path, run: list[dict]) -> None:
    """``run`` as the retrieve stage writes it, its ids numbered among every case id of
    :func:`committed_project` (its cases file: q99 too) and every chunk id of those cases."""
    cases = [row["case_id"] for row in scored_rows()] + ["q99"]
    write_run_frame(path, pl.DataFrame(run), cases, [f"{case}-{chunk}" for case in cases for chunk in "abc"])


EXPECTED = [
    f"DIFFERS {SAMPLE_CONFIG}: 27 cases, identical rankings at every k except 1 near-tie case(s), scores within "
    "0.0001 (largest move 4.0e-01)",
    "  near tie: q03",
    "  differs: case q24: only in the committed table",
    "  differs: case q99: only in the recomputed table",
    "  differs: case q07: q07-a scored 0.900000, now 0.500030; first_relevant_rank, metrics.mrr changed",
    f"  differs: metrics/{SAMPLE_CONFIG}.json: eval.metrics.recall@5 is 0.999, its per-case table gives 0.68",
    "NOT reproduced: 1 configuration(s) against HEAD",
]


@pytest.mark.parametrize("reverse", [False, True], ids=["in-case-order", "reversed-run"])
def test_verify_says_the_same_whatever_its_batches(tmp_path, monkeypatch, reverse):
    """verify reads both tables and both runs a batch of cases at a time: batches of one to
    three cases give what the default batches give, and what the whole-table kernel
    (check_config) gives; a run in another order is sorted first, to the same verdict."""
    settings = {**yaml.safe_load(template_text("params.yaml")), "slices": ["topic"]}
    committed_project(tmp_path, settings, reverse)
    monkeypatch.chdir(tmp_path)
    found = {
        rows: verify_results([SAMPLE_CONFIG], "HEAD", Path("."), Path("metrics"), Path("data/runs"), settings, rows)
        for rows in (None, 1, 2, 3)
    }
    (check,) = found[None]
    assert all(checks == [check] for checks in found.values())
    assert render([check], "HEAD").splitlines() == EXPECTED
    assert (check.cases, check.near_ties, check.rankings_checked, check.note, check.unread) == (27, [TIE], True, "", "")
    assert check.max_score_delta == pytest.approx(0.40003)
    tables = [results.read_results(Path("metrics/cases") / f"{SAMPLE_CONFIG}.parquet")]
    sh(tmp_path, "git", "stash", "-q")  # the committed side, to read it whole
    tables.insert(0, results.read_results(Path("metrics/cases") / f"{SAMPLE_CONFIG}.parquet"))
    committed_run = pl.read_parquet(Path("data/runs") / f"{SAMPLE_CONFIG}.parquet")
    sh(tmp_path, "git", "stash", "pop", "-q")
    recomputed_run = pl.read_parquet(Path("data/runs") / f"{SAMPLE_CONFIG}.parquet")
    runs = (rankings(committed_run.iter_rows(named=True)), rankings(recomputed_run.iter_rows(named=True)))
    whole = check_config(SAMPLE_CONFIG, *(results.result_rows(table) for table in tables), runs)
    assert whole.differences == check.differences[:3] and whole.near_ties == check.near_ties
    assert (whole.cases, whole.max_score_delta) == (check.cases, check.max_score_delta)


def test_named_cases_stop_at_the_cap_and_the_rest_are_counted():
    """Ten million near ties or changed cases are a count, not ten million lines: past the cap
    (here 2) each list counts the rest, and the output says how many."""
    before = [row(case_id=f"q{n}") for n in range(5)]
    after = [row(case_id=f"q{n}", counts={"retrieved": 2}) for n in range(1, 6)]
    runs = (
        {f"q{n}": [("a", 0.5), ("b", 0.5)] for n in range(6)},
        {f"q{n}": [("b", 0.5), ("a", 0.5)] for n in range(6)},
    )
    check = CaseComparison(True, cap=2).add(before, after, None).check("c")
    assert check.differences == [
        "case q0: only in the committed table",
        "case q5: only in the recomputed table",
        "and 4 more case(s)",
    ]
    tied = CaseComparison(True, cap=2).add(before, before, runs).check("c")
    assert (tied.near_ties, tied.more_near_ties, tied.near_tie_cases, tied.differences) == (["q0", "q1"], 3, 5, [])
    lines = render([tied], "HEAD").splitlines()
    assert lines[0].startswith("reproduced c: 5 cases, identical rankings at every k except 5 near-tie case(s)")
    assert lines[1:4] == ["  near tie: q0", "  near tie: q1", "  and 3 more near-tie case(s)"]


def test_a_runs_ids_stored_as_categories_are_read_as_text(tmp_path):
    """The retrieve stage stores ids as categories; verify reads them as strings, since polars
    keeps every category it decodes for the whole process (a gigabyte at ten million cases)."""
    run = pl.DataFrame(ranked("q1", (0.9, 0.5, 0.1)) + ranked("q2", (0.8, 0.4, 0.2)))
    run.with_columns(pl.col("case_id", "chunk_id").cast(pl.Categorical)).write_parquet(tmp_path / "run.parquet")
    batch = pl.concat(case_batches(tmp_path / "run.parquet", "run", RUN_COLUMNS))
    assert (batch.schema["case_id"], batch.schema["chunk_id"]) == (pl.String, pl.String)
    assert batch.equals(run)


def test_verify_pairs_runs_numbered_alike_by_their_numbers_to_the_same_verdict(tmp_path, monkeypatch):
    """Two runs numbered alike are compared by their case and chunk numbers, their ids read
    only where a case moved: whatever the batches, the verdict their ids give."""
    settings = {**yaml.safe_load(template_text("params.yaml")), "slices": ["topic"]}
    verdicts = {}
    for numbered in (False, True):
        (tmp_path / str(numbered)).mkdir()
        committed_project(tmp_path / str(numbered), settings, reverse=False, numbered=numbered)
        monkeypatch.chdir(tmp_path / str(numbered))
        run = Path("data/runs") / f"{SAMPLE_CONFIG}.parquet"
        assert (numbering(run) is not None) == numbered
        folders = (Path("metrics"), Path("data/runs"))
        verdicts[numbered] = [
            verify_results([SAMPLE_CONFIG], "HEAD", Path("."), *folders, settings, rows) for rows in (None, 1, 2, 3)
        ]
    assert all(checks == verdicts[False][0] for checks in verdicts[True])
    assert render(verdicts[True][0], "HEAD").splitlines() == EXPECTED


def test_numbered_runs_give_each_case_the_outcome_their_ids_give(tmp_path):
    """A case's ranking outcome by numbers is the one by ids: unmoved within ε, a near tie,
    a real swap, a case one run ranks and the other does not, a chunk only one run ranks."""
    committed = [
        *ranked("q1", (0.9, 0.5, 0.1)),
        *ranked("q2", (0.9, 0.50005, 0.5)),
        *ranked("q3", (0.9, 0.5, 0.1)),
        *ranked("q4", (0.7, 0.6, 0.5)),
        *ranked("q6", (0.8, 0.7, 0.6)),
    ]
    recomputed = [
        *ranked("q1", (0.90003, 0.50003, 0.10003)),
        *ranked("q2", (0.90003, 0.50001, 0.50002), ranks=(1, 3, 2)),  # b and c swap, 5e-5 apart
        *ranked("q3", (0.90003, 0.50003, 0.10003), "bac"),  # a and b swap, 0.4 apart
        *ranked("q5", (0.4, 0.3, 0.2)),
        *ranked("q6", (0.80001, 0.70002, 0.6), "abd"),  # d for c, both at the cut (0.6)
    ]
    cases = ["q1", "q2", "q3", "q4", "q5", "q6"]
    chunks = [f"{case}-{chunk}" for case in cases for chunk in "abcd"]
    for name, run in (("committed", committed), ("recomputed", recomputed)):
        write_run_frame(tmp_path / f"{name}.parquet", pl.DataFrame(run), cases, chunks)
        pl.DataFrame(run).write_parquet(tmp_path / f"{name}-ids.parquet")
    numbered = (tmp_path / "committed.parquet", tmp_path / "recomputed.parquet")
    by_ids = (tmp_path / "committed-ids.parquet", tmp_path / "recomputed-ids.parquet")
    assert numbering(numbered[0]) == numbering(numbered[1]) is not None and numbering(by_ids[0]) is None
    outcomes = {
        (rows, name): pl.concat(ranking_outcomes(sides, rows)).rows()
        for rows in (None, 1, 2, 3)
        for name, sides in (("numbers", numbered), ("ids", by_ids))
    }
    expected = [
        ("q1", None, False, pytest.approx(3e-5)),
        ("q2", None, True, pytest.approx(4e-5)),
        ("q3", "q3-a scored 0.900000, now 0.500030", True, pytest.approx(0.40003)),
        ("q4", "q4-a entered or left the ranking with score 0.700000, not at the cut", True, 0.0),
        ("q5", "q5-a entered or left the ranking with score 0.400000, not at the cut", True, 0.0),
        ("q6", None, True, pytest.approx(2e-5)),
    ]
    for found in outcomes.values():
        assert found == expected
