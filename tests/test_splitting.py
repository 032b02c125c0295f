from ragvet.schema import Case, Doc
from ragvet.splitting import assign_split, freeze_split, split_summary, unit_hash


def cases(n: int) -> list[Case]:
    return [Case(f"case-{i}", f"question {i}?", answerable=False) for i in range(n)]


DOCS = [Doc("d", "text")]


def test_split_is_a_pure_function_of_salt_and_id():
    assert 0 <= unit_hash("s", "x") < 1
    assert unit_hash("s", "x") == 0.28788398069473287  # pinned: a new hash would reshuffle every split
    assert unit_hash("t", "x") != unit_hash("s", "x")
    assert assign_split("s", "x", 1.0) == "eval" and assign_split("s", "x", 0.0) == "dev"


def test_fraction_is_roughly_honoured_on_many_ids():
    share = sum(assign_split("salt", f"id-{i}", 0.7) == "eval" for i in range(5000)) / 5000
    assert 0.67 < share < 0.73


def test_adding_a_case_never_moves_another_and_changes_only_its_split_fingerprint():
    before = freeze_split(cases(50), DOCS, "salt", 0.5)
    after = freeze_split(cases(51), DOCS, "salt", 0.5)
    for case_id, entry in before["cases"].items():
        assert after["cases"][case_id] == entry
    new_split = after["cases"]["case-50"]["split"]
    other = "dev" if new_split == "eval" else "eval"
    assert after["fingerprints"][f"{new_split}_split"] != before["fingerprints"][f"{new_split}_split"]
    assert after["fingerprints"][f"{other}_split"] == before["fingerprints"][f"{other}_split"]
    assert after["fingerprints"]["corpus"] == before["fingerprints"]["corpus"]


def test_editing_a_case_changes_the_eval_fingerprint():
    base = cases(20)
    record = freeze_split(base, DOCS, "salt", 1.0)
    edited = [Case(c.case_id, c.question + " (edited)" if c.case_id == "case-3" else c.question, False) for c in base]
    assert freeze_split(edited, DOCS, "salt", 1.0)["fingerprints"]["eval_split"] != record["fingerprints"]["eval_split"]
    assert (
        freeze_split(base, [Doc("d", "text!")], "salt", 1.0)["fingerprints"]["corpus"]
        != record["fingerprints"]["corpus"]
    )


def test_the_committed_summary_is_the_record_without_its_membership_and_moves_with_the_eval_set():
    base = cases(3)
    record = freeze_split(base, DOCS, "salt", 1.0)
    summary = split_summary(record)
    assert summary == {
        "salt": "salt",
        "eval_fraction": 1.0,
        "counts": {"eval": 3, "dev": 0},
        "fingerprints": record["fingerprints"],
    }
    assert "cases" in record and len(record["cases"]) == 3  # the membership stays in the DVC-kept record
    edited = [Case(c.case_id, c.question + "!" if c.case_id == "case-1" else c.question, False) for c in base]
    assert split_summary(freeze_split(edited, DOCS, "salt", 1.0)) != summary  # an edited eval case shows in git
