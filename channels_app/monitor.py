"""The admin monitor's read (``GET /v1/monitor``): every registered agent's inbox fanned in.

The cursor (``envelopes.MonitorCursor``) is one number, the monitor sequence's
(``services.monitorseq``): each delivery is numbered once it has committed, in commit order
across every inbox, so a read is "the deliveries numbered above the cursor, in that order" and
the cursor's size does not grow with the number of inboxes. A read numbers what has committed
unnumbered first (a delivery whose request died before numbering it), then takes the light
rows (number, stored size) above the cursor in one query, keeps those that fit ``limit`` and
the byte budget, and loads them in one more: a page is a few queries however many inboxes
there are. Every delivery's ``cursor`` (its number) is a place to resume from, as is the
page's ``next_cursor``; an agent registered later has its deliveries numbered as they come,
so it needs no place of its own in the cursor.

Order: the monitor's numbers follow commit order, and an inbox's deliveries commit in seq_num
order, so each inbox's deliveries come in seq_num order with no gap; across inboxes the order
is the order of commits (a batch numbered together, in timestamp, inbox, seq_num order), so
timestamps across inboxes are in order except between deliveries that committed in the other
order than they were stamped (concurrent sends, by the time a transaction takes to commit).

A version-1 cursor (a vector of per-inbox positions, what servers before this numbering made)
is refused, MONITOR_CURSOR_RETIRED, with ``detail.resume_cursor``: the number before the first
delivery that vector had not passed, so re-reading from it loses nothing (it may repeat some
deliveries of inboxes the vector was further along in; their inbox and seq_num tell them).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db.models import Min, Q

from agentchat.core.models import Agent
from agentchat.core.rules.encode import json_bytes
from agentchat.core.rules.errors import AppError
from channels_app.envelopes import MonitorCursor, envelope_to_dict, rfc3339
from channels_app.inbox import DELIVERY_OVERHEAD
from channels_app.models import Delivery
from channels_app.services.monitorseq import monitor_number, monitor_tail

# A delivery's cursor in its JSON, at most (``{"v":2,"s":<18 digits>}`` in base64url, quoted).
CURSOR_OVERHEAD = 48
# Version-1 positions looked up by one query while finding where such a cursor resumes.
LEGACY_CHUNK = 200


@dataclass(frozen=True)
class MonitorItem:
    inbox: str
    seq_num: int
    cursor: str  # the cursor after this delivery (an SSE event's ``id:``)
    json: bytes  # {"inbox", "cursor", "seq_num", "timestamp", "envelope"}


@dataclass(frozen=True)
class MonitorPage:
    items: list[MonitorItem]
    next_cursor: str
    tails: dict[str, int]
    more: bool = False  # deliveries numbered beyond next_cursor were left for the next read

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


def legacy_resume(positions: dict[str, int]) -> int:
    """Where a version-1 cursor resumes: the monitor number before the first delivery it had
    not passed (an inbox's first unread one is the one at its position, from 0 for an inbox
    it does not name; within an inbox, numbers follow seq_num). Deliveries not numbered yet
    will be numbered above the tail, so the tail when none is found."""
    inboxes = monitor_tails()
    named = {inboxes[name][0]: pos for name, pos in positions.items() if name in inboxes}
    firsts: list[int] = []
    pairs = list(named.items())
    for i in range(0, len(pairs), LEGACY_CHUNK):
        match = Q()
        for agent_id, pos in pairs[i : i + LEGACY_CHUNK]:
            match |= Q(recipient_id=agent_id, seq=pos)
        firsts.append(Delivery.objects.filter(match).aggregate(m=Min("mseq"))["m"])
    others = Delivery.objects.filter(seq=0).exclude(recipient_id__in=list(named))
    firsts.append(others.aggregate(m=Min("mseq"))["m"])
    found = [first for first in firsts if first is not None]
    return min(found) - 1 if found else monitor_tail()


def legacy_refuse(cursor: MonitorCursor | None) -> None:
    """Raise MONITOR_CURSOR_RETIRED, with where to resume, for a version-1 cursor. Sync."""
    if cursor is None or cursor.legacy is None:
        return
    monitor_number(queued=True)  # what has committed has its number: the resume point counts it
    resume = MonitorCursor(legacy_resume(cursor.legacy)).encode()
    raise AppError(
        "MONITOR_CURSOR_RETIRED",
        "this monitor cursor is of version 1, which this server no longer reads: "
        "re-read from detail.resume_cursor (nothing after the old cursor is lost)",
        detail={"field": "cursor", "resume_cursor": resume},
    )


def monitor_page(
    *, cursor: MonitorCursor | None, limit: int, max_bytes: int | None = None
) -> MonitorPage:
    """The deliveries numbered beyond ``cursor`` (from the start without one; see the module).
    Raises INVALID_CURSOR (beyond the monitor's tail), MONITOR_CURSOR_RETIRED. Sync."""
    max_bytes = max_bytes or settings.AGENTCHAT_READ_MAX_BYTES
    monitor_number(queued=True)
    legacy_refuse(cursor)
    start = 0 if cursor is None else cursor.seq
    if start > monitor_tail():
        raise AppError(
            "INVALID_CURSOR",
            "the cursor is beyond the monitor's tail",
            detail={"field": "cursor"},
        )
    heads = list(
        Delivery.objects.filter(mseq__gt=start)
        .order_by("mseq")
        .values_list("pk", "mseq", "message__json_size")[: limit + 1]
    )
    chosen: list[tuple[str, int]] = []  # (delivery pk, mseq) in the monitor's order
    planned = 0
    for pk, mseq, json_size in heads[:limit]:
        size = json_size + DELIVERY_OVERHEAD + CURSOR_OVERHEAD
        if chosen and planned + size > max_bytes:
            break
        planned += size
        chosen.append((pk, int(mseq or 0)))  # never null: the filter is mseq > start
    loaded = Delivery.objects.select_related("message", "recipient").in_bulk(
        [pk for pk, _ in chosen]
    )
    items: list[MonitorItem] = []
    total, position, taken = 0, start, 0
    for pk, mseq in chosen:
        delivery = loaded.get(pk)
        encoded = MonitorCursor(mseq).encode()
        if delivery is not None:  # else deleted meanwhile (with its agent): passed
            part = json_bytes(
                {
                    "inbox": delivery.recipient.name,
                    "cursor": encoded,
                    "seq_num": delivery.seq,
                    "timestamp": rfc3339(delivery.delivered_at),
                    "envelope": envelope_to_dict(delivery, delivery.message),
                }
            )
            if items and total + len(part) > max_bytes:
                break
            items.append(MonitorItem(delivery.recipient.name, delivery.seq, encoded, part))
            total += len(part) + 1
        position, taken = mseq, taken + 1
    inboxes = monitor_tails()  # after the deliveries: each one's seq_num is below its tail
    return MonitorPage(
        items,
        MonitorCursor(position).encode(),
        {name: tail for name, (_, tail) in inboxes.items()},
        more=len(heads) > taken,
    )
