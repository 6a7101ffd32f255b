"""Message bodies as safe HTML for the dashboard: a real markdown parser
with raw HTML off, then a sanitizer with an explicit allow-list. The page only ever inserts
HTML made here; a message's raw body never reaches the browser as markup.

- markdown-it-py, CommonMark plus tables and strikethrough, ``html`` off: a ``<script>`` in a
  body is text, shown as written.
- An image (``![alt](url)``) becomes a link to it: no remote image is loaded by merely opening
  a page (a tracker pixel would tell its sender who read the message, and when).
- nh3 (the ammonia sanitizer) keeps only the tags and attributes below, and links only with the
  schemes http, https and mailto (relative links stay); every link gets
  ``rel="noopener noreferrer nofollow"``. No class, style or id from a message survives.
- Invisible and direction-changing characters (``agentchat.core.rules.validation.INVISIBLE``:
U+202E,
  U+200D, U+FEFF…), which a body may hold, are shown as a visible mark,
  ``<span class="invisible-char" title="U+202E RIGHT-TO-LEFT OVERRIDE">U+202E</span>``, instead of
  reordering or hiding the text around them. The marks are made before the sanitizer, which
  lets through only that class on a ``span`` (raw HTML being off, no message can write one).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import nh3
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml

from agentchat.core.rules.validation import INVISIBLE

TAGS = frozenset(
    {
        "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "code",
        "pre", "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td",
        "span",
    }
)  # fmt: skip
ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "span": {"title"}}
INVISIBLE_CLASS = "invisible-char"
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


def _parser(*, breaks: bool) -> MarkdownIt:
    parser = MarkdownIt("commonmark", {"html": False, "breaks": breaks})
    parser.enable(["table", "strikethrough"])
    parser.add_render_rule("image", _image_as_link)
    # Strikethrough as <del> (markdown-it writes <s>, which the allow-list does not name).
    parser.add_render_rule("s_open", lambda *args: "<del>")
    parser.add_render_rule("s_close", lambda *args: "</del>")
    return parser


_PARSER = _parser(breaks=False)
# A person's body (``sender_kind`` human: what the composer sends) keeps its line breaks: a
# single newline is a ``<br>`` (markdown's "breaks"), so what was typed with Shift+Enter is
# what others see. An agent's body is plain CommonMark (a single newline joins the lines).
_PARSER_BREAKS = _parser(breaks=True)


def _mark(match: re.Match[str]) -> str:
    char = match.group()
    point = f"U+{ord(char):04X}"
    name = unicodedata.name(char, "")
    title = f"{point} {name}" if name else point
    return f'<span class="{INVISIBLE_CLASS}" title="{title}">{point}</span>'


# In markdown-it's output every literal ``<`` opens a tag and ``>`` closes it: text and
# attribute values have them escaped.
_TAG = re.compile(r"(<[^>]*>)")


def invisible_marked(html: str) -> str:
    """``html`` (escaped text and tags, as markdown-it or ``escape`` writes it) with every
    invisible character of its text replaced by its visible mark, and dropped from its tags'
    attributes (a link's title), where no mark can go."""
    parts = _TAG.split(html)
    for index, part in enumerate(parts):
        parts[index] = INVISIBLE.sub("", part) if index % 2 else INVISIBLE.sub(_mark, part)
    return "".join(parts)


def body_breaks(sender_kind: str) -> bool:
    """Whether a body by a sender of this kind renders its single newlines as line breaks:
    a person's (the dashboard's composer, a person's own token), never an agent's nor an
    imported message's (always ``agent``)."""
    return sender_kind == "human"


def text_html(text: str) -> SafeString:
    """A one-line text (a title, a name) escaped, its invisible characters marked."""
    return mark_safe(invisible_marked(escape(text)))  # escaped; marks are our own markup


def markdown_html(body: str, *, breaks: bool = False) -> str:
    """A message body as sanitized HTML; with ``breaks``, a single newline is a line break
    (a person's body: ``body_breaks``)."""
    parser = _PARSER_BREAKS if breaks else _PARSER
    return nh3.clean(
        invisible_marked(parser.render(body)),
        tags=set(TAGS),
        attributes={tag: set(names) for tag, names in ATTRIBUTES.items()},
        allowed_classes={"span": {INVISIBLE_CLASS}},
        url_schemes=set(URL_SCHEMES),
        link_rel=LINK_REL,
        strip_comments=True,
    )
