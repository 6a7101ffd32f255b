"""The wait's parking discipline, in-process (``channels_app.live.message_wait``): it reads the
database when it parks and once more at its deadline, and in between only when a ring that may
concern it cannot be served from the ring itself; it never polls. Each test runs on the
in-memory layer and on Redis."""

from __future__ import annotations

import asyncio

import pytest
from channels.layers import get_channel_layer
from django.db import transaction

from agentchat.core.live.layer import channels_held
from agentchat.core.live.push import EVENT_TYPE
from channels_app import live
from channels_app.selectors import cursor_get
from channels_app.services import channel_create, channel_group, cursor_ack, message_post
from tests.conftest import in_thread
from tests.signals import layer_kind, subscribers, until  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("layer_kind")


def ring(channel, **event):
    layer = get_channel_layer()
    return layer.group_send(channel_group(channel.pk), {"type": EVENT_TYPE, "event": event})


def body(result) -> dict:
    import json

    return json.loads(result.body())


@pytest.mark.django_db(transaction=True)
def test_parked_wait_reads_once_and_ignores_rings_for_others(make_agent, counted_reads):
    make_agent("alice")
    bob, _ = make_agent("bob")
    channel = channel_create(name="park", created_by="alice")

    async def scenario():
        waiting = asyncio.create_task(live.message_wait(channel=channel, agent=bob, timeout=1.0))
        await counted_reads.parked()
        for seq in range(1, 21):  # rings that cannot concern bob: no database read
            await ring(channel, kind="message", seq=seq, **{"from": "alice"}, to=["carol"])
            await ring(channel, kind="message", seq=seq, **{"from": "bob"}, to=[])
        return await waiting

    result = asyncio.run(scenario())
    assert body(result) == {"messages": [], "cursor": 0, "more": False, "timed_out": True}
    assert counted_reads.names == ["bob", "bob"]  # parking, and the last look at the deadline


@pytest.mark.django_db(transaction=True)
def test_a_relevant_ring_is_served_from_the_ring_and_moves_the_cursor(make_agent, counted_reads):
    make_agent("alice")
    bob, _ = make_agent("bob")
    channel = channel_create(name="park", created_by="alice")
    message_post(channel=channel, sender="alice", title="not for bob", to="carol")

    async def scenario():
        waiting = asyncio.create_task(live.message_wait(channel=channel, agent=bob, timeout=10))
        await counted_reads.parked()
        await in_thread(lambda: message_post(channel=channel, sender="alice", title="hi", to="bob"))
        return await asyncio.wait_for(waiting, 5)

    result = body(asyncio.run(scenario()))
    assert [m["title"] for m in result["messages"]] == ["hi"]
    assert result["cursor"] == 2
    assert counted_reads.names == ["bob"]  # no second read: the ring carried the message
    assert cursor_get(agent=bob, channel=channel) == 2


@pytest.mark.django_db(transaction=True)
def test_a_cursor_moved_meanwhile_falls_back_to_the_database(make_agent, counted_reads):
    make_agent("alice")
    bob, _ = make_agent("bob")
    channel = channel_create(name="park", created_by="alice")

    async def scenario():
        waiting = asyncio.create_task(live.message_wait(channel=channel, agent=bob, timeout=3))
        await counted_reads.parked()

        def carol_posts_and_bob_consumes_it_elsewhere():
            # One transaction, so the ring (sent on commit) comes after the cursor moved.
            with transaction.atomic():
                message_post(channel=channel, sender="carol", title="first", to="bob")
                cursor_ack(channel=channel, agent=bob, seq=1)

        await in_thread(carol_posts_and_bob_consumes_it_elsewhere)
        return await asyncio.wait_for(waiting, 5)

    result = asyncio.run(scenario())
    # The ring for #1 could not move the cursor from 0 (it is at 1 now): the database says
    # nothing is left for bob, and the wait runs to its deadline.
    assert body(result) == {"messages": [], "cursor": 1, "more": False, "timed_out": True}
    assert counted_reads.names == ["bob", "bob", "bob"]  # parking, the fallback, the deadline


@pytest.mark.django_db(transaction=True)
def test_many_waiters_woken_by_one_ring_share_one_cursor_transaction(
    make_agent, monkeypatch, counted_reads
):
    from channels_app import services

    make_agent("alice")
    waiters = [make_agent(f"w{i}")[0] for i in range(20)]
    channel = channel_create(name="park", created_by="alice")
    batches = []
    real = services.cursors_compare_and_set

    def recording(*, moves):
        batches.append(len(moves))
        return real(moves=moves)

    monkeypatch.setattr(live, "cursors_compare_and_set", recording)
    layer = get_channel_layer()
    real_receive = layer.receive
    receiving: list[str] = []

    async def counting_receive(channel):
        # A wait starts its receive and then awaits it: once this runs, that wait is parked.
        receiving.append(channel)
        return await real_receive(channel)

    monkeypatch.setattr(layer, "receive", counting_receive)

    async def scenario():
        tasks = [
            asyncio.create_task(live.message_wait(channel=channel, agent=w, timeout=10))
            for w in waiters
        ]
        await counted_reads.parked(waits=20)
        await until(lambda: len(receiving) == 20, what="the 20 waits parked on their inboxes")
        await in_thread(lambda: message_post(channel=channel, sender="alice", title="all"))
        return await asyncio.wait_for(asyncio.gather(*tasks), 10)

    results = [body(r) for r in asyncio.run(scenario())]
    assert all([m["title"] for m in r["messages"]] == ["all"] for r in results)
    assert batches == [20]  # one ring, one transaction for the twenty
    assert all(cursor_get(agent=w, channel=channel) == 1 for w in waiters)


@pytest.mark.django_db(transaction=True)
def test_a_finished_wait_frees_its_inbox_even_with_rings_left_in_it(make_agent):
    # Rings that arrive while a wait moves its cursor stay in its inbox once it has answered.
    # Left there, the in-memory layer kept them for a minute and the Redis pub/sub layer kept
    # the inbox subscribed for good, one more per wait.
    make_agent("alice")
    bob, _ = make_agent("bob")
    channel = channel_create(name="park", created_by="alice")
    group = channel_group(channel.pk)

    async def scenario():
        layer = get_channel_layer()
        before = channels_held(layer)
        for round_ in range(5):
            waiting = asyncio.create_task(live.message_wait(channel=channel, agent=bob, timeout=10))
            await until(lambda: subscribers(group) == 1)
            for k in range(1, 4):
                seq = 3 * round_ + k
                message = {"seq": seq, "title": f"m{seq}"}
                await ring(
                    channel,
                    kind="message",
                    seq=seq,
                    to=["bob"],
                    message=message,
                    **{"from": "alice"},
                )
            result = body(await asyncio.wait_for(waiting, 5))
            assert [m["seq"] for m in result["messages"]] == [3 * round_ + 1]
            await cursor_ack_async(bob, channel, 3 * round_ + 3)
        # And a wait that times out.
        await live.message_wait(channel=channel, agent=bob, timeout=0.2)
        return before, channels_held(layer), subscribers(group)

    async def cursor_ack_async(agent, channel, seq):
        # The rings above stand for messages never stored; move the cursor past them.
        from channels_app.models import Channel

        def ack():
            Channel.objects.filter(pk=channel.pk).update(last_seq=seq)
            cursor_ack(channel=channel, agent=agent, seq=seq)

        await in_thread(ack)

    before, after, left = asyncio.run(scenario())
    assert after == before
    assert left == 0
