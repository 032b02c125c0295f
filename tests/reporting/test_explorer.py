"""The HTML report's case explorer on tiny hand-made cases: its data (moves, interning,
order), and the page clicked through in headless Chromium (a row chosen, a slice and a
status filtered, a search typed, the highlighted evidence read back from the DOM)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
import yaml
from browser import CHROMIUM, chromium_page
from repos import commit_all, init_repo

from ragvet.gating.baselines import fetched
from ragvet.gating.retrieved import Retrieved, named_chunks, retrieved_at, top_k, unavailable
from ragvet.reporting.explorer import explorer_data, explorer_ids, explorer_section
from ragvet.reporting.moves import case_moves, first_moves
from ragvet.reporting.page import policy, render_html
from ragvet.schema import Chunk
from ragvet.storage.results import results_frame
from ragvet.text.escaping import script_json

needs_chromium = pytest.mark.skipif(
    CHROMIUM is None and os.environ.get("CI") != "true", reason="chromium not installed (CI installs it)"
)

D1 = "0123456789EVIDENCE!!tail of the first doc"
D2 = "abcdefghij"
TEXTS = {"d1": D1, "d2": D2}
CASES = [
    {
        "id": "c-miss",
        "question": "Where is the <b>leave</b> policy?",
        "tags": {"phrasing": "question", "year": 2025},
        "evidence": [{"doc": "d1", "start": 10, "end": 20}],
        "claims": [{"text": "Leave is 25 days.", "evidence": [{"doc": "d1", "start": 10, "end": 20}]}],
    },
    {"id": "c-found", "question": "abc", "tags": {"phrasing": "keyword", "year": 2026},
     "evidence": [{"any": [{"doc": "d2", "start": 0, "end": 3}, {"doc": "d1"}]}]},
    {"id": "c-same", "question": "fgh", "tags": {"phrasing": "keyword", "year": 2026},
     "evidence": [{"doc": "d2", "start": 5, "end": 8}]},
]  # fmt: skip


def row(case_id: str, hit: float, recall: float, split: str = "eval") -> dict:
    metrics = {"hit@2": hit, "evidence_recall@2": recall}
    return {"case_id": case_id, "split": split, "answerable": True, "tags": {}, "metrics": metrics}


def ranks(**found: int | None) -> pl.DataFrame:
    return pl.DataFrame({"case_id": list(found), "first_relevant_rank": list(found.values())}, strict=False)


BASE = results_frame([row("c-miss", 1, 1.0), row("c-found", 0, 0.0), row("c-same", 1, 0.5), row("dev", 1, 1, "dev")])
CUR = results_frame([row("c-miss", 0, 0.0), row("c-found", 1, 1.0), row("c-same", 1, 0.5), row("dev", 0, 0, "dev")])
COMPARISON = {"config": "cfg", "k": 2, "newly_missed": ["c-miss"], "newly_found": ["c-found"]}
CHUNKS = {
    "d1#1": Chunk("d1#1", "d1", 1, 5, 25, D1[5:25]),
    "d2#0": Chunk("d2#0", "d2", 0, 0, 10, D2),
}
BASELINE_SIDE = Retrieved({"c-miss": [("d1#1", 2.5), ("d2#0", 1.0)], "c-same": [("d2#0", 0.25)]}, CHUNKS)
CANDIDATE_SIDE = Retrieved({"c-miss": [("d2#0", 3.0)], "c-found": [("d2#0", 1.23456)]}, CHUNKS)


def ranked(table: pl.DataFrame, found: pl.DataFrame) -> pl.DataFrame:
    return table.join(found, on="case_id", how="left")


def moves() -> list[dict]:
    current = ranked(CUR, ranks(**{"c-miss": None, "c-found": 1, "c-same": 1}))
    baseline = ranked(BASE, ranks(**{"c-miss": 1, "c-found": None, "c-same": 1}))
    return case_moves(COMPARISON, current, baseline, ["hit@2"])


def test_case_moves_lists_newly_missed_then_found_then_unchanged_eval_cases_side_by_side():
    assert moves() == [
        {"config": "cfg", "case_id": "c-miss", "status": "newly missed", "baseline_first_rank": 1, "first_rank": None,
         "baseline_hit@2": 1.0, "hit@2": 0.0},
        {"config": "cfg", "case_id": "c-found", "status": "newly found", "baseline_first_rank": None, "first_rank": 1,
         "baseline_hit@2": 0.0, "hit@2": 1.0},
        {"config": "cfg", "case_id": "c-same", "status": "unchanged", "baseline_first_rank": 1, "first_rank": 1,
         "baseline_hit@2": 1.0, "hit@2": 1.0},
    ]  # fmt: skip
    # No baseline at all: every current eval case, unchanged, with nothing on the baseline's side.
    alone = case_moves({"config": "cfg"}, CUR, None, ["hit@2"])
    assert [(r["case_id"], r["status"], r["baseline_hit@2"], r["first_rank"]) for r in alone] == [
        ("c-found", "unchanged", None, None), ("c-miss", "unchanged", None, None), ("c-same", "unchanged", None, None)
    ]  # fmt: skip


def data(sides: dict | None = None, limit: int | None = None) -> dict:
    sides = sides or {"cfg": (BASELINE_SIDE, CANDIDATE_SIDE)}
    found = {"cfg": moves()}
    ids = explorer_ids(found, limit)
    return explorer_data(CASES, TEXTS, found, sides, ["first_rank", "hit@2"], ["phrasing", "year"], 2, "main", ids, 3)


def test_explorer_data_interns_docs_and_chunks_and_keeps_claims_pointing_at_evidence():
    found = data()
    assert found["ids"] == ["c-miss", "c-found", "c-same"] and found["status"] == [[0, 1, 2]]
    assert found["tags"] == [["question", "2025"], ["keyword", "2026"], ["keyword", "2026"]]
    assert found["rows"] == [[[1, None, 1.0, 0.0], [None, 1, 0.0, 1.0], [1, 1, 1.0, 1.0]]]
    assert found["docs"] == ["d1", "d2"]
    # c-found's {any} unit: both alternatives, the whole doc d1 with no span.
    assert found["evidence"] == [
        [[0, 10, 20, "EVIDENCE!!"]],
        [[1, 0, 3, "abc"], [0, None, None, None]],
        [[1, 5, 8, "fgh"]],
    ]
    assert found["claims"] == [[["Leave is 25 days.", [0]]], [], []]
    assert found["chunks"] == [["d1#1", 0, 5, 25, D1[5:25]], ["d2#0", 1, 0, 10, D2]]
    # Per case [chunk, score, ...], best first; scores at 4 places.
    assert found["top"] == [[[[0, 2.5, 1, 1.0], [], [1, 0.25]], [[1, 3.0], [1, 1.2346], []]]]
    off = data({"cfg": (unavailable("no run at main"), CANDIDATE_SIDE)})
    assert off["top"][0][0] is None and off["unavailable"] == [["no run at main", None]]
    assert "listed" not in found  # every case listed is shown
    first = data(limit=2)  # the page holds two cases of three: the moved ones, and says how many there are
    assert (first["ids"], first["listed"], first["status"]) == (["c-miss", "c-found"], 3, [[0, 1]])
    assert first["top"] == [[[[0, 2.5, 1, 1.0], []], [[1, 3.0], [1, 1.2346]]]]


def test_first_moves_keeps_each_status_first_rows_of_batches_in_case_order():
    def row(case_id: str, status: str) -> dict:
        return {"case_id": case_id, "status": status}

    def frames() -> Iterator[pl.DataFrame]:
        schema = {"case_id": pl.String, "status": pl.String}
        return (pl.DataFrame(rows, schema=schema) for rows in batches)

    missed, found, same = "newly missed", "newly found", "unchanged"
    batches = [[row("a", same), row("b", missed)], [row("c", found), row("d", same), row("e", missed)], []]
    assert first_moves(frames(), 2) == ([row("b", missed), row("e", missed)], 5)
    assert first_moves(frames(), 4)[0] == [row("b", missed), row("e", missed), row("c", found), row("a", same)]
    assert [r["case_id"] for r in first_moves(frames())[0]] == ["b", "e", "c", "a", "d"]
    assert first_moves(frames(), 1) == ([row("b", missed)], 5)  # each status's first row, then the move order


def test_top_k_and_named_chunks_read_a_run_and_a_chunk_table(tmp_path: Path):
    run = tmp_path / "run.parquet"
    frame = {"case_id": ["b", "a", "a", "a"], "rank": [1, 3, 1, 2], "chunk_id": ["x", "z", "x", "y"]}
    pl.DataFrame({**frame, "score": [0.5, 0.1, 0.9, 0.2]}).write_parquet(run)
    assert top_k(run, 2) == {"a": [("x", 0.9), ("y", 0.2)], "b": [("x", 0.5)]}
    assert top_k(run, 2, {"b", "zz"}) == {"b": [("x", 0.5)]}  # only the cases asked for
    lines = [json.dumps(CHUNKS["d2#0"].to_row()).encode(), b"", json.dumps(CHUNKS["d1#1"].to_row()).encode()]
    assert named_chunks(lines, {"d1#1"}) == {"d1#1": CHUNKS["d1#1"]}


def test_the_data_block_holds_no_markup_and_reads_back_whole():
    hostile = {"q": "</script><!-- <script>alert(1)</script> & \u2028\u2029"}
    text = script_json(json.dumps(hostile, ensure_ascii=False))
    assert not set("<>&\u2028\u2029") & set(text) and json.loads(text) == hostile


def explorer_page(tmp_path: Path, found: dict) -> Path:
    page = tmp_path / "explorer.html"
    table = "| configuration | x |\n| --- | --- |\n| `cfg` | 1 |\n"
    page.write_text(render_html(f"# Gate: FAILED\n\n{table}", [], explorer_section(found)), encoding="utf-8")
    return page


def shown_ids(page) -> list[str]:
    return page.eval_on_selector_all("#rx-body tr.rx-row", "rows => rows.map(r => r.dataset.case)")


@needs_chromium
def test_clicking_a_case_shows_its_evidence_highlighted_in_the_baseline_and_missing_from_the_candidate(tmp_path):
    console: list[str] = []
    with chromium_page(console) as page:
        page.goto(explorer_page(tmp_path, data()).as_uri())
        assert shown_ids(page) == ["c-miss", "c-found", "c-same"]
        assert page.text_content("#rx-count") == "3 of 3 cases"
        cells = page.eval_on_selector_all("#rx-body tr[data-case='c-miss'] td", "tds => tds.map(t => t.textContent)")
        assert cells == ["c-miss", "newly missed", "question", "2025", "1 \u2192 \u2014", "1.000 \u2192 0.000"]

        page.click("#rx-body tr[data-case='c-miss']")
        assert page.text_content("#rx-detail h3") == "c-miss"
        assert page.text_content("#rx-detail .rx-question") == "Where is the <b>leave</b> policy?"  # text, not markup
        baseline, candidate = "#rx-detail [data-side='baseline']", "#rx-detail [data-side='candidate']"
        assert page.text_content(f"{baseline} h4") == "Baseline (main): evidence at rank 1"
        assert page.eval_on_selector_all(f"{baseline} mark", "ms => ms.map(m => m.textContent)") == ["EVIDENCE!!"]
        assert page.text_content(f"{baseline} li[data-rank='1'] .rx-chunk") == D1[5:25]
        assert page.text_content(f"{candidate} h4") == "Candidate (this change): evidence not in top 2"
        assert page.eval_on_selector_all(f"{candidate} mark", "ms => ms.length") == 0
        assert page.text_content(f"{candidate} li[data-rank='1'] span") == " score 3"

        page.select_option("#rx-slice", label="phrasing=keyword")
        assert shown_ids(page) == ["c-found", "c-same"]
        page.click("#rx-body tr[data-case='c-found']")  # {any}: the span in d2, and the whole of d1
        assert page.eval_on_selector_all(f"{candidate} mark", "ms => ms.map(m => m.textContent)") == ["abc"]
        assert page.text_content(f"{candidate} h4") == "Candidate (this change): evidence at rank 1"
        page.select_option("#rx-status", label="newly found")
        assert shown_ids(page) == ["c-found"]
        page.select_option("#rx-slice", value="")
        page.select_option("#rx-status", value="")
        page.fill("#rx-search", "LEAVE")
        assert shown_ids(page) == ["c-miss"]
        page.fill("#rx-search", "")
        page.click("#rx-head th:nth-child(6)")  # hit@2 by change, ascending: the drop first, the rise last
        assert shown_ids(page) == ["c-miss", "c-same", "c-found"]

        # The report's row of the configuration links to its cases.
        assert page.text_content("table td:first-child .rx-link") == "cases"
    assert console == [], console


@needs_chromium
def test_an_unavailable_side_says_why_and_the_other_still_shows(tmp_path):
    console: list[str] = []
    found = data(
        {"cfg": (unavailable("main:data/runs/cfg.parquet: DVC object 1234 is not in this cache"), CANDIDATE_SIDE)}
    )
    with chromium_page(console) as page:
        page.goto(explorer_page(tmp_path, found).as_uri())
        page.click("#rx-body tr[data-case='c-miss']")
        assert page.text_content("#rx-detail .rx-unavailable") == (
            "The baseline's chunks are unavailable: main:data/runs/cfg.parquet: DVC object 1234 is not in this cache"
        )
        assert page.text_content("#rx-detail [data-side='candidate'] h4").endswith("evidence not in top 2")
    assert console == [], console


@needs_chromium
def test_the_policy_lets_the_explorer_run_and_no_other_script(tmp_path):
    """The page's own script runs under its policy; a planted inline script and handler do not."""
    console: list[str] = []
    page_path = explorer_page(tmp_path, data())
    planted = tmp_path / "planted.html"
    payload = "<script>document.title='ran'</script><img src=x onerror=\"document.title='ran'\">"
    planted.write_text(page_path.read_text().replace("</body>", payload + "</body>"))
    with chromium_page(console) as page:
        page.goto(planted.as_uri())
        assert shown_ids(page) == ["c-miss", "c-found", "c-same"] and page.title() == "ragvet retrieval report"
    assert any("Content Security Policy" in message for message in console), console
    assert "default-src 'none'" in policy()


def test_a_revisions_sides_read_its_own_params_run_and_chunks_or_say_what_it_lacks(tmp_path: Path):
    (tmp_path / "repo").mkdir()
    repo = init_repo(tmp_path / "repo")
    params = {"configs": {"cfg": {"chunking": "c300", "retriever": "bm25"}, "gone": {"chunking": "c9"}}}
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    (repo / "data" / "runs").mkdir(parents=True)
    (repo / "data" / "chunks").mkdir()
    frame = {"case_id": ["a", "a", "a"], "rank": [1, 2, 3], "chunk_id": ["d2#0", "d1#1", "d2#0"]}
    pl.DataFrame({**frame, "score": [2.0, 1.5, 1.0]}).write_parquet(repo / "data" / "runs" / "cfg.parquet")
    rows = [json.dumps(chunk.to_row()) for chunk in CHUNKS.values()]
    (repo / "data" / "chunks" / "c300.jsonl").write_text("\n".join(rows) + "\n")
    commit_all(repo, "a run")
    # The work tree moves on; the revision's files are what it committed.
    (repo / "params.yaml").write_text(yaml.safe_dump({"configs": {}}))
    with fetched("HEAD") as revision:
        found = retrieved_at("HEAD", ["cfg", "gone", "new"], 2, revision.folder, project=repo)
    assert found["cfg"] == Retrieved({"a": [("d2#0", 2.0), ("d1#1", 1.5)]}, CHUNKS)
    assert found["gone"] == unavailable("HEAD has no data/runs/gone.parquet")
    assert found["new"] == unavailable("HEAD's params.yaml has no configuration new")
