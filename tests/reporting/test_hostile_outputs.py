"""Hostile user text in every output.

Case ids, doc ids, tag values, questions and quotes are written by whoever edits
the data. These tests put script, markdown, mentions, control characters, ``$``
and very long values into each of them and read the outputs back the way a
reviewer meets them: the PR comment through GitHub's own markdown renderer
(cmark-gfm, with raw HTML allowed), the HTML report in headless Chromium, the
gate's terminal output line by line, the charts as SVG.
"""

from __future__ import annotations

import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import cmarkgfm
import polars as pl
import pytest
import yaml
from browser import CHROMIUM, chromium_page, open_in_chromium
from builders import gate_of
from cmarkgfm.cmark import Options
from repos import ragvet, sh
from test_explorer import COMPARISON, CUR, explorer_page, ranks
from test_reporting import GATE, KS, SUMMARIES, case

from ragvet.errors import Problem
from ragvet.gating.compare import gate_all, render_verdict
from ragvet.gating.reproduction import ConfigCheck
from ragvet.gating.reproduction import render as render_check
from ragvet.gating.retrieved import Retrieved, unavailable
from ragvet.gating.side_by_side import side_by_side
from ragvet.reporting.cases import describe_evidence
from ragvet.reporting.charts import slice_chart
from ragvet.reporting.comparisons import compare_configs
from ragvet.reporting.document import COMMENT_LIMIT, CUT_NOTE, Contents, render_report
from ragvet.reporting.explorer import explorer_data, explorer_ids
from ragvet.reporting.moves import case_moves
from ragvet.reporting.page import policy, render_html
from ragvet.reporting.side_by_side import side_by_side_section
from ragvet.schema import Chunk
from ragvet.text.escaping import MAX_CHARS, chart_label, html_text, md_code, md_prose, md_text, visible

CFG = "sentences-600-bm25"
# What a payload that runs sets, read back from the DOM Chromium dumps.
FLAG = "document.documentElement.setAttribute('data-pwned', 1)"
PWNED = 'data-pwned="1"'  # the attribute as the DOM dump writes it, not the payload text

CASE_ID = f'x`<img src=x onerror="{FLAG}">`'
DOC_ID = f'd``<svg onload="{FLAG}">``'
TAG = f'v`<details open ontoggle="{FLAG}">`'
QUESTION = (
    "q\n\n## ✅ Gate passed\n\n- all good ![b](http://evil.example/q.png) "
    f"@octocat @github/security-team #1 <script>{FLAG}</script> $5 or $10"
)
QUOTE = "see ![b](http://evil.example/quote.png) and [here](javascript:alert(1)) www.evil.example"
CI_ID = "a\n::error::pwned\r\n::set-output name=x::y\x1b[2J"


def github_html(markdown: str) -> str:
    """The comment as GitHub renders it (cmark-gfm with its extensions), raw HTML
    passed through: GitHub's sanitizer comes after, and is not relied upon."""
    return cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)


class Elements(HTMLParser):
    """Every start tag with its attributes; the text of each h1/h2 heading and of
    each code element; all the text, and the text outside code."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.headings: list[str] = []
        self.codes: list[str] = []
        self.text: list[str] = []
        self.prose: list[str] = []  # text outside code, where GitHub looks for mentions and references
        self._open: list[tuple[str, list[str], int]] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        target = self.headings if tag in ("h1", "h2") else self.codes if tag == "code" else None
        if target is not None:
            target.append("")
            self._open.append((tag, target, len(target) - 1))

    def handle_endtag(self, tag):
        if self._open and self._open[-1][0] == tag:
            self._open.pop()

    def handle_data(self, data):
        self.text.append(data)
        if not any(tag == "code" for tag, _, _ in self._open):
            self.prose.append(data)
        for _, target, index in self._open:
            target[index] += data


def _others(value: str) -> list[tuple[str, str]]:
    return [("b", value), ("c", "y"), ("d", "y")]


def hostile_inputs(value: str = TAG) -> tuple[list[dict], dict, dict]:
    """Comparisons, verdict and case details in which the newly missed case, its
    doc, its question, its quote and the moved slice all carry hostile text."""
    base = [case(CASE_ID, 1.0, 1.0, 100, value), *(case(cid, 1.0, 1.0, 100, kind) for cid, kind in _others(value))]
    cur = [case(CASE_ID, 0.0, 0.0, 100, value), *(case(cid, 1.0, 1.0, 100, kind) for cid, kind in _others(value))]
    fp = {"eval_split": "e1", "corpus": "c1", "chunking": "k1"}
    baselines = {CFG: ({"fingerprints": fp}, base)}
    comparisons = compare_configs({CFG: cur}, baselines, fp, KS, gate_of({**GATE, "configs": [CFG]}, ["kind"]))
    verdict = gate_all(gate_of({**GATE, "configs": [CFG]}, ["kind"]), baselines, {CFG: cur}, fp)
    texts = {DOC_ID: QUOTE + " the end"}
    info = {
        CASE_ID: {
            "question": QUESTION,
            "evidence": [describe_evidence({"doc": DOC_ID, "start": 0, "end": len(QUOTE)}, texts)],
        }
    }
    return comparisons, verdict, info


def assert_inert(elements: Elements) -> None:
    """No script, image, frame, form or SVG from user text; no event handler,
    source, link target or style attribute anywhere."""
    allowed = {"h1", "h2", "h3", "p", "ul", "li", "strong", "em", "code", "table", "thead", "tbody", "tr", "th", "td",
               "details", "summary", "blockquote", "br", "body"}  # fmt: skip
    assert {tag for tag, _ in elements.tags} <= allowed, {tag for tag, _ in elements.tags} - allowed
    attributes = {name for _, attrs in elements.tags for name in attrs}
    assert attributes <= {"align"}, attributes  # table cell alignment is all cmark-gfm writes
    prose = "".join(elements.prose)
    assert "@octocat" not in prose and "@github" not in prose and "#1" not in prose  # a zero-width space follows


def test_comment_renders_hostile_ids_questions_quotes_and_tags_inert_on_github():
    comparisons, verdict, info = hostile_inputs()
    comment = render_report(Contents(SUMMARIES, comparisons, verdict, info, KS), marker=True, limit=COMMENT_LIMIT)
    elements = Elements(github_html(comment))
    assert_inert(elements)
    assert "@\u200boctocat @\u200bgithub/security-team #\u200b1" in "".join(elements.prose)
    # Only ragvet's own headings: the question's "## ✅ Gate passed" stays inside its list item.
    assert elements.headings == [
        f"Gate: FAILED - 2 guarded metrics and 1 slice dropped in {CFG} (evidence_recall@5 1.000 -> 0.750, "
        "mrr 1.000 -> 0.750)",
        f"{CFG} (gated)", "Context budget beside recall",
        "All configurations", "eval split", "dev split", "Abstention cases (answerable: false)",
    ]  # fmt: skip
    # Backticks in ids do not break out: each id reads back whole from its code span.
    assert CASE_ID in elements.codes and DOC_ID in elements.codes and f"kind={TAG}" in elements.codes
    # The question is one list item, its newlines flattened, every character shown.
    item = next(t for t in "".join(elements.text).split(CASE_ID)[1:] if "all good" in t).replace("\u200b", "")
    assert f": {one_line(QUESTION)}\n" in item  # $5 or $10 too: no math


def test_a_raw_payload_would_be_caught_by_the_comment_checks():
    """The checks above can fail: the old rendering (a case id in plain backticks) trips them."""
    with pytest.raises(AssertionError):
        assert_inert(Elements(github_html(f"- **`{CASE_ID}`**: {QUESTION}")))


@pytest.mark.skipif(
    CHROMIUM is None and os.environ.get("CI") != "true", reason="chromium not installed (CI installs it)"
)
def test_html_report_runs_no_payload_in_chromium_and_fetches_nothing(tmp_path: Path):
    assert CHROMIUM is not None, "CI must have chromium: .ci/run installs it with apt-get"
    comparisons, verdict, info = hostile_inputs()
    chart = slice_chart([{"config": CFG, "slice": f"kind={TAG}", "cases": 1, "evidence_recall": 0.5}], [], [CFG])
    page = render_html(render_report(Contents(SUMMARIES, comparisons, verdict, info, KS)), [(QUESTION, chart)])
    assert_inert_page(page)
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    dom, console = open_in_chromium(path, tmp_path / "profile")
    assert PWNED not in dom and console == [], console
    assert CASE_ID.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in dom

    # A raw payload that escaping let through would still not run: the page's policy allows its own script only.
    raw = tmp_path / "raw.html"
    raw.write_text(page.replace("</body>", f'<img src=x onerror="{FLAG}"></body>'), encoding="utf-8")
    assert PWNED not in open_in_chromium(raw, tmp_path / "profile-raw")[0]
    # The flag does show when a payload runs: the same page with one raw payload, and its policy off.
    raw.write_text(raw.read_text().replace(f'<meta http-equiv="Content-Security-Policy" content="{policy()}">', ""))
    assert PWNED in open_in_chromium(raw, tmp_path / "profile-off")[0]


def assert_inert_page(page: str) -> None:
    """The page's own markup only: figures are inline SVG (matplotlib's), the rest
    as in :func:`assert_inert`; no attribute names a URL or runs code."""
    # The explorer's own static markup, style and script are ragvet's constants: what its
    # script builds from user text is read in Chromium (:func:`click_through_explorer`).
    own = r"<figure>.*?</figure>|<style>.*?</style>|<section id=\"ragvet-explorer\">.*?</section>|<script.*?</script>"
    body = re.sub(own, "", page, flags=re.DOTALL)
    elements = Elements(body[body.index("<body>") :])
    assert_inert(elements)
    attributes = [(name, value) for _, attrs in Elements(page).tags for name, value in attrs.items()]
    assert not [name for name, _ in attributes if name.startswith("on") or name == "src"]
    assert {value[:1] for name, value in attributes if name.endswith("href")} <= {"#"}  # the SVG's own <use> only
    assert "http://evil" not in body  # a zero-width space breaks every URL in markup; the data block holds it whole


# The elements the explorer's script builds; anything else in it came from a value.
EXPLORER_TAGS = {"section", "h2", "h3", "h4", "p", "div", "label", "select", "option", "input", "span", "table",
                 "thead", "tbody", "tr", "th", "td", "ol", "ul", "li", "code", "q", "mark", "a"}  # fmt: skip


def click_through_explorer(path: Path) -> tuple[set[str], str, bool, list[str]]:
    """Choose every case of the page's explorer in turn, as a reviewer would: the
    elements found inside the explorer, its text with the last case chosen, whether a
    payload set the flag, and the console's messages."""
    console: list[str] = []
    tags: set[str] = set()
    with chromium_page(console) as page:
        page.goto(path.as_uri())
        rows = page.locator("#rx-body tr.rx-row")
        for number in range(rows.count()):
            rows.nth(number).click()
            tags |= set(page.eval_on_selector_all("#ragvet-explorer *", "es => es.map(e => e.localName)"))
        text = page.text_content("#ragvet-explorer") or ""
        pwned = page.evaluate("document.documentElement.hasAttribute('data-pwned')")
    return tags, text, pwned, console


CHUNK_TEXT = f'<script>{FLAG}</script> policy text <img src=x onerror="{FLAG}"> end'


@pytest.mark.skipif(
    CHROMIUM is None and os.environ.get("CI") != "true", reason="chromium not installed (CI installs it)"
)
def test_the_explorer_shows_hostile_ids_tags_questions_and_documents_as_text(tmp_path: Path):
    claims = [{"text": QUESTION, "evidence": []}]
    evidence = [{"doc": DOC_ID, "start": 0, "end": 8}]
    cases = [{"id": CASE_ID, "question": QUESTION, "tags": {"kind": TAG}, "evidence": evidence, "claims": claims}]
    table = CUR.with_columns(pl.lit(CASE_ID).alias("case_id")).head(1)
    table = table.join(ranks(**{CASE_ID: 1}), on="case_id", how="left")
    moves = case_moves(COMPARISON | {"newly_missed": [CASE_ID]}, table, None, [])
    chunk = Chunk(f"{DOC_ID}#0", DOC_ID, 0, 0, len(CHUNK_TEXT), CHUNK_TEXT)
    sides = {"cfg": (unavailable(QUESTION), Retrieved({CASE_ID: [(chunk.chunk_id, 1.0)]}, {chunk.chunk_id: chunk}))}
    texts, ids = {DOC_ID: CHUNK_TEXT}, explorer_ids({"cfg": moves})
    listed = len(moves) + 1  # as if the page held one case of two: it says so
    data = explorer_data(cases, texts, {"cfg": moves}, sides, ["first_rank"], ["kind"], 5, TAG, ids, listed)
    page = explorer_page(tmp_path, data)
    assert_inert_page(page.read_text(encoding="utf-8"))
    tags, text, pwned, console = click_through_explorer(page)
    assert not pwned and tags <= EXPLORER_TAGS, tags - EXPLORER_TAGS
    assert console == [], console
    for value in (CASE_ID, QUESTION, TAG, DOC_ID, CHUNK_TEXT, "<script>"):  # every value shown whole, as text
        assert value in text, value
    assert "1 of 2 eval cases shown, the newly missed and found first" in text

    # The checks can fail: a payload planted in the page, with its policy off, runs and shows.
    planted = tmp_path / "planted.html"
    raw = page.read_text(encoding="utf-8").replace(
        f'<meta http-equiv="Content-Security-Policy" content="{policy()}">', ""
    )
    planted.write_text(raw.replace("</section>", f'<img src=x onerror="{FLAG}"></section>'), encoding="utf-8")
    tags, _, pwned, _ = click_through_explorer(planted)
    assert pwned and "img" in tags


# ------------------------------------------------------------------ the escaping rules, against cmark-gfm

NASTY = [
    "",
    " ",
    "plain-id",
    "`",
    "``x`",
    "a ` b",
    " lead",
    "trail ",
    "` both `",
    "pipe|in|id",
    "a\\|b",
    "x|\\",
    "<b>&amp;</b>",
    "line\nbreak\r\nand\ttab",
    "\x1b[31mred\x1b[0m",
    "rtl \u202eevil",
    "**bold** _em_ [l](http://x.example) ![i](http://x.example/i.png) $x$ ~~s~~ \\ #7 @me",
]


def one_line(value: str) -> str:
    """What every markdown context shows of ``value``: breaks and tabs as spaces, controls escaped."""
    return re.sub(r"[\n\r\t]", " ", value).replace("\x1b", "\\x1b").replace("\u202e", "\\u202e")


@pytest.mark.parametrize("value", NASTY)
def test_a_code_span_shows_any_value_verbatim_in_text_and_in_a_table_cell(value: str):
    (code,) = Elements(github_html(md_code(value))).codes
    assert code == (one_line(value) or " ")  # an empty value shows as one space: a code span is never empty
    table = f"| a |\n|---|\n| {md_code(value, table=True)} |\n"
    for rendered in (github_html(table), render_html(table, [])):  # GitHub, and ragvet's HTML report
        cells = Elements(rendered)
        assert [tag for tag, _ in cells.tags].count("td") == 1 and cells.codes == [code]


@pytest.mark.parametrize("value", NASTY)
def test_markdown_text_shows_any_value_as_text_in_one_element(value: str):
    elements = Elements(github_html(f"- item: {md_text(value)}"))
    assert [t for t, _ in elements.tags] == ["ul", "li"]  # no emphasis, link, image, code, heading
    text = "".join(elements.text).strip().removeprefix("item:").strip()
    assert text.replace("\u200b", "") == one_line(value).strip()


def test_prose_keeps_ragvets_code_and_escapes_the_values_in_it():
    html = github_html(md_prose("no results for x`<b>` at o@rigin: run `ragvet baseline accept`"))
    elements = Elements(html)
    assert elements.codes == ["<b>", "ragvet baseline accept"]
    assert "b" not in {t for t, _ in elements.tags}


def test_html_text_is_one_inert_line():
    assert (
        html_text('<a href="x">@me</a>\n\n<script>')
        == "&lt;a href=&quot;x&quot;&gt;@&#8203;me&lt;/a&gt;  &lt;script&gt;"
    )


def test_values_are_cut_with_a_note():
    assert md_code("x" * 70_000) == "`" + "x" * MAX_CHARS + "… (69,700 more characters)`"
    assert chart_label("y" * 100) == "y" * 60 + "… (40 more characters)"


# ------------------------------------------------------------------ terminal and CI logs (defect 19)


def test_gate_output_shows_control_characters_escaped_so_no_ci_command_starts_a_line():
    tag = "x\n::warning::tag"
    base = [case(CI_ID, 1.0, 1.0, 100, tag), *(case(cid, 1.0, 1.0, 100, kind) for cid, kind in _others(tag))]
    cur = [case(CI_ID, 0.0, 0.0, 100, tag), *(case(cid, 1.0, 1.0, 100, kind) for cid, kind in _others(tag))]
    fp = {"eval_split": "e1", "corpus": "c1", "chunking": "k1"}
    verdict = gate_all(
        gate_of({**GATE, "configs": [CFG]}, ["kind"]), {CFG: ({"fingerprints": fp}, base)}, {CFG: cur}, fp
    )
    out = render_verdict(verdict)
    assert verdict["configs"][0]["newly_missed"] == [CI_ID]
    assert not [line for line in out.splitlines() if line.lstrip().startswith("::")]
    assert "\x1b" not in out and "\r" not in out
    assert "a\\n::error::pwned\\r\\n::set-output name=x::y\\x1b[2J" in out
    assert "slice kind=x\\n::warning::tag" in out


def test_problems_show_a_case_id_with_line_breaks_on_one_line():
    problem = Problem(f"cases.yaml:3 (case {CI_ID})", "duplicate id 'x\n::error::y'", "rename it")
    lines = problem.render().splitlines()
    assert len(lines) == 2 and lines[1] == "    fix: rename it"
    assert (
        lines[0]
        == "cases.yaml:3 (case a\\n::error::pwned\\r\\n::set-output name=x::y\\x1b[2J): duplicate id 'x\\n::error::y'"
    )


def test_visible_is_unambiguous_and_leaves_ordinary_text_alone():
    assert visible("naïve 日本 ✅ é") == "naïve 日本 ✅ é"
    assert visible("a\\nb") == "a\\\\nb" and visible("a\nb") == "a\\nb"  # a typed backslash-n is not a newline


# ------------------------------------------------------------------ charts (defect 11)


def test_chart_labels_draw_dollars_literally_and_never_parse_math():
    rows = [
        {"config": CFG, "slice": "cost=$\\frac{1}{$ per day", "cases": 2, "evidence_recall": 0.5},
        {"config": CFG, "slice": "price=$5 or $10", "cases": 3, "evidence_recall": 1.0},
    ]
    svg = slice_chart(rows, [], [CFG])
    assert "price=$5 or $10 (n=3)" in svg and "cost=$\\frac{1}{$ per day (n=2)" in svg


# ------------------------------------------------------------------ comment size (defect 12)


def test_a_70000_character_slice_value_keeps_the_comment_under_githubs_limit():
    comparisons, verdict, info = hostile_inputs("s" * 70_000)
    comment = render_report(Contents(SUMMARIES, comparisons, verdict, info, KS), marker=True, limit=COMMENT_LIMIT)
    assert len(comment) <= 65_536
    assert f"kind={'s' * (MAX_CHARS - 5)}… (69,705 more characters)" in comment


def test_hundreds_of_failing_slices_are_cut_at_a_line_with_a_note():
    comparisons, verdict, info = hostile_inputs()
    cfg = verdict["configs"][0]
    failing = {**cfg["slices"][0], "failed": True}
    many = [{**failing, "value": f"value-{i:05d}-" + "w" * 200} for i in range(1_000)]
    verdict = {**verdict, "configs": [{**cfg, "slices": many}]}
    comment = render_report(Contents(SUMMARIES, comparisons, verdict, info, KS), marker=True, limit=COMMENT_LIMIT)
    assert len(comment) <= COMMENT_LIMIT and comment.endswith(CUT_NOTE + "\n")
    assert comment.count("<details>") == comment.count("</details>")
    assert comment.count("value-00000-") == 1 and "value-00999-" not in comment


# ------------------------------------------------------------------ end to end: a project whose data is hostile

# No whitespace in ids (validate may refuse it); the payloads need none.
E2E_FLAG = "document.documentElement.setAttribute('data-pwned',1)"
E2E_CASE = f"x`<img/src=x/onerror={E2E_FLAG}>`"
E2E_DOC = f"d``<svg/onload={E2E_FLAG}>``"
E2E_TAG = f"t`<img/src=x/onerror={E2E_FLAG}>` @octocat #1\n::error::tag"
MINERALS = ["Zircon", "Garnet", "Beryl", "Topaz", "Quartz", "Pyrite"]


@pytest.fixture(scope="module")
def hostile_project(tmp_path_factory) -> Path:
    """A project made by `ragvet init` whose doc ids (JSONL), case ids, tags and
    questions carry payloads, baselined, then harmed: BM25 made case-sensitive, so
    every case is newly missed (the questions name each mineral in lower case)."""
    project = tmp_path_factory.mktemp("hostile") / "project"
    ragvet(project.parent, "init", str(project), check=True)
    doc_ids = [E2E_DOC, *(f"d{n}" for n in range(1, len(MINERALS)))]
    docs = [{"doc_id": d, "text": f"{m} is mined in valley {n}."} for n, (d, m) in enumerate(zip(doc_ids, MINERALS))]
    docs += [{"doc_id": f"a{n:02d}", "text": f"Filler text number {n}."} for n in range(20)]  # first among ties
    for folder in ("data/corpus", "data/cases"):
        (project / folder).mkdir(parents=True, exist_ok=True)
    (project / "data/corpus/corpus.jsonl").write_text("".join(json.dumps(doc) + "\n" for doc in docs))
    cases = [
        {
            "id": E2E_CASE if n == 0 else f"q{n}",
            "question": m.lower() + (f" {QUESTION}" if n == 0 else ""),
            "evidence": [{"doc": d, "quote": f"{m} is mined"}],
            "tags": {"kind": E2E_TAG},
        }
        for n, (d, m) in enumerate(zip(doc_ids, MINERALS))
    ]
    (project / "data/cases/cases.yaml").write_text(yaml.safe_dump(cases, allow_unicode=True))
    settings = yaml.safe_load((project / "params.yaml").read_text())
    settings["slices"] = ["kind"]
    settings["split"]["eval_fraction"] = 1.0
    settings["gate"]["min_slice_cases"] = 1
    (project / "params.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
    sh(project, "git", "config", "user.email", "test@example.com")
    sh(project, "git", "config", "user.name", "test")
    sh(project, "dvc", "repro", "report")
    ragvet(project, "baseline", "accept", check=True)
    settings["retrievers"]["bm25"]["lowercase"] = False
    (project / "params.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
    sh(project, "dvc", "repro", "report")
    return project


def test_a_hostile_project_gate_prints_no_ci_command(hostile_project: Path):
    gate = ragvet(hostile_project, "gate")
    assert gate.returncode == 1 and "gate: FAILED" in gate.stdout
    assert f"newly missed at hit@5 (hit in baseline, missed now): q1, q2, q3, q4, q5, {E2E_CASE}\n" in gate.stdout
    assert f"FAIL {CFG} slice kind={visible(E2E_TAG)} " in gate.stdout and "\\n::error::tag" in gate.stdout
    assert not [line for line in gate.stdout.splitlines() if line.lstrip().startswith(("::", "#"))]


def test_a_hostile_project_comment_and_html_report_are_inert(hostile_project: Path, tmp_path: Path):
    comment = ragvet(hostile_project, "report", "--comment", check=True).stdout
    elements = Elements(github_html(comment))
    assert_inert(elements)
    assert E2E_CASE in elements.codes and E2E_DOC in elements.codes and f"kind={one_line(E2E_TAG)}" in elements.codes
    assert elements.headings[0].startswith("Gate: FAILED - ") and "Gate passed" not in "".join(elements.headings)
    if CHROMIUM is None and os.environ.get("CI") != "true":
        pytest.skip("chromium not installed (CI installs it)")
    page = tmp_path / "report.html"
    ragvet(hostile_project, "report", "--format", "html", "--out", str(page), check=True)
    assert_inert_page(page.read_text(encoding="utf-8"))
    dom, console = open_in_chromium(page, tmp_path / "profile")
    assert PWNED not in dom and console == [], console
    assert dom.count("<svg") == 3
    tags, text, pwned, console = click_through_explorer(page)  # every case chosen: its question, tags, chunks
    assert not pwned and tags <= EXPLORER_TAGS and console == [], (tags - EXPLORER_TAGS, console)
    assert E2E_CASE in text


def test_verify_names_a_near_tie_case_on_one_line():
    check = ConfigCheck(config=CFG, cases=1, rankings_checked=True)
    check.near_ties.append(CI_ID)
    check.differences.append(f"case {CI_ID}: only in the committed table")
    lines = render_check([check], "HEAD").splitlines()
    assert len(lines) == 4 and not [line for line in lines if line.lstrip().startswith("::")]
    assert lines[1] == "  near tie: a\\n::error::pwned\\r\\n::set-output name=x::y\\x1b[2J"


def test_the_many_configuration_table_shows_hostile_names_inert():
    """`ragvet compare` and the report's side-by-side table: config or experiment names in code spans."""
    evil = "e`|<img src=x onerror=alert(1)>|` @octocat"
    table_rows = {"base`|": [case("c1", 1.0, 1.0, 100, "x")], evil: [case("c1", 0.0, 0.0, 100, "x")], "gone": None}
    gate = gate_of({**GATE, "correction": "holm", "permutation": {"resamples": 100, "seed": 1}})
    table = side_by_side(table_rows, "base`|", ["evidence_recall@5"], gate)
    elements = Elements(github_html("\n".join(side_by_side_section(table, 0.95))))
    assert_inert(elements)
    assert [tag for tag, _ in elements.tags].count("tr") == 4  # header, base, evil, gone: no cell split off
    assert evil in elements.codes and "base`|" in elements.codes


def test_hostile_ids_of_cases_left_out_of_the_eval_split_are_named_inert():
    """The gate and the report name the eval cases relabel marked: their ids run nothing."""
    base = [case(cid, 1.0, 1.0, 100, kind) for cid, kind in _others(TAG)]
    fp = {"eval_split": "e1", "corpus": "c1", "chunking": "k1"}
    current_fp = {**fp, "eval_split": "e2", "left_out": {CASE_ID: "orphaned", CI_ID: "pending"}}
    settings = gate_of({**GATE, "configs": [CFG]}, ["kind"])
    baselines = {CFG: ({"fingerprints": fp}, base)}
    comparisons = compare_configs({CFG: base}, baselines, current_fp, KS, settings)
    verdict = gate_all(settings, baselines, {CFG: base}, current_fp)
    out = render_verdict(verdict)
    assert not [line for line in out.splitlines() if line.lstrip().startswith("::")] and "\x1b" not in out
    assert "a\\n::error::pwned\\r\\n::set-output name=x::y\\x1b[2J (pending review)" in out
    comment = render_report(Contents(SUMMARIES, comparisons, verdict, {}, KS), marker=True, limit=COMMENT_LIMIT)
    elements = Elements(github_html(comment))
    assert_inert(elements)
    assert "(orphaned)" in "".join(elements.text) and "(pending review)" in "".join(elements.text)
