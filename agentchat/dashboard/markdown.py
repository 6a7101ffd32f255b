"""Message bodies as safe HTML for the dashboard (issue 11, "Safety"): a real markdown parser
with raw HTML off, then a sanitizer with an explicit allow-list. The page only ever inserts
HTML made here; a message's raw body never reaches the browser as markup.

- markdown-it-py, CommonMark plus tables and strikethrough, ``html`` off: a ``<script>`` in a
  body is text, shown as written.
- An image (``![alt](url)``) becomes a link to it: no remote image is loaded by merely opening
  a page (a tracker pixel would tell its sender who read the message, and when).
- nh3 (the ammonia sanitizer) keeps only the tags and attributes below, and links only with the
  schemes http, https and mailto (relative links stay); every link gets
  ``rel="noopener noreferrer nofollow"``. No class, style or id from a message survives.
"""

from __future__ import annotations

from typing import Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml

TAGS = frozenset(
    {
        "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "code",
        "pre", "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td",
    }
)  # fmt: skip
ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}
URL_SCHEMES = frozenset({"http", "https", "mailto"})
LINK_REL = "noopener noreferrer nofollow"


def _image_as_link(renderer: Any, tokens: Any, index: int, options: Any, env: Any) -> str:
    """``![alt](url)`` as ``<a href="url">alt</a>`` (the parser has already refused the links
    it refuses: ``javascript:`` and the like leave no ``src``)."""
    token = tokens[index]
    src = token.attrGet("src") or ""
    alt = renderer.renderInlineAsText(token.children or [], options, env) or src
    if not src:
        return escapeHtml(alt)
    return f'<a href="{escapeHtml(src)}">{escapeHtml(alt)}</a>'


_PARSER = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
_PARSER.add_render_rule("image", _image_as_link)
# Strikethrough as <del> (markdown-it writes <s>, which the allow-list does not name).
_PARSER.add_render_rule("s_open", lambda *args: "<del>")
_PARSER.add_render_rule("s_close", lambda *args: "</del>")


def markdown_html(body: str) -> str:
    """A message body as sanitized HTML."""
    return nh3.clean(
        _PARSER.render(body),
        tags=set(TAGS),
        attributes={tag: set(names) for tag, names in ATTRIBUTES.items()},
        url_schemes=set(URL_SCHEMES),
        link_rel=LINK_REL,
        strip_comments=True,
    )
