"""Recorded answers and their human review: reading, checking and counting.

A team records what its RAG system answered under one configuration
(``data/answers/<config>.jsonl``, one line per case) and has people review it:
did the system abstain, ask a clarifying question or state a limitation; which
chunks did it cite; was each claim supported. ragvet turns those labels into
*human review figures*. It never labels anything itself and calls no model, so
these figures are not faithfulness scores: they count what reviewers decided.

They are kept apart from retrieval recall. A case without a recorded answer has
no review figure, and an unreviewed claim (``supported: null``) is counted and
shown but never treated as supported.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragvet.errors import InputError, Problem, raise_if
from ragvet.storage.files import iter_jsonl, link_out_of_project
from ragvet.text.values import as_id, did_you_mean, kind_of

BEHAVIOURS = ("answered", "abstained", "clarified", "limited")
# What an abstention case expects: any of these, rather than an answer.
NOT_ANSWERED = frozenset({"abstained", "clarified", "limited"})
ANSWER_KEYS = ("case_id", "behaviour", "sources_shown", "cited", "claims")
CLAIM_KEYS = ("text", "supported")
README_NAMES = frozenset({"README.md", "README", "README.txt", ".gitkeep"})
NOTE = (
    "Human review figures: counts of reviewers' labels of recorded answers (data/answers/<config>.jsonl). "
    "ragvet calls no model and judges no answer; these are not faithfulness scores."
)


@dataclass(frozen=True)
class ReviewedClaim:
    text: str
    supported: bool | None  # None: not yet reviewed


@dataclass(frozen=True)
class Answer:
    """What the system did for one case, as recorded, with the reviewers' labels."""

    case_id: str
    behaviour: str
    sources_shown: bool
    cited: tuple[str, ...]
    claims: tuple[ReviewedClaim, ...]


@dataclass(frozen=True)
class ReviewMetric:
    """A named per-case human review figure, for the metric registry and the gate.

    ``cases`` says which cases have a value ("abstention" or "answerable").
    ``higher_is_better`` gives the direction the gate guards: an *unsupported*
    share must not rise, a *handled* share must not drop.
    ``comparable_across_chunkings``: the figure reads no chunk id (a reviewer's label of
    an answer); one that counts cited chunks changes meaning with the chunking.
    """

    name: str
    at_k: bool
    definition: str
    cases: str
    higher_is_better: bool
    share: bool = True
    comparable_across_chunkings: bool = True

    def key(self, k: int | None) -> str:
        return f"{self.name}@{k}" if self.at_k else self.name


REVIEW_METRICS: dict[str, ReviewMetric] = {
    metric.name: metric
    for metric in (
        ReviewMetric(
            "abstention_handled",
            False,
            "1 if the system abstained, clarified or stated a limitation",
            "abstention",
            True,
        ),
        ReviewMetric(
            "unsupported_answer", False, "1 if the system answered with at least one claim", "abstention", False
        ),
        ReviewMetric("sources_shown", False, "1 if the answer showed sources the user can inspect", "abstention", True),
        ReviewMetric(
            "false_abstention",
            False,
            "1 if the system abstained, clarified or stated a limitation",
            "answerable",
            False,
        ),
        ReviewMetric(
            "unsupported_claims",
            False,
            "reviewed claims labelled unsupported / reviewed claims (unreviewed claims left out)",
            "answerable",
            False,
        ),
        ReviewMetric(
            "cited_available",
            True,
            "cited chunks in the retrieved top-k / cited chunks",
            "answerable",
            True,
            comparable_across_chunkings=False,
        ),
    )
}


def review_names(ks: Sequence[int]) -> list[str]:
    """Every per-case review figure for ``ks``, registry order then k ascending."""
    names: list[str] = []
    for metric in REVIEW_METRICS.values():
        names.extend([metric.key(k) for k in sorted(set(ks))] if metric.at_k else [metric.name])
    return names


# --------------------------------------------------------------------------- reading


def _claims(raw: Any, where: str, problems: list[Problem]) -> tuple[ReviewedClaim, ...]:
    if not isinstance(raw, list):
        problems.append(
            Problem(where, f"`claims` must be a list, got {kind_of(raw)}", 'write [{"text": "...", "supported": null}]')
        )
        return ()
    claims: list[ReviewedClaim] = []
    for index, claim in enumerate(raw):
        at = f"claims[{index}]"
        if not isinstance(claim, dict):
            problems.append(Problem(where, f"{at} must be an object, got {kind_of(claim)}", "write {text, supported}"))
            continue
        for key in sorted(set(claim) - set(CLAIM_KEYS), key=str):
            problems.append(
                Problem(
                    where,
                    f"unknown key {key!r} in {at}",
                    f"{did_you_mean(key, CLAIM_KEYS)}a claim takes text, supported",
                )
            )
        text = claim.get("text")
        if not isinstance(text, str) or not text.strip():
            problems.append(Problem(where, f"{at}.text must be non-empty text, got {text!r}", "copy the claim's text"))
        if "supported" not in claim:
            problems.append(
                Problem(
                    where, f"{at} has no `supported` label", "write supported: true, false, or null if not yet reviewed"
                )
            )
        elif claim["supported"] is not None and not isinstance(claim["supported"], bool):
            problems.append(
                Problem(
                    where,
                    f"{at}.supported must be true, false or null, got {claim['supported']!r}",
                    "use the reviewer's label: true, false, or null while not yet reviewed",
                )
            )
        else:
            claims.append(ReviewedClaim(str(text), claim["supported"]))
    return tuple(claims)


def _cited(raw: Any, where: str, chunk_ids: Collection[str], chunking: str, problems: list[Problem]) -> tuple[str, ...]:
    if not isinstance(raw, list):
        problems.append(Problem(where, f"`cited` must be a list of chunk ids, got {kind_of(raw)}", 'write ["doc#3"]'))
        return ()
    cited: list[str] = []
    for chunk_id in raw:
        if not isinstance(chunk_id, str) or chunk_id not in chunk_ids:
            problems.append(
                Problem(
                    where,
                    f"cited chunk {chunk_id!r} is not a chunk of chunking {chunking}",
                    f"cite chunk ids from data/chunks/{chunking}.jsonl (<doc_id>#<ordinal>); if chunking "
                    f"{chunking} changed since the answers were recorded, record and review them again under "
                    "it, or move the file out of data/answers/",
                )
            )
        elif chunk_id in cited:
            problems.append(Problem(where, f"chunk {chunk_id!r} is cited twice", "list each cited chunk once"))
        else:
            cited.append(chunk_id)
    return tuple(cited)


def _unknown_case(where: str, case_id: str) -> Problem:
    return Problem(where, f"case id {case_id!r} is not in the cases", "use an id from the cases file, or drop the line")


def read_answers(path: Path, case_ids: Collection[str], chunk_ids: Collection[str], chunking: str) -> dict[str, Answer]:
    """Recorded answers by case id. Every problem in the file is collected, each
    at ``<file>:<line>``, and raised together: nothing is scored from a file with
    a mistake in it."""
    problems: list[Problem] = []
    answers: dict[str, Answer] = {}
    first_line: dict[str, int] = {}
    for line, row in iter_jsonl(path):
        where = f"{path}:{line}"
        if not isinstance(row, dict):
            problems.append(
                Problem(where, f"a line must be a JSON object, got {kind_of(row)}", "see data/answers/README.md")
            )
            continue
        case_id = as_id(row.get("case_id"))
        if case_id is not None:
            where = f"{where} (case {case_id})"
        before = len(problems)
        for key in sorted(set(row) - set(ANSWER_KEYS), key=str):
            problems.append(
                Problem(
                    where,
                    f"unknown key {key!r}",
                    f"{did_you_mean(key, ANSWER_KEYS)}a line takes {', '.join(ANSWER_KEYS)}",
                )
            )
        if case_id is None:
            problems.append(
                Problem(where, f"case_id must be a case id, got {row.get('case_id')!r}", "add the case's id")
            )
        elif case_id not in case_ids:
            problems.append(_unknown_case(where, case_id))
        elif case_id in first_line:
            problems.append(
                Problem(
                    where,
                    f"case {case_id!r} already has an answer at line {first_line[case_id]}",
                    "keep one line per case",
                )
            )
        behaviour = row.get("behaviour")
        if behaviour not in BEHAVIOURS:
            problems.append(
                Problem(
                    where,
                    f"behaviour {behaviour!r} is not one of {', '.join(BEHAVIOURS)}",
                    "record what the system did: answered, abstained, clarified or limited",
                )
            )
        shown = row.get("sources_shown")
        if not isinstance(shown, bool):
            problems.append(
                Problem(
                    where, f"sources_shown must be true or false, got {shown!r}", "record whether sources were shown"
                )
            )
        cited = _cited(row.get("cited", []), where, chunk_ids, chunking, problems)
        claims = _claims(row.get("claims", []), where, problems)
        if case_id is not None and case_id not in first_line:
            first_line[case_id] = line
        if len(problems) == before and case_id is not None:
            answers[case_id] = Answer(case_id, str(behaviour), bool(shown), cited, claims)
    raise_if(problems)
    return answers


def stray_answer_files(folder: Path, configs: Collection[str]) -> list[Problem]:
    """Files in the answers folder that belong to no configuration.

    A file named after a configuration that does not exist (a typo, or a renamed
    configuration) would otherwise be ignored without a word.
    """
    if not folder.is_dir():
        return []
    problems: list[Problem] = []
    for path in sorted(folder.iterdir()):
        if path.name in README_NAMES or path.is_dir():
            continue
        outside = link_out_of_project(path, folder)
        if outside is not None:
            problems.append(outside)
        elif path.suffix != ".jsonl":
            problems.append(
                Problem(str(path), "not an answers file", "name answers files <config>.jsonl, one per configuration")
            )
        elif path.stem not in configs:
            problems.append(
                Problem(
                    str(path),
                    f"answers for configuration {path.stem!r}, which does not exist",
                    f"rename it to one of: {', '.join(sorted(configs))}, or add that configuration to params.yaml",
                )
            )
    return problems


def answers_file(folder: Path, config: str) -> Path:
    """Where a configuration's recorded answers are, if it has any: the one path rule."""
    return folder / f"{config}.jsonl"


def stray_answer_cases(folder: Path, configs: Collection[str], case_ids: Collection[str]) -> list[Problem]:
    """Answer lines naming a case that is not in the cases, for the validate stage.

    Evaluate would refuse them too, but only after every retrieval stage ran. A
    file none of whose lines name a known case (the bundled sample's answers left
    in a project with its own cases) is one problem, not one per line.
    """
    problems: list[Problem] = []
    for config in sorted(configs):
        path = answers_file(folder, config)
        if not path.is_file():
            continue
        try:
            named = [(line, as_id(row.get("case_id"))) for line, row in iter_jsonl(path) if isinstance(row, dict)]
        except InputError as err:
            problems += err.problems
            continue
        unknown = [(line, case_id) for line, case_id in named if case_id is not None and case_id not in case_ids]
        if unknown and len(unknown) == len(named):
            problems.append(
                Problem(
                    str(path),
                    f"none of its {len(unknown)} answers names a case in the cases (line 1: case "
                    f"{unknown[0][1]!r}): they were recorded for other cases, such as the bundled sample's",
                    "delete the file, or record answers for your own cases under this configuration",
                )
            )
        else:
            problems += [_unknown_case(f"{path}:{line} (case {case_id})", case_id) for line, case_id in unknown]
    return problems


def config_answers(
    folder: Path, config: str, case_ids: Collection[str], chunk_ids: Collection[str], chunking: str
) -> dict[str, Answer] | None:
    """The configuration's recorded answers, or None when it has none. Stray files
    are the validate stage's business (:func:`stray_answer_files`), so an evaluate
    stage reads only its own configuration's params."""
    path = answers_file(folder, config)
    if not path.is_file():
        return None
    return read_answers(path, case_ids, chunk_ids, chunking)


# -------------------------------------------------------------------------- figures


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def case_review(answer: Answer, answerable: bool, retrieved: Sequence[str], ks: Sequence[int]) -> tuple[dict, dict]:
    """``(figures, counts)`` of one recorded answer.

    Abstention cases get ``abstention_handled``, ``unsupported_answer`` and
    ``sources_shown``; answerable cases ``false_abstention``, ``unsupported_claims``
    and ``cited_available@k``. The other group's figures are None. A figure with
    nothing to count (no reviewed claim, no citation) is None, never 0.
    """
    reviewed = [claim for claim in answer.claims if claim.supported is not None]
    unsupported = sum(1 for claim in reviewed if claim.supported is False)
    not_answered = answer.behaviour in NOT_ANSWERED
    figures: dict[str, float | None] = dict.fromkeys(review_names(ks))
    counts: dict[str, Any] = {
        "behaviour": answer.behaviour,
        "sources_shown": answer.sources_shown,
        "claims": len(answer.claims),
        "claims_reviewed": len(reviewed),
        "claims_unsupported": unsupported,
        "claims_unreviewed": len(answer.claims) - len(reviewed),
        "cited": len(answer.cited),
    }
    cited = set(answer.cited)
    for k in sorted(set(ks)):
        counts[f"cited_retrieved@{k}"] = len(cited.intersection(retrieved[:k]))
    if not answerable:
        figures["abstention_handled"] = float(not_answered)
        figures["unsupported_answer"] = float(answer.behaviour == "answered" and bool(answer.claims))
        figures["sources_shown"] = float(answer.sources_shown)
        return figures, counts
    figures["false_abstention"] = float(not_answered)
    figures["unsupported_claims"] = _share(unsupported, len(reviewed))
    for k in sorted(set(ks)):
        figures[f"cited_available@{k}"] = _share(counts[f"cited_retrieved@{k}"], len(cited))
    return figures, counts


def add_reviews(
    rows: Sequence[dict], answers: Mapping[str, Answer], run: Mapping[str, Sequence[dict]], ks: Sequence[int]
) -> list[dict]:
    """Per-case rows with the review figures among their metrics (so the gate pairs
    them like any metric) and ``human_review`` counts; None where a case has no
    recorded answer. ``run`` is the ranked run by case id, deduplicated as scored."""
    out = []
    for row in rows:
        answer = answers.get(row["case_id"])
        if answer is None:
            figures, counts = dict.fromkeys(review_names(ks)), None
        else:
            retrieved = list(dict.fromkeys(r["chunk_id"] for r in run.get(row["case_id"], ())))
            figures, counts = case_review(answer, row.get("answerable", True), retrieved, ks)
        out.append({**row, "metrics": {**row["metrics"], **figures}, "human_review": counts})
    return out


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _group(rows: Sequence[dict], names: Sequence[str]) -> dict[str, Any]:
    """Means of the review figures over ``rows`` (cases of one kind, one split),
    with how many cases each mean counts, behaviours and claim counts."""
    recorded = [row for row in rows if row.get("human_review")]
    figures: dict[str, float | None] = {}
    counted: dict[str, int] = {}
    for name in names:
        present = [row["metrics"][name] for row in recorded if row["metrics"].get(name) is not None]
        figures[name] = _mean(present)
        counted[name] = len(present)
    reviews = [row["human_review"] for row in recorded]
    behaviours = Counter(review["behaviour"] for review in reviews)
    return {
        "cases": len(rows),
        "recorded": len(recorded),
        "behaviours": {behaviour: behaviours.get(behaviour, 0) for behaviour in BEHAVIOURS},
        "figures": figures,
        "counted": counted,
        "claims": {
            key: sum(review[f"claims{suffix}"] for review in reviews)
            for key, suffix in (
                ("total", ""),
                ("reviewed", "_reviewed"),
                ("unsupported", "_unsupported"),
                ("unreviewed", "_unreviewed"),
            )
        },
        "cited": sum(review["cited"] for review in reviews),
    }


def review_summary(rows: Sequence[dict], ks: Sequence[int], splits: Sequence[str]) -> dict | None:
    """The ``human_review`` section of the metrics JSON, or None when no case has a
    recorded answer (no answers file: no figure at all, never zeros).

    Per split, abstention and answerable cases apart. Besides the macro means,
    ``unsupported_claims_pooled`` and ``cited_available_pooled@k`` weigh each claim
    and each citation equally, as ``claim_availability_pooled@k`` does.
    """
    if not any("human_review" in row for row in rows):
        return None
    ks = sorted(set(ks))
    by_kind = {
        kind: [m.key(k) for m in REVIEW_METRICS.values() if m.cases == kind for k in (ks if m.at_k else [None])]
        for kind in ("abstention", "answerable")
    }
    summary: dict[str, Any] = {"note": NOTE}
    for split in splits:
        split_rows = [row for row in rows if row.get("split") == split]
        abstention = _group([row for row in split_rows if not row.get("answerable", True)], by_kind["abstention"])
        answerable = _group([row for row in split_rows if row.get("answerable", True)], by_kind["answerable"])
        reviews = [row["human_review"] for row in split_rows if row.get("answerable", True) and row.get("human_review")]
        claims = answerable["claims"]
        answerable["figures"]["unsupported_claims_pooled"] = _share(claims["unsupported"], claims["reviewed"])
        for k in ks:
            retrieved = sum(review[f"cited_retrieved@{k}"] for review in reviews)
            answerable["figures"][f"cited_available_pooled@{k}"] = _share(retrieved, answerable["cited"])
        summary[split] = {"abstention_cases": abstention, "answerable_cases": answerable}
    return summary


# ------------------------------------------------------------------------ reporting
