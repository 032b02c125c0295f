"""Relabelling after the documents changed: every span and quote label of a cases file
re-anchored in the edited corpus, the review file a person decides on, and the cases
file rewritten with what was moved or accepted.

A label is one ``{doc, start, end}`` or ``{doc, quote}`` reference of a case's evidence
or of a claim's evidence, alternatives of ``{any: [...]}`` included, named by its case
id and role (``evidence 2``, ``claim 1 evidence 1 alternative 2``: the roles the
evidence resolver names). A label is re-anchored from the anchor it stores (its text,
prefix, suffix and position, :func:`relabel_stored`) when its document's hash is no longer
the stored one, or, against an old revision (:func:`relabel`), when its document's text
differs from that revision's and the label reads as it did there (one edited since was
written against the new text), its anchor taken from the old document. Either anchor is
placed in the new document (:mod:`ragvet.inputs.anchoring`): ``kept`` (the document is
unchanged), ``moved`` (applied, with the anchor of its new place), ``changed`` or
``orphaned`` (written to the review file, applied only once accepted there; meanwhile its
case's ``status`` is ``pending`` or ``orphaned``, which keeps it out of the splits).

A YAML cases file is edited as text, one scalar at a time at the place its parser
located it, so its comments and layout stay byte for byte; JSONL lines holding an
edited label are re-serialised, the others are kept, in order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from ragvet.errors import Problem
from ragvet.evidence import ANCHOR_KEYS, doc_sha256, find_quote, normalise_whitespace, stored_anchor
from ragvet.inputs.anchoring import Anchor, Placement, anchor_at, place, text_diff
from ragvet.inputs.cases import STATUSES
from ragvet.inputs.freezing import jsonl_lines
from ragvet.text.located_yaml import LocatedDict, line_of, load_located_yaml
from ragvet.text.nesting import loads
from ragvet.text.values import as_id, is_int

MIN_SIMILARITY = 0.8  # the default of --min-similarity: one changed word in a sentence scores ~0.95
DECISIONS = ("pending", "accept", "reject")
REVIEW_HEADER = """\
# ragvet relabel: labels whose text changed, or could not be found, after the documents changed.
# For each entry set `decision: accept` (write `replacement` into the cases file; edit it first
# if the proposed place is wrong) or `decision: reject` (leave the label as it is), then run
#   ragvet relabel --accept {path}
# An orphaned label has no replacement: write one, or relabel or remove its case by hand.
# Until then its case carries `status: orphaned` (or `status: pending` while a changed label
# awaits its decision) in the cases file, and stays out of the splits, scored nowhere.
"""


@dataclass(frozen=True)
class Label:
    """One span or quote reference of a case, where it sits in the case (``path`` of keys)."""

    case: str
    role: str
    path: tuple[Any, ...]
    ref: dict


@dataclass(frozen=True)
class Outcome:
    """What became of one label: ``status`` kept, moved, changed or orphaned; ``old`` and
    ``new`` are ``{start, end, text}`` in the old and new document; ``replacement`` is what
    the reference's keys become when applied (empty when nothing changes)."""

    label: Label
    status: str
    old: dict | None = None
    new: dict | None = None
    replacement: dict = field(default_factory=dict)
    similarity: float = 1.0
    note: str = ""


# --- the labels of a cases file ------------------------------------------------------


def case_items(text: str, suffix: str) -> list[Any]:
    """The case items of a cases file's text (a YAML list, or one JSON object a line);
    a line that is not JSON is skipped (validate names it)."""
    if suffix == ".jsonl":
        rows = []
        for line in jsonl_lines(text):
            try:
                rows.append(loads(line) if line.strip() else None)
            except json.JSONDecodeError:
                rows.append(None)
        return rows
    data = yaml.safe_load(text.removeprefix("\ufeff"))
    return data if isinstance(data, list) else []


def labels_of(items: Iterable[Any]) -> list[Label]:
    """Every span and quote label of the cases, in file order."""
    found: list[Label] = []
    for item in items:
        if not isinstance(item, dict) or as_id(item.get("id")) is None:
            continue
        case = as_id(item["id"])
        found += _labels_in(case, item.get("evidence"), "evidence", ("evidence",))
        for number, claim in enumerate(item.get("claims") or [], start=1):
            if isinstance(claim, dict):
                path = ("claims", number - 1, "evidence")
                found += _labels_in(case, claim.get("evidence"), f"claim {number} evidence", path)
    return found


def _labels_in(case: str, refs: Any, role: str, path: tuple) -> list[Label]:
    if not isinstance(refs, list):
        return []
    found = []
    for number, ref in enumerate(refs, start=1):
        if isinstance(ref, dict) and isinstance(ref.get("any"), list):
            for alt, alternative in enumerate(ref["any"], start=1):
                if _is_text_label(alternative):
                    where = (*path, number - 1, "any", alt - 1)
                    found.append(Label(case, f"{role} {number} alternative {alt}", where, alternative))
        elif _is_text_label(ref):
            found.append(Label(case, f"{role} {number}", (*path, number - 1), ref))
    return found


def _is_text_label(ref: Any) -> bool:
    return isinstance(ref, dict) and as_id(ref.get("doc")) is not None and ("quote" in ref or "start" in ref)


# --- re-anchoring ----------------------------------------------------------------------


def old_span(ref: dict, text: str) -> tuple[int, int] | None:
    """Where a label pointed in the document it was written for; ``None`` when it did not
    resolve there (validate refused it at that revision)."""
    if "quote" in ref:
        occurrence = ref.get("occurrence") or 1
        spans = find_quote(text, ref["quote"]) if isinstance(ref["quote"], str) else []
        return spans[occurrence - 1] if is_int(occurrence) and 0 < occurrence <= len(spans) else None
    start, end = ref.get("start"), ref.get("end")
    return (start, end) if is_int(start) and is_int(end) and 0 <= start < end <= len(text) else None


def relabel(
    old_labels: Iterable[Label],
    labels: Iterable[Label],
    old_docs: Mapping[str, str],
    docs: Mapping[str, str],
    min_similarity: float = MIN_SIMILARITY,
) -> list[Outcome]:
    """The outcome of each label of ``labels`` (the work tree's) whose document existed in
    ``old_docs`` and that reads as it did in ``old_labels`` (the old revision's): document
    texts by doc id, old and new."""
    before = {(label.case, label.role): label for label in old_labels}
    outcomes = []
    for label in labels:
        doc = as_id(label.ref["doc"])
        was = before.get((label.case, label.role))
        if doc not in old_docs or was is None or was.ref != label.ref:
            continue
        outcomes.append(_outcome(label, old_docs[doc], docs.get(doc), min_similarity))
    return outcomes


def _outcome(label: Label, old_text: str, text: str | None, min_similarity: float) -> Outcome:
    if text is not None and text == old_text:
        return Outcome(label, "kept")
    span = old_span(label.ref, old_text)
    if span is None:
        return Outcome(label, "orphaned", similarity=0.0, note="the label did not resolve in the old document")
    old = {"start": span[0], "end": span[1], "text": old_text[span[0] : span[1]]}
    return _placed(label, anchor_at(old_text, *span), old, text, min_similarity)


def anchor_of(label: Label) -> Anchor | None:
    """The anchor a label stores (its text or quote, the stored prefix and suffix, its start),
    or ``None`` when it stores none, or one validate refuses."""
    anchor, quote = label.ref.get("anchor"), "quote" in label.ref
    if not isinstance(anchor, dict) or not all(isinstance(anchor.get(key), str) for key in ANCHOR_KEYS):
        return None
    exact = label.ref.get("quote" if quote else "text")
    start = anchor.get("start") if quote else label.ref.get("start")
    if not isinstance(exact, str) or not exact.strip() or not is_int(start):
        return None
    return Anchor(exact, anchor["prefix"], anchor["suffix"], start)


def relabel_stored(
    labels: Iterable[Label], docs: Mapping[str, str], min_similarity: float = MIN_SIMILARITY
) -> tuple[list[Outcome], list[Label]]:
    """``(outcomes, unanchored)``: the outcome of each label that stores its anchor, placed
    from that anchor when its document's hash is no longer the stored one (kept when it
    is), and the labels that store none, which only ``--from REV`` can re-anchor."""
    hashes: dict[str, str] = {}
    outcomes, unanchored = [], []
    for label in labels:
        anchor = anchor_of(label)
        if anchor is None:
            unanchored.append(label)
            continue
        doc = as_id(label.ref["doc"])
        text = docs.get(doc)
        if text is not None and doc not in hashes:
            hashes[doc] = doc_sha256(text)
        if text is not None and hashes[doc] == label.ref["anchor"]["doc_sha256"]:
            outcomes.append(Outcome(label, "kept"))
            continue
        end = label.ref["end"] if "quote" not in label.ref and is_int(label.ref.get("end")) else None
        old = {"start": anchor.start, "end": end or anchor.start + len(anchor.exact), "text": anchor.exact}
        outcomes.append(_placed(label, anchor, old, text, min_similarity))
    return outcomes, unanchored


def _placed(label: Label, anchor: Anchor, old: dict, text: str | None, min_similarity: float) -> Outcome:
    """The outcome of placing ``anchor`` (``old`` its place as it was) in the document's new text."""
    if text is None:
        return Outcome(label, "orphaned", old, similarity=0.0, note="the document was removed")
    found: Placement = place(anchor, text, min_similarity)
    if found.start is None or found.end is None:
        return Outcome(label, "orphaned", old, similarity=found.similarity, note=found.note)
    new = {"start": found.start, "end": found.end, "text": text[found.start : found.end]}
    replacement = _replacement(label.ref, text, found.start, found.end)
    return Outcome(label, found.status, old, new, replacement, found.similarity, found.note)


def _replacement(ref: dict, text: str, start: int, end: int) -> dict:
    """The keys a reference needs to point at ``text[start:end]`` and store its anchor there;
    empty when it does already. A quote keeps its words while they still match there, with
    the occurrence that picks this place when there is more than one; a span gets the text
    it covers."""
    if "quote" not in ref:
        changes = {} if (ref.get("start"), ref.get("end")) == (start, end) else {"start": start, "end": end}
        if ref.get("text") != text[start:end]:
            changes["text"] = text[start:end]
        return _with_anchor(ref, changes, text, start, end)
    changes: dict[str, Any] = {}
    quote = ref["quote"]
    spans = find_quote(text, quote)
    if (start, end) not in spans:
        quote = normalise_whitespace(text[start:end])
        changes["quote"] = quote
        spans = find_quote(text, quote)
    occurrence = spans.index((start, end)) + 1 if (start, end) in spans else 1
    if (occurrence > 1 or len(spans) > 1 or "occurrence" in ref) and ref.get("occurrence") != occurrence:
        changes["occurrence"] = occurrence
    return _with_anchor(ref, changes, text, start, end)


def _with_anchor(ref: dict, changes: dict, text: str, start: int, end: int) -> dict:
    """``changes`` and the anchor of ``text[start:end]``, unless the reference stores it already."""
    anchor = stored_anchor(text, start, end, "quote" in ref)
    return changes if ref.get("anchor") == anchor else {**changes, "anchor": anchor}


def anchoring_edits(labels: Iterable[Label], resolver: Any, where: str) -> tuple[list[Edit], int, list[Problem]]:
    """``(edits, left, problems)``: the edits that store each label's anchor where it points
    now (a span's covered text too), the number of labels left as they are because their
    anchor was taken in another text of their document (``ragvet relabel`` re-anchors them
    from it), and the problems of the labels that do not resolve. An anchor taken in the
    document as it is is written again: a label moved by hand gets the anchor of its place."""
    edits: list[Edit] = []
    left, problems = 0, []
    for label in labels:
        anchor = label.ref.get("anchor")
        doc = resolver.docs.get(as_id(label.ref["doc"]))
        if isinstance(anchor, dict) and doc is not None and anchor.get("doc_sha256") != doc_sha256(doc.text):
            left += 1
            continue
        ref = {key: value for key, value in label.ref.items() if key != "anchor"}
        unit, found = resolver.resolve(ref, f"{where} (case {label.case})", label.role)
        problems += found
        if unit is not None and unit.start is not None and unit.end is not None:
            keys = _replacement(label.ref, doc.text, unit.start, unit.end)
            if keys:
                edits.append((label.case, label.path, keys))
    return edits, left, problems


def case_statuses(outcomes: Iterable[Outcome]) -> list[Edit]:
    """The ``status`` of each case with a label to review: ``orphaned`` when one of its labels
    is, else ``pending``; each leaves the splits until relabelled (:data:`STATUSES`)."""
    statuses: dict[str, str] = {}
    for outcome in outcomes:
        if outcome.status == "orphaned":
            statuses[outcome.label.case] = "orphaned"
        elif outcome.status == "changed":
            statuses.setdefault(outcome.label.case, "pending")
    return [(case, (), {"status": status}) for case, status in statuses.items()]


def decided_statuses(data: dict, cases: Collection[str]) -> list[Edit]:
    """The ``status`` of each case of a review file still among ``cases`` (the ids the cases
    file holds: one removed by hand has none to set) once its decisions are applied:
    ``orphaned`` while one of its orphaned labels is not accepted (a rejected orphan still
    points at text that is gone), else ``pending`` while an entry is, else none (``None``
    removes the key)."""
    statuses: dict[str, str | None] = {}
    for entry in (entry for entry in data["entries"] if str(entry["case"]) in cases):
        case, decision = str(entry["case"]), entry["decision"]
        if entry.get("status") == "orphaned" and decision != "accept":
            statuses[case] = "orphaned"
        elif decision == "pending" and statuses.get(case) != "orphaned":
            statuses[case] = "pending"
        else:
            statuses.setdefault(case, None)
    return [(case, (), {"status": status}) for case, status in statuses.items()]


# --- the review file -------------------------------------------------------------------


def review_entries(outcomes: Iterable[Outcome], docs: Mapping[str, str]) -> list[dict]:
    """The review file's entries: every changed or orphaned label, in file order."""
    entries = []
    for outcome in outcomes:
        if outcome.status not in ("changed", "orphaned"):
            continue
        doc = as_id(outcome.label.ref["doc"])
        entry: dict[str, Any] = {
            "case": outcome.label.case,
            "label": outcome.label.role,
            "status": outcome.status,
            "note": outcome.note,
            "similarity": outcome.similarity,
            "reference": dict(outcome.label.ref),
            "doc_sha256": doc_sha256(docs[doc]) if doc in docs else None,
            "old": outcome.old,
            "new": outcome.new,
        }
        if outcome.old is not None and outcome.new is not None:
            entry["diff"] = text_diff(outcome.old["text"], outcome.new["text"])
        replacement = {**outcome.label.ref, **outcome.replacement}
        replacement.pop("anchor", None)  # accepting anchors the label where the replacement points
        entry["replacement"] = replacement if outcome.new else None
        entry["decision"] = "pending"
        entries.append(entry)
    return entries


def review_text(entries: list[dict], rev: str, cases: str, path: str) -> str:
    """The review file: a header saying how to decide, then the entries, keys in a fixed order."""
    body = yaml.safe_dump(
        {"from": rev, "cases": cases, "entries": entries}, sort_keys=False, allow_unicode=True, width=4096
    )
    return REVIEW_HEADER.format(path=path) + body


def read_decisions(text: str, where: str) -> tuple[dict | None, list[Problem]]:
    """A review file's content, or every problem with it, each at its line."""
    data, found = load_located_yaml(text, where)
    problems = [Problem(*problem) for problem in found]
    if problems:
        return None, problems
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list) or "cases" not in data:
        return None, [Problem(where, "not a review file of ragvet relabel", "pass the file `ragvet relabel` wrote")]
    for number, entry in enumerate(data["entries"], start=1):
        at = f"{where}:{line_of(entry, default=1)} (entry {number})"
        if not isinstance(entry, dict) or not {"case", "label", "reference", "decision"} <= entry.keys():
            problems.append(Problem(at, "an entry needs case, label, reference and decision", "restore the entry"))
            continue
        at = f"{where}:{line_of(entry, 'decision')} (entry {number}, case {entry['case']})"
        if entry["decision"] not in DECISIONS:
            problems.append(
                Problem(
                    at,
                    f"decision {entry['decision']!r} is not one of {', '.join(DECISIONS)}",
                    "write `decision: accept` or `decision: reject`",
                )
            )
        elif entry["decision"] == "accept" and not isinstance(entry.get("replacement"), dict):
            problems.append(
                Problem(
                    at,
                    "an accepted entry needs a replacement reference, and this one has none (an orphan)",
                    "write `replacement: {doc: ..., quote: ...}` with the label's new place, or reject it",
                )
            )
    return (None, problems) if problems else (data, [])


def entry_where(where: str, entry: Any, number: int) -> str:
    """``review-file:line (entry n, case id)`` for a problem with one entry."""
    line = line_of(entry, "replacement") if isinstance(entry, LocatedDict) else 0
    return f"{where}:{line or line_of(entry, default=1)} (entry {number}, case {entry['case']})"


# --- rewriting the cases file ----------------------------------------------------------

Edit = tuple[str, tuple[Any, ...], dict]  # case id, path of keys to the mapping, its new keys (None: removed)


def rewrite_cases(text: str, suffix: str, edits: list[Edit], where: str) -> tuple[str, list[Problem]]:
    """The cases file's text with each edit's keys set on its mapping (a reference, or the
    case itself with an empty path), a key whose value is ``None`` removed; all or none."""
    if suffix == ".jsonl":
        return _rewrite_jsonl(text, edits, where)
    return _rewrite_yaml(text, edits, where)


def _node(items: list, case: str, path: tuple) -> Any:
    """The reference at ``path`` in case ``case``, or ``None``."""
    node = next((item for item in items if isinstance(item, dict) and as_id(item.get("id")) == case), None)
    for key in path:
        try:
            node = node[key]  # type: ignore[index]
        except (KeyError, IndexError, TypeError):
            return None
    return node if isinstance(node, dict) else None


def _rewrite_jsonl(text: str, edits: list[Edit], where: str) -> tuple[str, list[Problem]]:
    lines = jsonl_lines(text)
    rows = case_items(text, ".jsonl")
    touched: set[int] = set()
    problems = []
    for case, path, keys in edits:
        number = next((n for n, row in enumerate(rows) if isinstance(row, dict) and as_id(row.get("id")) == case), None)
        node = _node(rows, case, path)
        if number is None or node is None:
            problems.append(_gone(where, case))
            continue
        node.update({key: value for key, value in keys.items() if value is not None})
        for key in [key for key, value in keys.items() if value is None]:
            node.pop(key, None)
        touched.add(number)
    for number in touched:
        lines[number] = json.dumps(rows[number], ensure_ascii=False) + "\n"
    return "".join(lines), problems


def _gone(where: str, case: str) -> Problem:
    return Problem(where, f"case {case}: the label is no longer where it was", "run `ragvet relabel` again")


_PLAIN = re.compile(r"[^,}\]#\n]*")


def _token_end(text: str, at: int) -> int | None:
    """Where the one-line YAML scalar starting at ``at`` ends; ``None`` when it spans lines."""
    quote = text[at : at + 1]
    if quote in ("'", '"'):
        index = at + 1
        while index < len(text) and text[index] != "\n":
            if quote == '"' and text[index] == "\\":
                index += 2
                continue
            if text[index] == quote:
                if quote == "'" and text[index + 1 : index + 2] == "'":
                    index += 2
                    continue
                return index + 1
            index += 1
        return None
    if quote in ("|", ">"):
        return None
    match = _PLAIN.match(text, at)
    return at + len(match[0].rstrip()) if match else at


def _flow_end(text: str, at: int) -> int | None:
    """Where the one-line flow collection (``{...}`` or ``[...]``) starting at ``at`` ends;
    ``None`` when it spans lines. A quote opens a scalar only where a scalar starts."""
    depth, index = 0, at
    while index < len(text) and text[index] != "\n":
        char = text[index]
        if char in "'\"" and text[:index].rstrip(" ")[-1:] in ("{", "[", ",", ":"):
            end = _token_end(text, index)
            if end is None:
                return None
            index = end
            continue
        depth += (char in "{[") - (char in "}]")
        index += 1
        if depth == 0:
            return index
    return None


def _value_end(text: str, at: int, value: Any) -> int | None:
    """Where the one-line value at ``at`` ends: a scalar, or a flow collection; ``None`` for a
    value across lines (a block collection among them)."""
    if isinstance(value, (dict, list)):
        return _flow_end(text, at) if text[at : at + 1] in ("{", "[") else None
    return _token_end(text, at)


_ESCAPED = {"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085", "\ufeff": "\\ufeff"}


def _scalar(value: Any) -> str:
    """A value in YAML's flow style: a string double-quoted (JSON's escapes, and the characters
    YAML reads as line breaks or a byte-order mark escaped too) but a case's status, which reads
    as itself, a mapping ``{key: value}``."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {_scalar(item)}" for key, item in value.items()) + "}"
    if isinstance(value, str) and value in STATUSES:
        return value
    if isinstance(value, str):
        quoted = json.dumps(value, ensure_ascii=False)
        return quoted.translate(str.maketrans(_ESCAPED)) if any(char in quoted for char in _ESCAPED) else quoted
    return str(value)


def _rewrite_yaml(text: str, edits: list[Edit], where: str) -> tuple[str, list[Problem]]:
    from ruamel.yaml import YAML  # deferred: loads ruamel, only to rewrite labels in place

    items = YAML().load(text)
    starts = [0] + [match.end() for match in re.finditer("\n", text)]
    pieces: list[tuple[int, int, int, str]] = []
    problems = []
    for case, path, keys in edits:
        node = _node(items or [], case, path)
        if node is None:
            problems.append(_gone(where, case))
            continue
        for key, value in keys.items():
            piece = _yaml_piece(text, starts, node, key, value)
            if isinstance(piece, int):
                problems.append(_multiline(where, piece, case, key))
            elif piece is not None:
                pieces.append((piece[0], piece[1], len(pieces), piece[2]))
    for start, end, _, new in sorted(pieces, reverse=True):  # of two at one place, the first edit's ends first
        text = text[:start] + new + text[end:]
    return text, problems


def _yaml_piece(text: str, starts: list[int], node: Any, key: str, value: Any) -> tuple[int, int, str] | int | None:
    """The replacement ``(start, end, new text)`` that sets ``key`` of a located mapping to
    ``value`` (``None``: removes it), or the 0-based line of a value that spans lines."""
    if key in node:
        line, column = node.lc.value(key)
        at = starts[line] + column
        end = _value_end(text, at, node[key])
        if end is None:
            return line
        if value is not None:
            return at, end, _scalar(value)
        key_line, key_column = node.lc.key(key)
        begin = starts[key_line] + key_column
        if node.fa.flow_style():
            return text.rindex(",", 0, begin), end, ""
        newline = text.find("\n", end)
        if text[starts[key_line] : begin].strip():  # `- key: value`: the item's dash stays
            return begin, len(text) if newline == -1 else newline, ""
        return starts[key_line], len(text) if newline == -1 else newline + 1, ""
    if value is None:
        return None
    for last in reversed(list(node)):  # after the last key whose value ends on its line
        line, column = node.lc.value(last)
        end = _value_end(text, starts[line] + column, node[last])
        if end is not None:
            break
    else:
        return node.lc.line
    if node.fa.flow_style():
        return end, end, f", {key}: {_scalar(value)}"
    indent = " " * node.lc.key(last)[1]
    return end, end, f"\n{indent}{key}: {_scalar(value)}"


def _multiline(where: str, line: int, case: str, key: str) -> Problem:
    return Problem(
        f"{where}:{line + 1}",
        f"case {case}: `{key}` spans several lines and cannot be rewritten in place",
        f"write `{key}` on one line and run ragvet relabel again",
    )


def accepted_edits(data: dict, labels: Iterable[Label], resolver: Any, where: str) -> tuple[list[Edit], list[Problem]]:
    """The edits of a review file's accepted entries, or every problem with them: the label
    must still read as the review saw it, its document be the text reviewed, and the
    replacement resolve in it (``resolver`` is an :class:`~ragvet.evidence.EvidenceResolver`)."""
    current = {(label.case, label.role): label for label in labels}
    edits: list[Edit] = []
    problems: list[Problem] = []
    for number, entry in enumerate(data["entries"], start=1):
        if entry["decision"] != "accept":
            continue
        at = entry_where(where, entry, number)
        label = current.get((str(entry["case"]), str(entry["label"])))
        reference, replacement = dict(entry["reference"]), dict(entry["replacement"])
        doc = resolver.docs.get(as_id(replacement.get("doc")))
        if label is None or label.ref != reference:
            problems.append(
                Problem(at, f"{entry['label']} no longer reads as this entry's reference", "run ragvet relabel again")
            )
        elif doc is not None and entry.get("doc_sha256") not in (None, doc_sha256(doc.text)):
            problems.append(
                Problem(at, f"doc {doc.doc_id!r} changed since this review was written", "run ragvet relabel again")
            )
        elif set(reference) - set(replacement) - {"anchor"} or replacement.get("doc") != reference.get("doc"):
            problems.append(
                Problem(
                    at,
                    "the replacement must keep the reference's doc and keys "
                    f"({', '.join(sorted(reference))}), with new values",
                    "edit only the values of start/end, quote or occurrence",
                )
            )
        else:
            unit, found = resolver.resolve(replacement, at, "replacement")
            problems += found
            if unit is not None and unit.start is not None and unit.end is not None:
                placed = {**replacement, **_replacement(replacement, doc.text, unit.start, unit.end)}
                keys = {key: value for key, value in placed.items() if reference.get(key) != value}
                edits.append((label.case, label.path, keys))
    return edits, problems
