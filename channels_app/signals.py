"""EP-0118 signals, read: ``read_signals`` as a pure query, and the signal's record.

A signal is a message of the channel (the EP's session) with a type (``Message.signal_type``,
one of ``services.SIGNAL_TYPES``), posted by ``services.signal_post``: it has a seq, shows in
the channel's reads, peeks, waits, streams, dashboard and synced folder like any message, and
is relevant to its recipients by the one rule (``agentchat.relevance``). What makes
it a signal is that each agent also keeps a read marker per signal (``SignalRead``, written by
``services.signal_ack``), beside its cursor: reading signals moves nothing, acknowledging some
marks exactly those, for that agent only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from django.db.models import Exists, OuterRef, QuerySet, Subquery

from agentchat.core.models import Agent
from agentchat.core.rules.encode import json_bytes
from agentchat.core.rules.records import ts_micros
from channels_app.models import Channel, Message, SignalRead
from channels_app.records import message_ts
from channels_app.selectors import channel_last_seq_visible, message_relevant_filter, sizes_within

SIGNALS_DEFAULT = 100
SIGNALS_MAX = 1000
BROADCAST = "*"  # the EP's recipient of a broadcast


def signal_to(message: Message) -> str:
    """The signal's recipient as the EP spells it: ``*`` for a broadcast, else the name (the
    names joined by commas for an imported signal that had several)."""
    return ",".join(message.to) if message.to else BROADCAST


def signal_to_dict(message: Message, *, read_at: datetime | None) -> dict[str, Any]:
    """A signal as ``read_signals`` lists it (the EP's ``Signal``: id, sequence, timestamp,
    sender, recipient, type, content), in this API's spellings; ``read_at`` is when the
    reader acknowledged it (null: unread)."""
    return {
        "id": message.id,
        "seq": message.seq,
        "channel": message.channel.name,
        "ts": message_ts(message),
        "from": message.sender,
        "sender_kind": message.sender_kind,
        "to": signal_to(message),
        "type": message.signal_type,
        "content": message.body,
        "reply_to": message.reply_to,
        "read_at": ts_micros(read_at) if read_at is not None else None,
    }


def signals_relevant(*, channel: Channel, name: str) -> QuerySet[Message]:
    """The channel's signals relevant to ``name`` (to it, one of its sub-agents or everyone;
    not its own), through the partial index of signals."""
    return (
        Message.objects.filter(channel=channel)
        .exclude(signal_type="")
        .filter(message_relevant_filter(name))
    )


class SignalPage(NamedTuple):
    parts: list[bytes]  # each signal's JSON, ascending by seq
    more: bool  # signals were left out after the last one
    next: int | None  # with more: the last one's seq, the next page's ``after``

    def body(self) -> bytes:
        return b"".join(
            (
                b'{"signals":[',
                b",".join(self.parts),
                b'],"more":',
                json_bytes(self.more),
                b',"next":',
                b"null" if self.next is None else json_bytes(self.next),
                b"}",
            )
        )


def signal_list(
    *,
    channel: Channel,
    agent: Agent,
    unread_only: bool = True,
    after: int | None = None,
    limit: int = SIGNALS_DEFAULT,
    max_bytes: int,
) -> SignalPage:
    """``read_signals``: the signals relevant to ``agent`` (to it or a sub-agent of it, or
    broadcast; IASP §5 "directed to the specified agent_id or its dot-notation subagent
    namespaces"), ascending by seq, after ``after``; only those it has not acknowledged with
    ``unread_only``. At most ``limit`` of them and about ``max_bytes`` of JSON (always at
    least one), planned from the sizes stored with the rows; ``more`` and ``next`` page on.

    A pure query: it writes nothing (no cursor, no read marker), so reading twice returns the
    same. Raises CHANNEL_NOT_FOUND (``agent`` may no longer see the channel)."""
    channel_last_seq_visible(channel, viewer=agent.name)
    reads = SignalRead.objects.filter(agent=agent, message=OuterRef("pk"))
    rows = signals_relevant(channel=channel, name=agent.name)
    if unread_only:
        rows = rows.filter(~Exists(reads))
    if after is not None:
        rows = rows.filter(seq__gt=after)
    rows = rows.order_by("seq")
    sizes = list(rows.values_list("seq", "json_size")[: limit + 1])
    if not sizes:
        return SignalPage([], False, None)
    taken = sizes_within(sizes[:limit], max_bytes)
    last_planned = sizes[taken - 1][0]
    loaded = rows.filter(seq__lte=last_planned).annotate(
        read_at=Subquery(reads.values("read_at")[:1])
    )
    parts: list[bytes] = []
    size_sent = 0
    more = taken < len(sizes)
    last = None
    for message in loaded:
        message.channel = channel
        part = json_bytes(signal_to_dict(message, read_at=message.read_at))
        if parts and size_sent + len(part) > max_bytes:
            more = True
            break
        parts.append(part)
        size_sent += len(part) + 1
        last = message.seq
    return SignalPage(parts, more, last if more else None)
