"""Presence across channels as one viewer may see it: the agents page of the dashboard.

An agent's activity is recorded per channel (``Presence``: what it sent; ``Cursor``: what it
read or acked), never on the agent (``Agent.last_seen`` is the token's last use, wherever it
was used): so what it does in a members-only channel stays there. Everything here is read
through ``channels_visible_to``, the visibility rule's home, so a viewer who is no member of a
channel learns nothing of who was active in it, not even that someone was "just now".
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Max

from channels_app.models import Cursor, Presence
from channels_app.selectors import channels_visible_to

PRESENCE_ROWS = 5000


def presence_seen_by(*, viewer: str, limit: int = PRESENCE_ROWS) -> dict[str, dict[str, Any]]:
    """Per agent (by name, as messages spell it), what ``viewer`` may see of its presence in
    the channels it may see: ``last_sent_at`` and ``channel`` (its latest message or event),
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
            row.agent, {"last_sent_at": row.last_sent_at, "channel": row.channel.name}
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
