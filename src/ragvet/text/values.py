"""Checks of single YAML/JSON values, shared by every validator.

They live apart from the validators so that the data model, the chunkers, the
retrievers and the importers can check a value without importing each other.
"""

from __future__ import annotations

import difflib
import math
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

import orjson

# Names become DVC foreach keys (``retrieve@<config>``), file names (``metrics/<config>.json``)
# and parts of paths a shell may see: nothing a shell or a path would read specially.
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
SAFE_NAME_FIX = "use letters, digits, '.', '_' and '-' only, starting with a letter or digit"


def is_safe_name(value: Any) -> bool:
    return isinstance(value, str) and _SAFE_NAME.match(value) is not None


def is_int(value: Any) -> bool:
    """YAML ``true`` is a bool, which Python counts as an int: it is not one here."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_positive_int(value: Any) -> bool:
    return is_int(value) and value > 0


def is_scalar(value: Any) -> bool:
    """One text, number or true/false value; NaN and infinities are not (JSON has none)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, (str, int, bool))


def as_id(value: Any) -> str | None:
    """An id written as a number (``id: 42``) is read as its text, as written (``1_000``
    stays ``1_000``: the YAML loader keeps it); other types are not ids."""
    if isinstance(value, str):
        return value if value.strip() else None
    if not is_int(value):
        return None
    return getattr(value, "text", None) or str(value)


def id_problem(value: Any, name: str = "id") -> str:
    """Why :func:`as_id` refused a value, for a "what is wrong" message."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return f"missing or empty {name} (got {value!r})"
    return f"the {name} must be text or a whole number, got {kind_of(value)} {value!r}"


ID_FIX = 'quote it (id: "010" keeps the text as written); YAML reads yes, 1.5 or ~ as other types'
# Whitespace and control characters split a TREC line's columns; `\s` covers tabs and newlines.
_ID_FLAW = re.compile(r"[\s\x00-\x1f\x7f-\x9f\u2028\u2029]")


def id_flaw(identifier: str) -> str | None:
    """What makes an id unusable in TREC and TSV exports, where whitespace separates
    columns: a space, a tab, a newline or a control character; ``None`` when it is sound."""
    found = _ID_FLAW.search(identifier)
    if found is None:
        return None
    name = unicodedata.name(found[0], "a control character")
    return f"contains {name} (U+{ord(found[0]):04X}) at position {found.start() + 1}"


def nfc(text: str) -> str:
    """The NFC spelling: ``é`` typed as one code point or as ``e`` plus an accent."""
    return unicodedata.normalize("NFC", text)


def lone_surrogate(value: Any) -> str | None:
    """The first text in a JSON/YAML value (keys included) that holds half of a
    UTF-16 pair (``"\\ud800"``): no output file could be written with it.

    A value orjson serialises holds no such text (it refuses text that is not UTF-8,
    and writes every key and text :func:`_surrogate_walk` would visit), and proving that
    at C speed spares the walk over every value of a log; anything else walks."""
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        return _surrogate_walk(value)
    return None


def _surrogate_walk(value: Any) -> str | None:
    """:func:`lone_surrogate` the slow way, which finds which text is first."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")  # strict: fails exactly on a lone surrogate, at C speed
        except UnicodeEncodeError:
            return value
        return None
    items = [*value.keys(), *value.values()] if isinstance(value, dict) else value if isinstance(value, list) else []
    return next((found for item in items if (found := _surrogate_walk(item)) is not None), None)


def surrogate_what(found: str) -> str:
    return (
        f"text {found!r:.60} holds half of a UTF-16 surrogate pair (a lone \\ud800-\\udfff escape), "
        "which no UTF-8 file can hold"
    )


ID_FLAW_FIX = "ids become whitespace-separated columns of TREC runs and qrels: remove the character"


SURROGATE_FIX = (
    "replace the escape with the character itself, or with both halves of its pair (e.g. \\ud83d\\ude00 for one emoji)"
)


def kind_of(value: Any) -> str:
    """What a value is, in the words of a YAML or JSON user (for "got ..." messages)."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def has_text(text: Any) -> bool:
    """Non-blank text: a question, a claim or a document of spaces says nothing."""
    return isinstance(text, str) and bool(text.strip())


def did_you_mean(key: Any, options: Iterable[str]) -> str:
    """A "did you mean `x`? " prefix for a fix, when a close option exists."""
    close = difflib.get_close_matches(str(key), list(options), n=1)
    return f"did you mean `{close[0]}`? " if close else ""


def spelling_note(one: str, other: str) -> str:
    """The note for two ids that are one id in two Unicode spellings (NFC vs NFD):
    they look the same on screen, and a reader would take them for one."""
    return f" as {other!r}, the same text in another Unicode spelling (NFC vs NFD)" if one != other else ""
