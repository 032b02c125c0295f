"""The user's own retrieval system as a configuration: a Python function, or the
ranked output of the production system in a run file.

Both are checked strictly, because a silently mis-read run would produce
confident but wrong numbers: every problem names the target or file and line.
"""

from __future__ import annotations

import importlib
import sys
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragvet.errors import InputError, Problem, raise_if
from ragvet.formats.runfiles import entry_score, read_external_run
from ragvet.retrieval.passages import PassageLocator
from ragvet.retrieval.ranking import RunRow, rank_scored
from ragvet.retrieval.request import Request
from ragvet.schema import Case, Chunk
from ragvet.text.values import is_number

Scored = dict[str, dict[str, float]]  # case_id -> chunk_id -> score

SHAPE = "{case_id: [(chunk_id, score), ...]}"


def load_target(target: str):
    """Import ``package.module:function`` from the project or the environment.

    The project folder (where DVC runs the stage) comes first on the import path: the
    ``ragvet`` command, unlike ``python -m``, does not put it there, and the project's
    ``plugins/`` must win over any installed package of that name.
    """
    module_name, _, attribute = target.partition(":")
    where = f"params.yaml: target {target!r}"
    project = str(Path.cwd())
    if sys.path[:1] != [project]:
        sys.path.insert(0, project)
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # any import-time failure is the plugin's, reported as such
        raise InputError(
            [Problem(where, f"cannot import {module_name!r}: {type(err).__name__}: {err}", "check the module path")]
        ) from None
    function = getattr(module, attribute, None)
    if not callable(function):
        raise InputError([Problem(where, f"{module_name!r} has no function {attribute!r}", "fix the name after ':'")])
    return function


def chunk_table(chunks: Sequence[Chunk]):
    """The chunk table a plugin receives, as a pandas DataFrame."""
    import pandas as pd  # deferred: only a kind: python plugin's chunk table

    columns = ["chunk_id", "doc_id", "ordinal", "start", "end", "text", "metadata"]
    return pd.DataFrame([chunk.to_row() for chunk in chunks], columns=columns)


def _pairs(case_id: str, ranked: Any, known: set[str], where: str) -> tuple[dict[str, float], list[Problem]]:
    """One case's returned list as ``{chunk_id: score}``, with every problem."""
    if not isinstance(ranked, (list, tuple)):
        return {}, [
            Problem(f"{where} (case {case_id})", f"expected a list of (chunk_id, score), got {ranked!r:.60}", SHAPE)
        ]
    scores: dict[str, float] = {}
    problems = []
    for item in ranked:
        if not (isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[1], (int, float))):
            problems.append(Problem(f"{where} (case {case_id})", f"item {item!r:.60} is not (chunk_id, score)", SHAPE))
        elif not is_number(item[1]):
            problems.append(
                Problem(
                    f"{where} (case {case_id})",
                    f"chunk {item[0]!r:.60} has score {item[1]!r}, not a finite number",
                    "return finite scores (NaN sorts nowhere); leave out a chunk you cannot score",
                )
            )
        elif item[0] not in known:
            problems.append(
                Problem(f"{where} (case {case_id})", f"unknown chunk id {item[0]!r}", "return ids of the chunk table")
            )
        elif item[0] in scores:
            problems.append(
                Problem(f"{where} (case {case_id})", f"chunk id {item[0]!r} returned twice", "return each chunk once")
            )
        else:
            scores[item[0]] = float(item[1])
    return scores, problems


def check_plugin_result(result: Any, cases: Sequence[Case], chunks: Sequence[Chunk], where: str) -> Scored:
    """Validate what a plugin returned against the cases and the chunk table."""
    if not isinstance(result, Mapping):
        raise InputError([Problem(where, f"the function returned {type(result).__name__}, not a mapping", SHAPE)])
    case_ids = {case.case_id for case in cases}
    known = {chunk.chunk_id for chunk in chunks}
    problems = [
        Problem(where, f"unknown case id {case_id!r} in the result", "return only the case ids you were given")
        for case_id in sorted(set(map(str, result)) - case_ids)
    ]
    scored: Scored = {}
    for case_id in sorted(case_ids & set(result)):
        scored[case_id], found = _pairs(case_id, result[case_id], known, where)
        problems += found
    raise_if(problems)
    return scored


def call_plugin(target: str, cases: Sequence[Case], chunks: Sequence[Chunk], options: dict) -> Scored:
    """The plugin's checked result. An exception it raises is the plugin's bug, not
    ragvet's: it becomes a problem at the plugin's own file and line."""
    function = load_target(target)
    payload = [{"id": case.case_id, "question": case.question, "filter": case.filter} for case in cases]
    try:
        result = function(payload, chunk_table(chunks), **options)
    except Exception as err:  # whatever the user's code raises
        frame = traceback.extract_tb(err.__traceback__)[-1]
        raise InputError(
            [
                Problem(
                    f"{_shown(frame.filename)}:{frame.lineno} (plugin {target})",
                    f"the plugin raised {type(err).__name__}: {str(err)[:300]}",
                    "fix the plugin; run it alone on the first few cases to see the full traceback",
                )
            ]
        ) from None
    return check_plugin_result(result, cases, chunks, f"plugin {target}")


def _shown(filename: str) -> str:
    """A source file relative to the project when it is inside it, as a user reads it."""
    path = Path(filename)
    return path.relative_to(Path.cwd()).as_posix() if path.is_relative_to(Path.cwd()) else filename


def _doc_chunks(chunks: Sequence[Chunk], path: Path) -> dict[str, str]:
    """Doc id -> its one chunk id, for a doc-level run; a doc-level run is only
    comparable with doc evidence when each doc is a single chunk."""
    per_doc: dict[str, list[str]] = {}
    for chunk in chunks:
        per_doc.setdefault(chunk.doc_id, []).append(chunk.chunk_id)
    if any(len(ids) > 1 for ids in per_doc.values()):
        raise InputError(
            [
                Problem(
                    str(path),
                    "the run ranks documents, but the configuration's chunking splits documents into several chunks",
                    "give this configuration a chunking with `strategy: document`",
                )
            ]
        )
    return {doc_id: ids[0] for doc_id, ids in per_doc.items()}


def item_id(
    item: Mapping[str, Any], lookup: dict[str, Chunk], locator: PassageLocator, where: str
) -> str | list[Problem]:
    """The id of a returned item: a chunk id of the chunking, or a foreign passage
    (``{doc_id, start, end}`` or ``{doc_id, text}``), located and added to ``lookup``."""
    if "chunk_id" in item:
        chunk_id = str(item["chunk_id"])
        if chunk_id in lookup:
            return chunk_id
        return [Problem(where, f"unknown chunk id {chunk_id!r}", "use chunk ids of the configuration's chunking")]
    located = locator.locate(item, where)
    if isinstance(located, list):
        return located
    lookup[located.chunk_id] = located
    return located.chunk_id


def add_score(scored: Scored, case_id: str, item: str, score: float, where: str) -> list[Problem]:
    """Record one item's score for a case; an item twice for one case is a problem."""
    if item in scored.get(case_id, {}):
        return [Problem(where, f"{item!r} appears twice for this case", "list each item once per case")]
    scored.setdefault(case_id, {})[item] = score
    return []


def external_scores(
    path: Path, declared_format: str | None, cases: Sequence[Case], chunks: Sequence[Chunk], locator: PassageLocator
) -> tuple[Scored, dict[str, Chunk]]:
    """A run file as ``{case_id: {item_id: score}}``, checked line by line, and the
    chunk of every item id: the chunking's own, or the located foreign passages."""
    entries = read_external_run(path, declared_format)
    lookup = {chunk.chunk_id: chunk for chunk in chunks}
    doc_chunks = _doc_chunks(chunks, path) if entries and entries[0].level == "doc" else {}
    case_ids = {case.case_id for case in cases}
    problems: list[Problem] = []
    scored: Scored = {}
    for entry in entries:
        where = f"{path}:{entry.line} (case {entry.case_id})"
        if entry.case_id not in case_ids:
            problems.append(Problem(where, "unknown case id", "use the ids of the cases file"))
            continue
        if entry.level == "doc" and entry.item_id not in doc_chunks:
            problems.append(Problem(where, f"unknown doc id {entry.item_id!r}", "use doc ids of the corpus"))
            continue
        item = entry.passage if entry.level == "passage" else {"chunk_id": doc_chunks.get(entry.item_id, entry.item_id)}
        found = item_id(item, lookup, locator, where)
        problems += (
            found if isinstance(found, list) else add_score(scored, entry.case_id, found, entry_score(entry), where)
        )
    raise_if(problems)
    return scored, lookup


def python_run(request: Request, spec: dict) -> list[RunRow]:
    """Call the user's ``package.module:function(cases, chunks, **options)``.

    ``cases`` is a list of ``{"id", "question", "filter"}`` and ``chunks`` a
    pandas DataFrame of the chunk table. It returns ``{case_id: [(chunk_id,
    score), ...]}``. ragvet re-applies the metadata filter, so a plugin that
    ignores it is not rewarded for chunks the case excludes.
    """
    result = call_plugin(spec["target"], request.cases, request.chunks, spec.get("options") or {})
    chunk_by_id = request.chunk_by_id()
    return [
        row
        for case in request.cases
        for row in rank_scored(case, result.get(case.case_id, {}), chunk_by_id, request.depth)
    ]


def run_file_run(request: Request, spec: dict) -> list[RunRow]:
    """Rank a production system's run file, checked against the chunking or, for
    foreign passages, located in the corpus."""
    locator = PassageLocator(request.docs)
    scored, chunk_by_id = external_scores(
        Path(spec["path"]), spec.get("format"), request.cases, request.chunks, locator
    )
    return [
        row
        for case in request.cases
        for row in rank_scored(case, scored.get(case.case_id, {}), chunk_by_id, request.depth)
    ]
