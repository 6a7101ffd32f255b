"""The layer adapter (agentchat/core/live/layer.py), on the in-memory layer and on Redis."""

from __future__ import annotations

import asyncio

import pytest
from channels.layers import BaseChannelLayer, get_channel_layer

from agentchat.core.live.layer import channel_held, channels_held, group_channels, inbox_close
from tests.signals import layer_kind  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("layer_kind")


def test_group_channels_probes_who_is_subscribed():
    layer = get_channel_layer()

    async def scenario():
        a, b = await layer.new_channel(), await layer.new_channel()
        seen = [group_channels(layer, "agentchat.g.1")]
        await layer.group_add("agentchat.g.1", a)
        await layer.group_add("agentchat.g.1", b)
        await layer.group_add("agentchat.g.2", a)
        seen.append(group_channels(layer, "agentchat.g.1"))
        await inbox_close(layer, a, ["agentchat.g.1", "agentchat.g.2"])
        seen.append(group_channels(layer, "agentchat.g.1"))
        seen.append(group_channels(layer, "agentchat.g.2"))
        await inbox_close(layer, b, ["agentchat.g.1"])
        seen.append(group_channels(layer, "agentchat.g.1"))
        return a, b, seen

    a, b, seen = asyncio.run(scenario())
    assert seen == [set(), {a, b}, {b}, set(), set()]


def test_inbox_close_frees_an_inbox_that_still_holds_rings():
    layer = get_channel_layer()

    async def scenario():
        before = channels_held(layer)
        inbox = await layer.new_channel()
        await layer.group_add("agentchat.g.3", inbox)
        for seq in range(5):
            await layer.group_send("agentchat.g.3", {"type": "agentchat.event", "seq": seq})
        # One ring taken on either layer: the inbox is then held (Redis: subscribed by the
        # receive; memory: its queue) with four rings still on their way or queued.
        assert (await asyncio.wait_for(layer.receive(inbox), 5))["seq"] == 0
        held = channel_held(layer, inbox)
        await inbox_close(layer, inbox, ["agentchat.g.3"])
        return before, held, channel_held(layer, inbox), channels_held(layer)

    before, held, after, left = asyncio.run(scenario())
    assert held is True
    assert after is False
    assert left == before


def test_an_unknown_layer_is_not_guessed_at():
    class OtherLayer(BaseChannelLayer):
        pass

    other = OtherLayer()
    assert group_channels(other, "g") is None
    assert channel_held(other, "c") is None
    assert channels_held(other) is None
