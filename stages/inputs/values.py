"""Checks of single YAML/JSON values, shared by every validator.

They live apart from the validators so that the data model, the chunkers, the
retrievers and the importers can check a value without importing each other.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable
from typing import Any

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
    """An id written as a number (``id: 42``) is read as its text; other types are not ids."""
    if isinstance(value, str):
        return value if value.strip() else None
    return str(value) if is_int(value) else None


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
