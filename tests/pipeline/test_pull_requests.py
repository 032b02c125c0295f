"""Pull requests end to end: a temporary git repo whose `main` holds the accepted
results, and branches with a harmful chunking change, an improvement and an
edit of the eval labels, compared with `--against main` as CI does."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html import unescape as html_unescape
from pathlib import Path

import pytest
import yaml
from browser import CHROMIUM, chromium_page, open_in_chromium
from repos import ROOT, commit_all, copy_repo, ragvet, set_param, sh, untune

from ragvet.reporting.document import COMMENT_MARKER
from ragvet.reporting.page import policy
from ragvet.storage.results import read_results, result_rows

GATED = "sentences-600-bm25"
SNAPSHOT = ROOT / "tests" / "snapshots" / "pr_comment.md"
SCREENSHOT = ROOT / "docs" / "explorer-screenshot.png"  # docs/pull-requests.md shows it
UPDATE = os.environ.get("RAGVET_UPDATE_SNAPSHOTS") == "1"


def branch_with(repo: Path, name: str, change) -> Path:
    """Check out a new branch, apply ``change`` (without the sample's tuned threshold),
    reproduce up to the report, commit."""
    sh(repo, "git", "checkout", "-q", "-b", name)
    untune(repo)
    change(repo)
    sh(repo, "dvc", "repro", "report")
    commit_all(repo, name)
    return repo


def git_show_bytes(repo: Path, rev: str, path: str) -> bytes:
    return subprocess.run(["git", "show", f"{rev}:{path}"], cwd=repo, capture_output=True, check=True).stdout


def rows_at(repo: Path, rev: str | None) -> dict[str, dict]:
    path = f"metrics/cases/{GATED}.parquet"
    data = (repo / path).read_bytes() if rev is None else git_show_bytes(repo, rev, path)
    return {row["case_id"]: row for row in result_rows(read_results(data)) if row["split"] == "eval"}


def summaries_at(repo: Path, *revs: str | None) -> list[str]:
    """The gated configuration's metrics JSON at each revision (None: the work tree)."""
    path = f"metrics/{GATED}.json"
    return [(repo / path).read_text() if rev is None else git_show_bytes(repo, rev, path).decode() for rev in revs]


def listed_cases(report: str, heading: str) -> list[str]:
    """Case ids listed under the gated configuration's collapsed ``heading`` list."""
    section = report[report.index(f"## `{GATED}` (gated)") :]
    start = section.index(f"<summary>{heading}")
    block = section[start : section.index("</details>", start)]
    return re.findall(r"^- \*\*`([^`]+)`\*\*", block, flags=re.MULTILINE)


@pytest.fixture(scope="module")
def harmful_repo(sample_repo: Path, tmp_path_factory) -> Path:
    repo = copy_repo(sample_repo, tmp_path_factory.mktemp("pr") / "repo")
    return branch_with(repo, "harmful", lambda r: set_param(r, ["chunking", "sentences-600", "max_chars"], 300))


def test_harmful_chunking_change_fails_against_main_and_lists_the_newly_missed_cases(harmful_repo):
    gate = ragvet(harmful_repo, "gate", "--against", "main")
    assert gate.returncode == 1 and "gate: FAILED" in gate.stdout
    assert re.search(rf"^FAIL {GATED} evidence_recall@5: ", gate.stdout, flags=re.MULTILINE)
    # 300-character packing is another chunking: recall@5 and mrr are named as skipped, never compared.
    fingerprints = [json.loads(text)["fingerprints"]["chunking"] for text in summaries_at(harmful_repo, "main", None)]
    reason = f"not comparable across chunkings (baseline chunking {fingerprints[0]}, current {fingerprints[1]})"
    for skipped in ("recall@5", "mrr"):
        assert f"SKIP {GATED} {skipped}: {reason}\n" in gate.stdout
        assert not re.search(rf"^(FAIL|ok  ) {GATED} {skipped}: ", gate.stdout, flags=re.MULTILINE)
    compared = re.findall(rf"^(?:FAIL|ok  ) {GATED} (\S+): ", gate.stdout, flags=re.MULTILINE)
    assert compared == ["evidence_recall@5", "claim_availability@5", "evidence_recall_budget@512", "unsupported_answer"]

    before, after = rows_at(harmful_repo, "main"), rows_at(harmful_repo, None)
    expected = sorted(
        cid for cid in before.keys() & after.keys()
        if before[cid]["metrics"]["hit@5"] == 1 and after[cid]["metrics"]["hit@5"] == 0
    )  # fmt: skip
    found = sorted(
        cid for cid in before.keys() & after.keys()
        if before[cid]["metrics"]["hit@5"] == 0 and after[cid]["metrics"]["hit@5"] == 1
    )  # fmt: skip
    assert expected, "a 300-character sentence packing must lose some hits"

    report = ragvet(harmful_repo, "report", "--against", "main", "--comment", check=True).stdout
    assert report.startswith(COMMENT_MARKER + "\n")
    assert report.splitlines()[2].startswith("# Gate: FAILED - ") and report.index("(gated)") < report.index(
        "## Context budget"
    )
    assert listed_cases(report, f"Newly missed at hit@5: {len(expected)} case") == expected
    assert listed_cases(report, f"Newly found at hit@5: {len(found)} case") == found if found else True
    questions = {
        case["id"]: case["question"] for case in yaml.safe_load((harmful_repo / "data/cases/cases.yaml").read_text())
    }
    for case_id in expected:
        assert f"- **`{case_id}`**: {questions[case_id]}" in report
    assert "not a production guarantee" in report

    if UPDATE:
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(report)
    assert report == SNAPSHOT.read_text(), "snapshot changed: re-run with RAGVET_UPDATE_SNAPSHOTS=1 if intended"


def test_a_drop_accepted_in_the_change_passes_against_main_and_still_shows(harmful_repo, tmp_path):
    """`ragvet baseline accept` in the pull request is the deliberate way through:
    against main the drop is still listed, but the verdict is an accepted pass."""
    repo = copy_repo(harmful_repo, tmp_path / "repo")
    ragvet(repo, "baseline", "accept", check=True)
    sh(repo, "dvc", "repro")
    commit_all(repo, "accept the drop")
    gate = ragvet(repo, "gate", "--against", "main")
    assert gate.returncode == 0 and "gate: PASSED" in gate.stdout
    assert f"ACCEPTED {GATED}: this change re-accepted metrics/baseline/" in gate.stdout
    assert re.search(rf"^FAIL {GATED} evidence_recall@5: ", gate.stdout, flags=re.MULTILINE)
    report = ragvet(repo, "report", "--against", "main", check=True).stdout
    assert report.startswith("# Gate: PASSED - ") and "accepted deliberately: reviewers, check them" in report

    # Once results move away from the accepted baseline again, nothing is accepted: a change
    # that re-runs only the gated configuration's stages (the branch has no tuned threshold).
    set_param(repo, ["chunking", "sentences-600", "max_chars"], 200)
    out = sh(repo, "dvc", "repro", "report").stdout
    assert "Running stage 'evaluate@sentences-600-bm25'" in out and "Running stage 'retrieve@fixed-300-bm25'" not in out
    gate = ragvet(repo, "gate", "--against", "main")
    assert gate.returncode == 1 and "ACCEPTED" not in gate.stdout


def test_improvement_passes_against_main(work_repo):
    # A retriever change, not a chunking one: the sample's recorded answers cite
    # sentences-600 chunk ids, which a different packing would invalidate.
    branch_with(work_repo, "better", lambda r: set_param(r, ["retrievers", "bm25", "k1"], 1.2))
    gate = ragvet(work_repo, "gate", "--against", "main")
    assert gate.returncode == 0 and "gate: PASSED" in gate.stdout
    report = ragvet(work_repo, "report", "--against", "main", check=True).stdout
    assert report.startswith("# Gate: PASSED - ") and "Newly missed at hit@5: 0 cases." in report
    # evidence_recall@5 rose (0.710 -> 0.714), shown beside its context budget.
    row = next(line for line in report.splitlines() if line.startswith(f"| `{GATED}` | "))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[1] == "0.714 (+0.005)" and " → " in cells[3]


def test_label_edit_fails_against_main_with_the_fingerprint_message(work_repo):
    def relabel(repo: Path) -> None:
        path = repo / "data" / "cases" / "cases.yaml"
        text = path.read_text()
        assert "question: cycle to work scheme limit\n" in text  # an eval-split case
        path.write_text(text.replace("question: cycle to work scheme limit\n", "question: cycle-to-work limit\n"))

    branch_with(work_repo, "relabel", relabel)
    gate = ragvet(work_repo, "gate", "--against", "main")
    assert gate.returncode == 1
    assert f"INVALID {GATED}: eval-split fingerprint differs" in gate.stdout
    assert "labels changed: re-baseline deliberately" in gate.stdout
    report = ragvet(work_repo, "report", "--against", "main", check=True).stdout
    assert report.startswith("# Gate: FAILED - ") and "labels changed: re-baseline deliberately" in report

    ragvet(work_repo, "baseline", "accept", check=True)  # as the message says
    sh(work_repo, "dvc", "repro")
    gate = ragvet(work_repo, "gate", "--against", "main")
    assert gate.returncode == 0 and f"ACCEPTED {GATED}: this change re-accepted" in gate.stdout
    assert f"INVALID {GATED}: eval-split fingerprint differs" in gate.stdout  # still shown to reviewers


BIKE = "You can lease a bike and accessories up to £3,000 through salary sacrifice over 12 months."


def test_a_case_orphaned_by_a_corpus_edit_leaves_the_eval_split_and_the_gate_names_it(work_repo):
    """Through DVC's CLI: the labels anchored, the bike sentence rewritten; relabel orphans the one
    case quoting it, validate leaves it out, and the gate compares the other 117 eval cases,
    names it and fails until the results are accepted."""

    def orphan(repo: Path) -> None:
        ragvet(repo, "freeze-labels", check=True)
        faq = repo / "data" / "corpus" / "benefits-faq.md"
        faq.write_text(faq.read_text().replace(BIKE, "Bike leasing moved to our benefits partner."))
        done = ragvet(repo, "relabel")
        assert done.returncode == 1 and "0 changed, 2 orphaned" in done.stdout, done.stdout
        entries = yaml.safe_load((repo / "relabel-review.yaml").read_text())["entries"]
        assert {(e["case"], e["status"]) for e in entries} == {("kw-cycle-to-work", "orphaned")}
        (repo / "relabel-review.yaml").unlink()

    branch_with(work_repo, "orphan", orphan)
    cases = yaml.safe_load((work_repo / "data" / "cases" / "cases.yaml").read_text())
    assert [case["id"] for case in cases if "status" in case] == ["kw-cycle-to-work"]
    split = json.loads((work_repo / "metrics" / "split.json").read_text())
    assert split["left_out"] == {"eval": {"kw-cycle-to-work": "orphaned"}, "dev": {}}
    assert split["counts"] == {"eval": 117, "dev": 63}
    gate = ragvet(work_repo, "gate")
    assert gate.returncode == 1
    assert (
        "Left out of the eval split (compared without them): kw-cycle-to-work (orphaned); relabel them" in gate.stdout
    )
    baseline = result_rows(read_results(work_repo / "metrics" / "baseline" / "cases" / f"{GATED}.parquet"))
    valued = [r["case_id"] for r in baseline if r["split"] == "eval" and r["metrics"]["evidence_recall@5"] is not None]
    assert len(valued) == 105 and "kw-cycle-to-work" in valued
    assert f"ok   {GATED} evidence_recall@5: 0.707 -> 0.707 (delta 0.000, " in gate.stdout
    assert ", 104 cases)\n" in gate.stdout  # the 105 but the case left out
    ragvet(work_repo, "baseline", "accept", check=True)  # deliberately, as the message says
    sh(work_repo, "dvc", "repro")
    assert ragvet(work_repo, "gate").returncode == 0


def test_against_an_unknown_revision_or_one_without_results_is_a_clear_error(work_repo):
    unknown = ragvet(work_repo, "gate", "--against", "origin/nope")
    assert unknown.returncode == 2 and "git revision 'origin/nope' does not exist" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    empty_tree = sh(work_repo, "git", "hash-object", "-t", "tree", "/dev/null").stdout.strip()
    bare = sh(work_repo, "git", "commit-tree", empty_tree, "-m", "no results").stdout.strip()
    for command in ("gate", "report"):
        done = ragvet(work_repo, command, "--against", bare)
        assert done.returncode == 2 and "that revision has no ragvet results" in done.stderr


def test_dvc_plots_show_and_diff_main(harmful_repo):
    ids = {"recall_at_k", "evidence_recall_at_k", "evidence_recall_vs_budget", "slice_evidence_recall"}
    shown = json.loads(sh(harmful_repo, "dvc", "plots", "show", "--json").stdout)
    assert "errors" not in shown and ids <= set(shown["data"])  # beside the stages' own plots
    diff = json.loads(sh(harmful_repo, "dvc", "plots", "diff", "main", "--json").stdout)
    assert "errors" not in diff and ids <= set(diff["data"])
    for plot_id in ids:
        (plot,) = diff["data"][plot_id]
        assert sorted(plot["revisions"]) == ["main", "workspace"], plot_id
        values = plot["content"]["data"]["values"]
        configs = {(v["rev"], v["config"]) for v in values}
        assert configs == {
            (rev, c) for rev in ("main", "workspace") for c in ("fixed-300-bm25", "headings-1200-bm25", GATED)
        }
    budget = [
        v for v in diff["data"]["evidence_recall_vs_budget"][0]["content"]["data"]["values"] if v["config"] == GATED
    ]
    values = yaml.safe_load((harmful_repo / "params.yaml").read_text())["budget"]["values"]
    for rev in ("main", "workspace"):  # a line per config and rev: one point per budget value
        assert sorted(int(v["budget"]) for v in budget if v["rev"] == rev) == sorted(values)

    # The per-case moves (DVC's cache keeps data/moves.csv, not git): at main, against its own
    # accepted baseline, every case in place; on the branch, each eval case's first evidence rank
    # as main's per-case table and the branch's have it, the newly missed ones named so.
    assert "data/moves.csv" not in sh(harmful_repo, "git", "ls-files").stdout
    (plot,) = diff["data"]["evidence_rank_moves"]
    moves = {rev: [v for v in plot["content"]["data"]["values"] if v["rev"] == rev] for rev in ("main", "workspace")}
    assert moves["main"] and all(v["baseline_first_rank"] == v["first_rank"] for v in moves["main"])
    before, after = rows_at(harmful_repo, "main"), rows_at(harmful_repo, None)
    assert {v["case_id"] for v in moves["workspace"]} == set(after)
    rank = lambda value: None if value in ("", None) else int(value)  # noqa: E731  (a CSV cell)
    for v in moves["workspace"]:
        case_id = v["case_id"]
        assert rank(v["baseline_first_rank"]) == before[case_id]["first_relevant_rank"], case_id
        assert rank(v["first_rank"]) == after[case_id]["first_relevant_rank"], case_id
        missed = before[case_id]["metrics"]["hit@5"] == 1 and after[case_id]["metrics"]["hit@5"] == 0
        assert (v["status"] == "newly missed") == missed, case_id


# ------------------------------------------------------------------ the HTML report in a browser

# Appended to a copy of the page: records each chart's rendered size and drawing.
MEASURE = """<script>
const sizes = [...document.querySelectorAll("figure svg")].map(svg => {
  const box = svg.getBoundingClientRect();
  return [Math.round(box.width), Math.round(box.height), svg.querySelectorAll("path, use, rect, text").length];
});
document.body.insertAdjacentHTML("beforeend", "<pre id='measured'>" + JSON.stringify(sizes) + "</pre>");
</script>"""

# Appended to another copy: reads the page as laid out (what comes first, which table, each chart
# panel's series and their computed colours) into the DOM, so the test parses no HTML itself.
LAYOUT = """<script>
const first = document.body.firstElementChild;
const heading = table => {
  for (let node = table.previousElementSibling; node; node = node.previousElementSibling)
    if (/^H[1-6]$/.test(node.tagName)) return node.textContent;
  return null;
};
const colour = group => {
  const mark = group.querySelector("path, use");
  const style = getComputedStyle(mark);
  return style.stroke !== "none" ? style.stroke : style.fill;
};
const charts = [...document.querySelectorAll("figure svg")].map(svg => {
  const panels = {};
  for (const group of svg.querySelectorAll("g[id^='series-']")) {
    const [, , panel, series] = group.id.split("-");
    (panels[panel] ||= {})[series] = colour(group);
  }
  return Object.values(panels).map(series => Object.values(series));
});
const layout = {
  first: [first.tagName, first.textContent],
  tables: [...document.querySelectorAll("table")].map(heading),
  gatedTop: document.querySelector("table").getBoundingClientRect().top + window.scrollY,
  charts,
};
document.body.insertAdjacentHTML("beforeend", "<pre id='layout'>" + JSON.stringify(layout) + "</pre>");
</script>"""


@pytest.mark.skipif(
    CHROMIUM is None and os.environ.get("CI") != "true", reason="chromium not installed (CI installs it)"
)
def test_html_report_renders_its_charts_in_chromium_without_console_errors(harmful_repo, tmp_path):
    assert CHROMIUM is not None, "CI must have chromium: .ci/run installs it with apt-get"
    page = tmp_path / "report.html"
    ragvet(harmful_repo, "report", "--against", "main", "--format", "html", "--out", str(page), check=True)
    html = page.read_text()
    # Self-contained: the explorer's data block and script only, no stylesheet link, every href/src internal.
    assert html.count("<script") == 2 and "<link" not in html
    assert not re.search(r'(?:src|href)="(?!#)', html)

    dom, console = open_in_chromium(page, tmp_path / "profile-a")
    assert console == [], console
    assert "Gate: FAILED - " in dom and dom.count("<svg") == 3

    # A copy that measures its charts and logs one error: the sizes come back in the DOM, and
    # the console check can fail (the error planted is caught, and it is the only message).
    # The planted scripts below run only once the page's policy, which allows its own script alone, is gone.
    html = html.replace(f'<meta http-equiv="Content-Security-Policy" content="{policy()}">\n', "")
    measured = tmp_path / "measured.html"
    measured.write_text(html.replace("</body>", MEASURE + "<script>console.error('boom')</script></body>"))
    dom, console = open_in_chromium(measured, tmp_path / "profile-b")
    (message,) = console
    assert message.startswith('"boom", source: ' + measured.as_uri()), console
    sizes = json.loads(re.search(r"<pre id=\"measured\">(.*?)</pre>", dom).group(1))
    assert len(sizes) == 3
    for width, height, marks in sizes:
        assert width > 200 and height > 100 and marks > 20

    # As laid out: the verdict in plain text first, the gated configuration's table first and near
    # the top, and no chart panel with more than 8 series or two series of one colour.
    laid_out = tmp_path / "layout.html"
    laid_out.write_text(html.replace("</body>", LAYOUT + "</body>"))
    dom, console = open_in_chromium(laid_out, tmp_path / "profile-c")
    assert console == [], console
    layout = json.loads(html_unescape(re.search(r"<pre id=\"layout\">(.*?)</pre>", dom).group(1)))
    tag, text = layout["first"]
    assert tag == "H1" and text.startswith("Gate: FAILED - ") and f" dropped in {GATED} (" in text
    assert text.isascii(), text
    assert layout["tables"][0] == f"{GATED} (gated)" and layout["tables"].count(f"{GATED} (gated)") == 1
    assert layout["gatedTop"] < 600, layout["gatedTop"]
    assert len(layout["charts"]) == 3 and all(layout["charts"])
    for chart in layout["charts"]:
        for colours in chart:
            assert 1 <= len(colours) <= 8 and len(set(colours)) == len(colours), chart
    # recall@k: a panel per configuration, each with recall and evidence recall, current and baseline.
    assert [len(colours) for colours in layout["charts"][0]] == [4, 4, 4]


@pytest.mark.skipif(
    CHROMIUM is None and os.environ.get("CI") != "true", reason="chromium not installed (CI installs it)"
)
def test_the_explorer_lists_the_newly_missed_first_with_the_evidence_the_candidate_lost(harmful_repo, tmp_path):
    page_path = tmp_path / "report.html"
    ragvet(harmful_repo, "report", "--against", "main", "--format", "html", "--out", str(page_path), check=True)
    before, after = rows_at(harmful_repo, "main"), rows_at(harmful_repo, None)
    missed = sorted(
        c for c in before.keys() & after.keys() if before[c]["metrics"]["hit@5"] == 1 > after[c]["metrics"]["hit@5"]
    )
    cases = {json.loads(line)["id"]: json.loads(line) for line in (harmful_repo / "data/validated/cases.jsonl").open()}
    corpus = {
        json.loads(line)["doc_id"]: json.loads(line)["text"]
        for line in (harmful_repo / "data/validated/corpus.jsonl").open()
    }
    console: list[str] = []
    with chromium_page(console) as page:
        page.goto(page_path.as_uri())
        rows = page.eval_on_selector_all(
            "#rx-body tr.rx-row", "rows => rows.map(r => [r.dataset.case, r.children[1].textContent])"
        )
        assert 0 < len(missed) < len(rows) and rows[: len(missed)] == [[c, "newly missed"] for c in missed]
        assert page.text_content("#rx-count") == f"{len(after)} of {len(after)} cases"
        case_id = missed[0]
        page.click(f"#rx-body tr[data-case='{case_id}']")
        baseline, candidate = "#rx-detail [data-side='baseline']", "#rx-detail [data-side='candidate']"
        rank = before[case_id]["first_relevant_rank"]
        assert page.text_content(f"{baseline} h4") == f"Baseline (main): evidence at rank {rank}"
        assert page.text_content(f"{candidate} h4") == "Candidate (this change): evidence not in top 5"
        assert page.eval_on_selector_all(f"{candidate} mark", "ms => ms.length") == 0
        # Each highlight in the baseline's chunk at that rank is text of one of the case's evidence spans.
        marks = page.eval_on_selector_all(f"{baseline} li[data-rank='{rank}'] mark", "ms => ms.map(m => m.textContent)")
        quotes = [corpus[ref["doc"]][ref["start"] : ref["end"]] for ref in cases[case_id]["evidence"]]
        assert marks and all(any(mark in quote for quote in quotes) for mark in marks), (marks, quotes)
        assert page.text_content("#rx-detail .rx-question") == cases[case_id]["question"]
        if UPDATE:
            page.set_viewport_size({"width": 1280, "height": 1100})
            page.eval_on_selector("#ragvet-explorer", "e => e.scrollIntoView()")
            page.screenshot(path=str(SCREENSHOT))
    assert console == [], console

    # Without main's run in the DVC cache (and no remote), the baseline's side says why, the
    # candidate's still shows, and the report is written all the same.
    repo = copy_repo(harmful_repo, tmp_path / "no-cache")
    shutil.rmtree(repo / ".dvc" / "cache")
    ragvet(repo, "report", "--against", "main", "--format", "html", "--out", str(page_path), check=True)
    with chromium_page(console) as page:
        page.goto(page_path.as_uri())
        page.click(f"#rx-body tr[data-case='{case_id}']")
        note = page.text_content("#rx-detail .rx-unavailable")
        what = f"main:data/runs/{GATED}.parquet: DVC tracks it (object "
        assert note.startswith(f"The baseline's chunks are unavailable: {what}") and "no default DVC remote" in note
        assert page.text_content(f"{candidate} h4") == "Candidate (this change): evidence not in top 5"
    assert console == [], console


def test_example_workflow_builds_the_comment_with_ragvet_and_gates_last():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "ragvet.yml").read_text())
    steps = workflow["jobs"]["retrieval"]["steps"]
    checkout = next(step for step in steps if step.get("uses", "").startswith("actions/checkout"))
    assert checkout["with"]["fetch-depth"] == 0
    runs = [step.get("run", "") for step in steps]
    order = [
        next(i for i, run in enumerate(runs) if needle in run)
        for needle in (
            "pip install -r requirements-dense.lock",
            "dvc pull --allow-missing",
            "dvc repro",
            'ragvet report --against "$BASE" --comment --out ragvet-comment.md',
            "gh api -X PATCH",
            'ragvet gate --against "$BASE"',
        )
    ]
    assert order == sorted(order) and order[-1] == len(steps) - 1
    # The comment step finds its comment by the report's first line, the marker.
    assert 'marker="$(head -n 1 ragvet-comment.md)"' in runs[order[4]]
    # A remote's credentials come from the repository's secrets, never from a file.
    # The report and the gate fetch the base's per-case tables through DVC when it keeps them (docs/storage.md).
    for step in (order[1], order[3], order[5]):
        assert steps[step]["env"]["AWS_SECRET_ACCESS_KEY"] == "${{ secrets.AWS_SECRET_ACCESS_KEY }}"
    assert workflow["jobs"]["retrieval"]["env"]["BASE"] == "origin/${{ github.base_ref }}"
    cached = " ".join(str(step.get("with", {}).get("path", "")) for step in steps)
    assert ".dvc/cache" in cached and any(step.get("with", {}).get("cache") == "pip" for step in steps)
