"""Each delivery rings, once committed, its recipient's inbox group and the monitor's group:
doorbells with the inbox and the seq_num only (a live follower reads the inbox back)."""

from __future__ import annotations

import pytest

from agentchat.core.live import push
from agentchat.core.rules.errors import AppError
from channels_app.models import Channel
from channels_app.services import (
    MONITOR_GROUP,
    ROSTER_GROUP,
    channel_group,
    envelope_send,
    inbox_group,
    receipt_send,
)


@pytest.fixture
def rings(monkeypatch):
    rung: list[tuple[str, dict]] = []
    monkeypatch.setattr(push, "push_now", lambda group, event: rung.append((group, event)))
    return rung


def test_a_delivery_rings_the_inbox_and_the_monitor_on_commit(
    make_agent, rings, django_capture_on_commit_callbacks
):
    alice, _ = make_agent("alice")
    bob, _ = make_agent("bob")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        sent = envelope_send(sender=alice, to="bob", text="hi")
    assert rings == []  # nothing before the commit
    for callback in callbacks:
        callback()
    channel = Channel.objects.get()
    ring = {"kind": "delivery", "inbox": bob.pk, "seq": 0}
    assert [group for group, _ in rings] == [
        ROSTER_GROUP,  # the pair's channel was made
        channel_group(channel.pk),  # its message, as every channel message rings
        inbox_group(bob.pk),
        MONITOR_GROUP,
    ]
    assert rings[2:] == [(inbox_group(bob.pk), ring), (MONITOR_GROUP, {**ring, "name": "bob"})]
    rings.clear()
    with django_capture_on_commit_callbacks(execute=True):
        receipt_send(sender=bob, message_id=sent.delivery.envelope_id, status="read")
    assert (inbox_group(alice.pk), {"kind": "delivery", "inbox": alice.pk, "seq": 0}) in rings


def test_a_refused_send_rings_nothing(make_agent, rings, django_capture_on_commit_callbacks):
    alice, _ = make_agent("alice")
    make_agent("bob")
    envelope_send(sender=alice, to="bob", text="x", envelope_id="same")
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(AppError):
        envelope_send(sender=alice, to="bob", text="other", envelope_id="same")
    with django_capture_on_commit_callbacks(execute=True):
        envelope_send(sender=alice, to="bob", text="x", envelope_id="same")  # a retry
    assert rings == []
