"""A body may hold invisible and direction-changing characters; the dashboard shows each one as
a visible mark (the sanitizer lets that mark through and nothing else of its kind)."""

from __future__ import annotations

import pytest

from agentchat.dashboard.markdown import markdown_html
from tests.conftest import PagesClient
from tests.state.scenario import imported_message

pytestmark = pytest.mark.django_db

RLO = '<span class="invisible-char" title="U+202E RIGHT-TO-LEFT OVERRIDE">U+202E</span>'


def test_a_body_with_an_override_is_shown_with_the_mark(api_for, django_user_model):
    alice = api_for("alice")
    assert alice.post("/api/v1/channels/", {"name": "ops"}, format="json").status_code == 201
    body = 'pay \u202eexe.fdp\n\n`co\u200dde` [link](https://x.test "ti\u202etle")'
    r = alice.post("/api/v1/channels/ops/messages/", {"title": "t", "body": body}, format="json")
    assert r.status_code == 201 and r.json()["body"] == body  # stored as sent
    channel = r.json()["channel"]
    from channels_app.models import Channel

    imported_message(Channel.objects.get(name=channel), 2, title="old \ufefftitle", body="b",
                     frontmatter=[], imported=True)  # fmt: skip
    browser = PagesClient()
    browser.force_login(django_user_model.objects.create_user("ann", password="pw"))
    response = browser.get("/c/ops/")
    page = response.content.decode()
    assert f"pay {RLO}exe.fdp" in page
    assert 'co<span class="invisible-char" title="U+200D ZERO WIDTH JOINER">U+200D</span>de' in page
    assert 'old <span class="invisible-char" title="U+FEFF ZERO WIDTH NO-BREAK SPACE">' in page
    assert not any(c in page for c in "\u202e\u200d\ufeff")
    assert "script-src 'self'" in response.headers["Content-Security-Policy"]


def test_a_message_cannot_write_the_mark_or_any_class():
    html = markdown_html('<span class="invisible-char">U+202E</span> and \u202e')
    assert html.count("<span") == 1 and "&lt;span" in html
    link = markdown_html('[a](https://x.test "ti\u202etle")')  # no mark in an attribute
    assert '<a href="https://x.test" title="title" rel="noopener noreferrer nofollow">a</a>' in link


def test_the_agents_page_marks_invisible_characters_in_names_and_statuses(
    api_for, django_user_model
):
    # Rows stored before the one-line rules (an old import, an old event): shown marked.
    from django.utils import timezone

    from channels_app.models import Channel, Presence

    alice = api_for("alice")
    assert alice.post("/api/v1/channels/", {"name": "ops"}, format="json").status_code == 201
    Presence.objects.create(
        channel=Channel.objects.get(name="ops"), agent="ad\u200dmin", last_seq=1,
        last_sent_at=timezone.now(), harness="evil\u202eharness", status="busy",
        detail="work \u202edetail", primitives=["wait"],
    )  # fmt: skip
    browser = PagesClient()
    browser.force_login(django_user_model.objects.create_user("ann", password="pw"))
    page = browser.get("/agents/").content.decode()
    zwj = '<span class="invisible-char" title="U+200D ZERO WIDTH JOINER">U+200D</span>'
    assert f"<strong>ad{zwj}min</strong>" in page
    assert f"evil{RLO}harness" in page and f"work {RLO}detail" in page
    assert "\u202e" not in page
