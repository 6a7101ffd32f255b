"""Reads of a person's HTTP v1 direct messages, for the dashboard: the direct channels an agent
is one of the pair of (its conversations, by peer), a page of one pair's envelopes with their
deliveries, and the receipts that answer envelopes on a page.

An envelope is a ``Message`` of the pair's direct channel plus its ``Delivery``
(``services.envelopes``); a receipt is an envelope of kind ``receipt`` whose message replies
(``reply_to``) to the message it answers, so the receipts of a page's messages are the
channel's receipt messages after the page's first seq that reply to one of them: one range of
the (channel, seq) index, never the whole channel.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce

from agentchat.core.models import Agent
from channels_app.models import Channel, Cursor, Delivery, Message
from channels_app.selectors import message_relevant_filter
from channels_app.services.direct import direct_channel_get

RECEIPT = Delivery.Kind.RECEIPT


@dataclass(frozen=True)
class Conversation:
    """One pair's direct channel as ``agent`` sees it."""

    channel: Channel
    peer: str  # the other of the pair (``agent`` itself for its notes to itself)
    last_ts: datetime | None
    last_sender: str
    last_title: str
    unread: int


def direct_peer(channel: Channel, agent: str) -> str:
    """The other agent of a direct channel's pair (``agent`` for a pair of one)."""
    first, _, second = (channel.direct_pair or "").partition(" ")
    return second if first == agent else first


def direct_conversations(*, agent: Agent, limit: int) -> tuple[list[Conversation], bool]:
    """The direct channels ``agent`` is one of the pair of, newest first (by their last
    message), at most ``limit``, each with its unread count (the channel's read cursor, as the
    channel list counts it); and whether more exist. One query: per channel, its last message by
    the (channel, seq) index and a count over the index range after the cursor."""
    name = agent.name
    mine = Q(direct_pair__startswith=f"{name} ") | Q(direct_pair__endswith=f" {name}")
    last = Message.objects.filter(channel=OuterRef("pk"), seq=OuterRef("last_seq"))
    cursor = Coalesce(
        Subquery(Cursor.objects.filter(agent=agent, channel=OuterRef("pk")).values("seq")[:1]), 0
    )
    unread = (
        Message.objects.filter(channel=OuterRef("pk"), seq__gt=OuterRef("cursor"))
        .filter(message_relevant_filter(name))
        .order_by()
        .values("channel")
        .annotate(n=Count("pk"))
        .values("n")
    )
    rows = list(
        Channel.objects.filter(direct_pair__isnull=False)
        .filter(mine)
        .annotate(
            last_ts=Subquery(last.values("ts")[:1]),
            last_sender=Subquery(last.values("sender")[:1]),
            last_title=Subquery(last.values("title")[:1]),
        )
        .annotate(cursor=cursor)
        .annotate(unread=Coalesce(Subquery(unread), 0))
        .order_by("-last_ts", "name")[: limit + 1]
    )
    found = [
        Conversation(
            channel=row,
            peer=direct_peer(row, name),
            last_ts=row.last_ts,
            last_sender=row.last_sender or "",
            last_title=row.last_title or "",
            unread=row.unread,
        )
        for row in rows
        # ``startswith``/``endswith`` may match a longer name on SQLite's case folding:
        # keep only the pairs that name ``agent`` exactly.
        if name in (row.direct_pair or "").split(" ")
    ]
    return found[:limit], len(rows) > limit


def direct_peer_exists(name: str) -> bool:
    """Whether ``name`` is an agent's (someone a person may message)."""
    return Agent.objects.filter(name=name).exists()


def direct_channel_of(*, agent: str, peer: str) -> Channel | None:
    """The direct channel of ``agent`` and ``peer`` (None before their first envelope)."""
    return direct_channel_get(agent, peer)


def _with_deliveries(channel: Channel, messages: list[Message]) -> list[Message]:
    """Each message with its channel and its ``Delivery`` (one query), as ``message.delivery``
    (a message without one, which a direct channel never holds, keeps none)."""
    found = Delivery.objects.select_related("recipient").in_bulk([m.pk for m in messages])
    for message in messages:
        message.channel = channel
        delivery = found.get(message.pk)
        if delivery is not None:
            delivery.message = message
            message.delivery = delivery
    return messages


def direct_messages_before(
    *, channel: Channel, before: int | None, limit: int, conversation: str | None = None
) -> list[Message]:
    """The last ``limit`` envelopes of a direct channel before seq ``before`` (or its last
    ones), of ``conversation`` when given, ascending by seq, with their deliveries."""
    rows = Message.objects.filter(channel=channel)
    if before is not None:
        rows = rows.filter(seq__lt=before)
    if conversation is not None:
        rows = rows.filter(conversation_id=conversation)
    found = list(rows.order_by("-seq")[:limit])
    found.reverse()
    return _with_deliveries(channel, found)


def direct_messages_after(
    *, channel: Channel, after: int, limit: int, conversation: str | None = None
) -> tuple[list[Message], int, bool]:
    """The first ``limit`` envelopes after seq ``after`` (of ``conversation`` when given), with
    their deliveries; the highest seq looked at (what a live page continues after, even when
    the conversation filter left it out); whether more follow."""
    seqs = list(
        Message.objects.filter(channel=channel, seq__gt=after)
        .order_by("seq")
        .values_list("seq", "conversation_id")[: limit + 1]
    )
    more = len(seqs) > limit
    seqs = seqs[:limit]
    if not seqs:
        return [], after, False
    wanted = [seq for seq, cid in seqs if conversation is None or cid == conversation]
    rows = list(Message.objects.filter(channel=channel, seq__in=wanted).order_by("seq"))
    return _with_deliveries(channel, rows), seqs[-1][0], more


def direct_receipts_for(*, channel: Channel, seqs: Iterable[int]) -> dict[int, list[Message]]:
    """The receipts in ``channel`` that answer the messages ``seqs``, by the seq they answer, in
    seq order: the receipt messages after the first of ``seqs`` (a receipt is always later
    than what it answers) that reply to one of them."""
    wanted = set(seqs)
    if not wanted:
        return {}
    rows = Message.objects.filter(
        channel=channel, seq__gt=min(wanted), status=RECEIPT, reply_to__in=wanted
    ).order_by("seq")
    found: dict[int, list[Message]] = {}
    for row in _with_deliveries(channel, list(rows)):
        if row.reply_to is not None:
            found.setdefault(row.reply_to, []).append(row)
    return found


def receipt_fields(receipt: Message) -> dict[str, Any]:
    """A receipt's ``message.data`` (``{message_id, status, detail}``), whatever it holds."""
    data = receipt.data if isinstance(receipt.data, dict) else {}
    return {
        "status": str(data.get("status") or ""),
        "detail": data.get("detail") if isinstance(data.get("detail"), str) else None,
        "message_id": str(data.get("message_id") or ""),
    }
