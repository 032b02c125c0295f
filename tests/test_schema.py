"""Loading and validating the corpus, the cases and params: every problem, each at file:line."""

from __future__ import annotations

import copy
import dataclasses
import importlib.metadata
import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from ragvet.errors import InputError
from ragvet.inputs.cases import load_cases
from ragvet.inputs.corpus import collect_corpus, load_corpus
from ragvet.inputs.params import validate_params
from ragvet.retrieval import models
from ragvet.schema import Case, Claim, Doc, EvidenceUnit, case_fingerprint, corpus_fingerprint

ROOT = Path(__file__).resolve().parents[1]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path


def problems(fn, *args) -> list:
    with pytest.raises(InputError) as err:
        fn(*args)
    return err.value.problems


# --- corpus -----------------------------------------------------------------------------


def test_md_and_txt_docs_nested_with_front_matter(tmp_path):
    corpus = tmp_path / "corpus"
    write(
        corpus / "leave.md", "---\ntitle: Leave 2026\nyear: 2026\ndate: 2026-01-05\n---\n# Leave\n\nCarry five days.\n"
    )
    write(corpus / "hr/faq.txt", "Plain text, no front matter.\r\nSecond line.")
    write(corpus / "hr/deep/old.policy.md", "---\n---\n  body kept exactly  \n")
    write(corpus / "hr/notes.rst", "ignored: not a corpus file type")
    write(corpus / ".hidden/x.md", "ignored: hidden folder")
    docs = load_corpus(corpus)
    assert [d.doc_id for d in docs] == ["hr/deep/old.policy", "hr/faq", "leave"]
    old, faq, leave = docs
    assert leave == Doc("leave", "# Leave\n\nCarry five days.\n", "Leave 2026", {"year": 2026, "date": "2026-01-05"})
    assert faq == Doc("hr/faq", "Plain text, no front matter.\r\nSecond line.", None, {})
    assert old.text == "  body kept exactly  \n" and old.metadata == {}


def test_jsonl_corpus(tmp_path):
    rows = [
        {"doc_id": "b", "text": "Bee.", "metadata": {"doc_type": "faq", "year": 2025}},
        {"doc_id": "a", "text": "Ay.", "title": "A"},
    ]
    write(tmp_path / "c/docs.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n\n")
    docs = load_corpus(tmp_path / "c")
    assert docs == [Doc("a", "Ay.", "A", {}), Doc("b", "Bee.", None, {"doc_type": "faq", "year": 2025})]


def test_a_missing_corpus_folder_is_named(tmp_path):
    [missing] = problems(load_corpus, tmp_path / "nope")
    assert missing.where == str(tmp_path / "nope") and "not found" in missing.what


def test_collect_corpus_keeps_the_valid_docs(tmp_path):
    write(tmp_path / "c/ok.md", "Fine.")
    write(tmp_path / "c/bad.md", "---\n: [\n---\nx")
    docs, found = collect_corpus(tmp_path / "c")
    assert [d.doc_id for d in docs] == ["ok"] and len(found) == 1


# --- cases ------------------------------------------------------------------------------

LEAVE = "Staff may carry up to five unused days. This applies to the 2026 plan year."
DOCS = {
    "leave-2026": Doc("leave-2026", LEAVE, None, {"doc_type": "policy", "year": 2026}),
    "benefits": Doc("benefits", "Dental cover starts in May.", None, {"doc_type": "faq"}),
}
CHUNKINGS = {"fixed-10": {"strategy": "fixed", "unit": "chars", "window": 10, "overlap": 0}}

GOOD_CASES = """\
- id: leave-carryover
  question: How many vacation days carry into next year?
  evidence:
    - {doc: leave-2026, quote: "carry up to  five
        unused days"}
    - {doc: leave-2026, start: 40, end: 75}
    - {chunk: "benefits#1", chunking: fixed-10}
    - {doc: benefits}
  claims:
    - text: Employees may carry five unused days.
      evidence: [{doc: leave-2026, quote: carry up to five unused days}]
  tags: {phrasing: natural, year: 2026, reviewed: true}
  filter: {doc_type: [policy, faq]}
- id: a-sabbatical-mars
  question: Can I take my sabbatical on Mars?
  answerable: false
"""


def test_yaml_cases_resolve_every_form_and_sort_by_id(tmp_path):
    cases = load_cases(write(tmp_path / "cases.yaml", GOOD_CASES), DOCS, CHUNKINGS)
    assert [c.case_id for c in cases] == ["a-sabbatical-mars", "leave-carryover"]
    mars, leave = cases
    assert mars == Case("a-sabbatical-mars", "Can I take my sabbatical on Mars?", answerable=False)
    carry = EvidenceUnit("leave-2026", 10, 38)  # "carry" at 10, "days" ends at 38
    assert LEAVE[10:38] == "carry up to five unused days"
    assert leave.evidence == (
        carry,
        EvidenceUnit("leave-2026", 40, 75),
        EvidenceUnit("benefits", 10, 20),
        EvidenceUnit("benefits"),
    )
    assert leave.claims == (Claim("Employees may carry five unused days.", (carry,)),)
    assert leave.tags == {"phrasing": "natural", "year": "2026", "reviewed": "true"}
    assert leave.filter == {"doc_type": ["policy", "faq"]}


def test_jsonl_cases_are_accepted(tmp_path):
    rows = [
        {"id": "q2", "question": "Dental?", "evidence": [{"doc": "benefits", "quote": "Dental cover"}]},
        {"id": "q1", "question": "Mars?", "answerable": False},
    ]
    path = write(tmp_path / "cases.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    cases = load_cases(path, DOCS, CHUNKINGS)
    assert [c.case_id for c in cases] == ["q1", "q2"]
    assert cases[1].evidence == (EvidenceUnit("benefits", 0, 12),)


# --- bad corpora and cases: tests/data/load/<corpus|cases>/<case>/ ------------------------

BAD_INPUTS = Path(__file__).parent / "data" / "load"


@pytest.mark.parametrize(
    "case",
    sorted(path for path in BAD_INPUTS.glob("*/*/") if path != BAD_INPUTS / "cases" / "corpus"),
    ids=lambda case: f"{case.parent.name}/{case.name}",
)
def test_a_bad_corpus_or_cases_file_gives_every_problem_at_its_line_with_its_fix(case):
    """Each folder holds the input and problems.txt, the problems as a user reads them
    (paths relative to the folder); the cases are read against cases/corpus/."""
    if case.parent.name == "corpus":
        found = problems(load_corpus, case / "corpus")
    else:
        docs = {doc.doc_id: doc for doc in load_corpus(BAD_INPUTS / "cases" / "corpus")}
        [path] = [path for path in case.iterdir() if path.name != "problems.txt"]
        found = problems(load_cases, path, docs, CHUNKINGS)
    assert "\n".join(problem.render() for problem in found).replace(f"{case}/", "") + "\n" == (
        (case / "problems.txt").read_text()
    )


# --- params -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def params() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))


def where_what(found) -> list[tuple[str, str]]:
    return [(p.where, p.what) for p in found]


def is_probe(problem) -> bool:
    """A problem of the installed-package probe: it depends on the environment, not on the params."""
    return "is not installed" in problem.what


def params_problems(params: dict) -> list:
    return [problem for problem in validate_params(params) if not is_probe(problem)]


@pytest.fixture(params=["installed", "absent"])
def dense_extra(request, monkeypatch) -> str:
    """Run a params test both with the environment's dense extra and as if it were
    not installed: the pure checks must say the same either way."""
    if request.param == "absent":
        real = importlib.util.find_spec
        missing = {"torch", "sentence_transformers", "faiss"}
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in missing else real(name, *a))
        monkeypatch.setattr(models, "package_model_dir", lambda name: None)
    return request.param


def test_a_model_name_is_looked_up_among_the_installed_packages_once_per_process(tmp_path, monkeypatch):
    """Without the dense extra, each lookup of the default model scans every installed
    distribution (seconds in a large environment), and every validation names it several times."""
    scans = []
    real = importlib.metadata.packages_distributions
    monkeypatch.setattr(importlib.metadata, "packages_distributions", lambda: scans.append(1) or real())
    monkeypatch.syspath_prepend(str(tmp_path))  # an import path of its own: no lookup cached before
    for _ in range(3):
        with pytest.raises(InputError, match="never downloads"):
            models.resolve_model("no-such-model-anywhere")
    assert len(scans) == 1


def test_without_the_dense_extra_each_dense_retriever_names_what_to_install(params, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "faiss" else real(name, *a))
    probed = [problem for problem in validate_params(params) if is_probe(problem)]
    dense = sorted(
        f"params.yaml: retrievers.{name}" for name, spec in params["retrievers"].items() if spec["kind"] == "dense"
    )
    assert [problem.where for problem in probed] == dense
    assert all("needs the Python module faiss" in problem.what for problem in probed)


def test_the_shipped_params_are_valid(dense_extra, params):
    assert params_problems(params) == []


def test_keys_dvc_run_cache_cannot_see_are_refused_at_any_depth(dense_extra, params):
    """DVC hashes a stage for its run cache without keys named size or nfiles, so
    a change to one would restore stale outputs: no params key may use them."""
    bad = copy.deepcopy(params)
    bad["chunking"]["fixed-300"]["size"] = bad["chunking"]["fixed-300"].pop("window")
    bad["retrievers"]["mine"] = {"kind": "python", "target": "plugins/x.py:run", "params": {"nfiles": 2}}
    found = [p for p in params_problems(bad) if "run cache" in p.what]
    assert [p.where for p in found] == [
        "params.yaml: chunking.fixed-300.size",
        "params.yaml: retrievers.mine.params.nfiles",
    ]
    assert all("stale outputs" in p.what and "`window`" in p.fix for p in found)


def test_config_naming_unknown_chunking_or_retriever(dense_extra, params):
    bad = copy.deepcopy(params)
    bad["configs"]["x"] = {"chunking": "fixed-30", "retriever": "bm52"}
    found = params_problems(bad)
    assert where_what(found) == [
        ("params.yaml: configs.x.chunking", "config 'x' names unknown chunking 'fixed-30'"),
        ("params.yaml: configs.x.retriever", "config 'x' names unknown retriever 'bm52'"),
    ]
    assert "fixed-300, headings-1200, sentences-600" in found[0].fix and "bm25" in found[1].fix


def test_config_keys_and_names(dense_extra, params):
    bad = copy.deepcopy(params)
    bad["configs"]["a/b"] = {"chunking": "fixed-300", "retriever": "bm25", "reranker": "x"}
    found = where_what(params_problems(bad))
    assert ("params.yaml: configs.a/b", "config name 'a/b' cannot be used in stage names and file paths") in found
    assert ("params.yaml: configs.a/b.reranker", "unknown key `reranker` in `configs.a/b`") in found


@pytest.mark.parametrize(
    ("ks", "where", "what"),
    [
        ([1, 0, 5], "params.yaml: ks[1]", "k must be an integer > 0, got 0"),
        ([1, -3], "params.yaml: ks[1]", "k must be an integer > 0, got -3"),
        ([2.5], "params.yaml: ks[0]", "k must be an integer > 0, got 2.5"),
        ([True], "params.yaml: ks[0]", "k must be an integer > 0, got True"),
        ([], "params.yaml: ks", "`ks` must be a non-empty list of integers > 0, got []"),
        ([5, 5], "params.yaml: ks", "`ks` lists a k more than once: [5, 5]"),
    ],
)
def test_bad_ks(dense_extra, params, ks, where, what):
    bad = copy.deepcopy(params)
    bad["ks"] = ks
    bad["gate"]["metrics"] = ["mrr"]
    bad["gate"]["slice_metric"] = "mrr"
    bad["judged"]["metric"] = "judged@5"  # [5, 5] computes k = 5 only
    assert where_what(params_problems(bad)) == [(where, what)]


def test_depth_below_the_largest_k_is_a_problem(dense_extra, params):
    bad = copy.deepcopy(params)
    bad["depth"] = 5
    [problem] = params_problems(bad)
    assert problem.where == "params.yaml: depth" and "below the largest k 10" in problem.what


def test_sections_split_evidence_slices_and_gate(dense_extra, params):
    bad = copy.deepcopy(params)
    bad["chunkng"] = {}
    del bad["slices"]
    bad["split"] = {"salt": "", "eval_fraction": 1.5}
    bad["evidence"]["span_coverage"] = 1.5
    bad["gate"]["configs"] = ["nope"]
    bad["gate"]["metrics"] = ["recal@5", "recall@7"]
    bad["gate"]["max_drop"] = -0.1
    bad["gate"]["bootstrap"] = {"resamples": 0, "seed": 1.5, "confidence": 0.95, "n": 3}
    wheres = [p.where for p in params_problems(bad)]
    assert wheres == [
        "params.yaml: slices",
        "params.yaml: chunkng",
        "params.yaml: split.salt",
        "params.yaml: split.eval_fraction",
        "params.yaml: evidence.span_coverage",
        "params.yaml: gate.configs",
        "params.yaml: gate.metrics",
        "params.yaml: gate.metrics",
        "params.yaml: gate.max_drop",
        "params.yaml: gate.bootstrap.n",
        "params.yaml: gate.bootstrap.resamples",
        "params.yaml: gate.bootstrap.seed",
    ]


def test_bad_chunking_and_retriever_are_checked_by_their_modules(dense_extra, params):
    bad = copy.deepcopy(params)
    bad["chunking"]["fixed-300"]["window"] = 0
    bad["retrievers"]["bm25"]["kind"] = "bm52"
    wheres = {p.where for p in params_problems(bad)}
    assert wheres == {"params.yaml: chunking.fixed-300", "params.yaml: retrievers.bm25"}


# --- fingerprints -----------------------------------------------------------------------


def test_corpus_fingerprint_is_order_free_and_sees_every_character():
    docs = list(DOCS.values())
    assert corpus_fingerprint(docs) == corpus_fingerprint(docs[::-1])
    assert len(corpus_fingerprint(docs)) == 16
    changed = [dataclasses.replace(DOCS["leave-2026"], text=LEAVE + " "), DOCS["benefits"]]
    assert corpus_fingerprint(changed) != corpus_fingerprint(docs)


def test_case_fingerprint_normalises_order_but_sees_content():
    a, b = EvidenceUnit("d", 0, 5), EvidenceUnit("d")
    texts = {"d": "Leave is 25 days."}
    case = Case("c", "q?", True, (a, b), (Claim("x", (a,)), Claim("y", (b,))))
    reordered = Case("c", "q?", True, (b, a), (Claim("y", (b,)), Claim("x", (a,))))
    assert case_fingerprint(case, texts) == case_fingerprint(reordered, texts)
    assert case_fingerprint(case, texts) != case_fingerprint(Case("c", "q??", True, (a, b), case.claims), texts)
    wider = Case("c", "q?", True, (EvidenceUnit("d", 0, 8), b), case.claims)
    assert case_fingerprint(case, texts) != case_fingerprint(wider, texts)


MOVED_BEFORE = "Parental leave is 16 weeks. Leave is 25 days a year."
MOVED_AFTER = "New policy from May. " + MOVED_BEFORE


def _span_case(start: int, end: int) -> Case:
    return Case("c", "How long is leave?", True, (EvidenceUnit("d", start, end),))


def test_case_fingerprint_keeps_a_label_that_only_moved():
    """A sentence inserted before the label moves its offsets, not what it says."""
    at = MOVED_BEFORE.index("Leave is 25 days")
    moved = MOVED_AFTER.index("Leave is 25 days")
    assert moved == at + 21
    before = case_fingerprint(_span_case(at, at + 16), {"d": MOVED_BEFORE})
    assert case_fingerprint(_span_case(moved, moved + 16), {"d": MOVED_AFTER}) == before
    # Line endings and Unicode spelling are no change of meaning either.
    crlf = MOVED_BEFORE.replace(" ", "\r\n")
    label = "Leave is 25 days".replace(" ", "\r\n")
    assert case_fingerprint(_span_case(crlf.index(label), crlf.index(label) + len(label)), {"d": crlf}) == before


def test_case_fingerprint_sees_a_changed_label_and_which_occurrence():
    at = MOVED_BEFORE.index("Leave is 25 days")
    before = case_fingerprint(_span_case(at, at + 16), {"d": MOVED_BEFORE})
    edited = MOVED_BEFORE.replace("25 days", "30 days")
    assert case_fingerprint(_span_case(at, at + 16), {"d": edited}) != before  # same offsets, other text
    # The same words, but their second occurrence in the document: another label.
    twice = "Leave is 25 days. " + MOVED_BEFORE
    second = twice.index("Leave is 25 days", 1)
    first = case_fingerprint(_span_case(0, 16), {"d": twice})
    assert first != case_fingerprint(_span_case(second, second + 16), {"d": twice})


def test_gate_refuses_context_chars_and_repeated_metrics(dense_extra, params):
    bad = copy.deepcopy(params)
    bad["gate"]["metrics"] = ["recall@5", "recall@5", "context_chars@5"]
    bad["gate"]["slice_metric"] = "context_chars@5"
    found = where_what(params_problems(bad))
    assert ("params.yaml: gate.metrics", "metric 'recall@5' is listed twice") in found
    assert ("params.yaml: gate.metrics", "'context_chars@5' cannot be gated: more context is not a drop") in found
    assert ("params.yaml: gate.slice_metric", "'context_chars@5' cannot be gated: more context is not a drop") in found


def test_the_judged_section_and_a_gated_judged_share_are_checked(dense_extra, params):
    bad = copy.deepcopy(params)
    bad["gate"]["metrics"] = ["recall@5", "judged@5"]
    bad["judged"] = {"metric": "recall@10", "max_drop": 1.5, "k": 10}
    assert where_what(params_problems(bad)) == [
        ("params.yaml: judged.k", "unknown key `k` in `judged`"),
        ("params.yaml: judged.metric", "`judged.metric` must be judged@<k>, got 'recall@10'"),
        ("params.yaml: judged.max_drop", "`judged.max_drop` must be a number in [0, 1], got 1.5"),
        (
            "params.yaml: gate.metrics",
            "'judged@5' cannot be gated: it describes the judgements, not the retrieval",
        ),
    ]
    bad["judged"] = {"metric": "judged@7"}
    bad["gate"]["metrics"] = ["recall@5"]
    assert where_what(params_problems(bad)) == [  # each key is optional: max_drop defaults to 0.1
        ("params.yaml: judged.metric", "metric 'judged@7' uses k=7, which is not computed"),
    ]
    del bad["judged"]  # optional: the report then warns at judged@10 with max_drop 0.1
    assert params_problems(bad) == []


# --- judged sets (imported qrels) -----------------------------------------------------------

JUDGED_DOCS = {doc_id: Doc(doc_id, f"Text of {doc_id}.") for doc_id in ("d1", "d2", "184")}


def test_a_judged_set_keeps_every_grade_and_moves_the_fingerprint(tmp_path):
    cases = write(
        tmp_path / "cases.yaml",
        "- id: q1\n  question: Tides?\n  evidence: [{doc: d1}]\n  judged: {d1: 2, d2: 0, 184: -1}\n"
        "- id: q2\n  question: Red planet?\n  answerable: false\n  judged: {d2: 0}\n"
        "- id: native\n  question: Mars?\n  evidence: [{doc: d1}]\n",
    )
    native, q1, q2 = load_cases(cases, JUDGED_DOCS)  # sorted by id
    assert q1.judged == {"d1": 2, "d2": 0, "184": -1}  # a number-like YAML key is the doc id as text
    assert q2.judged == {"d2": 0} and not q2.answerable
    assert native.judged is None and "judged" not in native.to_row()  # the row of a native case is unchanged
    assert Case.from_row(q1.to_row()) == q1
    regraded = dataclasses.replace(q1, judged={"d1": 2, "d2": 1, "184": -1})
    texts = {doc.doc_id: doc.text for doc in JUDGED_DOCS.values()}
    assert case_fingerprint(regraded, texts) != case_fingerprint(q1, texts)
    assert case_fingerprint(dataclasses.replace(q1, judged=None), texts) == case_fingerprint(
        Case("q1", "Tides?", True, (EvidenceUnit("d1"),)), texts
    )


def test_a_bad_judged_set_is_refused_at_its_line(tmp_path):
    cases = write(
        tmp_path / "cases.yaml",
        "- id: q1\n  question: Tides?\n  evidence: [{doc: d1}]\n  judged:\n    d1: 2\n    nope: 1\n    d2: high\n"
        "- id: q2\n  question: Red?\n  evidence: [{doc: d1}]\n  judged: {d2: 1}\n"
        "- id: q3\n  question: Moon?\n  evidence: [{doc: d1}]\n  judged:\n    d1: 0\n"
        "- id: q4\n  question: Sun?\n  answerable: false\n  judged: {}\n"
        "- id: q5\n  question: Stars?\n  answerable: false\n  judged: [d1, d2]\n",
    )
    found = [(p.where, p.what) for p in problems(load_cases, cases, JUDGED_DOCS)]
    assert found == [
        (f"{cases}:6 (case q1)", "judged doc 'nope' is not in the corpus"),
        (f"{cases}:7 (case q1)", "judged doc 'd2' has grade 'high', not an integer"),
        (f"{cases}:11 (case q2)", "evidence doc 'd1' is not in the case's judged set"),
        (f"{cases}:16 (case q3)", "evidence doc 'd1' is judged not relevant (grade 0)"),
        (f"{cases}:20 (case q4)", "judged must be a non-empty mapping of doc id: grade, got an empty mapping"),
        (f"{cases}:24 (case q5)", "judged must be a non-empty mapping of doc id: grade, got a list"),
    ]


def test_validate_refuses_a_span_whose_text_changed_under_it(tmp_path):
    """Offsets still inside the edited doc, now over other words: refused where the label is."""
    cases = write(
        tmp_path / "cases.yaml",
        "- id: c1\n  question: How long is leave?\n"
        "  evidence:\n    - {doc: d, start: 28, end: 44, text: Leave is 25 days}\n",
    )
    (case,) = load_cases(cases, {"d": Doc("d", MOVED_BEFORE)})
    assert case.evidence == (EvidenceUnit("d", 28, 44),)
    wrapped = MOVED_BEFORE.replace("Leave is", "Leave\nis")  # a line break is no change of meaning
    assert load_cases(cases, {"d": Doc("d", wrapped)})[0].evidence == (EvidenceUnit("d", 28, 44),)
    with pytest.raises(InputError) as err:
        load_cases(cases, {"d": Doc("d", MOVED_AFTER)})
    (problem,) = err.value.problems
    assert problem.where == f"{cases}:4 (case c1)"
    assert problem.what == (
        "evidence 1: offsets [28:44] of doc 'd' read '…l leave is 16 we…', not the label's text "
        "'Leave is 25 days': the doc changed under the label"
    )
    assert "ragvet relabel --from REV" in problem.fix
