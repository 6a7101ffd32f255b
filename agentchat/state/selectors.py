"""Reads of the state summary: the summary now, and the latest compaction's snapshot."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from agentchat.core.rules.errors import AppError
from agentchat.models import StateSnapshot
from agentchat.state.checkpoints import fold_caught_up
from agentchat.state.messages import MessageFold, message_views
from agentchat.state.summary import summary_build
from channels_app.models import Channel


@contextmanager
def read_snapshot() -> Iterator[None]:
    """One consistent view of the database for a summary's several reads: on PostgreSQL a
    read-only REPEATABLE READ transaction (unless one is already open). SQLite's write
    transactions take the write lock at once, so there the reads run as they are (its message
    stream is a single statement, and so a single snapshot)."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield


def messages_folded(channel: Channel, *, strict: bool = False) -> MessageFold:
    """The fold of every message of the channel: the furthest stored fold (a checkpoint, a
    compaction's), then the messages posted since (``checkpoints.fold_caught_up``). Raises
    STATE_MALFORMED_SOURCE in strict mode for the first message the reference could not get
    through, WORK_BUDGET_EXCEEDED in a heavy request."""
    fold, _ = fold_caught_up(channel)
    if strict:
        fold.strict_check()
    return fold


def state_summary(
    *, channel: Channel, strict: bool = False, now: datetime | None = None
) -> dict[str, Any]:
    """The channel's state summary (``agentchat.state.summary``). Raises
    STATE_MALFORMED_SOURCE in strict mode (``messages_folded``)."""
    # The history is folded first, outside the read snapshot (its checkpoints are writes);
    # within it only the messages posted meanwhile.
    fold = messages_folded(channel)
    with read_snapshot():
        fold.feed_all(message_views(channel, after=fold.last_seq))
        if strict:
            fold.strict_check()
        return summary_build(channel=channel, fold=fold, generated_at=now or timezone.now())


def latest_snapshot(channel: Channel) -> StateSnapshot | None:
    """The channel's last compaction (the synced folder's ``state.md``), or None."""
    return StateSnapshot.objects.filter(channel=channel).order_by("-id").first()


def snapshot_markdown_latest(channel: Channel) -> str | None:
    """The markdown of the channel's last compaction (the synced folder's ``state.md``), or
    None; only that column is read."""
    return (
        StateSnapshot.objects.filter(channel=channel)
        .order_by("-id")
        .values_list("markdown", flat=True)
        .first()
    )


def snapshot_get(channel: Channel) -> StateSnapshot:
    """``latest_snapshot``, raising STATE_RECORD_NOT_FOUND when the channel was never
    compacted."""
    snapshot = latest_snapshot(channel)
    if snapshot is None:
        raise AppError(
            "STATE_RECORD_NOT_FOUND",
            f"channel {channel.name!r} has no compacted state",
            detail={"channel": channel.name},
        )
    return snapshot
