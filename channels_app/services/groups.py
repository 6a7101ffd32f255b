"""The channel-layer groups the writes ring: a channel's, the roster's, an inbox's and the
monitor's."""

from __future__ import annotations

from agentchat.core.live.push import group_name


def channel_group(channel_id: int) -> str:
    return group_name("channel", channel_id)


# Rung on commit by the changes that no message announces: a channel made, a marker claimed.
# ``sync_folder --follow`` listens to it (beside every channel's group) on the Redis layer.
ROSTER_GROUP = group_name("roster", 0)


def inbox_group(agent_id: int) -> str:
    """Rung on commit by each delivery to the agent's HTTP v1 inbox (``services.envelopes``):
    ``{"kind": "delivery", "inbox": <agent id>, "seq": <seq_num>}``. A follower reads the inbox
    back from its cursor."""
    return group_name("inbox", agent_id)


# Rung on commit by every delivery to any inbox, with the inbox's name beside its id: the admin
# monitor's live follow.
MONITOR_GROUP = group_name("monitor", 0)
