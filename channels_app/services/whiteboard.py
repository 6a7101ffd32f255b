"""EP-0118's whiteboard, written: ``whiteboard_write`` and ``whiteboard_delete``, each with its
audit message in the same transaction. Reads and rules are in ``channels_app.whiteboard``.

Concurrent writers of a channel's whiteboard are serialized by its audit message: the audit
allocates the channel's next seq first (PostgreSQL: the channel row's lock; SQLite: the write
lock), and only then is the entry read and written. So the last write to commit wins, whole:
its value, ``updated_by``, ``updated_at`` (its audit message's ts, taken under that lock, so
never earlier than the write it replaced) and ``audit_seq`` belong to the same write, and the
caps (keys, bytes) are checked against what is committed.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Sum

from agentchat.core.db.transactions import write_atomic
from agentchat.core.rules.errors import AppError
from channels_app.models import Channel, WhiteboardEntry
from channels_app.selectors import channel_last_seq_visible
from channels_app.services.events import audit_post
from channels_app.whiteboard import (
    BYTES_MAX,
    KEYS_MAX,
    key_check,
    key_not_found,
    value_text,
)

EVENT_WRITTEN = "whiteboard.written"
EVENT_DELETED = "whiteboard.deleted"


def _full(why: str, **detail: Any) -> AppError:
    return AppError(
        "WHITEBOARD_FULL",
        why,
        detail={**detail, "keys_max": KEYS_MAX, "bytes_max": BYTES_MAX},
    )


@write_atomic()
def whiteboard_write(
    *, channel: Channel, key: str, value: Any, actor: str
) -> tuple[WhiteboardEntry, bool]:
    """IASP ``write_whiteboard(key, value)``: set ``key`` to ``value`` (any JSON) as
    ``actor``, with a broadcast ``whiteboard.written`` audit message from ``actor`` (payload:
    event, channel, key, ``value_json``: the value as compact JSON text, its size; the
    message's sender and ts are the entry's ``updated_by`` and ``updated_at``). Returns
    (entry, created). Raises INVALID_KEY, INVALID_VALUE, INVALID_TYPE, JSON_TOO_DEEP,
    FIELD_TOO_LARGE, CHANNEL_NOT_FOUND, WHITEBOARD_FULL."""
    key_check(key)
    text = value_text(value)
    size = len(text.encode("utf-8"))
    channel_last_seq_visible(channel, viewer=actor)
    audit = audit_post(
        channel=channel,
        actor=actor,
        event=EVENT_WRITTEN,
        subject=key,
        payload={
            "event": EVENT_WRITTEN,
            "channel": channel.name,
            "key": key,
            "value_json": text,
            "size": size,
        },
    )
    # From here on this transaction holds the channel's seq: no other write of its whiteboard
    # runs until it ends.
    others = (
        WhiteboardEntry.objects.filter(channel=channel)
        .exclude(key=key)
        .aggregate(count=Count("pk"), total=Sum("size"))
    )
    current = WhiteboardEntry.objects.filter(channel=channel, key=key).first()
    if current is None and others["count"] >= KEYS_MAX:
        raise _full(f"the whiteboard of {channel.name!r} holds {KEYS_MAX} keys", key=key)
    if (others["total"] or 0) + size > BYTES_MAX:
        raise _full(
            f"the whiteboard of {channel.name!r} would hold over {BYTES_MAX} bytes of values",
            key=key,
        )
    fields = {
        "value_json": text,
        "size": size,
        "updated_by": actor,
        "updated_at": audit.ts,
        "audit_seq": audit.seq,
    }
    if current is None:
        return WhiteboardEntry.objects.create(channel=channel, key=key, **fields), True
    for name, field_value in fields.items():
        setattr(current, name, field_value)
    current.save(update_fields=list(fields))
    return current, False


@write_atomic()
def whiteboard_delete(*, channel: Channel, key: str, actor: str) -> WhiteboardEntry:
    """Remove ``key`` as ``actor``, with a broadcast ``whiteboard.deleted`` audit message;
    returns the entry as it was. Raises INVALID_KEY, CHANNEL_NOT_FOUND, KEY_NOT_FOUND (nothing
    is posted)."""
    key_check(key)
    channel_last_seq_visible(channel, viewer=actor)
    audit_post(
        channel=channel,
        actor=actor,
        event=EVENT_DELETED,
        subject=key,
        payload={"event": EVENT_DELETED, "channel": channel.name, "key": key},
    )
    current = WhiteboardEntry.objects.filter(channel=channel, key=key).first()
    if current is None:
        raise key_not_found(channel, key)  # undoes the audit with the transaction
    current.delete()
    return current
