"""The record shapes of channels and messages, and the audit message's text: pure functions,
one definition for the API, the live streams and (with the sync issue) the folder renderer.

The API spells a message's ``ts`` with microseconds and its offset (``isoformat()``); the
folder spells it to the second as the reference does (``agentchat.core.records.ts_seconds``).
"""

from __future__ import annotations

import json
from typing import Any

from agentchat.core.encode import json_bytes
from channels_app.models import Channel, Message


def channel_to_dict(channel: Channel) -> dict[str, Any]:
    return {
        "name": channel.name,
        "topic": channel.topic,
        "members": list(channel.members),
        "created_at": channel.created_at.isoformat() if channel.created_at else None,
        "created_by": channel.created_by,
        "last_seq": channel.last_seq,
        "visibility": channel.visibility,
    }


def message_to_dict(message: Message) -> dict[str, Any]:
    return {
        "seq": message.seq,
        "id": message.id,
        "channel": message.channel.name,
        "from": message.sender,
        "to": list(message.to),
        "reply_to": message.reply_to,
        "status": message.status,
        "title": message.title,
        "body": message.body,
        "ts": message.ts.isoformat(),
        "kind": message.kind,
        "conversation_id": message.conversation_id or None,
        "correlation_id": message.correlation_id or None,
        "data": message.data,
        "content_type": message.content_type or None,
        "metadata": message.metadata,
    }


def message_json(message: Message) -> bytes:
    """A message as the API spells it, in JSON bytes (raises on what JSON cannot carry)."""
    return json_bytes(message_to_dict(message))


def message_json_size(message: Message) -> int:
    """What ``Message.json_size`` stores: the bytes of ``message_json``. Whatever makes a
    message row sets it (a row at 0 would be planned as free and loaded in bulk)."""
    return len(message_json(message))


def message_dict_json(data: dict[str, Any]) -> bytes:
    return json_bytes(data)


def audit_title(event: str, subject: str) -> str:
    """An audit message's title, as the reference writes it: ``<event> <subject>``."""
    return f"{event} {subject}"


def audit_body(payload: dict[str, Any]) -> str:
    """An audit message's body, as the reference writes it (REFERENCE-CLI §3.13): the payload
    as key-sorted JSON indented by two, non-ASCII kept."""
    return json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False)
