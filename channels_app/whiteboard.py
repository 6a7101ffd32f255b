"""EP-0118's whiteboard (its ``session_state``), read: a channel's key/value entries, their
rules and their record. Written by ``services.whiteboard_write`` and ``whiteboard_delete``.

Keys are case-sensitive record ids (``[A-Za-z0-9][A-Za-z0-9._-]*``, at most 128 characters:
one path segment of ``channels/<name>/whiteboard/<key>/``); a value is any JSON of at most
64 KiB as compact UTF-8 JSON, kept as that text. A channel holds at most 256 keys and 1 MiB of
values, so that a whole whiteboard fits one answer (the state summary shows it whole). Who may
see the channel sees its whiteboard, no one else (``selectors.channel_get``).
"""

from __future__ import annotations

import json
from typing import Any

from django.db.models import QuerySet

from agentchat.core.http.pages import ListPage, PageWindow, list_page, size_of
from agentchat.core.rules.encode import json_bytes
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import record_id_check
from agentchat.core.rules.records import ts_micros
from agentchat.core.rules.validation import json_value_check
from channels_app.models import Channel, WhiteboardEntry
from channels_app.selectors import channel_last_seq_visible

KEY_MAX = 128
VALUE_MAX_BYTES = 64 * 1024
KEYS_MAX = 256  # entries per channel
BYTES_MAX = 1024 * 1024  # value bytes per channel
ENTRY_SIZE = size_of("value_json")


def key_check(key: object) -> str:
    """Raises INVALID_KEY."""
    return record_id_check(
        key, what="a whiteboard key", code="INVALID_KEY", max_length=KEY_MAX, field="key"
    )


def value_text(value: Any) -> str:
    """The value as the compact JSON text stored (keys in the order given). Raises
    INVALID_VALUE, INVALID_TYPE, JSON_TOO_DEEP (``json_value_check``), FIELD_TOO_LARGE (over
    VALUE_MAX_BYTES)."""
    json_value_check(value, field="value")
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    if len(text.encode("utf-8")) > VALUE_MAX_BYTES:
        raise AppError(
            "FIELD_TOO_LARGE",
            f"value is over {VALUE_MAX_BYTES} bytes as compact UTF-8 JSON",
            detail={"field": "value", "limit": VALUE_MAX_BYTES},
        )
    return text


def entry_to_dict(entry: WhiteboardEntry) -> dict[str, Any]:
    return {
        "key": entry.key,
        "value": json.loads(entry.value_json),
        "updated_by": entry.updated_by,
        "updated_at": ts_micros(entry.updated_at),
        "audit_seq": entry.audit_seq,
    }


def entry_get(*, channel: Channel, key: str, viewer: str) -> WhiteboardEntry:
    """Raises INVALID_KEY, KEY_NOT_FOUND, CHANNEL_NOT_FOUND (``viewer`` may no longer see the
    channel)."""
    key_check(key)
    channel_last_seq_visible(channel, viewer=viewer)
    entry = WhiteboardEntry.objects.filter(channel=channel, key=key).first()
    if entry is None:
        raise key_not_found(channel, key)
    return entry


def key_not_found(channel: Channel, key: str) -> AppError:
    return AppError(
        "KEY_NOT_FOUND",
        f"no whiteboard entry {key!r} in channel {channel.name!r}",
        detail={"key": key},
    )


def entries_of(channel: Channel) -> QuerySet[WhiteboardEntry]:
    return WhiteboardEntry.objects.filter(channel=channel).order_by("key")


def entry_list(*, channel: Channel, viewer: str, window: PageWindow) -> ListPage:
    """A page of the channel's entries by key (``agentchat.core.http.pages``). Raises
    CHANNEL_NOT_FOUND."""
    channel_last_seq_visible(channel, viewer=viewer)
    return list_page(
        entries_of(channel),
        key="key",
        size=ENTRY_SIZE,
        window=window,
        load=lambda rows: rows,
        render=entry_to_dict,
    )


def entries_all(channel: Channel) -> list[dict[str, Any]]:
    """Every entry of the channel, by key (at most KEYS_MAX and BYTES_MAX of values): the state
    summary's ``whiteboard``."""
    return [entry_to_dict(entry) for entry in entries_of(channel)]


def after_key_check(value: str) -> None:
    """``?after=`` of the list: a key. Raises INVALID_KEY."""
    key_check(value)


def entry_json(entry: WhiteboardEntry) -> bytes:
    return json_bytes(entry_to_dict(entry))
