"""``live.message_stream``: the stream's plain async interface, without ASGI.
The websocket endpoints are thin layers over it."""

from __future__ import annotations

import asyncio

import pytest
from channels.layers import get_channel_layer

from agentchat.core.identity.revocation import REVOCATIONS_GROUP
from agentchat.core.identity.services import token_revoke
from agentchat.core.live.layer import channels_held, group_channels
from agentchat.core.models import ApiToken
from agentchat.core.rules.errors import AppError
from channels_app import live
from channels_app.services import channel_create, channel_group, channel_update, message_post
from tests.conftest import in_thread
from tests.signals import layer_kind, subscribers  # noqa: F401  (fixture)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("layer_kind")]


@pytest.fixture
def room(make_agent):
    make_agent("alice")
    bob, _ = make_agent("bob")
    channel = channel_create(name="room", created_by="alice")
    for n in (1, 2, 3):
        message_post(channel=channel, sender="alice", title=f"old {n}")
    return channel, bob, ApiToken.objects.get(agent=bob)


def held() -> set[str]:
    """What the layer holds besides the process's one revocation watcher."""
    layer = get_channel_layer()
    return channels_held(layer) - (group_channels(layer, REVOCATIONS_GROUP) or set())


def post(channel, title: str):
    return in_thread(lambda: message_post(channel=channel, sender="alice", title=title))


def test_it_replays_after_since_then_follows_live_posts_and_frees_its_inbox(room):
    channel, _, token = room

    async def scenario():
        before = held()
        titles = []
        async with live.message_stream(
            channel=channel, viewer="bob", since=1, token_id=token.pk
        ) as stream:
            assert subscribers(channel_group(channel.pk)) == 1  # subscribed on entry
            await post(channel, "new 4")  # posted after entry: streamed
            async for message in stream:
                titles.append(message["title"])
                if message["seq"] == 4:
                    break
        return titles, before, held(), subscribers(channel_group(channel.pk))

    titles, before, after, left = asyncio.run(scenario())
    assert titles == ["old 2", "old 3", "new 4"]
    assert left == 0
    assert after == before


def test_from_now_on_when_since_is_none(room):
    channel, _, _ = room

    async def scenario():
        async with live.message_stream(channel=channel, viewer="bob", since=None) as stream:
            await post(channel, "new 4")
            return (await anext(stream))["title"]

    assert asyncio.run(scenario()) == "new 4"


def test_a_revoked_token_ends_the_stream_with_auth_invalid(room, settings):
    settings.AGENTCHAT_REVOCATION_CHECK_SECONDS = 3600  # only the ring ends it
    channel, _, token = room

    async def scenario():
        async with live.message_stream(
            channel=channel, viewer="bob", since=3, token_id=token.pk
        ) as stream:
            iterating = asyncio.ensure_future(anext(stream))  # parked: nothing after 3
            await in_thread(lambda: token_revoke(token=token))
            await asyncio.wait_for(stream.ended.wait(), 10)
            with pytest.raises(AppError) as info:
                await asyncio.wait_for(iterating, 10)
            return info.value.code

    assert asyncio.run(scenario()) == "AUTH_INVALID"


def test_a_viewer_who_loses_sight_of_the_channel_gets_channel_not_found(room):
    channel, _, _ = room

    async def scenario():
        async with live.message_stream(channel=channel, viewer="bob", since=3) as stream:
            await in_thread(
                lambda: channel_update(
                    channel=channel, actor="alice", visibility="members", members=["alice"]
                )
            )
            with pytest.raises(AppError) as info:
                async for _ in stream:
                    pass
            return info.value.code

    assert asyncio.run(scenario()) == "CHANNEL_NOT_FOUND"


def test_entering_for_a_channel_the_viewer_cannot_see_subscribes_nothing(room):
    channel, _, _ = room
    channel_update(channel=channel, actor="alice", visibility="members", members=["alice"])

    async def scenario():
        layer = get_channel_layer()
        before = channels_held(layer)
        with pytest.raises(AppError):
            async with live.message_stream(channel=channel, viewer="bob", since=0):
                pass
        return before, channels_held(layer)

    before, after = asyncio.run(scenario())
    assert after == before


def test_tasks_end_waits_for_every_task_then_passes_the_callers_cancellation_on():
    """A caller cancelled while ``tasks_end`` waits still sees every task end (nothing is
    left running), then stops as it was asked to: the cancellation is not swallowed."""
    from channels_app.live import tasks_end

    async def scenario():
        cleaning = asyncio.Event()
        released = asyncio.Event()
        order: list[str] = []

        async def slow_to_end():
            try:
                await asyncio.Event().wait()
            finally:
                cleaning.set()  # tasks_end cancelled it: the caller waits for it now
                await asyncio.shield(released.wait())  # its clean-up takes a while
                order.append("task ended")

        task = asyncio.ensure_future(slow_to_end())

        async def caller():
            try:
                await tasks_end([task])
                order.append("went on")  # must not happen: it was cancelled
            finally:
                order.append("caller stopped")

        waiting = asyncio.ensure_future(caller())
        await cleaning.wait()
        waiting.cancel()
        # Both wake-ups are due in this order: a caller that stopped at its cancellation would
        # be done before the task's clean-up ran.
        released.set()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        return order

    assert asyncio.run(scenario()) == ["task ended", "caller stopped"]
