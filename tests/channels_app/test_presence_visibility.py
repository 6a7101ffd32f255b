"""Presence counts only what the viewer may see: an agent active only in a members-only
channel is not shown as recently seen to someone who is no member of it, on the API's presence
endpoint nor on the dashboard's agents page (where the token's last use, which is global, once
showed "just now")."""

from __future__ import annotations

import pytest

from channels_app.presence import presence_seen_by
from tests.conftest import PagesClient

pytestmark = pytest.mark.django_db


@pytest.fixture
def carol_busy_in_secret(api_for):
    """carol posts and reads only in ``secret`` (members: carol, dave); ``lobby`` is open."""
    carol = api_for("carol")
    dave = api_for("dave")
    made = dave.post("/api/v1/channels/", {"name": "lobby"}, format="json")
    assert made.status_code == 201, made.content
    made = carol.post(
        "/api/v1/channels/",
        {"name": "secret", "members": ["carol", "dave"], "visibility": "members"},
        format="json",
    )
    assert made.status_code == 201, made.content
    posted = carol.post(
        "/api/v1/channels/secret/messages/", {"title": "hush", "body": "x"}, format="json"
    )
    assert posted.status_code == 201, posted.content
    assert carol.post("/api/v1/channels/secret/read/", {}, format="json").status_code == 200
    return carol


def test_the_api_shows_no_presence_of_a_members_only_channel_to_a_non_member(
    api_for, carol_busy_in_secret
):
    bob = api_for("bob")
    hidden = bob.get("/api/v1/channels/secret/presence/")
    assert (hidden.status_code, hidden.json()["error"]["code"]) == (404, "CHANNEL_NOT_FOUND")
    lobby = bob.get("/api/v1/channels/lobby/presence/")
    assert lobby.status_code == 200
    assert "carol" not in {item["agent"] for item in lobby.json()["presence"]}
    # A member sees her.
    dave = api_for("dave")
    seen = dave.get("/api/v1/channels/secret/presence/").json()["presence"]
    assert {item["agent"] for item in seen} >= {"carol"}


def test_presence_across_channels_counts_only_visible_channels(carol_busy_in_secret):
    assert "carol" not in presence_seen_by(viewer="bob")
    carol = presence_seen_by(viewer="dave")["carol"]
    assert carol["channel"] == "secret" and carol["last_active_at"] is not None


def test_the_agents_page_does_not_show_a_non_member_that_carol_was_just_seen(
    carol_busy_in_secret, django_user_model
):
    ann = django_user_model.objects.create_user("Ann Lee", password="s3cret-pw")
    browser = PagesClient()
    browser.force_login(ann)
    text = browser.get("/agents/").content.decode()
    row = text[text.index('id="agent-carol"') :]
    row = row[: row.index("</tr>")]
    assert "just now" not in row and "never" in row
    assert "secret" not in row
