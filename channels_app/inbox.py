"""Reads of the HTTP v1 inboxes: a page of one agent's deliveries from a cursor, and the
envelope an agent received by its id.

The document's cursor is the next seq_num to read (not the last one seen): a page from ``c``
holds deliveries ``c, c+1, ...``, ``next_cursor`` is the last one's seq_num + 1 (the given
cursor for an empty page) and ``tail`` the next seq_num the inbox will assign. The tail is read
first and the page below it: seq_nums are commit-ordered (``services.mailbox``), so every
delivery under the tail read has committed, and a page has no hole a later read would fill.

``inbox_page`` is what the JSON replay answers and what a live follower (Server-Sent Events)
reads after each ring of the inbox's group (``services.groups.inbox_group``): each item carries
its seq_num and its bytes (the SSE ``data:``), ``item.seq_num + 1`` being the event's ``id:``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings

from agentchat.core.models import Agent
from agentchat.core.rules.encode import json_bytes
from agentchat.core.rules.errors import AppError
from channels_app.envelopes import delivery_to_dict
from channels_app.models import Delivery, Mailbox

# What a delivery's JSON holds besides its message's (the seq_num, the timestamp, the envelope's
# own keys), added to the message's stored size when a page is planned.
DELIVERY_OVERHEAD = 256


@dataclass(frozen=True)
class InboxItem:
    seq_num: int
    json: bytes  # {"seq_num", "timestamp", "envelope"}

    @property
    def next_cursor(self) -> int:
        """The cursor after this delivery (an SSE event's ``id:``)."""
        return self.seq_num + 1


@dataclass(frozen=True)
class InboxPage:
    items: list[InboxItem]
    next_cursor: int
    tail: int

    def body(self) -> bytes:
        return cursor_page_body(
            b"deliveries", (item.json for item in self.items), self.next_cursor, self.tail
        )


def cursor_page_body(key: bytes, parts: Iterable[bytes], next_cursor: int, tail: int) -> bytes:
    """``{"<key>": [...], "next_cursor": n, "tail": t}``: a page of a log read by cursor (an
    inbox's deliveries, an address book's events)."""
    return b'{"%s":[%s],"next_cursor":%d,"tail":%d}' % (key, b",".join(parts), next_cursor, tail)


def inbox_tail(agent: Agent) -> int:
    """The next seq_num ``agent``'s inbox will assign (0 before its first delivery)."""
    tail = Mailbox.objects.filter(agent=agent).values_list("inbox_tail", flat=True).first()
    return int(tail or 0)


def inbox_cursor_check(cursor: int, tail: int, *, of: str = "inbox") -> None:
    """A cursor of a log (the inbox, or ``of``: the address book) is at most its tail. Raises
    INVALID_CURSOR."""
    if cursor > tail:
        raise AppError(
            "INVALID_CURSOR",
            f"cursor {cursor} is beyond the {of}'s tail {tail}",
            detail={"cursor": cursor, "tail": tail},
        )


def inbox_page(
    *, agent: Agent, cursor: int | None, limit: int, max_bytes: int | None = None
) -> InboxPage:
    """``agent``'s deliveries from ``cursor`` (0 when None): at most ``limit`` and about
    ``max_bytes`` (AGENTCHAT_READ_MAX_BYTES) of JSON, at least one; planned from the stored
    sizes first (reading no text), then loaded. Only the owner's: the caller checks who asks.
    Raises INVALID_CURSOR (beyond the tail). Sync."""
    max_bytes = max_bytes or settings.AGENTCHAT_READ_MAX_BYTES
    tail = inbox_tail(agent)
    start = cursor or 0
    inbox_cursor_check(start, tail)
    if start == tail:
        return InboxPage([], start, tail)
    below = Delivery.objects.filter(recipient=agent, seq__gte=start, seq__lt=tail)
    planned = 0
    last = None
    for seq, size in below.order_by("seq").values_list("seq", "message__json_size")[:limit]:
        if last is not None and planned + size + DELIVERY_OVERHEAD > max_bytes:
            break
        planned += size + DELIVERY_OVERHEAD
        last = seq
    if last is None:
        return InboxPage([], start, tail)
    items: list[InboxItem] = []
    total = 0
    rows = below.filter(seq__lte=last).select_related("message").order_by("seq")
    for delivery in rows:
        delivery.recipient = agent
        part = json_bytes(delivery_to_dict(delivery, delivery.message))
        if items and total + len(part) > max_bytes:
            break  # bigger than planned: the rest is the next page's
        items.append(InboxItem(delivery.seq, part))
        total += len(part) + 1
    return InboxPage(items, items[-1].next_cursor if items else start, tail)


def delivery_received(
    *, agent: Agent, envelope_id: str, sender: str | None = None, kind: str | None = None
) -> Delivery:
    """The envelope ``envelope_id`` that ``agent`` received (from ``sender``, of ``kind``, when
    given), with its message. Raises MESSAGE_NOT_FOUND, INVALID_VALUE (without ``sender``, the
    id names envelopes of several senders: ids are unique per sender only)."""
    rows = Delivery.objects.select_related("message").filter(
        recipient=agent, envelope_id=envelope_id
    )
    if sender is not None:
        rows = rows.filter(sender=sender)
    if kind is not None:
        rows = rows.filter(kind=kind)
    found = list(rows[:2])  # two say "several senders"; no order (the id's index finds them)
    if not found:
        raise AppError(
            "MESSAGE_NOT_FOUND",
            f"no envelope {envelope_id!r} in {agent.name}'s inbox"
            + (f" from {sender}" if sender else ""),
            detail={"message_id": envelope_id},
        )
    if len(found) > 1:
        raise AppError(
            "INVALID_VALUE",
            f"envelopes of several senders carry the id {envelope_id!r}: name the sender (to)",
            detail={"field": "to", "senders": sorted({row.sender for row in found})},
        )
    found[0].recipient = agent
    return found[0]
