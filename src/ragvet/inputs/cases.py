"""Loading and validating the cases: one YAML or JSONL file, each case's evidence resolved
against the corpus.

Every loader collects *all* problems, each naming ``file:line (case id)``, what is wrong
and how to fix it, so that the validate stage can report them at once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from ragvet.errors import Problem, raise_if
from ragvet.evidence import EvidenceResolver
from ragvet.schema import Case, Claim, Doc, EvidenceUnit, matches_filter
from ragvet.storage.files import decode_utf8, dumps_line, link_out_of_project, text_lines
from ragvet.text.located_yaml import LocatedList, line_of, load_located_yaml
from ragvet.text.nesting import loads
from ragvet.text.values import (
    ID_FIX,
    ID_FLAW_FIX,
    SURROGATE_FIX,
    as_id,
    did_you_mean,
    has_text,
    id_flaw,
    id_problem,
    is_int,
    is_scalar,
    kind_of,
    lone_surrogate,
    nfc,
    spelling_note,
    surrogate_what,
)

CASE_KEYS = ("id", "question", "answerable", "evidence", "claims", "tags", "filter", "judged", "status")
# A case's `status`, which `ragvet relabel` writes: a label it could not place (orphaned) or one
# awaiting its review decision (pending). Such a case says nothing reliable: it leaves the splits.
STATUSES = {"orphaned": "a label could not be placed in its edited document", "pending": "a label awaits review"}
CLAIM_KEYS = ("text", "evidence")
CASE_SUFFIXES = (".yaml", ".yml", ".jsonl")


def cases_text(rows: list[dict], suffix: str) -> str:
    """Case rows as a cases file's text: JSONL for ``.jsonl``, else a YAML list."""
    if suffix.lower() == ".jsonl":
        return "".join(dumps_line(row) + "\n" for row in rows)
    return yaml.dump(rows, Dumper=yaml.SafeDumper, sort_keys=True, allow_unicode=True, width=1 << 30)


def cases_target_problems(path: Path, force: bool, option: str) -> list[Problem]:
    """Why ``path`` (given as ``option``) cannot receive a new cases file."""
    problems = []
    if path.suffix.lower() not in CASE_SUFFIXES:
        problems.append(Problem(str(path), "the cases file must end in .jsonl, .yaml or .yml", "rename it"))
    if path.is_dir() or any(parent.is_file() for parent in path.parents):
        problems.append(Problem(str(path), f"{option} is a folder or lies under a file", "give a file path"))
    elif path.exists() and not force:
        problems.append(Problem(str(path), "the cases file exists", "pass --force to replace it"))
    return problems


def cases_file(path: Path, problems: list[Problem]) -> Path | None:
    """The one cases file a folder holds, so dvc.yaml can depend on the folder and the
    user may write YAML or JSONL without editing it (DVC cannot depend on a glob).

    A path that is not a folder is returned as it is.
    """
    if not path.is_dir():
        outside = link_out_of_project(path, path.parent)
        if outside is not None:
            problems.append(outside)
            return None
        return path
    found = sorted(child for child in path.iterdir() if child.is_file() and child.suffix.lower() in CASE_SUFFIXES)
    if len(found) == 1:
        return cases_file(found[0], problems)
    if found:
        names = ", ".join(child.name for child in found)
        problems.append(Problem(str(path), f"more than one cases file: {names}", "keep exactly one of them"))
    else:
        problems.append(
            Problem(
                str(path),
                "no cases file in the folder",
                "put the cases in it as cases.yaml (a YAML list) or cases.jsonl (one case object per line), "
                f"or write them there with `ragvet import ... --out-cases {path}/cases.yaml`",
            )
        )
    return None


def _read_case_items(path: Path, problems: list[Problem]) -> list[tuple[int, Any]]:
    """``(line, item)`` for each case in a YAML list or a JSONL file."""
    if not path.is_file():
        problems.append(Problem(str(path), "cases file not found", "create it, or fix the path in dvc.yaml"))
        return []
    suffix = path.suffix.lower()
    if suffix not in CASE_SUFFIXES:
        problems.append(
            Problem(
                str(path),
                f"unsupported cases file type {suffix or '(none)'!r}",
                "write the cases as a YAML list (.yaml or .yml) or as JSONL (.jsonl, one case object per line)",
            )
        )
        return []
    if suffix == ".jsonl":
        items = []
        for number, line in text_lines(path, problems):
            try:
                items.append((number, loads(line)))
            except json.JSONDecodeError as err:
                problems.append(
                    Problem(
                        f"{path}:{number}",
                        f"malformed JSON: {err.msg} (column {err.colno})",
                        "make each line one JSON case object",
                    )
                )
        if not items and not problems:
            problems.append(Problem(str(path), "the cases file has no cases", "add one JSON case object per line"))
        return items
    text, problem = decode_utf8(path.read_bytes(), str(path))
    if problem is not None:
        problems.append(problem)
        return []
    data, yaml_problems = load_located_yaml(text, str(path))
    problems.extend(Problem(*found) for found in yaml_problems)
    if data is None and yaml_problems:
        return []
    if data is None or (isinstance(data, list) and not data):
        problems.append(Problem(str(path), "the cases file has no cases", "add cases as a YAML list: `- id: ...`"))
        return []
    if not isinstance(data, list):
        hint = " (start each case with `- `)" if isinstance(data, dict) else ""
        problems.append(
            Problem(
                f"{path}:1",
                f"the cases file must be a YAML list of cases, got {kind_of(data)}{hint}",
                "write each case as a list item: `- id: ...`, `  question: ...`",
            )
        )
        return []
    lines = data.item_lines if isinstance(data, LocatedList) else [0] * len(data)
    return list(zip(lines, data))


class _CaseChecker:
    """Checks one case item, collecting problems under ``file:line (case id)``."""

    def __init__(self, path: Path, line: int, item: Any, number: int, problems: list[Problem]):
        self.path, self.line, self.item, self.problems = path, line, item, problems
        self.label = f"case #{number}"

    def at(self, key: Any = None, value: Any = None) -> str:
        """``file:line (case id)`` for the whole case, one of its keys, or one nested value."""
        line = line_of(value, default=0) or line_of(self.item, key, self.line) or self.line
        return f"{self.path}:{line} ({self.label})"

    def add(self, what: str, fix: str, key: Any = None, value: Any = None) -> None:
        self.problems.append(Problem(self.at(key, value), what, fix))


def _tags(checker: _CaseChecker, raw: Any) -> dict[str, str]:
    """Tags are a mapping of scalars, kept as text (``year: 2026`` slices as ``"2026"``)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        checker.add(
            f"tags must be a mapping of key: value, got {kind_of(raw)}",
            'write tags as {phrasing: natural, year: "2026"}',
            "tags",
        )
        return {}
    tags: dict[str, str] = {}
    for key, value in raw.items():
        if value is None or not is_scalar(value):
            checker.add(
                f"tag `{key}` must have one text, number or true/false value, got {value!r}",
                "give the tag a single value (slices group cases by it), or remove it",
                "tags",
                raw,
            )
            continue
        tags[str(key)] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return tags


def _filter(checker: _CaseChecker, raw: Any) -> dict[str, Any]:
    """A filter maps metadata keys to one scalar or a non-empty list of scalars."""
    if raw is None:
        return {}
    fix = "write the filter as {doc_type: policy} or {region: [emea, apac]}"
    if not isinstance(raw, dict):
        checker.add(f"filter must be a mapping of metadata key: value, got {kind_of(raw)}", fix, "filter")
        return {}
    flt: dict[str, Any] = {}
    for key, value in raw.items():
        values = value if isinstance(value, list) else [value]
        if not values or any(v is None or not is_scalar(v) for v in values):
            checker.add(
                f"filter `{key}` must be one value or a non-empty list of values, got {value!r}",
                fix,
                "filter",
                raw,
            )
            continue
        flt[str(key)] = list(value) if isinstance(value, list) else value
    return flt


JUDGED_FIX = "write it as {doc_id: grade, ...} with every doc the qrels judged, e.g. judged: {d12: 2, d40: 0, d7: -1}"


def _judged(
    checker: _CaseChecker, raw: Any, evidence: list[EvidenceUnit], docs: dict[str, Doc]
) -> dict[str, int] | None:
    """The judged set of an imported query: ``{doc_id: integer grade}``, every doc of
    the corpus, non-empty. A case's judged set must hold its own evidence docs with a
    grade above 0: a judged set that calls an evidence doc unjudged or not relevant
    contradicts the case. ``None`` when absent (a native case)."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or not raw:
        got = "an empty mapping" if isinstance(raw, dict) else kind_of(raw)
        checker.add(f"judged must be a non-empty mapping of doc id: grade, got {got}", JUDGED_FIX, "judged")
        return None

    def add(key: Any, what: str, fix: str) -> None:  # at the line of the doc's own entry
        line = line_of(raw, key) or line_of(checker.item, "judged", checker.line) or checker.line
        checker.problems.append(Problem(f"{checker.path}:{line} ({checker.label})", what, fix))

    judged: dict[str, int] = {}
    for key, grade in raw.items():
        doc_id = as_id(key)
        if doc_id is None or doc_id not in docs:
            add(key, f"judged doc {key!r} is not in the corpus", "add the doc to the corpus, or remove it from judged")
        elif not is_int(grade):
            add(key, f"judged doc {doc_id!r} has grade {grade!r}, not an integer", JUDGED_FIX)
        else:
            judged[doc_id] = grade
    named = {as_id(key) for key in raw}
    for doc_id in dict.fromkeys(doc_id for unit in evidence for doc_id in unit.doc_ids):
        if doc_id not in named:
            add(
                None,
                f"evidence doc {doc_id!r} is not in the case's judged set",
                f"add `{doc_id}: <grade above 0>` to judged: the judged set holds every judged doc",
            )
        elif doc_id in judged and judged[doc_id] <= 0:
            add(
                doc_id,
                f"evidence doc {doc_id!r} is judged not relevant (grade {judged[doc_id]})",
                "give it its grade above 0 in judged, or remove it from the evidence",
            )
    return judged


def _references(
    checker: _CaseChecker, raw: Any, key: str, role: str, resolver: Any, container: Any
) -> list[EvidenceUnit]:
    """Resolve a list of evidence references; every problem is collected."""
    if not isinstance(raw, list):
        checker.problems.append(
            Problem(
                f"{checker.path}:{line_of(container, key, checker.line)} ({checker.label})",
                f"{role} must be a list of references, got {kind_of(raw)}",
                'write it as a list, e.g. evidence: [{doc: leave-policy, quote: "carry up to five days"}]',
            )
        )
        return []
    units: list[EvidenceUnit] = []
    lines = raw.item_lines if isinstance(raw, LocatedList) else []
    for index, ref in enumerate(raw, start=1):
        line = line_of(ref, default=lines[index - 1] if index <= len(lines) else 0) or line_of(container, key)
        where = f"{checker.path}:{line or checker.line} ({checker.label})"
        unit, problems = resolver.resolve(ref, where, f"{role} {index}")
        checker.problems.extend(problems)
        if unit is not None:
            units.append(unit)
    return list(dict.fromkeys(units))  # the same span listed twice is one unit, not double weight


def _claims(checker: _CaseChecker, raw: Any, resolver: Any) -> list[Claim]:
    if not isinstance(raw, list):
        checker.add(
            f"claims must be a list, got {kind_of(raw)}",
            "write claims as a list of {text: ..., evidence: [...]}",
            "claims",
        )
        return []
    claims = []
    for index, claim in enumerate(raw, start=1):
        role = f"claim {index}"
        if not isinstance(claim, dict):
            checker.add(
                f"{role} must be a mapping with text and evidence, got {kind_of(claim)}",
                "write it as {text: ..., evidence: [{doc: ..., quote: ...}]}",
                "claims",
                claim,
            )
            continue
        before = len(checker.problems)
        for key in claim:
            if key not in CLAIM_KEYS:
                checker.add(
                    f"{role}: unknown key `{key}`",
                    f"{did_you_mean(key, CLAIM_KEYS)}a claim takes only text and evidence",
                    "claims",
                    claim,
                )
        text = claim.get("text")
        if not has_text(text):
            checker.add(f"{role} has no text (got {text!r})", "write the claim's text under `text`", "claims", claim)
        evidence = claim.get("evidence")
        units: list[EvidenceUnit] = []
        if evidence is None or evidence == []:
            checker.add(
                f"{role} has no evidence",
                "add the human-verified evidence that supports the claim, or remove the claim",
                "claims",
                claim,
            )
        else:
            units = _references(checker, evidence, "evidence", f"{role} evidence", resolver, claim)
        if len(checker.problems) == before:
            claims.append(Claim(text, tuple(units)))
    return claims


def _check_case(
    checker: _CaseChecker, resolver: Any, docs: dict[str, Doc], filter_hits: dict[str, bool]
) -> Case | None:
    item = checker.item
    if not isinstance(item, dict):
        checker.add(
            f"a case must be a mapping, got {kind_of(item)} {item!r}",
            "write each case as `- id: ...` with `question: ...` and its evidence",
        )
        return None
    found = lone_surrogate(item)
    if found is not None:
        checker.add(surrogate_what(found), SURROGATE_FIX)
        return None
    before = len(checker.problems)
    case_id = as_id(item.get("id"))
    if case_id is None:
        fix = "give the case a unique, stable id, e.g. `id: leave-carryover`; never reuse an old one"
        checker.add(id_problem(item.get("id")), fix if item.get("id") is None else ID_FIX, "id")
    elif id_flaw(case_id):
        checker.add(f"case id {case_id!r} {id_flaw(case_id)}", ID_FLAW_FIX, "id")
        case_id = None
    else:
        checker.label = f"case {case_id}"
    for key in item:
        if key not in CASE_KEYS:
            checker.add(
                f"unknown key `{key}`",
                f"{did_you_mean(key, CASE_KEYS)}a case takes: {', '.join(CASE_KEYS)}",
                key,
            )
    question = item.get("question")
    if not has_text(question):
        checker.add(f"missing or empty question (got {question!r})", "write the question as text", "question")
    answerable = item.get("answerable", True)
    if not isinstance(answerable, bool):
        checker.add(
            f"answerable must be true or false, got {answerable!r}",
            "remove it for a normal case, or write `answerable: false` for an abstention case",
            "answerable",
        )
        answerable = True
    evidence_raw, claims_raw = item.get("evidence"), item.get("claims")
    evidence: list[EvidenceUnit] = []
    claims: list[Claim] = []
    if not answerable:
        for key, raw in (("evidence", evidence_raw), ("claims", claims_raw)):
            if raw not in (None, []):
                checker.add(
                    f"the case is marked `answerable: false` but has {key}",
                    f"an abstention case has no evidence and no claims: remove `{key}`, or remove "
                    "`answerable: false` if the corpus does answer it",
                    key,
                )
    else:
        if evidence_raw in (None, []):
            checker.add(
                "an answerable case has no evidence",
                "add what complete retrieval must bring back (evidence: [{doc: ..., quote: ...}]), or mark "
                "the case `answerable: false` if the corpus cannot answer it",
                "evidence" if "evidence" in item else None,
            )
        else:
            evidence = _references(checker, evidence_raw, "evidence", "evidence", resolver, item)
        if claims_raw is not None:
            claims = _claims(checker, claims_raw, resolver)
    tags = _tags(checker, item.get("tags"))
    flt = _filter(checker, item.get("filter"))
    if flt:
        _check_filter(checker, flt, evidence, claims, docs, filter_hits)
    judged = _judged(checker, item.get("judged"), evidence, docs)
    if len(checker.problems) > before or case_id is None:
        return None
    return Case(case_id, question, answerable, tuple(evidence), tuple(claims), tags, flt, judged)


def _check_filter(
    checker: _CaseChecker,
    flt: dict[str, Any],
    evidence: list[EvidenceUnit],
    claims: list[Claim],
    docs: dict[str, Doc],
    filter_hits: dict[str, bool],
) -> None:
    """A filter that excludes the case's own evidence makes the case impossible to hit."""
    units = [*evidence, *(u for c in claims for u in c.evidence)]
    doc_ids = dict.fromkeys(doc_id for unit in units for doc_id in unit.doc_ids)
    for doc_id in doc_ids:
        if not matches_filter(docs[doc_id].metadata, flt):
            checker.add(
                f"evidence doc {doc_id!r} does not pass the case's filter {flt} (its metadata is "
                f"{docs[doc_id].metadata}), so no retriever that applies the filter can return it",
                "fix the filter, the doc's metadata or the evidence",
                "filter",
            )
    if not doc_ids:
        key = dumps_line(flt)
        if key not in filter_hits:
            filter_hits[key] = any(matches_filter(doc.metadata, flt) for doc in docs.values())
        if not filter_hits[key]:
            checker.add(
                f"the filter {flt} matches no document of the corpus",
                "check the metadata keys and values against the corpus (a doc without the key never matches)",
                "filter",
            )


def unused_slices(slices: Any, cases: list[Case], where: str) -> list[Problem]:
    """Slice tags that no answerable case carries: each would be an empty table in
    every report (slices count answerable cases only, as ``measures.summary.slice_table``
    does), which looks like a slice with nothing to worry about."""
    if not isinstance(slices, list) or not cases:
        return []
    carried = {key for case in cases if case.answerable for key in case.tags}
    return [
        Problem(
            where,
            f"slice {key!r} is carried by no answerable case (of {len(cases)})",
            f"tag the cases with it (tags: {{{key}: ...}}), or remove {key!r} from `slices`",
        )
        for key in slices
        if isinstance(key, str) and key not in carried
    ]


def _flagged(checker: _CaseChecker, item: dict, case_id: str | None) -> str | None:
    """The status of a case ``ragvet relabel`` marked (:data:`STATUSES`), or ``None``. Only its
    id is checked besides: its labels say nothing reliable until it is relabelled."""
    status = item.get("status") if isinstance(item.get("status"), str) else repr(item.get("status"))
    sound = case_id is not None and not id_flaw(case_id) and lone_surrogate(item) is None
    if sound:
        checker.label = f"case {case_id}"
    if status in STATUSES and sound:
        return status
    if status not in STATUSES:
        checker.add(
            f"status must be {' or '.join(STATUSES)} (written by ragvet relabel), got {item.get('status')!r}",
            "remove `status` once the case is relabelled",
            "status",
        )
    return None


def collect_cases(
    path: str | Path,
    docs: dict[str, Doc],
    chunkings: dict[str, dict] | None = None,
    left_out: dict[str, str] | None = None,
    warnings: list[Problem] | None = None,
) -> tuple[list[Case], list[Problem]]:
    """Like :func:`load_cases`, but returns ``(valid_cases, problems)`` instead of raising.

    A case with a ``status`` is not among the cases: it goes to ``left_out`` (case id ->
    status) with a warning in ``warnings``, as does each document whose labels store the
    anchor of an earlier text of it."""
    problems: list[Problem] = []
    path = cases_file(Path(path), problems)
    if path is None:
        return [], problems
    items = _read_case_items(path, problems)
    resolver = EvidenceResolver(docs, chunkings if isinstance(chunkings, dict) else {})
    cases: list[Case] = []
    first_seen: dict[str, tuple[str, int]] = {}
    filter_hits: dict[str, bool] = {}
    for number, (line, item) in enumerate(items, start=1):
        line = line or line_of(item)
        checker = _CaseChecker(path, line, item, number, problems)
        case_id = as_id(item.get("id")) if isinstance(item, dict) else None
        status = None
        if isinstance(item, dict) and "status" in item:
            status = _flagged(checker, item, case_id)
            case = None
            if status is None:
                _check_case(checker, resolver, docs, filter_hits)
        else:
            case = _check_case(checker, resolver, docs, filter_hits)
        if case_id is None:
            continue
        if nfc(case_id) in first_seen:
            other, other_line = first_seen[nfc(case_id)]
            problems.append(
                Problem(
                    checker.at("id"),
                    f"duplicate case id {case_id!r}: also used at {path}:{other_line}{spelling_note(case_id, other)}",
                    "give each case its own id; never reuse an id, even of a deleted case",
                )
            )
            continue
        first_seen[nfc(case_id)] = (case_id, line)
        if case is not None:
            cases.append(case)
        if status is not None:
            _leave_out(checker, case_id, status, left_out, warnings)
    if warnings is not None:
        warnings += resolver.outdated_warnings(str(path))
    return sorted(cases, key=lambda case: case.case_id), problems


def _leave_out(checker: _CaseChecker, case_id: str, status: str, left_out: dict | None, warnings: list | None) -> None:
    if left_out is not None:
        left_out[case_id] = status
    if warnings is not None:
        warnings.append(
            Problem(
                checker.at("status"),
                f"left out of the splits, scored nowhere: `status: {status}` ({STATUSES[status]})",
                "decide its entries in the review file and run `ragvet relabel --accept FILE`, or relabel it by "
                "hand and remove `status`, or remove the case",
            )
        )


def load_cases(path: str | Path, docs: dict[str, Doc], chunkings: dict[str, dict] | None = None) -> list[Case]:
    """Every case of a YAML list (``.yaml``/``.yml``) or JSONL file (or of the one such
    file in the folder ``path``), sorted by case_id,
    with every evidence reference resolved to an :class:`EvidenceUnit`.

    ``chunkings`` is ``params["chunking"]`` (for ``{chunk, chunking}`` references).
    Raises :class:`InputError` with every problem, each at ``file:line (case id)``.
    """
    cases, problems = collect_cases(path, docs, chunkings)
    raise_if(problems)
    return cases
