"""Freezing the eval/dev split so that labels cannot drift unnoticed.

Membership is a pure function of (salt, case_id): adding a case never moves
another, and the same case lands in the same split on every machine.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from ragvet.schema import DEV, EVAL, SPLITS, Case, Doc, case_fingerprint, corpus_fingerprint
from ragvet.storage.files import dumps_line


def unit_hash(salt: str, case_id: str) -> float:
    """H(salt, case_id) in [0, 1): the first 53 bits of sha256, scaled (53, so the
    float is exact and can never round up to 1.0)."""
    digest = hashlib.sha256(f"{salt}\x00{case_id}".encode()).digest()
    return (int.from_bytes(digest[:8], "big") >> 11) / 2**53


def assign_split(salt: str, case_id: str, eval_fraction: float) -> str:
    """``eval`` if H(salt, case_id) < eval_fraction else ``dev``."""
    return EVAL if unit_hash(salt, case_id) < eval_fraction else DEV


def set_fingerprint(members: Sequence[tuple[str, str]]) -> str:
    """A fingerprint of a set of (case_id, case_fingerprint) pairs, order-free."""
    return hashlib.sha256(dumps_line(sorted(members)).encode("utf-8")).hexdigest()[:16]


def freeze_split(cases: Sequence[Case], docs: Sequence[Doc], salt: str, eval_fraction: float) -> dict:
    """The committed split record: each case's split and fingerprint, and the
    fingerprints the gate compares (eval split, dev split, corpus)."""
    texts = {doc.doc_id: doc.text for doc in docs}
    members = {
        case.case_id: {
            "split": assign_split(salt, case.case_id, eval_fraction),
            "fingerprint": case_fingerprint(case, texts),
        }
        for case in cases
    }
    by_split = {name: [(cid, m["fingerprint"]) for cid, m in members.items() if m["split"] == name] for name in SPLITS}
    return {
        "salt": salt,
        "eval_fraction": eval_fraction,
        "counts": {name: len(pairs) for name, pairs in by_split.items()},
        "fingerprints": {
            "eval_split": set_fingerprint(by_split[EVAL]),
            "dev_split": set_fingerprint(by_split[DEV]),
            "corpus": corpus_fingerprint(docs),
        },
        "cases": dict(sorted(members.items())),
    }


def left_out_of(statuses: dict[str, str], salt: str, eval_fraction: float) -> dict[str, dict[str, str]]:
    """The cases left out of the splits (case id -> status, as validate found them marked),
    by the split each would be in: the eval split's are what its comparison lacks."""
    found: dict[str, dict[str, str]] = {name: {} for name in SPLITS}
    for case_id, status in sorted(statuses.items()):
        found[assign_split(salt, case_id, eval_fraction)][case_id] = status
    return found


def split_summary(record: dict) -> dict:
    """The split record without its per-case membership: what git keeps, so that
    a change to the eval set shows in a pull request (its fingerprint and counts
    move) while the membership, which grows with the cases, lives in DVC."""
    return {key: value for key, value in record.items() if key != "cases"}
