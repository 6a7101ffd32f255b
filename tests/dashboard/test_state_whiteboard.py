"""The state page shows the channel's whiteboard (EP-0118) below the summary: each entry's
key, value (text, never markup; invisible characters marked), who wrote it and when; and a
signal shows in the channel's thread like any message."""

from __future__ import annotations

import pytest
from django.test import Client

from channels_app import services
from channels_app.models import Channel
from tests.conftest import PagesClient

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(django_user_model) -> Client:
    client = PagesClient(enforce_csrf_checks=True)
    client.force_login(django_user_model.objects.create_user("ann", password="s3cret-pw"))
    return client


@pytest.fixture
def room() -> Channel:
    return services.channel_create(name="room", created_by="alice", topic="rollout")


def test_the_state_page_shows_the_whiteboard(browser, room):
    text = browser.get("/c/room/state/").content.decode()
    assert "The whiteboard is empty" in text
    services.whiteboard_write(
        channel=room, key="goal", value={"ship": "<b>v0.2</b>", "by": "fri\u202e"}, actor="alice"
    )
    text = browser.get("/c/room/state/").content.decode()
    row = text[text.index('id="whiteboard-goal"') :]
    row = row[: row.index("</tr>")]
    assert "<code>goal</code>" in row and ">alice<" in row and "#1" in row
    assert "&lt;b&gt;v0.2&lt;/b&gt;" in row  # a value is text, never markup
    assert "\u202e" not in row and "U+202E" in row  # marked, not applied
    assert "The whiteboard is empty" not in text


def test_a_signal_shows_in_the_thread(browser, room):
    services.signal_post(
        channel=room, sender="alice", to="bob", content="Review T-1?\nplease", signal_type="query"
    )
    text = browser.get("/c/room/").content.decode()
    item = text[text.index('id="m-1"') :]
    item = item[: item.index("</li>")]
    assert "Review T-1?" in item and "query" in item
