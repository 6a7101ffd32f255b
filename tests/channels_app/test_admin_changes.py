"""Django admin of channels: edits of topic, members and visibility go through channel_update
(its rules, its channel.updated audit, sent by the admin); the admin sees every channel."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from agentchat.core.models import Agent
from channels_app.models import Channel, Message
from channels_app.services import channel_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def room(make_agent):
    make_agent("alice")
    return channel_create(
        name="room", created_by="alice", topic="old", members=["alice"], visibility="members"
    )


def change_url(channel: Channel) -> str:
    return reverse("admin:channels_app_channel_change", args=[channel.pk])


def form(channel: Channel, **changes) -> dict[str, str]:
    data = {
        "name": channel.name,
        "topic": channel.topic,
        "members": json.dumps(channel.members),
        "visibility": channel.visibility,
        "maintainer": channel.maintainer,
    }
    data.update({k: json.dumps(v) if k == "members" else v for k, v in changes.items()})
    return data


def audits() -> list[Message]:
    return list(Message.objects.filter(status="channel.updated").order_by("seq"))


def test_the_changelist_shows_members_only_channels_and_their_visibility(admin_client, room):
    channel_create(name="lobby", created_by="bob")
    r = admin_client.get(reverse("admin:channels_app_channel_changelist"))
    html = r.content.decode()
    assert "room" in html and "lobby" in html
    assert "members only" in html
    assert admin_client.get(change_url(room)).status_code == 200
    r = admin_client.get(reverse("admin:channels_app_channel_changelist") + "?visibility=members")
    assert "lobby" not in r.content.decode()


def test_an_admin_edit_is_audited_as_the_admin(admin_client, admin_user, room):
    r = admin_client.post(
        change_url(room), form(room, topic="new", members=["alice", "bob"], maintainer="alice")
    )  # bob is no agent (yet): fine while alice is one
    assert r.status_code == 302, r.content.decode()[:2000]
    room.refresh_from_db()
    assert (room.topic, room.members, room.maintainer) == ("new", ["alice", "bob"], "alice")
    [audit] = audits()
    # The admin acts as their human agent, made on first use: the audit is a person's.
    assert (audit.sender, audit.sender_kind) == ("admin", "human")
    assert Agent.objects.get(user=admin_user).kind == Agent.Kind.HUMAN
    payload = json.loads(audit.body)
    assert payload["actor"] == "admin"
    assert payload["before"] == {"members": ["alice"], "topic": "old"}
    assert payload["after"] == {"members": ["alice", "bob"], "topic": "new"}
    # with another linked agent, the admin acts as that agent
    Agent.objects.filter(user=admin_user).update(user=None)
    Agent.objects.create(name="ops", user=admin_user)
    admin_client.post(change_url(room), form(room, visibility="open"))
    assert audits()[-1].sender == "ops"


def test_an_admin_edit_that_changes_nothing_audited_posts_nothing(admin_client, room):
    r = admin_client.post(change_url(room), form(room, maintainer="alice"))
    assert r.status_code == 302
    assert Channel.objects.get().maintainer == "alice"
    assert audits() == []


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"members": []}, "members"),  # members-only without members
        ({"members": ["ghost"]}, "members"),  # ... or without an agent among them
        ({"members": ["Bob"]}, "members"),
        ({"members": {"alice": 1}}, "members"),
        ({"topic": "t" * 5000}, "topic"),
        ({"visibility": "secret"}, "visibility"),
        ({"name": "bad name"}, "name"),
    ],
)
def test_an_admin_edit_that_breaks_the_rules_is_refused(admin_client, room, changes, field):
    before = list(Channel.objects.values())
    r = admin_client.post(change_url(room), form(room, **changes))
    assert r.status_code == 200  # the form again, with the error
    assert field in r.context["adminform"].form.errors
    assert list(Channel.objects.values()) == before
    assert audits() == []
