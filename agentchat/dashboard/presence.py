"""Presence as the dashboard shows it: the registry's (status, last heartbeat, harness, stale
flagged) beside what the viewer may see of an agent's activity, with sub-agents (``alice.critic``)
nested under their parent."""

from __future__ import annotations

from typing import Any

from agentchat.core.identity.selectors import agent_list_named
from channels_app.models import Channel
from channels_app.selectors import presence_list

# A channel page lists at most this many of the agents around it (the rest are counted).
MEMBERS_SHOWN = 200


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]


def presence_nested(people: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``people`` (each with its ``name`` and ``kind``) ordered so that every sub-agent follows
    its parent, each with its ``depth`` (how many of its ancestors are listed) and ``parent``
    (the nearest one listed, or None). A person's agent named under an agent (``carol.human``)
    is no sub-agent: it stays at the top."""
    names = {p["name"] for p in people}
    ordered = sorted(people, key=lambda p: p["name"].split("."))
    for p in ordered:
        listed = (
            [] if p.get("kind") == "human" else [a for a in _ancestors(p["name"]) if a in names]
        )
        p["depth"] = len(listed)
        p["parent"] = listed[0] if listed else None
        p["short"] = p["name"][len(listed[0]) + 1 :] if listed else p["name"]
    return ordered


def channel_members(*, channel: Channel, viewer: str) -> tuple[list[dict[str, Any]], int]:
    """Who is around ``channel`` as ``viewer`` sees it (the roster, every sender, every agent
    with a cursor there), each with its registry presence and its last activity in this
    channel, nested; and how many more there are than ``MEMBERS_SHOWN``. Raises
    CHANNEL_NOT_FOUND (``viewer`` may no longer see it)."""
    around = {item.agent: item for item in presence_list(channel=channel, viewer=viewer)}
    names = sorted({*around, *channel.members}, key=lambda n: n.split("."))
    hidden = max(0, len(names) - MEMBERS_SHOWN)
    names = names[:MEMBERS_SHOWN]
    known = agent_list_named(names)
    people = []
    for name in names:
        item: dict[str, Any] = dict(
            known.get(name, {"name": name, "kind": "agent", "unregistered": True})
        )
        seen = around.get(name)
        times = []
        if seen is not None:
            if seen.presence is not None and seen.presence.last_sent_at is not None:
                times.append(seen.presence.last_sent_at)
            if seen.read_at is not None:
                times.append(seen.read_at)
        item["last_active_at"] = max(times) if times else None
        item["member"] = name in channel.members
        people.append(item)
    return presence_nested(people), hidden
