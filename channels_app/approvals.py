"""Pending approval requests (``channels_app.approval_rule`` says what decides one): the API's
GET /api/v1/approvals/, the dashboard's approvals page, its navigation count and a channel
page's "awaiting approval" links all ask here.

What is pending is decided from the approvals' two covering partial indexes alone (the
requests' ``channel, seq, ts, id, sender, json_size``; the deciding answers'), never from a
message row: a page's requests are then loaded, bodies and all, within the read's byte budget
(``channels_app.budget.messages_within``). So a list's cost is the pending requests' index
entries, not their bodies: ``limit=1`` over 300 requests of 400 KB reads one body."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from django.db.models import Exists, OuterRef, Q, QuerySet

from agentchat.core.rules.errors import AppError
from channels_app.approval_rule import REQUEST_QUERY, deciding_answers
from channels_app.budget import messages_within
from channels_app.models import Channel, Message
from channels_app.selectors import channels_visible_to

APPROVALS_MAX = 1000
APPROVAL_OVERHEAD = 256  # an approval's record beyond its request's JSON (a name at most)

# A page's cursor (``next``, given back as ``?after=``): the last request's ts in microseconds
# since the epoch and its id, ``<micros>~<id>``; the list's order is (ts, id).
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
CURSOR_PATTERN = r"^(-?[0-9]{1,18})~([A-Za-z0-9._:-]{1,128})$"
_CURSOR = re.compile(CURSOR_PATTERN)
CURSOR_MAX = 1 + 18 + 1 + 128


def approval_cursor(request: Message) -> str:
    """The cursor that continues the list after ``request``."""
    return f"{(request.ts - _EPOCH) // timedelta(microseconds=1)}~{request.pk}"


def cursor_parse(raw: str) -> tuple[datetime, str]:
    """A cursor's (ts, id). Raises INVALID_VALUE."""
    found = _CURSOR.fullmatch(raw)
    try:
        if found is not None:
            return _EPOCH + timedelta(microseconds=int(found[1])), found[2]
    except OverflowError:
        pass  # beyond the years a datetime holds
    raise AppError(
        "INVALID_VALUE", "after must be a previous page's next", detail={"field": "after"}
    )


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
    after: str | None = None,
) -> tuple[list[Message], bool]:
    """The pending requests ``viewer`` may see (of ``channel``, which the caller looked up as
    ``viewer``, or of every channel), oldest first, after the cursor ``after`` (a previous
    page's ``approval_cursor``; INVALID_VALUE when malformed), at most ``limit`` and about
    ``max_bytes`` (AGENTCHAT_READ_MAX_BYTES) of JSON, at least one; and whether more remain."""
    rows = _pending(viewer, channel).order_by("ts", "id")
    if after:
        ts, pk = cursor_parse(after)
        rows = rows.filter(Q(ts__gt=ts) | Q(ts=ts, id__gt=pk))
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
