"""The channel layer delivers at most once. When a ring is lost, nothing is lost: the stream's
sweep and the wait's last look at its deadline read the database."""

from __future__ import annotations

import asyncio

import pytest
from channels.testing import WebsocketCommunicator

from agentchat.asgi import application
from channels_app import consumers, services
from channels_app.services import channel_create, message_post
from tests.conftest import in_thread


@pytest.fixture
def rings_lost(monkeypatch):
    monkeypatch.setattr(services, "push_on_commit", lambda group, event: None)


async def _stream_gets_a_message_posted_without_a_ring(token: str, channel) -> dict | None:
    communicator = WebsocketCommunicator(application, f"/ws/channels/lost/?token={token}")
    connected, _ = await communicator.connect()
    assert connected
    try:
        await in_thread(lambda: message_post(channel=channel, sender="alice", title="no ring"))
        if await communicator.receive_nothing(timeout=2.0, interval=0.05):
            return None
        return await communicator.receive_json_from()
    finally:
        await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
def test_stream_sweep_delivers_a_message_whose_ring_was_lost(make_agent, rings_lost, settings):
    settings.AGENTCHAT_STREAM_SWEEP_SECONDS = 0.3
    make_agent("alice")
    _, token = make_agent("bob")
    channel = channel_create(name="lost", created_by="alice")
    frame = asyncio.run(_stream_gets_a_message_posted_without_a_ring(token, channel))
    assert frame is not None
    assert frame["message"]["title"] == "no ring"


@pytest.mark.django_db(transaction=True)
def test_without_the_sweep_a_lost_ring_is_not_seen_in_time(make_agent, rings_lost, settings):
    # The control for the test above: it is the sweep that delivered, not something else.
    settings.AGENTCHAT_STREAM_SWEEP_SECONDS = 60
    make_agent("alice")
    _, token = make_agent("bob")
    channel = channel_create(name="lost", created_by="alice")
    assert asyncio.run(_stream_gets_a_message_posted_without_a_ring(token, channel)) is None


@pytest.mark.django_db(transaction=True)
def test_wait_finds_a_message_whose_ring_was_lost_at_its_deadline(make_agent, rings_lost):
    make_agent("alice")
    bob, _ = make_agent("bob")
    channel = channel_create(name="lost", created_by="alice")

    async def scenario():
        waiting = asyncio.create_task(consumers.ChannelWaitConsumer.wait(channel, bob, 1.0))
        await asyncio.sleep(0.2)
        await in_thread(
            lambda: message_post(channel=channel, sender="alice", title="no ring", to="bob")
        )
        return await asyncio.wait_for(waiting, 5)

    result = asyncio.run(scenario())
    assert [m["title"] for m in result["messages"]] == ["no ring"]
    assert "timed_out" not in result
    assert result["cursor"] == 1
