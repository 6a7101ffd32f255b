"""The admin monitor's read (``GET /v1/monitor``): every registered agent's inbox fanned in.

The cursor (``envelopes.MonitorCursor``) is a vector of per-inbox positions, each the next
seq_num to read; an inbox it does not name is read from 0, so an agent registered after the
cursor was issued is found by the next read and read from its start. Each inbox is read as
``inbox.inbox_page`` reads one (its tail first, then below it), so what the vector passed has
committed; there is no order across inboxes, only each inbox's.

A page takes the deliveries beyond the positions in the document's presentation order
(timestamp, inbox id, seq_num), at most ``limit`` and about the byte budget. An inbox's
timestamps never go back (``services.mailbox``), so taking the first ones in that order takes
a run from each inbox's position with no gap: every delivery's ``cursor`` (the vector after
it) is a place to resume from, as is the page's ``next_cursor``. The order is found by merging
the inboxes' heads (a few light rows each: seq, timestamp, stored size), then only the chosen
deliveries are loaded.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings

from agentchat.core.models import Agent
from agentchat.core.rules.encode import json_bytes
from agentchat.core.rules.errors import AppError
from channels_app.envelopes import MonitorCursor, envelope_to_dict, rfc3339
from channels_app.inbox import DELIVERY_OVERHEAD
from channels_app.models import Delivery

# Heads read from one inbox at a time while merging.
HEADS_BATCH = 32


@dataclass(frozen=True)
class MonitorItem:
    inbox: str
    seq_num: int
    cursor: str  # the vector after this delivery (an SSE event's ``id:``)
    json: bytes  # {"inbox", "cursor", "seq_num", "timestamp", "envelope"}


@dataclass(frozen=True)
class MonitorPage:
    items: list[MonitorItem]
    next_cursor: str
    tails: dict[str, int]

    def body(self) -> bytes:
        return b'{"deliveries":[%s],"next_cursor":%s,"tails":%s}' % (
            b",".join(item.json for item in self.items),
            json_bytes(self.next_cursor),
            json_bytes(self.tails),
        )


def monitor_tails() -> dict[str, tuple[int, int]]:
    """Every registered agent's inbox: name -> (agent id, tail), by name."""
    rows = Agent.objects.order_by("name").values_list("pk", "name", "mailbox__inbox_tail")
    return {name: (pk, int(tail or 0)) for pk, name, tail in rows}


class _Heads:
    """One inbox's next deliveries as (pk: the message id, seq, timestamp, size), read a batch
    at a time."""

    def __init__(self, agent_id: int, start: int, tail: int) -> None:
        self.agent_id, self.next, self.tail = agent_id, start, tail
        self.rows: list[tuple[str, int, datetime, int]] = []

    def peek(self) -> tuple[str, int, datetime, int] | None:
        if not self.rows and self.next < self.tail:
            self.rows = list(
                Delivery.objects.filter(
                    recipient_id=self.agent_id, seq__gte=self.next, seq__lt=self.tail
                )
                .order_by("seq")
                .values_list("pk", "seq", "delivered_at", "message__json_size")[:HEADS_BATCH]
            )
            self.rows.reverse()
            if not self.rows:
                self.next = self.tail  # deleted meanwhile: nothing more here
        return self.rows[-1] if self.rows else None

    def pop(self) -> None:
        self.next = self.rows.pop()[1] + 1


def monitor_page(
    *, cursor: MonitorCursor | None, limit: int, max_bytes: int | None = None
) -> MonitorPage:
    """The deliveries of every inbox beyond ``cursor`` (from 0 without one; see the module).
    Raises INVALID_CURSOR (a position beyond its inbox's tail). Sync."""
    max_bytes = max_bytes or settings.AGENTCHAT_READ_MAX_BYTES
    inboxes = monitor_tails()
    given = cursor or MonitorCursor({})
    positions: dict[str, int] = {}
    for name, pos in given.positions.items():
        if name not in inboxes:
            continue  # no such agent (any more): nothing to read there
        if pos > inboxes[name][1]:
            raise AppError(
                "INVALID_CURSOR",
                f"the cursor's position of {name} is beyond its inbox's tail",
                detail={"field": "cursor", "inbox": name},
            )
        positions[name] = pos
    heads: dict[str, _Heads] = {}
    queue: list[tuple[datetime, str, int]] = []
    for name, (agent_id, tail) in inboxes.items():
        start = positions.get(name, 0)
        if start < tail:
            heads[name] = _Heads(agent_id, start, tail)
            head = heads[name].peek()
            if head is not None:
                queue.append((head[2], name, head[1]))
    heapq.heapify(queue)
    chosen: list[tuple[str, str]] = []  # (inbox, delivery pk) in presentation order
    planned = 0
    # Each delivery carries the vector after it: at most the given one plus a position for
    # each inbox read here.
    cursor_size = len(given.encode()) + 32 * len(heads)
    while queue and len(chosen) < limit:
        _, name, _ = queue[0]
        head = heads[name].peek()
        assert head is not None
        size = head[3] + DELIVERY_OVERHEAD + cursor_size
        if chosen and planned + size > max_bytes:
            break
        heapq.heappop(queue)
        planned += size
        chosen.append((name, head[0]))
        heads[name].pop()
        following = heads[name].peek()
        if following is not None:
            heapq.heappush(queue, (following[2], name, following[1]))
    loaded = Delivery.objects.select_related("message", "recipient").in_bulk(
        [pk for _, pk in chosen]
    )
    items: list[MonitorItem] = []
    total = 0
    for name, pk in chosen:
        delivery = loaded.get(pk)
        if delivery is None:
            break  # deleted meanwhile (its agent): the vector must not pass it
        after = {**positions, name: delivery.seq + 1}
        encoded = MonitorCursor(after).encode()
        part = json_bytes(
            {
                "inbox": name,
                "cursor": encoded,
                "seq_num": delivery.seq,
                "timestamp": rfc3339(delivery.delivered_at),
                "envelope": envelope_to_dict(delivery, delivery.message),
            }
        )
        if items and total + len(part) > max_bytes:
            break
        positions = after
        items.append(MonitorItem(name, delivery.seq, encoded, part))
        total += len(part) + 1
    return MonitorPage(
        items,
        MonitorCursor(positions).encode(),
        {name: tail for name, (_, tail) in inboxes.items()},
    )
