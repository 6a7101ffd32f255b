"""Presence across channels as one viewer may see it: the agents page of the dashboard, and
the agent registry's list (``registry_page``, ``GET agents/``).

An agent's activity is recorded per channel (``Presence``: what it sent; ``Cursor``: what it
read or acked), never on the agent (``Agent.last_seen`` is the token's last use, wherever it
was used): so what it does in a members-only channel stays there. Everything here is read
through ``channels_visible_to``, the visibility rule's home, so a viewer who is no member of a
channel learns nothing of who was active in it, not even that someone was "just now".
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Max, QuerySet

from agentchat.core.http.pages import LIST_LIMIT_MAX, ListPage, PageWindow, list_page, size_of
from agentchat.core.identity.registry import registration_record
from agentchat.core.models import Agent, Registration
from agentchat.core.rules import clock
from channels_app.models import Channel, Cursor, Presence
from channels_app.selectors import channels_visible_to

PRESENCE_ROWS = 5000


def presence_seen_by(*, viewer: str, limit: int = PRESENCE_ROWS) -> dict[str, dict[str, Any]]:
    """Per agent (by name, as messages spell it), what ``viewer`` may see of its presence in
    the channels it may see: ``last_sent_at``, ``channel`` and ``last_seq`` (its latest message
    or event),
    ``status``, ``detail``, ``status_channel`` (its latest status event), ``primitives`` and
    ``harness`` (its latest capability event), ``last_read_at`` (its latest read or ack) and
    ``last_active_at`` (the later of the two). An agent active only where ``viewer`` may not
    look is absent. At most ``limit`` presence rows and cursors are read."""
    visible = channels_visible_to(viewer)
    rows = (
        Presence.objects.filter(channel__in=visible)
        .select_related("channel")
        .order_by("-last_sent_at")[:limit]
    )
    seen: dict[str, dict[str, Any]] = {}
    for row in rows:
        item = seen.setdefault(
            row.agent,
            {
                "last_sent_at": row.last_sent_at,
                "channel": row.channel.name,
                "last_seq": row.last_seq,
            },
        )
        if "status" not in item and row.status:
            item.update(status=row.status, detail=row.detail, status_channel=row.channel.name)
        if "primitives" not in item and row.primitives is not None:
            item.update(primitives=row.primitives, harness=row.harness)
    reads = (
        Cursor.objects.filter(channel__in=visible)
        .values("agent__name")
        .annotate(at=Max("updated_at"))
        .order_by("-at")[:limit]
    )
    for read in reads:
        seen.setdefault(read["agent__name"], {})["last_read_at"] = read["at"]
    for item in seen.values():
        times: list[datetime] = [
            at for at in (item.get("last_sent_at"), item.get("last_read_at")) if at is not None
        ]
        item["last_active_at"] = max(times)
    return seen


def registry_page(*, viewer: str, window: PageWindow, session: Channel | None = None) -> ListPage:
    """A page of the agent registry (EP-0118) as ``viewer`` may see it: every agent by name
    (those of ``session`` only, when given), with its registration's status, last heartbeat,
    harness and substrate (``registration_record``; status None for an agent that never
    registered). A registration's ``session`` shows only when ``viewer`` may see that channel.
    Paged like every list (``agentchat.core.http.pages``)."""
    rows = Agent.objects.all()
    if session is not None:
        rows = rows.filter(registration__session=session.name)
    now = clock.now()
    visible: set[str] = set()

    def load(planned: QuerySet[Agent]) -> list[Agent]:
        agents = list(planned.select_related("registration"))
        sessions = {
            agent.registration.session
            for agent in agents
            if _registration(agent) is not None and agent.registration.session
        }
        visible.update(
            channels_visible_to(viewer).filter(name__in=sessions).values_list("name", flat=True)
        )
        return agents

    def render(agent: Agent) -> dict[str, Any]:
        record = registration_record(agent, _registration(agent), now=now)
        if record["session"] is not None and record["session"] not in visible:
            record["session"] = None
        return record

    return list_page(
        rows,
        key="name",
        size=size_of("registration__note"),
        window=window,
        load=load,
        render=render,
        plan_first=LIST_LIMIT_MAX + 1,
    )


def _registration(agent: Agent) -> Registration | None:
    try:
        return agent.registration
    except Registration.DoesNotExist:
        return None
