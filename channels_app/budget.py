"""A list of messages within the read's byte budget (AGENTCHAT_READ_MAX_BYTES), planned from the
size stored with each row (``Message.json_size``) before any body is loaded: search and the
pending approvals answer at most ``limit`` items and about the budget of JSON, always at least
one, and say ``more`` when either cut them."""

from __future__ import annotations

from django.conf import settings
from django.db.models import QuerySet

from channels_app.models import Message


def messages_within(
    rows: QuerySet[Message], *, limit: int, max_bytes: int | None = None, overhead: int = 0
) -> tuple[list[Message], bool]:
    """The first rows of ``rows`` (already ordered) within ``limit`` and about ``max_bytes``
    of JSON (each row counted as its ``json_size`` plus ``overhead``, what its record adds),
    at least one; and whether rows remain. One query reads keys and sizes only, one loads the
    planned rows."""
    sizes = list(rows.values_list("pk", "json_size")[: limit + 1])
    return messages_planned(sizes, limit=limit, max_bytes=max_bytes, overhead=overhead)


def messages_planned(
    sizes: list[tuple[str, int]], *, limit: int, max_bytes: int | None = None, overhead: int = 0
) -> tuple[list[Message], bool]:
    """``messages_within`` from the keys and sizes of its first ``limit + 1`` rows, in order
    (read by the caller's own query): one query loads the planned rows."""
    budget = max_bytes or settings.AGENTCHAT_READ_MAX_BYTES
    chosen: list[str] = []
    total = 0
    for pk, size in sizes[:limit]:
        total += size + overhead + 1
        if chosen and total > budget:
            break
        chosen.append(pk)
    if not chosen:
        return [], False
    loaded = {
        message.pk: message
        for message in Message.objects.filter(pk__in=chosen).select_related("channel")
    }
    # Rows gone between the two queries (a deleted channel) are left out.
    return [loaded[pk] for pk in chosen if pk in loaded], len(chosen) < len(sizes)
