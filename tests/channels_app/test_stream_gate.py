"""What one agent's websockets may cost the others: every replay batch a websocket stream reads
(the single channel's and the multiplexed one's) takes the agent's turn at the heavy gate, keyed
as the API lane keys its requests (``a<id>`` of the token's agent, whichever sub-agent it acts
as), and runs on the heavy pool; and an agent holds at most AGENTCHAT_WS_MAX_PER_AGENT
websockets open, one more told STREAM_TOO_MANY_CONNECTIONS and closed 4429. Counted, not timed:
the gate's queue, which pool read, the frames."""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.testing import WebsocketCommunicator

from agentchat.asgi import application
from agentchat.core.db.transactions import run_db
from agentchat.core.live import follows
from agentchat.core.models import Agent
from channels_app.services import channel_create, message_post
from tests.heavy_gate import heavy_calls, held
from tests.signals import until

HOST = [(b"host", b"testserver")]


@pytest.fixture
def replay(make_agent, monkeypatch):
    """alice's channel of three messages, bob's token, and the names of what ran on the heavy
    pool."""
    make_agent("alice")
    _, token = make_agent("bob")
    channel = channel_create(name="ws", created_by="alice")
    for i in range(3):
        message_post(channel=channel, sender="alice", title=f"m{i}")
    return channel, token, heavy_calls(monkeypatch)


async def _freed(key: bytes, *, below: int) -> None:
    """Once the server has seen a closed websocket go (it learns of it asynchronously)."""
    while await follows.follow_slots().count("ws", key) >= below:
        await asyncio.sleep(0)


async def _frame(client: WebsocketCommunicator) -> dict:
    return json.loads((await client.receive_output(timeout=10))["text"])


@pytest.mark.django_db(transaction=True)  # the reads run on the pools: committed rows
@pytest.mark.parametrize("acting", [None, "bob.sub"])
def test_a_websockets_replay_waits_its_agents_turn_at_the_gate_while_a_post_commits(replay, acting):
    channel, token, heavy_calls = replay
    key = b"a%d" % Agent.objects.get(name="bob").pk  # the lane's key, a sub-agent's too
    headers = HOST + ([(b"agentchat-as", acting.encode())] if acting else [])

    async def main():
        gate, release, holder = await held(key)
        client = WebsocketCommunicator(
            application, f"/ws/channels/ws/?since=0&token={token}", headers=headers
        )
        connected, _ = await client.connect()
        assert connected
        # The replay's first read waits behind bob's running heavy request, holding no thread.
        await until(lambda: gate.waiting(key) == 2)
        assert heavy_calls == [] and await client.receive_nothing(timeout=0.05)
        await run_db(message_post, channel=channel, sender="alice", title="meanwhile")
        release.set()
        titles = [(await _frame(client))["message"]["title"] for _ in range(4)]
        await holder
        await client.disconnect()
        return titles

    assert asyncio.run(main()) == ["m0", "m1", "m2", "meanwhile"]
    assert heavy_calls and set(heavy_calls) == {"_messages_for"}


@pytest.mark.django_db(transaction=True)
def test_a_multiplexed_subscriptions_replay_takes_the_gate_too(replay):
    _, token, heavy_calls = replay
    key = b"a%d" % Agent.objects.get(name="bob").pk

    async def main():
        gate, release, holder = await held(key)
        client = WebsocketCommunicator(application, f"/ws/channels/?token={token}", headers=HOST)
        connected, _ = await client.connect()
        assert connected
        await client.send_to(text_data=json.dumps({"op": "subscribe", "channel": "ws", "since": 0}))
        assert (await _frame(client))["type"] == "subscribed"
        await until(lambda: gate.waiting(key) == 2)
        assert heavy_calls == []
        release.set()
        titles = [(await _frame(client))["message"]["title"] for _ in range(3)]
        await holder
        await client.disconnect()
        return titles

    assert asyncio.run(main()) == ["m0", "m1", "m2"]
    assert set(heavy_calls) == {"_messages_for"}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["/ws/channels/ws/", "/ws/channels/"])
def test_one_websocket_past_the_agents_cap_is_told_and_closed_4429(replay, settings, path):
    _, token, _ = replay
    settings.AGENTCHAT_WS_MAX_PER_AGENT = 2
    url = f"{path}?token={token}"

    async def main():
        first, second = (WebsocketCommunicator(application, url, headers=HOST) for _ in "12")
        assert (await first.connect())[0] and (await second.connect())[0]
        third = WebsocketCommunicator(application, url, headers=HOST)
        assert (await third.connect())[0]  # accepted, to be told why
        told = await _frame(third)
        closed = await third.receive_output(timeout=10)
        await first.disconnect()
        await asyncio.wait_for(_freed(key, below=2), 10)
        fourth = WebsocketCommunicator(application, url, headers=HOST)
        assert (await fourth.connect())[0]
        assert await fourth.receive_nothing(timeout=0.05)  # served: nothing refused
        for client in (second, fourth):
            await client.disconnect()
        return told, closed

    key = b"a%d" % Agent.objects.get(name="bob").pk
    told, closed = asyncio.run(main())
    assert told["type"] == "error"
    assert told["error"]["code"] == "STREAM_TOO_MANY_CONNECTIONS"
    assert told["error"]["detail"] == {"limit": 2}
    assert closed == {"type": "websocket.close", "code": 4429}
