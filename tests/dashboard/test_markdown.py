"""Message bodies as the dashboard shows them: parsed markdown, then the allow-list; nothing a
body says can run, load or restyle anything."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentchat.dashboard.markdown import (
    ATTRIBUTES,
    LINK_REL,
    TAGS,
    URL_SCHEMES,
    body_breaks,
    markdown_html,
)


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs)))


def elements(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Elements()
    parser.feed(html)
    parser.close()
    return parser.found


def assert_safe(html: str) -> None:
    for tag, attrs in elements(html):
        assert tag in TAGS, (tag, html)
        allowed = ATTRIBUTES.get(tag, set()) | ({"rel"} if tag == "a" else set())
        assert set(attrs) <= allowed, (tag, attrs, html)
        if tag == "a":
            assert attrs["rel"] == LINK_REL
            href = (attrs.get("href") or "").strip().lower()
            scheme = href.split(":", 1)[0] if ":" in href.split("/", 1)[0] else None
            assert scheme is None or scheme in URL_SCHEMES, html


HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '<a href="javascript:alert(1)">x</a>',
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x](data:text/html;base64,PHNjcmlwdD4=)",
    "[x](vbscript:msgbox)",
    "![x](javascript:alert(1))",
    '<div onclick="alert(1)" style="position:fixed" class="c" id="i">x</div>',
    "<iframe src=https://example.com></iframe>",
    "<svg onload=alert(1)><circle/></svg>",
    "<style>body{display:none}</style>",
    "<!-- comment --><b>bold</b>",
    "<details open ontoggle=alert(1)>",
    '[x](https://a "title" onmouseover="alert(1)")',
    "<a href='https://ok' onmouseover=alert(1)>ok</a>",
    "```html\n<script>alert(1)</script>\n```",
    "<math><mi xlink:href=javascript:alert(1)>x</mi></math>",
    "<form action=https://evil><input name=q></form>",
]


@pytest.mark.parametrize("body", HOSTILE)
def test_hostile_bodies_leave_nothing_that_runs_or_loads(body):
    html = markdown_html(body)
    assert_safe(html)
    # What a body said in markup may remain as text (escaped); never in a tag or attribute.
    for _, attrs in elements(html):
        for value in attrs.values():
            assert "script:" not in (value or "").lower(), html


def test_markdown_renders_the_allowed_shapes():
    html = markdown_html(
        "# Title\n\n**b** *i* ~~gone~~ `code`\n\n> quoted\n\n3. three\n4. four\n\n"
        '| a | b |\n|---|---|\n| 1 | 2 |\n\n[site](https://example.com "t") <mailto:a@b.c>\n\n---'
    )
    tags = [tag for tag, _ in elements(html)]
    for tag in ("h1", "strong", "em", "del", "code", "blockquote", "ol", "li", "table", "th", "td",
                "a", "hr"):  # fmt: skip
        assert tag in tags, (tag, html)
    assert '<ol start="3">' in html
    assert '<a href="https://example.com" title="t" rel="noopener noreferrer nofollow">' in html
    assert_safe(html)


def test_an_image_is_a_link_to_it_never_loaded():
    html = markdown_html("![the chart](https://example.com/chart.png)")
    assert elements(html) == [
        ("p", {}),
        ("a", {"href": "https://example.com/chart.png", "rel": LINK_REL}),
    ]
    assert "the chart" in html


def test_raw_html_is_shown_as_text():
    assert markdown_html("<b>x</b>") == "<p>&lt;b&gt;x&lt;/b&gt;</p>\n"


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list("<>\"'=/:[]()!`*_~#-| \nabjsvcriptoneulf&;x0")), max_size=80
    )
)
def test_any_mix_of_markup_characters_stays_inside_the_allow_list(body):
    assert_safe(markdown_html(body))


def test_a_person_s_single_newline_is_a_line_break_an_agent_s_is_not():
    body = "first line\nsecond line\n\n```\ncode\nkept\n```"
    person = markdown_html(body, breaks=body_breaks("human"))
    assert "<p>first line<br>\nsecond line</p>" in person
    assert "<pre><code>code\nkept\n</code></pre>" in person  # code blocks as they were
    agent = markdown_html(body, breaks=body_breaks("agent"))
    assert "<p>first line\nsecond line</p>" in agent  # CommonMark: one paragraph line
    assert_safe(person)


@pytest.mark.parametrize("body", HOSTILE)
def test_hostile_bodies_stay_safe_with_line_breaks(body):
    assert_safe(markdown_html(body, breaks=True))
