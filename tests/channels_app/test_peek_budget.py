"""Peek answers at most AGENTCHAT_READ_MAX_BYTES of messages (always at least one), as read
does, with ``more`` saying what it left out; it loads no more rows than it sends."""

from __future__ import annotations

import pytest

from channels_app import services
from channels_app.models import Channel

pytestmark = pytest.mark.django_db

BODY = "x" * 10_000


@pytest.fixture
def alice(api_for):
    client = api_for("alice")
    client.post("/api/v1/channels/", {"name": "big"}, format="json")
    channel = Channel.objects.get(name="big")
    for index in range(10):
        services.message_post(channel=channel, sender="alice", title=f"m{index}", body=BODY)
    return client


def peek(client, **params):
    r = client.get("/api/v1/channels/big/messages/", params)
    assert r.status_code == 200, r.content
    body = r.json()
    return [m["seq"] for m in body["messages"]], body["more"], len(r.content)


def test_peek_stops_at_the_byte_budget(alice, settings):
    settings.AGENTCHAT_READ_MAX_BYTES = 25_000
    seqs, more, size = peek(alice, after=0, limit=1000)
    assert (seqs, more) == ([1, 2], True)
    assert size <= 25_000
    assert peek(alice, after=2, limit=1000)[:2] == ([3, 4], True)
    assert peek(alice, after=8, limit=1000)[:2] == ([9, 10], False)
    # Without after: the latest messages within the budget, more saying earlier ones exist.
    assert peek(alice, limit=1000)[:2] == ([9, 10], True)


def test_peek_answers_one_message_over_the_budget(alice, settings):
    settings.AGENTCHAT_READ_MAX_BYTES = 10
    assert peek(alice, after=0)[:2] == ([1], True)
    assert peek(alice)[:2] == ([10], True)


def test_peek_within_the_budget_and_the_limit(alice):
    assert peek(alice, after=0)[:2] == (list(range(1, 11)), False)
    assert peek(alice, after=0, limit=3)[:2] == ([1, 2, 3], True)
    assert peek(alice, limit=3)[:2] == ([8, 9, 10], True)
    assert peek(alice, after=10)[:2] == ([], False)
