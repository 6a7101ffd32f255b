"""The record shapes of channels and messages, and the audit message's text: pure functions,
one definition for the API, the live streams and (with the sync issue) the folder renderer.

A message's ``ts`` and a channel's ``created_at`` are spelled as the reference writes them, to
the second in UTC (``2026-11-29T15:46:20+00:00``), or as an imported file spelled them; the API
and the synced folder give the same string (``message_ts``, ``channel_created``).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from agentchat.core.rules.encode import json_bytes
from agentchat.core.rules.records import ts_micros, ts_seconds, ts_spelled
from channels_app.models import Channel, Message, Presence


def message_ts(message: Message) -> str:
    """The message's time as the folder's ``ts:`` and the API spell it."""
    return message.ts_text or ts_seconds(message.ts)


def channel_created(channel: Channel) -> str | None:
    """The channel's creation time as ``_meta.json``'s ``created`` and the API spell it."""
    if channel.created_at is None:
        return None
    return ts_spelled(channel.created_at, channel.spellings, "created", ts_seconds)


def channel_to_dict(channel: Channel) -> dict[str, Any]:
    return {
        "name": channel.name,
        "topic": channel.topic,
        "members": list(channel.members),
        "created_at": channel_created(channel),
        "created_by": channel.created_by,
        "last_seq": channel.last_seq,
        "visibility": channel.visibility,
    }


def message_to_dict(message: Message) -> dict[str, Any]:
    """A message as the API spells it. ``"imported": true`` follows ``sender_kind`` only on a
    message imported from a folder, and ``"type"`` (its EP-0118 signal type) ends a signal's
    record only (every other message's bytes stay as they were)."""
    record: dict[str, Any] = {
        "seq": message.seq,
        "id": message.id,
        "channel": message.channel.name,
        "from": message.sender,
        "sender_kind": message.sender_kind,
    }
    if message.imported:
        record["imported"] = True
    record.update(
        {
            "to": list(message.to),
            "reply_to": message.reply_to,
            "status": message.status,
            "title": message.title,
            "body": message.body,
            "ts": message_ts(message),
            "kind": message.kind,
            "conversation_id": message.conversation_id or None,
            "correlation_id": message.correlation_id or None,
            "data": message.data,
            "content_type": message.content_type or None,
            "metadata": message.metadata,
        }
    )
    if message.signal_type:
        record["type"] = message.signal_type
    return record


def message_json(message: Message) -> bytes:
    """A message as the API spells it, in JSON bytes (raises on what JSON cannot carry). A
    message is immutable: the bytes are kept on the instance once made."""
    rendered = getattr(message, "_json", None)
    if rendered is None:
        rendered = message._json = json_bytes(message_to_dict(message))
    return rendered


def message_json_size(message: Message) -> int:
    """What ``Message.json_size`` stores: the bytes of ``message_json``. Whatever makes a
    message row sets it (a row at 0 would be planned as free and loaded in bulk)."""
    return len(message_json(message))


def message_dict_json(data: dict[str, Any]) -> bytes:
    return json_bytes(data)


def audit_title(event: str, subject: str | None) -> str:
    """An audit message's title, as the reference writes it: ``<event> <subject>``, or the
    event alone for an audit about the whole channel (``state.compacted``)."""
    return event if subject is None else f"{event} {subject}"


def audit_body(payload: dict[str, Any]) -> str:
    """An audit message's body, as the reference writes it (REFERENCE-CLI §3.13): the payload
    as key-sorted JSON indented by two, non-ASCII kept."""
    return json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False)


def event_item_to_dict(seq: int, message_id: str, event: dict[str, Any]) -> dict[str, Any]:
    """An event as the API lists it: the event object and the message it rode in."""
    return {"seq": seq, "id": message_id, "event": event}


def presence_to_dict(
    agent: str, row: Presence | None, cursor: int | None, read_at: datetime | None
) -> dict[str, Any]:
    """One agent's presence in a channel. ``status``, ``detail``, ``status_ts`` (spelled as the
    event spelled it) and ``status_seq`` come from its latest status event, ``primitives`` and
    ``capability_seq`` from its latest capability event, ``harness`` from the latest event of
    either; ``last_seq`` and ``last_sent_at`` are the last message or event it sent;
    ``cursor`` and ``last_read_at`` its cursor and that cursor's last move (a read or an ack);
    ``last_active_at`` the later of the two. Each is null when there is none."""
    sent_at = row.last_sent_at if row is not None else None
    active = max((at for at in (sent_at, read_at) if at is not None), default=None)
    return {
        "agent": agent,
        "status": (row.status or None) if row is not None else None,
        "detail": row.detail if row is not None else None,
        "status_ts": (row.status_ts or None) if row is not None else None,
        "status_seq": row.status_seq if row is not None else None,
        "harness": (row.harness or None) if row is not None else None,
        "primitives": row.primitives if row is not None else None,
        "capability_seq": row.capability_seq if row is not None else None,
        "last_seq": row.last_seq if row is not None else None,
        "last_sent_at": ts_micros(sent_at) if sent_at is not None else None,
        "cursor": cursor,
        "last_read_at": ts_micros(read_at) if read_at is not None else None,
        "last_active_at": ts_micros(active) if active is not None else None,
    }


def approval_to_dict(request: Message) -> dict[str, Any]:
    """A pending approval request: the request message and who decides (the channel's
    maintainer, or null: any answer counts)."""
    return {
        "request": message_to_dict(request),
        "maintainer": request.channel.maintainer or None,
    }
