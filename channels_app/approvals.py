"""Pending approval requests (``channels_app.approval_rule`` says what decides one): the API's
GET /api/v1/approvals/, the dashboard's approvals page, its navigation count and a channel
page's "awaiting approval" links all ask here.

What is pending is decided from the approvals' two covering partial indexes alone (the
requests' ``channel, seq, ts, id, sender, json_size``; the deciding answers'), never from a
message row: a page's requests are then loaded, bodies and all, within the read's byte budget
(``channels_app.budget.messages_within``). So a list's cost is the pending requests' index
entries, not their bodies: ``limit=1`` over 300 requests of 400 KB reads one body."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Exists, OuterRef, QuerySet

from channels_app.approval_rule import REQUEST_QUERY, deciding_answers
from channels_app.budget import messages_within
from channels_app.models import Channel, Message
from channels_app.selectors import channels_visible_to

APPROVALS_MAX = 1000
APPROVAL_OVERHEAD = 256  # an approval's record beyond its request's JSON (a name at most)


def _pending(viewer: str, channel: Channel | None) -> QuerySet[Message]:
    answered = Message.objects.filter(deciding_answers(OuterRef))
    rows = Message.objects.filter(REQUEST_QUERY)
    if channel is None:
        rows = rows.filter(channel__in=channels_visible_to(viewer))
    else:
        rows = rows.filter(channel=channel)
    return rows.exclude(Exists(answered))


def approvals_pending(
    *,
    viewer: str,
    limit: int = APPROVALS_MAX,
    channel: Channel | None = None,
    max_bytes: int | None = None,
) -> tuple[list[Message], bool]:
    """The pending requests ``viewer`` may see (of ``channel``, which the caller looked up as
    ``viewer``, or of every channel), oldest first, at most ``limit`` and about ``max_bytes``
    (AGENTCHAT_READ_MAX_BYTES) of JSON, at least one; and whether more remain."""
    rows = _pending(viewer, channel).order_by("ts", "id")
    # A record wraps the request with its maintainer: {"request": …, "maintainer": …}.
    return messages_within(rows, limit=limit, max_bytes=max_bytes, overhead=APPROVAL_OVERHEAD)


def approvals_pending_among(*, channel: Channel, seqs: Iterable[int]) -> set[int]:
    """Which of ``seqs`` (messages of ``channel``, looked up by its viewer) are pending
    requests: one query, for a page of messages."""
    wanted = list(seqs)
    if not wanted:
        return set()
    rows = _pending("", channel).filter(seq__in=wanted)
    return set(rows.values_list("seq", flat=True))


def approvals_pending_count(*, viewer: str) -> int:
    """How many requests are pending for ``viewer`` (the dashboard's navigation), counted up
    to APPROVALS_MAX + 1: from the covering indexes, reading no message row."""
    return _pending(viewer, None).order_by().values("pk")[: APPROVALS_MAX + 1].count()
