"""``ragvet freeze-labels``: chunk-anchored labels become the spans they resolve to,
every other byte of a YAML cases file stays, and the labels stop depending on the
chunking."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml
from repos import ROOT, ragvet, set_param, sh

from ragvet.evidence import EvidenceResolver
from ragvet.gating.compare import RELABEL_FIX, fingerprint_reasons
from ragvet.inputs.cases import load_cases
from ragvet.inputs.corpus import load_corpus
from ragvet.inputs.freezing import chunk_anchors, freeze_jsonl, freeze_yaml, span_freezer
from ragvet.schema import Doc
from ragvet.splitting import freeze_split

# 26 characters; a fixed window of 10 with no overlap makes chunks d#0 [0,10), d#1 [10,20), d#2 [20,26).
DOC = Doc("d", "abcdefghijklmnopqrstuvwxyz")
CHUNKINGS = {"w10": {"strategy": "fixed", "unit": "chars", "window": 10, "overlap": 0}}


def freezer():
    return span_freezer(EvidenceResolver({"d": DOC}, CHUNKINGS))


def test_yaml_keeps_every_other_byte_and_comments():
    text = (
        "# labelled by hand\n"
        "- id: c1  # the first\n"
        "  question: q?\n"
        "  evidence:\n"
        '    - {chunk: "d#1", chunking: w10}   # middle chunk\n'
        "    - {chunking: w10, chunk: 'd#2'}\n"
        "    - {doc: d, quote: abc}\n"
    )
    frozen, count, problems = freeze_yaml(text, Path("cases.yaml"), freezer())
    assert (count, problems) == (2, [])
    assert frozen == (
        "# labelled by hand\n"
        "- id: c1  # the first\n"
        "  question: q?\n"
        "  evidence:\n"
        '    - {doc: "d", start: 10, end: 20}   # middle chunk\n'
        '    - {doc: "d", start: 20, end: 26}\n'
        "    - {doc: d, quote: abc}\n"
    )


def test_yaml_problems_name_the_line_and_nothing_is_frozen_by_the_command(tmp_path):
    text = "- id: c1\n  question: q?\n  evidence:\n    - {chunk: d#7, chunking: w10}\n"
    text += "    - chunk: d#1\n      chunking: w10\n"
    _, count, problems = freeze_yaml(text, Path("cases.yaml"), freezer())
    assert count == 0
    assert [(p.where, p.what) for p in problems][1:] == [
        ("cases.yaml:5", "a {chunk, chunking} reference in block style cannot be rewritten in place"),
        ("cases.yaml:6", "a {chunk, chunking} reference in block style cannot be rewritten in place"),
    ]
    assert problems[0].where == "cases.yaml:4" and "unknown chunk id 'd#7'" in problems[0].what
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "d.txt").write_text(DOC.text)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"chunking": CHUNKINGS}))
    (tmp_path / "cases.yaml").write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "ragvet.cli", "freeze-labels", "--cases", "cases.yaml", "--corpus", "corpus"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": str(Path(sys.executable).parent)},
    )
    assert done.returncode == 2 and "cases.yaml:5: a {chunk, chunking} reference in block style" in done.stderr
    assert (tmp_path / "cases.yaml").read_text() == text


def test_jsonl_rewrites_only_the_lines_with_a_chunk_reference():
    plain = '{"id": "c0", "question": "q?", "evidence": [{"doc": "d"}]}\n'
    anchored = {
        "id": "c1",
        "question": "q?",
        "claims": [{"text": "t", "evidence": [{"chunk": "d#0", "chunking": "w10"}]}],
    }
    frozen, count, problems = freeze_jsonl(plain + json.dumps(anchored) + "\n", Path("c.jsonl"), freezer())
    assert (count, problems) == (1, [])
    lines = frozen.splitlines(keepends=True)
    assert lines[0] == plain
    assert json.loads(lines[1])["claims"][0]["evidence"] == [{"doc": "d", "start": 0, "end": 10}]


def test_frozen_sample_labels_are_the_same_and_no_longer_depend_on_the_chunking(tmp_path):
    """The sample anchors 13 references on fixed-300. Frozen, its cases resolve to the
    same spans (same split fingerprints); a new fixed-300 window then changes the
    anchored labels' fingerprint but not the frozen ones'."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    docs = load_corpus(ROOT / "data" / "corpus")
    frozen_path = tmp_path / "cases.yaml"
    text, count, problems = freeze_yaml(
        (ROOT / "data" / "cases" / "cases.yaml").read_text(),
        ROOT / "data" / "cases" / "cases.yaml",
        span_freezer(EvidenceResolver({doc.doc_id: doc for doc in docs}, params["chunking"])),
    )
    assert (count, problems) == (13, [])
    frozen_path.write_text(text)

    def fingerprints(path: Path, chunkings: dict) -> dict:
        cases = load_cases(path, {doc.doc_id: doc for doc in docs}, chunkings)
        return freeze_split(cases, docs, params["split"]["salt"], params["split"]["eval_fraction"])["fingerprints"]

    anchored = fingerprints(ROOT / "data" / "cases" / "cases.yaml", params["chunking"])
    assert fingerprints(frozen_path, params["chunking"]) == anchored
    moved = {**params["chunking"], "fixed-300": {**params["chunking"]["fixed-300"], "window": 280}}
    assert fingerprints(ROOT / "data" / "cases" / "cases.yaml", moved)["eval_split"] != anchored["eval_split"]
    assert fingerprints(frozen_path, moved) == anchored


def _figures(repo: Path) -> dict[str, bytes]:
    """The metrics JSON files but metrics/split.json, which names the anchoring
    chunkings (freezing empties that list) beside its unchanged fingerprints."""
    return {p.name: p.read_bytes() for p in sorted((repo / "metrics").glob("*.json")) if p.name != "split.json"}


def test_freezing_the_sample_through_dvc_keeps_every_figure(work_repo):
    """Through DVC's CLI: freezing changes the cases file, not one metrics byte; a new
    fixed-300 window afterwards leaves the split as it was, with no anchor left to name."""
    before = _figures(work_repo)
    split = json.loads((work_repo / "data" / "split.json").read_text())
    done = ragvet(work_repo, "freeze-labels", check=True)
    assert done.stdout == "froze 13 chunk references into spans, anchored 458 labels -> data/cases/cases.yaml\n"
    sh(work_repo, "dvc", "repro")
    assert _figures(work_repo) == before
    set_param(work_repo, ["chunking", "fixed-300", "window"], 280)
    sh(work_repo, "dvc", "repro", "split")
    frozen = json.loads((work_repo / "data" / "split.json").read_text())
    assert frozen["fingerprints"] == {**split["fingerprints"], "anchors": []}
    assert frozen["cases"] == split["cases"]


def test_labels_changed_names_the_anchoring_chunkings_and_the_way_out():
    base = {"eval_split": "e0", "corpus": "c0"}
    assert fingerprint_reasons(base, {**base, "eval_split": "e1"}) == [
        f"eval-split fingerprint differs (baseline e0, current e1): {RELABEL_FIX}"
    ]
    [reason] = fingerprint_reasons(base, {**base, "eval_split": "e1", "anchors": ["fixed-300"]})
    assert reason == (
        f"eval-split fingerprint differs (baseline e0, current e1): {RELABEL_FIX}. Labels are anchored on chunking "
        "'fixed-300' ({chunk, chunking} evidence), so a change to its params changes them: to free it, restore its "
        "params, run `ragvet freeze-labels` (the same spans, same fingerprint), then change it"
    )
    assert fingerprint_reasons(base, {**base, "anchors": ["fixed-300"]}) == []


def test_chunk_anchors_reads_a_chunk_key_spelt_with_an_escape(tmp_path):
    """Lines that cannot name `chunk` are skipped unparsed; one spelling it as `\\u0063hunk`
    still counts, and a line without either counts nothing."""
    cases = tmp_path / "cases.jsonl"
    lines = [
        {"id": "a", "evidence": [{"chunk": "d#1", "chunking": "small"}]},
        {"id": "b", "evidence": [{"doc": "d"}]},
    ]
    escaped = '{"id": "c", "evidence": [{"\\u0063hunk": "d#2", "chunking": "big"}]}'
    cases.write_text("".join(json.dumps(line) + "\n" for line in lines) + escaped + "\n", encoding="utf-8")
    assert chunk_anchors(cases) == ["big", "small"]


def test_jsonl_lines_break_at_newlines_only_as_validate_does(tmp_path):
    """A raw U+2028 or U+0085 inside a JSON string is valid JSON (only controls below
    U+0020 must be escaped) and validate accepts it; `str.splitlines` would cut the
    line there, so the anchors crashed on the broken half and freeze-labels left that
    line's reference unfrozen."""
    anchored = {"id": "c1", "question": "a\u2028b\x85c?", "evidence": [{"chunk": "d#0", "chunking": "w10"}]}
    text = json.dumps(anchored, ensure_ascii=False) + "\n"
    assert "\u2028" in text and len(text.splitlines()) == 3
    cases = tmp_path / "cases.jsonl"
    cases.write_text(text, encoding="utf-8")
    assert chunk_anchors(cases) == ["w10"]
    frozen, count, problems = freeze_jsonl(text, Path("c.jsonl"), freezer())
    assert (count, problems) == (1, [])
    assert json.loads(frozen)["evidence"] == [{"doc": "d", "start": 0, "end": 10}]
    assert json.loads(frozen)["question"] == anchored["question"]
