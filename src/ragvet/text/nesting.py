"""JSON nested deeper than Python's parser can recurse, read as a syntax error.

``json.loads`` of 100,000 nested lists raises ``RecursionError``, which no reader
expects: it came out as a traceback. :func:`loads` turns it into a
:class:`json.JSONDecodeError` at the point the nesting is deepest, so every reader's
own located message (file, line, column) covers it with no code of its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

TOO_DEEP = "nested too deeply to read"
NESTING_FIX = "flatten the value: no ragvet input needs more than a few levels of lists and objects"

# A JSON string (an unterminated one runs to the end) or a bracket: brackets inside strings do not nest.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.DOTALL)


def deepest(text: str) -> int:
    """The offset of the first bracket at the deepest nesting of ``text``."""
    depth, best, at = 0, 0, 0
    for match in _TOKEN.finditer(text):
        token = match[0]
        if token in "[{":
            depth += 1
            if depth > best:
                best, at = depth, match.start()
        elif token in "]}":
            depth -= 1
    return at


def loads(text: str, decode: Callable[[str], Any] = json.loads) -> Any:
    """``decode(text)`` (``json.loads`` by default); nesting too deep to decode is a
    :class:`json.JSONDecodeError` naming where, with the fix in its message."""
    try:
        return decode(text)
    except RecursionError:
        raise json.JSONDecodeError(f"{TOO_DEEP} ({NESTING_FIX})", text, deepest(text)) from None
