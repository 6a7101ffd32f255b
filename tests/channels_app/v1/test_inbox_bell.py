"""The multiplexed websocket's ``inbox`` subscription: the doorbell of the principal's own HTTP v1
inbox (``{"type": "inbox", "tail": t}`` once a delivery commits), what the MCP server's inbox
resource is pushed from; its frames checked as every frame is; nothing left in the groups."""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.testing import WebsocketCommunicator

from agentchat.asgi import application
from channels_app.live_inbox import InboxBell
from channels_app.services import envelope_send, inbox_group
from tests.conftest import in_thread
from tests.signals import layer_kind, subscribers, until  # noqa: F401  (fixture)

HOST = [(b"host", b"testserver")]


async def connect(token: str) -> WebsocketCommunicator:
    client = WebsocketCommunicator(application, f"/ws/channels/?token={token}", headers=HOST)
    connected, _ = await client.connect()
    assert connected
    return client


async def ask(client: WebsocketCommunicator, frame: dict | str) -> dict:
    await client.send_to(text_data=frame if isinstance(frame, str) else json.dumps(frame))
    return await client.receive_json_from(timeout=5)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("layer_kind")
def test_the_inbox_rings_its_owner_with_each_new_tail(make_agent):
    alice, _ = make_agent("alice")
    bob, token = make_agent("bob")
    envelope_send(sender=alice, to="bob", text="before")

    async def scenario():
        client = await connect(token)
        answered = await ask(client, {"op": "subscribe", "kind": "inbox", "since": 0})
        await in_thread(lambda: envelope_send(sender=alice, to="bob", text="live"))
        rung = await client.receive_json_from(timeout=5)
        # bob's own send (to alice) rings alice's inbox, not his.
        await in_thread(lambda: envelope_send(sender=bob, to="alice", text="from bob"))
        await in_thread(lambda: envelope_send(sender=alice, to="bob", text="again"))
        again = await client.receive_json_from(timeout=5)
        twice = await ask(client, {"op": "subscribe", "kind": "inbox"})
        gone = await ask(client, {"op": "unsubscribe", "kind": "inbox"})
        held = subscribers(inbox_group(bob.pk))
        await in_thread(lambda: envelope_send(sender=alice, to="bob", text="unheard"))
        nothing = await client.receive_nothing(timeout=0.3)
        await client.disconnect()
        return answered, rung, again, twice, gone, held, nothing

    answered, rung, again, twice, gone, held, nothing = asyncio.run(scenario())
    assert answered == {"type": "subscribed", "kind": "inbox", "since": 0, "tail": 1}
    assert rung == {"type": "inbox", "tail": 2}
    assert again == {"type": "inbox", "tail": 3}
    assert twice["type"] == "error" and twice["kind"] == "inbox"
    assert twice["error"]["code"] == "INVALID_VALUE"
    assert gone == {"type": "unsubscribed", "kind": "inbox"}
    assert held == 0 and nothing is True


@pytest.mark.django_db(transaction=True)
def test_inbox_frames_are_checked_and_the_connection_goes_on(make_agent):
    _, token = make_agent("bob")

    async def scenario():
        client = await connect(token)
        answers = [
            await ask(client, {"op": "subscribe", "kind": "outbox"}),
            await ask(client, {"op": "subscribe", "kind": "inbox", "channel": "x"}),
            await ask(client, {"op": "subscribe", "kind": "inbox", "since": -1}),
            await ask(client, {"op": "subscribe", "kind": "inbox", "since": 5}),
            await ask(client, {"kind": "inbox"}),
            await ask(client, {"op": "subscribe", "kind": "inbox"}),  # still served
        ]
        await client.disconnect()
        return answers

    answers = asyncio.run(scenario())
    codes = [a["error"]["code"] if a["type"] == "error" else a["type"] for a in answers]
    assert codes == [
        "INVALID_VALUE",
        "UNKNOWN_FIELD",
        "INVALID_CURSOR",
        "INVALID_CURSOR",  # beyond the tail (0)
        "MISSING_FIELD",
        "subscribed",
    ]
    assert all(a["kind"] == "inbox" for a in answers)


def test_the_bell_tells_the_latest_tail_once_for_many_rings():
    async def scenario():
        bell = InboxBell(agent=None, sweep_seconds=60)
        bell.ring({"kind": "delivery", "seq": 0})
        bell.ring({"kind": "delivery", "seq": 2})
        bell.ring({"kind": "delivery", "seq": 1})  # a ring that came late
        bell.ring({"kind": "other", "seq": 9})
        bell.ring({"kind": "delivery", "seq": "9"})
        first = await bell.__anext__()
        pending = asyncio.ensure_future(bell.__anext__())
        await asyncio.sleep(0)
        assert not pending.done()  # nothing new: it waits
        bell.ring({"kind": "delivery", "seq": 3})
        second = await asyncio.wait_for(pending, 5)
        return first, second

    assert asyncio.run(scenario()) == (3, 4)
