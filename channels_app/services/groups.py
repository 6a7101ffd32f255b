"""The channel-layer groups the writes ring: a channel's and the roster's."""

from __future__ import annotations

from agentchat.core.live.push import group_name


def channel_group(channel_id: int) -> str:
    return group_name("channel", channel_id)


# Rung on commit by the changes that no message announces: a channel made, a marker claimed.
# ``sync_folder --follow`` listens to it (beside every channel's group) on the Redis layer.
ROSTER_GROUP = group_name("roster", 0)
