"""How user text enters each output format: one rule per format, in one place.

Case ids, doc ids, tag values, slice names, questions, quotes and config names
are written by whoever edits the cases, the corpus or params.yaml, and then read
by a reviewer in a pull-request comment, a browser or a CI log. None of them may
change what the output says around it, run code, fetch a resource or notify
someone. Every function here is total: any string, however hostile, comes out
inert in its format.

- Markdown for GitHub (:func:`md_text`, :func:`md_code`, :func:`md_prose`): one
  line only, markdown punctuation backslash-escaped, ``< > &`` as entities, a
  zero-width space after ``@``, ``#`` (as Dependabot writes them) and in URLs, so
  no mention, issue reference or autolink fires; code spans fenced by more
  backticks than the text holds.
- HTML (:func:`html_text`): entities, one line, the same zero-width spaces.
- Terminal and CI logs (:func:`visible`): control characters, line breaks and
  bidirectional overrides shown as backslash escapes, so no text starts a new
  log line (``::error::``, ``::set-output``) or repaints the terminal.
- JSON inside an HTML ``<script type="application/json">`` block (:func:`script_json`):
  ``< > &`` and the line and paragraph separators as ``\\u`` escapes, so no value
  ends the block or opens a comment, and the page's script reads it as data.
- CSV cells (:func:`csv_cell`): a cell a spreadsheet would read as a formula
  starts with ``'``.
- Chart labels (:func:`chart_label`): one visible line, short enough for an
  axis; the charts also turn matplotlib's mathtext off.

Long values are cut at :data:`MAX_CHARS` with a note saying how much was left
out, so that no single value can push a comment past GitHub's size limit.
"""

from __future__ import annotations

import html
import re
import unicodedata

MAX_CHARS = 300  # one user value in a report; a 70,000-character slice value shows its first 300
CHART_CHARS = 60  # one label on a chart axis or legend

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}
# Bidirectional overrides and isolates reorder what a reader sees (Trojan Source).
_BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_MD_PUNCT = re.compile(r"([\\`*_\[\]!~|$])")
# After each of these a zero-width space: no mention (@), issue reference (#),
# e-mail, or bare URL (http://, www.) that GitHub would link.
_INERT = re.compile(r"[@#]|:(?=//)|(?i:www)(?=\.)")
_ZWSP = "&#8203;"  # an entity, not the character: GitHub shows it as nothing, and it survives copy-editing


def _hidden(char: str) -> bool:
    """Characters that act instead of showing: C0/C1 controls, line and
    paragraph separators, bidirectional controls."""
    return unicodedata.category(char) in ("Cc", "Zl", "Zp", "Cs") or char in _BIDI


def _escaped(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def cut(text: str, limit: int | None = MAX_CHARS) -> str:
    """At most ``limit`` characters of ``text``, with a visible note of how many
    were left out; ``limit=None`` keeps it whole."""
    if limit is None or len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def visible(text: str, limit: int | None = MAX_CHARS) -> str:
    """Terminal and CI logs: one line, every control character, line break and
    bidirectional control written as its escape (``\\n``, ``\\x1b``, ``\\u202e``),
    and the backslash doubled so an escape in the text cannot pass for one of these."""
    text = cut(text, limit)
    if not any(_hidden(c) or c in _NAMED for c in text):
        return text
    return "".join(_escaped(c) if _hidden(c) or c == "\\" else c for c in text)


def _one_line(text: str, limit: int | None) -> str:
    """Line breaks and tabs as a space, other hidden characters as their escape:
    the one-line form every markdown and HTML context starts from."""
    text = cut(text, limit)
    return "".join(" " if c in "\n\r\t\x0b\x0c\x85\u2028\u2029" else _escaped(c) if _hidden(c) else c for c in text)


def md_text(text: str, limit: int | None = MAX_CHARS) -> str:
    """Markdown prose, a table cell or a list item (GitHub and CommonMark): one
    line, so no heading, list or quote can start; ``< > &`` as entities, so no
    HTML; markdown punctuation backslash-escaped, so no emphasis, link, image
    (``![``), code span, table break (``|``) or math (``$``); a zero-width space
    after ``@``, ``#``, ``:`` before ``//`` and ``www`` before ``.``, so no
    mention, issue reference or autolink."""
    text = _one_line(text, limit)
    text = _MD_PUNCT.sub(r"\\\1", text)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _INERT.sub(lambda match: match[0] + _ZWSP, text)


def md_code(text: str, table: bool = False, limit: int | None = MAX_CHARS) -> str:
    """A markdown code span showing ``text`` verbatim (CommonMark 6.1): fenced by
    one backtick more than its longest backtick run, padded with a space where it
    starts or ends with a backtick or a space (one is stripped from each side,
    unless the span is all spaces).
    In a table cell (``table=True``) a ``|`` is backslash-escaped, since GFM splits
    cells before it reads code spans and drops that backslash inside them."""
    text = _one_line(text, limit)
    if table:
        text = text.replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    text = text or " "  # a code span is never empty
    pad = " " if text.strip(" ") and (text[:1] in "` " or text[-1:] in "` ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_prose(text: str, table: bool = False, limit: int | None = None) -> str:
    """ragvet's own sentence in which pairs of backticks mark code (a gate reason):
    the code parts as :func:`md_code` (``table`` as there), the rest as
    :func:`md_text`. A user value inside it is escaped either way, whatever
    backticks it holds."""
    parts = _one_line(text, limit).split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no code span at all
        return md_text(text, limit)
    return "".join(
        md_code(part, table, limit=None) if i % 2 else md_text(part, limit=None) for i, part in enumerate(parts)
    )


def html_text(text: str, limit: int | None = MAX_CHARS) -> str:
    """HTML text or attribute value (a ``<summary>`` line, a figure caption): one
    line, so a raw HTML block cannot end early; entities for ``< > & "`` (ragvet
    quotes attributes with ``"``); the zero-width spaces of :func:`md_text`, since
    GitHub looks for mentions in such blocks too."""
    text = html.escape(_one_line(text, limit), quote=False).replace('"', "&quot;")
    return _INERT.sub(lambda match: match[0] + _ZWSP, text)


_SCRIPT_JSON = str.maketrans({c: f"\\u{ord(c):04x}" for c in "<>&\u2028\u2029"})


def script_json(text: str) -> str:
    """JSON text made safe inside a ``<script type="application/json">`` element: each
    ``<``, ``>``, ``&``, U+2028 and U+2029 written as its ``\\u`` escape. JSON.parse
    reads the same value back, and no value can write ``</script>`` or ``<!--``, which
    end or bend the element however the JSON is quoted."""
    return text.translate(_SCRIPT_JSON)


def chart_label(text: str) -> str:
    """A chart label: one line of at most :data:`CHART_CHARS` characters, drawn as
    written (a backslash stays single: nothing reads a chart's text back)."""
    return _one_line(text, CHART_CHARS)


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what makes a spreadsheet read a cell as a formula


def csv_cell(value: object) -> object:
    """A CSV cell: text starting with ``= + - @``, a tab or a CR gets a leading ``'``
    (OWASP's advice against CSV injection), so a slice named ``=HYPERLINK(...)`` opens
    in a spreadsheet as text; numbers, negative ones too, stay numbers."""
    return "'" + value if isinstance(value, str) and value.startswith(_FORMULA_START) else value
