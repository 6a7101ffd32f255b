"""The channels a person sees by latest activity, with their unread counts for the
dashboard's badges (the sidebar's ``nav/``, the channel list, the overview's "unread for you").

The order and the limit are the database's: every channel the viewer may see is ranked by its
latest activity (its last message's time, read at the (channel, seq) unique index; the channels
without messages after those, the newest first), and only the first ``limit`` are then counted, in a
second query: two queries whatever the number of channels, none per channel. The badges count
conversation (messages of kind ``message`` for the viewer after its cursor): audits and events
(task, lease, lock, whiteboard and status records) are left out of them; the channel page's
read bar says how many unread there are in all."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import F, OuterRef, Subquery
from django.db.models.functions import Coalesce, Substr

from agentchat.core.models import Agent
from channels_app.models import Message
from channels_app.selectors import channels_visible_to, cursor_and_unread

TOPIC_SHOWN = 200  # characters of a channel's topic read for the channel list


def channels_by_activity(
    agent: Agent, *, limit: int, offset: int = 0
) -> tuple[list[dict[str, Any]], bool]:
    """The channels ``agent`` may see, latest activity first (then by name), from ``offset``,
    at most ``limit``; each as ``name``, ``visibility``, ``topic`` (its first TOPIC_SHOWN
    characters), ``at`` (its last message's time, None without one) and ``unread``
    (conversation for ``agent``). And whether more follow."""
    last_ts = Subquery(
        Message.objects.filter(channel=OuterRef("pk"), seq=OuterRef("last_seq"))
        .order_by()
        .values("ts")[:1]
    )
    ranked = list(
        channels_visible_to(agent.name)
        .annotate(last_ts=last_ts)
        .order_by(F("last_ts").desc(nulls_last=True), "-created_at", "name")
        .values_list("pk", "last_ts")[offset : offset + limit + 1]
    )
    more = len(ranked) > limit
    ranked = ranked[:limit]
    if not ranked:
        return [], more
    cursor, unread = cursor_and_unread(agent, conversation=True)
    counted = {
        row["pk"]: row
        for row in channels_visible_to(agent.name)
        .filter(pk__in=[pk for pk, _ in ranked])
        .annotate(cursor=cursor)
        .annotate(unread=Coalesce(unread, 0), topic_head=Substr("topic", 1, TOPIC_SHOWN))
        .order_by()
        .values("pk", "name", "visibility", "topic_head", "unread")
    }
    rows = []
    for pk, at in ranked:
        row = counted.get(pk)
        if row is None:  # no longer visible between the two reads
            continue
        at_value: datetime | None = at
        rows.append(
            {
                "name": row["name"],
                "visibility": row["visibility"],
                "topic": row["topic_head"],
                "unread": row["unread"],
                "at": at_value,
            }
        )
    return rows, more


def channels_unread_for(agent: Agent, *, limit: int) -> list[dict[str, Any]]:
    """The channels ``agent`` may see with conversation for it after its cursor (``name`` and
    ``unread``, as the badges count), most unread first: one query, at most ``limit`` (the
    overview's "unread for you")."""
    cursor, unread = cursor_and_unread(agent, conversation=True)
    rows = (
        channels_visible_to(agent.name)
        .annotate(cursor=cursor)
        .annotate(unread=Coalesce(unread, 0))
        .filter(unread__gt=0)
        .order_by("-unread", "name")
        .values_list("name", "unread")[:limit]
    )
    return [{"name": name, "unread": count} for name, count in rows]
