"""The channel layer delivers at most once. When a ring is lost, nothing is lost: the sweeps
(the stream's and the wait's), the stream's next ring and the wait's last look at its deadline
read the database."""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator

from agentchat.asgi import application
from agentchat.core.live.push import EVENT_TYPE, push_on_commit
from channels_app import live, services
from channels_app.services import channel_create, channel_group, message_post
from tests.conftest import in_thread
from tests.signals import layer_kind, until  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("layer_kind")


class Rings:
    """Lets a test drop the rings of the posts it makes, then let them through again."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.lost = True
        real = services.channels.push_on_commit

        def maybe(group, event):
            if not self.lost:
                real(group, event)

        monkeypatch.setattr(services.channels, "push_on_commit", maybe)
        monkeypatch.setattr(services.claims, "push_on_commit", maybe)
        monkeypatch.setattr(services.messages, "push_on_commit", maybe)


@pytest.fixture
def rings(monkeypatch):
    return Rings(monkeypatch)


@pytest.fixture
def sweeps(monkeypatch):
    """Counts the stream's looks at the channel's last seq (its opening, then each sweep)."""
    calls = []
    real = live.channel_last_seq_visible

    def counting(channel, **kwargs):
        calls.append(channel.pk)
        return real(channel, **kwargs)

    monkeypatch.setattr(live, "channel_last_seq_visible", counting)
    return calls


async def _connected(token: str) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(
        application, f"/ws/channels/lost/?token={token}", headers=[(b"host", b"testserver")]
    )
    connected, _ = await communicator.connect()
    assert connected
    return communicator


@pytest.mark.django_db(transaction=True)
def test_stream_sweep_delivers_a_message_whose_ring_was_lost(make_agent, rings, sweeps, settings):
    settings.AGENTCHAT_STREAM_SWEEP_SECONDS = 0.3
    make_agent("alice")
    _, token = make_agent("bob")
    channel = channel_create(name="lost", created_by="alice")

    async def scenario():
        communicator = await _connected(token)  # the stream's position is fixed by now
        try:
            await in_thread(lambda: message_post(channel=channel, sender="alice", title="no ring"))
            looks_before = len(sweeps)
            frame = await communicator.receive_json_from(timeout=10)
            return frame, looks_before, len(sweeps)
        finally:
            await communicator.disconnect()

    frame, looks_before, looks_after = asyncio.run(scenario())
    assert frame["message"]["title"] == "no ring"
    assert looks_after > looks_before  # found by a sweep: no ring ever came


@pytest.mark.django_db(transaction=True)
def test_stream_fills_the_gap_of_a_lost_ring_at_the_next_ring(make_agent, rings, sweeps, settings):
    settings.AGENTCHAT_STREAM_SWEEP_SECONDS = 3600  # no sweep in this test
    make_agent("alice")
    _, token = make_agent("bob")
    channel = channel_create(name="lost", created_by="alice")

    async def scenario():
        communicator = await _connected(token)
        try:
            await in_thread(lambda: message_post(channel=channel, sender="alice", title="lost"))
            rings.lost = False
            await in_thread(lambda: message_post(channel=channel, sender="alice", title="rung"))
            return [await communicator.receive_json_from(timeout=10) for _ in range(2)]
        finally:
            await communicator.disconnect()

    frames = asyncio.run(scenario())
    assert [(f["message"]["seq"], f["message"]["title"]) for f in frames] == [
        (1, "lost"),
        (2, "rung"),
    ]
    assert len(sweeps) == 1  # only the stream's opening: the ring of #2 revealed the gap


@pytest.mark.django_db(transaction=True)
def test_wait_finds_a_message_whose_ring_was_lost_at_its_deadline(make_agent, rings, counted_reads):
    make_agent("alice")
    bob, _ = make_agent("bob")
    channel = channel_create(name="lost", created_by="alice")
    reads = counted_reads.names

    async def scenario():
        waiting = asyncio.create_task(live.message_wait(channel=channel, agent=bob, timeout=1.0))
        # The wait's first read is done: the post below cannot be found by it.
        await counted_reads.parked()
        await in_thread(
            lambda: message_post(channel=channel, sender="alice", title="no ring", to="bob")
        )
        return await asyncio.wait_for(waiting, 5)

    result = json.loads(asyncio.run(scenario()).body())
    assert [m["title"] for m in result["messages"]] == ["no ring"]
    assert "timed_out" not in result
    assert result["cursor"] == 1
    assert reads == ["bob", "bob"]  # parking, then the last look found it


@pytest.mark.django_db(transaction=True)
def test_a_push_rings_the_group_when_its_transaction_commits(make_agent):
    # push_on_commit's callback, run in process by a real commit: the group's subscribers get
    # the event; a transaction that rolls back rings nobody.
    from django.db import transaction

    layer = get_channel_layer()
    group = channel_group(1)

    def commit_and_roll_back():
        with transaction.atomic():
            push_on_commit(group, {"kind": "message", "seq": 7, "title": "\u00e9"})
        try:
            with transaction.atomic():
                push_on_commit(group, {"kind": "message", "seq": 8})
                raise RuntimeError("roll back")
        except RuntimeError:
            pass

    async def scenario():
        inbox = await layer.new_channel()
        await layer.group_add(group, inbox)
        try:
            await in_thread(commit_and_roll_back)
            first = await asyncio.wait_for(layer.receive(inbox), 5)
            # A ring sent now comes next: the rolled-back push queued nothing before it.
            await layer.group_send(group, {"type": EVENT_TYPE, "event": {"seq": 9}})
            second = await asyncio.wait_for(layer.receive(inbox), 5)
            return first, second
        finally:
            await layer.group_discard(group, inbox)

    first, second = asyncio.run(scenario())
    assert first == {"type": EVENT_TYPE, "event": {"kind": "message", "seq": 7, "title": "é"}}
    assert second["event"] == {"seq": 9}


@pytest.mark.django_db(transaction=True)
def test_a_parked_wait_sweeps_and_finds_a_lost_ring_long_before_its_deadline(
    make_agent, rings, counted_reads, settings
):
    settings.AGENTCHAT_STREAM_SWEEP_SECONDS = 0.3
    make_agent("alice")
    bob, _ = make_agent("bob")
    channel = channel_create(name="lost", created_by="alice")
    reads = counted_reads.names

    async def scenario():
        waiting = asyncio.create_task(live.message_wait(channel=channel, agent=bob, timeout=600))
        await counted_reads.parked()
        await in_thread(
            lambda: message_post(channel=channel, sender="alice", title="no ring", to="bob")
        )
        return await asyncio.wait_for(waiting, 10)  # before: at the deadline, 600 s away

    result = json.loads(asyncio.run(scenario()).body())
    assert [m["title"] for m in result["messages"]] == ["no ring"]
    assert result["cursor"] == 1
    assert len(reads) >= 2  # parking, then a sweep found it
