"""The wait's parking discipline, in-process: it reads the database once, then only when a
ring may concern the waiter; it never polls."""

from __future__ import annotations

import asyncio

import pytest
from channels.layers import get_channel_layer

from agentchat.core.push import EVENT_TYPE
from channels_app import consumers
from channels_app.services import channel_create, channel_group, message_post


@pytest.fixture
def counted_reads(monkeypatch):
    calls = []
    real = consumers.messages_read

    def counting(**kwargs):
        calls.append(kwargs["agent"].name)
        return real(**kwargs)

    monkeypatch.setattr(consumers, "messages_read", counting)
    return calls


def ring(channel, **event):
    layer = get_channel_layer()
    return layer.group_send(channel_group(channel.pk), {"type": EVENT_TYPE, "event": event})


@pytest.mark.django_db(transaction=True)
def test_parked_wait_reads_once_and_ignores_rings_for_others(make_agent, counted_reads):
    make_agent("alice")
    bob, _ = make_agent("bob")
    channel = channel_create(name="park", created_by="alice")

    async def scenario():
        waiting = asyncio.create_task(consumers.ChannelWaitConsumer.wait(channel, bob, 1.0))
        await asyncio.sleep(0.2)
        for seq in range(1, 21):  # rings that cannot concern bob: no database read
            await ring(channel, kind="message", seq=seq, **{"from": "alice"}, to=["carol"])
            await ring(channel, kind="message", seq=seq, **{"from": "bob"}, to=[])
        return await waiting

    result = asyncio.run(scenario())
    assert result == {"messages": [], "cursor": 0, "timed_out": True}
    assert counted_reads == ["bob"]


@pytest.mark.django_db(transaction=True)
def test_a_relevant_ring_triggers_one_read_that_returns_the_message(make_agent, counted_reads):
    make_agent("alice")
    bob, _ = make_agent("bob")
    channel = channel_create(name="park", created_by="alice")

    async def scenario():
        waiting = asyncio.create_task(consumers.ChannelWaitConsumer.wait(channel, bob, 10.0))
        await asyncio.sleep(0.2)
        await asyncio.to_thread(
            lambda: message_post(channel=channel, sender="alice", title="hi", to="bob")
        )
        return await asyncio.wait_for(waiting, 5)

    result = asyncio.run(scenario())
    assert [m["title"] for m in result["messages"]] == ["hi"]
    assert counted_reads == ["bob", "bob"]
