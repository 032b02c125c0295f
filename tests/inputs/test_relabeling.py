"""``ragvet relabel``: span and quote labels re-anchored after hand-made edits of their
documents, in a small git repository whose first commit is the revision the labels were
written against: kept, moved (applied), changed (reviewed, applied once accepted),
orphaned; an ambiguous exact match never moved blindly; YAML comments kept."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from pathlib import Path

import pytest
import yaml
from repos import ragvet, sh

from ragvet.inputs.anchoring import anchor_at, nfc_view, place
from ragvet.inputs.cases import collect_cases
from ragvet.inputs.corpus import load_corpus
from ragvet.schema import case_fingerprint

POLICY = (
    "Leave policy for all staff.\n"
    "Staff may carry up to five unused days into the next year.\n"
    "Requests for leave go to the HR portal.\n"
)
ROADMAP = "The roadmap names three themes for the year.\nThe first theme is reliability of the platform.\n"
CASES = """\
# hand-labelled cases: keep this comment
- id: carry            # the carry-over case
  question: How many days carry over?
  evidence:
    - {doc: policy, start: 28, end: 86}   # the carry sentence
    - {doc: policy, quote: "go to the HR portal"}
- id: theme
  question: What is the first theme?
  evidence:
    - doc: roadmap
      quote: "reliability of the platform"
  claims:
    - text: Reliability is the first theme.
      evidence: [{any: [{doc: roadmap, start: 45, end: 92}, {doc: policy, quote: "five unused days"}]}]
"""
CARRY = "Staff may carry up to five unused days into the next year."


def write_project(root: Path, policy: str = POLICY, roadmap: str | None = ROADMAP, cases: str = CASES) -> None:
    corpus = root / "data" / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    (corpus / "policy.md").write_bytes(policy.encode("utf-8"))
    if roadmap is None:
        (corpus / "roadmap.md").unlink()
    else:
        (corpus / "roadmap.md").write_bytes(roadmap.encode("utf-8"))
    (root / "data" / "cases").mkdir(parents=True, exist_ok=True)
    (root / "data" / "cases" / "cases.yaml").write_text(cases, encoding="utf-8")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository whose commit ``labelled`` holds the corpus the labels were written for."""
    write_project(tmp_path)
    sh(tmp_path, "git", "init", "-q", "-b", "main")
    sh(tmp_path, "git", "-c", "user.email=t@example.com", "-c", "user.name=t", "add", "-A")
    sh(tmp_path, "git", "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "labelled")
    sh(tmp_path, "git", "tag", "labelled")
    return tmp_path


def cases_text(repo: Path) -> str:
    return (repo / "data" / "cases" / "cases.yaml").read_text(encoding="utf-8")


_STRING = r'"(?:[^"\\]|\\.)*"'
_ANCHOR = re.compile(
    rf", anchor: {{prefix: {_STRING}, suffix: {_STRING}, doc_sha256: \"[0-9a-f]{{64}}\"(?:, start: \d+)?}}"
    rf'|\n *anchor: {{prefix: {_STRING}, suffix: {_STRING}, doc_sha256: "[0-9a-f]{{64}}"(?:, start: \d+)?}}'
)
_TEXT = re.compile(rf"(?:, |\n *)text: {_STRING}(?=(?:, |\n *)anchor: )")


def plain(text: str, texts: bool = True) -> str:
    """A cases file's text without the anchors relabel stores, the span texts it adds beside
    them (unless ``texts`` is False: the labels had them) and the cases' `status` lines: what
    the tests of where labels land compare."""
    text = _TEXT.sub("", text) if texts else text
    return re.sub(r"\n *status: (?:orphaned|pending)(?=\n)", "", _ANCHOR.sub("", text))


def review(repo: Path) -> dict:
    return yaml.safe_load((repo / "relabel-review.yaml").read_text(encoding="utf-8"))


def test_the_sample_offsets_are_the_carry_sentence():
    assert POLICY[28:86] == CARRY
    assert ROADMAP[45:92] == "The first theme is reliability of the platform."


def test_unchanged_documents_keep_every_label_and_write_nothing(repo):
    done = ragvet(repo, "relabel", "--from", "labelled")
    summary = "5 kept, 0 moved, 0 changed, 0 orphaned of the labels as labelled had them"
    assert (done.returncode, done.stdout.splitlines()[0]) == (0, summary)
    assert plain(cases_text(repo)) == CASES
    assert not (repo / "relabel-review.yaml").exists()


def test_a_sentence_inserted_before_a_label_moves_its_offsets_and_keeps_every_comment(repo):
    inserted = "Part-time staff accrue leave pro rata.\n"
    write_project(repo, POLICY.replace("Staff may", inserted + "Staff may"))
    done = ragvet(repo, "relabel", "--from", "labelled")
    assert done.returncode == 0, done.stdout + done.stderr
    start = 28 + len(inserted)
    assert plain(cases_text(repo)) == CASES.replace("start: 28, end: 86", f"start: {start}, end: {start + 58}")
    assert "moved    carry evidence 1: 28-86 -> 67-125" in done.stdout
    assert "2 kept, 3 moved, 0 changed, 0 orphaned" in done.stdout  # the quotes moved too, needing no edit


def test_a_word_changed_inside_a_label_goes_to_review_with_its_new_place_and_nothing_is_applied(repo):
    changed = POLICY.replace("five unused", "seven unused")
    write_project(repo, changed)
    done = ragvet(repo, "relabel", "--from", "labelled")
    assert done.returncode == 1
    assert plain(cases_text(repo)) == CASES
    entries = review(repo)["entries"]
    assert [(e["case"], e["label"], e["status"]) for e in entries] == [
        ("carry", "evidence 1", "changed"),
        ("theme", "claim 1 evidence 1 alternative 2", "changed"),
    ]
    span = entries[0]
    assert span["new"] == {"start": 28, "end": 87, "text": CARRY.replace("five", "seven")}
    assert span["replacement"] == {"doc": "policy", "start": 28, "end": 87, "text": CARRY.replace("five", "seven")}
    assert span["diff"] == "Staff may carry up to [-five-]{+seven+} unused days into the next year."
    assert span["decision"] == "pending"
    assert entries[1]["new"]["text"] == "seven unused days"
    assert entries[1]["replacement"] == {"doc": "policy", "quote": "seven unused days"}


def decide(repo: Path, *decisions: str) -> None:
    path = repo / "relabel-review.yaml"
    text = path.read_text(encoding="utf-8")
    for decision in decisions:
        text = text.replace("decision: pending", f"decision: {decision}", 1)
    path.write_text(text, encoding="utf-8")


def test_accept_applies_the_accepted_entries_only_all_at_once(repo):
    write_project(repo, POLICY.replace("five unused", "seven unused"))
    ragvet(repo, "relabel", "--from", "labelled")
    decide(repo, "accept", "reject")
    done = ragvet(repo, "relabel", "--accept", "relabel-review.yaml")
    assert (done.returncode, done.stdout.strip()) == (
        0,
        "applied 1 accepted label to data/cases/cases.yaml, 1 rejected, 0 pending",
    )
    assert plain(cases_text(repo)) == CASES.replace("start: 28, end: 86", "start: 28, end: 87")


def test_accept_refuses_every_entry_when_one_replacement_does_not_resolve(repo):
    write_project(repo, POLICY.replace("five unused", "seven unused"))
    ragvet(repo, "relabel", "--from", "labelled")
    decide(repo, "accept", "accept")
    path = repo / "relabel-review.yaml"
    path.write_text(path.read_text().replace("quote: seven unused days\n  decision", "quote: nine days\n  decision"))
    done = ragvet(repo, "relabel", "--accept", "relabel-review.yaml")
    assert done.returncode == 2
    assert "relabel-review.yaml:" in done.stderr and "(entry 2, case theme)" in done.stderr
    assert "replacement: quote 'nine days' not found" in done.stderr
    assert "Traceback" not in done.stderr
    assert plain(cases_text(repo)) == CASES


def test_a_bad_decision_is_a_located_problem_and_changes_nothing(repo):
    write_project(repo, POLICY.replace("five unused", "seven unused"))
    ragvet(repo, "relabel", "--from", "labelled")
    decide(repo, "later")
    text = (repo / "relabel-review.yaml").read_text()
    line = text.splitlines().index("  decision: later") + 1
    done = ragvet(repo, "relabel", "--accept", "relabel-review.yaml")
    assert done.returncode == 2
    where = f"relabel-review.yaml:{line} (entry 1, case carry)"
    assert f"{where}: decision 'later' is not one of pending, accept, reject" in done.stderr
    assert "Traceback" not in done.stderr
    assert plain(cases_text(repo)) == CASES


def test_a_review_file_that_is_not_yaml_is_a_located_problem(repo):
    (repo / "review.yaml").write_text("entries: [\n")
    done = ragvet(repo, "relabel", "--accept", "review.yaml")
    assert done.returncode == 2 and "review.yaml:" in done.stderr and "Traceback" not in done.stderr


def test_deleted_text_and_a_removed_document_are_orphaned(repo):
    write_project(repo, POLICY.replace(CARRY + "\n", ""), roadmap=None)
    done = ragvet(repo, "relabel", "--from", "labelled")
    assert done.returncode == 1
    entries = {(e["case"], e["label"]): e for e in review(repo)["entries"]}
    assert {key: e["status"] for key, e in entries.items()} == {
        ("carry", "evidence 1"): "orphaned",
        ("theme", "evidence 1"): "orphaned",
        ("theme", "claim 1 evidence 1 alternative 1"): "orphaned",
        ("theme", "claim 1 evidence 1 alternative 2"): "orphaned",
    }
    assert entries[("theme", "evidence 1")]["note"] == "the document was removed"
    assert entries[("carry", "evidence 1")]["new"] is None
    assert entries[("carry", "evidence 1")]["old"]["text"] == CARRY
    assert "0 kept, 1 moved, 0 changed, 4 orphaned" in done.stdout
    assert plain(cases_text(repo)) == CASES


def test_a_labelled_sentence_duplicated_elsewhere_is_placed_by_its_context():
    text = POLICY + "Summary: " + CARRY + "\n"
    assert place(anchor_at(POLICY, 28, 86), text, 0.8).status == "moved"
    assert place(anchor_at(POLICY, 28, 86), text, 0.8).start == 28


def test_a_duplicate_whose_context_is_the_same_goes_to_review(repo):
    write_project(repo, POLICY + POLICY)
    done = ragvet(repo, "relabel", "--from", "labelled")
    assert done.returncode == 1
    entries = {(e["case"], e["label"]): e for e in review(repo)["entries"]}
    carry = entries[("carry", "evidence 1")]
    assert carry["status"] == "changed" and carry["new"]["start"] == 28
    assert carry["note"] == "the exact text occurs 2 times with the same context: check which one is meant"
    assert plain(cases_text(repo)) == CASES


def test_a_quote_that_now_occurs_twice_gets_the_occurrence_of_its_place(repo):
    write_project(repo, "Contractors get five unused days of grace.\n" + POLICY)
    done = ragvet(repo, "relabel", "--from", "labelled")
    assert done.returncode == 0, done.stdout
    shift = len("Contractors get five unused days of grace.\n")
    expected = CASES.replace("start: 28, end: 86", f"start: {28 + shift}, end: {86 + shift}").replace(
        'quote: "five unused days"}', 'quote: "five unused days", occurrence: 2}'
    )
    assert plain(cases_text(repo)) == expected


def test_crlf_line_endings_move_the_spans_and_leave_the_quotes(repo):
    write_project(repo, POLICY.replace("\n", "\r\n"), ROADMAP.replace("\n", "\r\n"))
    done = ragvet(repo, "relabel", "--from", "labelled")
    assert done.returncode == 0, done.stdout
    assert plain(cases_text(repo)) == CASES.replace("start: 28, end: 86", "start: 29, end: 87").replace(
        "start: 45, end: 92", "start: 46, end: 93"
    )


def test_a_label_across_a_line_break_survives_the_change_to_crlf():
    old = "one two\nthree four"
    found = place(anchor_at(old, 4, 13), old.replace("\n", "\r\n"), 0.8)
    assert (found.status, found.start, found.end) == ("moved", 4, 14)


def test_nfd_text_moves_a_quote_to_its_decomposed_spelling(repo):
    policy = POLICY.replace("HR portal", "café portal")
    cases = CASES.replace("go to the HR portal", "go to the café portal")
    write_project(repo, policy, cases=cases)
    sh(repo, "git", "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qam", "café")
    nfd = unicodedata.normalize("NFD", policy)
    write_project(repo, nfd, cases=cases)
    done = ragvet(repo, "relabel", "--from", "HEAD")
    assert done.returncode == 0, done.stdout
    quote = json.dumps(unicodedata.normalize("NFD", "go to the café portal"), ensure_ascii=False)
    assert plain(cases_text(repo)) == cases.replace('"go to the café portal"', quote)
    assert "start: 28, end: 86" in plain(cases_text(repo))  # no accent before it: the same offsets


def test_nfc_view_maps_every_offset_back():
    text = unicodedata.normalize("NFD", "crème brûlée")
    view, offsets = nfc_view(text)
    assert view == "crème brûlée"
    assert [text[offsets[i] : offsets[i + 1]] for i in range(len(view))][2] == "e\u0300"
    assert offsets[-1] == len(text)


def test_jsonl_cases_keep_their_line_order_and_untouched_lines(repo):
    lines = [
        json.dumps({"id": "a", "question": "q?", "evidence": [{"doc": "policy", "start": 28, "end": 86}]}) + "\n",
        '{"id": "b", "question": "q?",   "evidence": [{"doc": "roadmap"}]}\n',
    ]
    (repo / "data" / "cases" / "cases.yaml").unlink()
    (repo / "data" / "cases" / "cases.jsonl").write_text("".join(lines))
    sh(repo, "git", "-c", "user.email=t@example.com", "-c", "user.name=t", "add", "-A")
    sh(repo, "git", "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "jsonl")
    (repo / "data" / "corpus" / "policy.md").write_text("Preface.\n" + POLICY)
    done = ragvet(repo, "relabel", "--from", "HEAD")
    assert done.returncode == 0, done.stdout + done.stderr
    moved = {"doc": "policy", "start": 37, "end": 95, "text": CARRY}
    moved["anchor"] = {"prefix": "ce.\nLeave policy for all staff.\n", "suffix": "\nRequests for leave go to the HR"}
    moved["anchor"]["doc_sha256"] = hashlib.sha256(("Preface.\n" + POLICY).encode()).hexdigest()
    row = {"id": "a", "question": "q?", "evidence": [moved]}
    assert (repo / "data" / "cases" / "cases.jsonl").read_text() == json.dumps(row) + "\n" + lines[1]


def test_an_unknown_revision_is_a_located_problem(repo):
    done = ragvet(repo, "relabel", "--from", "no-such-rev")
    assert done.returncode == 2 and "--from no-such-rev: git cannot read that revision" in done.stderr
    assert "Traceback" not in done.stderr


def test_without_stored_anchors_no_revision_is_a_problem_and_both_modes_are_one(repo):
    done = ragvet(repo, "relabel")
    assert done.returncode == 2 and "none of its 5 span and quote labels stores its anchor" in done.stderr
    assert "ragvet relabel --from REV" in done.stderr and "Traceback" not in done.stderr
    done = ragvet(repo, "relabel", "--from", "labelled", "--accept", "x.yaml")
    assert done.returncode == 2 and "give --from REV or --accept FILE, not both" in done.stderr


TITLED = (
    "periodic temperature distributions in a two-layer composite\nslab .\n"
    "an investigation of thermal barriers has been completed .  in one portion of this\n"
    "study, a solution was developed for the periodic temperature\n"
    "distribution in a two-layer composite slab .  one exposed surface of\nthe slab was adiabatic .\n"
)


def test_a_changed_label_whose_old_words_recur_in_a_like_context_is_not_moved_there():
    start = TITLED.index("a two-layer")
    changed = TITLED.replace("two-layer", "two-transverse", 1)
    found = place(anchor_at(TITLED, start, start + 26), changed, 0.8)
    assert (found.status, found.start, found.end) == ("changed", 38, 69)
    assert changed[38:69] == "a two-transverse composite\nslab"


def test_text_inserted_right_after_a_label_leaves_it_moved_not_widened():
    end = TITLED.index(" .\n")
    inserted = TITLED[:end] + " seen to agree" + TITLED[end:]
    found = place(anchor_at(TITLED, 0, end), inserted, 0.8)
    assert (found.status, found.start, found.end) == ("moved", 0, end)


def test_a_block_style_quote_gets_its_occurrence_on_a_line_of_its_own(repo):
    write_project(repo, roadmap="Customers ask for reliability of the platform.\n" + ROADMAP)
    done = ragvet(repo, "relabel", "--from", "labelled")
    assert done.returncode == 0, done.stdout
    shift = len("Customers ask for reliability of the platform.\n")
    expected = CASES.replace(
        '      quote: "reliability of the platform"\n',
        '      quote: "reliability of the platform"\n      occurrence: 2\n',
    ).replace("start: 45, end: 92", f"start: {45 + shift}, end: {92 + shift}")
    assert plain(cases_text(repo)) == expected


def test_a_corpus_dvc_tracks_is_read_at_the_revision_through_dvc(tmp_path):
    write_project(tmp_path)
    git = ("git", "-c", "user.email=t@example.com", "-c", "user.name=t")
    sh(tmp_path, "git", "init", "-q", "-b", "main")
    sh(tmp_path, "dvc", "init", "-q")
    sh(tmp_path, "dvc", "add", "-q", "data/corpus")
    sh(tmp_path, *git, "add", "-A")
    sh(tmp_path, *git, "commit", "-qm", "labelled")
    assert sh(tmp_path, "git", "ls-files", "data").stdout.splitlines() == [
        "data/.gitignore",
        "data/cases/cases.yaml",
        "data/corpus.dvc",
    ]
    inserted = "Part-time staff accrue leave pro rata.\n"
    (tmp_path / "data" / "corpus" / "policy.md").write_text(POLICY.replace("Staff may", inserted + "Staff may"))
    done = ragvet(tmp_path, "relabel", "--from", "HEAD")
    assert done.returncode == 0, done.stdout + done.stderr
    assert plain(cases_text(tmp_path)) == CASES.replace("start: 28, end: 86", "start: 67, end: 125")


def test_a_span_labels_text_stays_when_it_moves_and_follows_an_accepted_change(repo):
    with_text = CASES.replace("start: 28, end: 86}", f'start: 28, end: 86, text: "{CARRY}"}}')
    write_project(repo, cases=with_text)
    sh(repo, "git", "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qam", "text")
    sh(repo, "git", "tag", "-f", "labelled")
    write_project(repo, "New rules from May.\n" + POLICY, cases=with_text)
    assert ragvet(repo, "relabel", "--from", "labelled").returncode == 0
    assert plain(cases_text(repo), texts=False) == with_text.replace("start: 28, end: 86", "start: 48, end: 106")
    write_project(repo, POLICY.replace("five unused", "seven unused"), cases=with_text)
    ragvet(repo, "relabel", "--from", "labelled")
    decide(repo, "accept", "reject")
    assert ragvet(repo, "relabel", "--accept", "relabel-review.yaml").returncode == 0
    seven = CARRY.replace("five", "seven")
    expected = with_text.replace("start: 28, end: 86", "start: 28, end: 87").replace(CARRY, seven)
    assert plain(cases_text(repo), texts=False) == expected


# --- stored anchors: freeze-labels writes them, relabel re-anchors from them ---------------


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def anchor_project(repo: Path) -> str:
    """Store every label's anchor with freeze-labels; the cases file's new text."""
    (repo / "params.yaml").write_text("chunking: {}\n")
    done = ragvet(repo, "freeze-labels")
    assert done.returncode == 0, done.stdout + done.stderr
    return cases_text(repo)


def checked(repo: Path) -> tuple[dict[str, str], list[str], dict[str, str], list[str]]:
    """What validate finds: each valid case's fingerprint, the problems, the cases left out
    and the warnings, rendered."""
    docs = {doc.doc_id: doc for doc in load_corpus(repo / "data" / "corpus")}
    left_out: dict[str, str] = {}
    warnings: list = []
    cases, problems = collect_cases(repo / "data" / "cases", docs, {}, left_out, warnings)
    texts = {doc_id: doc.text for doc_id, doc in docs.items()}
    prints = {case.case_id: case_fingerprint(case, texts) for case in cases}
    return prints, [p.render() for p in problems], left_out, [w.render() for w in warnings]


def labels(repo: Path) -> list[dict]:
    items = yaml.safe_load(cases_text(repo))
    return [items[0]["evidence"][0], items[0]["evidence"][1], items[1]["evidence"][0]]


def test_freeze_labels_stores_each_labels_anchor_and_the_fingerprints_ignore_it(repo):
    before = checked(repo)[0]
    text = anchor_project(repo)
    carry = {"prefix": "Leave policy for all staff.\n", "suffix": "\nRequests for leave go to the HR"}
    portal = POLICY.index("go to the HR portal")
    reliability = ROADMAP.index("reliability")
    assert labels(repo) == [
        {"doc": "policy", "start": 28, "end": 86, "text": CARRY, "anchor": {**carry, "doc_sha256": sha(POLICY)}},
        {
            "doc": "policy",
            "quote": "go to the HR portal",
            "anchor": {"prefix": POLICY[74:106], "suffix": ".\n", "doc_sha256": sha(POLICY), "start": 106},
        },
        {
            "doc": "roadmap",
            "quote": "reliability of the platform",
            "anchor": {
                "prefix": ROADMAP[reliability - 32 : reliability],
                "suffix": ".\n",
                "doc_sha256": sha(ROADMAP),
                "start": 64,
            },
        },
    ]
    assert portal == 106 and reliability == 64
    assert "# the carry sentence" in text and "# hand-labelled cases: keep this comment" in text
    after = checked(repo)
    assert after == (before, [], {}, [])  # anchors valid, fingerprints unchanged
    assert ragvet(repo, "freeze-labels").stdout.startswith("froze 0 chunk references into spans, anchored 0 labels")


def test_without_a_revision_the_stored_anchors_move_the_labels_of_an_edited_document(repo):
    anchor_project(repo)
    before = checked(repo)[0]
    policy = POLICY.replace("Staff may", "Part-time staff accrue leave pro rata.\nStaff may")
    write_project(repo, policy, cases=cases_text(repo))
    assert "carry the anchor of an earlier text" in " ".join(checked(repo)[3])
    done = ragvet(repo, "relabel")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = "2 kept, 3 moved, 0 changed, 0 orphaned of the labels as their anchors had them"
    assert done.stdout.splitlines()[0] == summary
    carry = labels(repo)[0]
    assert carry == {
        "doc": "policy",
        "start": 67,
        "end": 125,
        "text": CARRY,
        "anchor": {"prefix": policy[35:67], "suffix": policy[125:157], "doc_sha256": sha(policy)},
    }
    assert labels(repo)[1]["anchor"]["start"] == 145 and labels(repo)[1]["anchor"]["doc_sha256"] == sha(policy)
    assert checked(repo) == (before, [], {}, [])  # the same meaning, anchors current: no warning
    again = ragvet(repo, "relabel")
    assert (again.returncode, again.stdout.splitlines()[0][:9]) == (0, "5 kept, 0")


def test_stored_anchors_survive_crlf_line_endings(repo):
    anchor_project(repo)
    before = checked(repo)[0]
    policy, roadmap = POLICY.replace("\n", "\r\n"), ROADMAP.replace("\n", "\r\n")
    write_project(repo, policy, roadmap, cases=cases_text(repo))
    done = ragvet(repo, "relabel")
    assert done.returncode == 0 and "0 kept, 5 moved" in done.stdout, done.stdout
    carry, portal, reliability = labels(repo)
    assert (carry["start"], carry["end"], carry["text"]) == (29, 87, CARRY)
    assert carry["anchor"] == {"prefix": policy[0:29], "suffix": policy[87:119], "doc_sha256": sha(policy)}
    assert portal["quote"] == "go to the HR portal" and portal["anchor"]["start"] == 108
    assert reliability["anchor"]["start"] == 65
    assert checked(repo) == (before, [], {}, [])


def test_stored_anchors_follow_a_document_re_saved_in_nfd(repo):
    policy = POLICY.replace("HR portal", "café portal")
    write_project(repo, policy, cases=CASES.replace("go to the HR portal", "go to the café portal"))
    anchor_project(repo)
    before = checked(repo)[0]
    nfd = unicodedata.normalize("NFD", policy)
    write_project(repo, nfd, cases=cases_text(repo))
    done = ragvet(repo, "relabel")
    assert done.returncode == 0, done.stdout
    assert labels(repo)[1]["quote"] == unicodedata.normalize("NFD", "go to the café portal")
    assert labels(repo)[1]["anchor"]["doc_sha256"] == sha(nfd)
    assert checked(repo) == (before, [], {}, [])  # label_text compares in NFC: the same meaning


def test_an_ambiguous_duplicate_leaves_its_cases_pending_and_out_of_the_splits(repo):
    anchor_project(repo)
    write_project(repo, POLICY + POLICY, cases=cases_text(repo))
    done = ragvet(repo, "relabel")
    assert done.returncode == 1
    entries = {(e["case"], e["label"]): e for e in review(repo)["entries"]}
    carry = entries[("carry", "evidence 1")]
    assert (carry["status"], carry["new"]["start"]) == ("changed", 28)
    assert carry["note"] == "the exact text occurs 2 times with the same context: check which one is meant"
    items = yaml.safe_load(cases_text(repo))
    assert [item.get("status") for item in items] == ["pending", "pending"]
    marked = "- id: carry            # the carry-over case\n  question: How many days carry over?\n  status: pending\n"
    assert marked in cases_text(repo)
    prints, problems, left_out, warnings = checked(repo)
    assert (prints, problems, left_out) == ({}, [], {"carry": "pending", "theme": "pending"})
    assert "cases.yaml:4 (case carry): left out of the splits, scored nowhere: `status: pending`" in warnings[0]


def test_a_removed_document_orphans_its_case_which_validate_leaves_out(repo):
    anchor_project(repo)
    write_project(repo, roadmap=None, cases=cases_text(repo))
    done = ragvet(repo, "relabel")
    assert done.returncode == 1
    entries = {(e["case"], e["label"]): (e["status"], e["note"]) for e in review(repo)["entries"]}
    assert entries == {
        ("theme", "evidence 1"): ("orphaned", "the document was removed"),
        ("theme", "claim 1 evidence 1 alternative 1"): ("orphaned", "the document was removed"),
    }
    assert [item.get("status") for item in yaml.safe_load(cases_text(repo))] == [None, "orphaned"]
    prints, problems, left_out, _ = checked(repo)
    assert (sorted(prints), problems, left_out) == (["carry"], [], {"theme": "orphaned"})


def test_accepting_every_entry_of_a_case_clears_its_status_and_anchors_the_labels(repo):
    anchor_project(repo)
    seven = POLICY.replace("five unused", "seven unused")
    write_project(repo, seven, cases=cases_text(repo))
    assert ragvet(repo, "relabel").returncode == 1
    decide(repo, "accept", "pending")
    done = ragvet(repo, "relabel", "--accept", "relabel-review.yaml")
    assert done.returncode == 1 and "applied 1 accepted label" in done.stdout
    assert [item.get("status") for item in yaml.safe_load(cases_text(repo))] == [None, "pending"]
    carry = labels(repo)[0]
    assert carry == {
        "doc": "policy",
        "start": 28,
        "end": 87,
        "text": CARRY.replace("five", "seven"),
        "anchor": {"prefix": seven[:28], "suffix": seven[87:119], "doc_sha256": sha(seven)},
    }
    prints, problems, left_out, _ = checked(repo)
    assert (sorted(prints), problems, left_out) == (["carry"], [], {"theme": "pending"})


def test_a_stale_anchor_on_an_unchanged_document_is_a_located_problem(repo):
    text = anchor_project(repo)
    moved_by_hand = text.replace("start: 28, end: 86", "start: 29, end: 86").replace(
        f'text: "{CARRY}"', f'text: "{CARRY[1:]}"'
    )
    (repo / "data" / "cases" / "cases.yaml").write_text(moved_by_hand)
    problems = checked(repo)[1]
    assert len(problems) == 1
    assert "data/cases/cases.yaml:5 (case carry): evidence 1: the anchor's prefix does not read as doc" in problems[0]
    assert "ragvet freeze-labels" in problems[0]
    assert anchor_project(repo) != moved_by_hand and checked(repo)[1] == []  # freeze-labels re-anchors it there


def test_a_case_removed_by_hand_before_accepting_is_no_problem_and_the_others_settle(repo):
    anchor_project(repo)
    edited = POLICY.replace("Requests for leave go to the HR portal.\n", "").replace("five unused", "seven unused")
    write_project(repo, edited, cases=cases_text(repo))
    assert ragvet(repo, "relabel").returncode == 1
    assert [(e["case"], e["label"], e["status"]) for e in review(repo)["entries"]] == [
        ("carry", "evidence 1", "orphaned"),  # its suffix went with the sentence after it: too little alike
        ("carry", "evidence 2", "orphaned"),
        ("theme", "claim 1 evidence 1 alternative 2", "changed"),
    ]
    text = cases_text(repo)
    (repo / "data" / "cases" / "cases.yaml").write_text(text[text.index("- id: theme") :])
    decide(repo, "reject", "reject", "accept")
    done = ragvet(repo, "relabel", "--accept", "relabel-review.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [item.get("status") for item in yaml.safe_load(cases_text(repo))] == [None]
    assert checked(repo)[1:] == ([], {}, [])
