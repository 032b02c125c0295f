"""The self-contained HTML page (``ragvet report --format html``): the markdown report
rendered, the inline SVG charts, then the case explorer when there is one.

No external resource, so it opens offline and nothing is fetched: its
Content-Security-Policy (:func:`policy`) allows no network at all, inline styles, and
one script only, the explorer's own (by its hash), so no script or event handler
from a value could run even if escaping failed. Raw HTML in the markdown is limited
to ragvet's own tags, a second wall behind the escaping of user text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragvet.reporting.document import COMMENT_MARKER
from ragvet.reporting.explorer_script import script_hash
from ragvet.text.escaping import html_text

_CSS = """
body { font: 14px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; max-width: 1100px;
       margin: 2em auto; padding: 0 1em; color: #1f2328; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: left; }
th { background: #f6f8fa; }
code { background: #f6f8fa; padding: 0 3px; border-radius: 3px; }
blockquote { color: #59636e; border-left: 4px solid #d0d7de; margin: 0; padding: 0 1em; }
h1 { font-size: 1.5em; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; }
"""


_OWN_HTML = re.compile(f"(</?(?:details|summary|code)>|{re.escape(COMMENT_MARKER)})")


def _own_html_only(renderer, tokens, idx, options, env) -> str:
    """A raw HTML token as HTML only where it is one of ragvet's own attribute-less
    tags (``details``, ``summary``, ``code``) or the comment marker; any other
    ``<`` or ``>`` in it is written as an entity. User text is escaped before it
    enters the markdown, so this is the second wall: no tag, attribute or script
    from a value can reach the page even if a rule upstream missed one."""
    parts = _OWN_HTML.split(tokens[idx].content)
    return "".join(part if i % 2 else part.replace("<", "&lt;").replace(">", "&gt;") for i, part in enumerate(parts))


def policy() -> str:
    """The page's Content-Security-Policy: nothing from anywhere (``default-src 'none'``:
    no fetch, image, frame, font or form target), inline styles (the page's and
    matplotlib's SVG), and only the explorer's script, by its hash."""
    return (
        f"default-src 'none'; style-src 'unsafe-inline'; script-src {script_hash()}; "
        "base-uri 'none'; form-action 'none'"
    )


def render_html(markdown: str, figures: Sequence[tuple[str, str]], explorer: str = "") -> str:
    """One self-contained HTML page: the markdown report rendered (tables and
    ``<details>`` kept), the inline SVG figures, then ``explorer`` (the case explorer's
    section, :func:`ragvet.reporting.explorer.explorer_section`; none when empty). No
    external resource, so it opens offline and nothing is fetched: markdown images,
    links and autolinks are off, raw HTML is limited to ragvet's own tags
    (:func:`_own_html_only`), and the :func:`policy` forbids any other script."""
    from markdown_it import MarkdownIt  # not for `ragvet --help`

    md = MarkdownIt("commonmark", {"html": True}).enable("table").disable(["image", "link", "autolink"])
    md.add_render_rule("html_block", _own_html_only)
    md.add_render_rule("html_inline", _own_html_only)
    body = md.render(markdown)
    plots = ["<h2>Plots</h2>"]
    for title, svg in figures:
        plots.append(f"<figure><figcaption>{html_text(title)}</figcaption>\n{svg}</figure>")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{policy()}">\n'
        "<title>ragvet retrieval report</title>\n"
        f"<style>{_CSS}</style>\n</head>\n<body>\n{body}\n" + "\n".join(plots) + f"\n{explorer}</body>\n</html>\n"
    )
