"""Messages: ``message_post`` in named steps, recipients, ids and seqs.

A post validates and normalizes its fields, returns the first message of a retry
with the same id, inserts the message under the next seq, then rings the channel.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from agentchat.core.db.rows import row_insert
from agentchat.core.db.transactions import write_atomic
from agentchat.core.identity.rates import rate_take
from agentchat.core.live.push import push_on_commit
from agentchat.core.models import Agent
from agentchat.core.rules import clock
from agentchat.core.rules.audit import is_envelope_status, is_reserved, status_key
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import check_agent_name, record_id_check
from agentchat.core.rules.validation import json_value_check, text_check
from channels_app import events
from channels_app.models import Channel, Message, Presence
from channels_app.records import audit_body, audit_title, message_json_size, message_to_dict
from channels_app.services.direct import direct_channel_refuse
from channels_app.services.groups import channel_group
from channels_app.services.limits import (
    BROADCAST_WORDS,
    MESSAGE_ID_MAX,
    PUSH_INLINE_LIMIT,
    RECIPIENTS_MAX,
    STATUS_MAX,
    TITLE_MAX,
)
from channels_app.services.loopguard import (
    EVENT_LOOP_SUSPECTED,
    LoopFlag,
    loop_config,
    loop_flag_record,
    loop_guard_step,
)


def recipients_column(recipients: list[str]) -> str:
    """The stored ``,a,b,`` form the relevance filter matches ('' for a broadcast)."""
    return "".join(f",{name}" for name in recipients) + ("," if recipients else "")


def recipients_normalize(to: str | list[str] | None) -> list[str]:
    """``to`` as a list; [] is a broadcast. Accepts one name, a list, a comma list, all or *."""
    if to is None:
        return []
    if isinstance(to, str):
        # A comma list may have spaces after the commas; nothing else is trimmed, so a name
        # with a newline or a tab is refused, not silently repaired.
        names = [name.strip(" ") for name in to.split(",")]
        names = [name for name in names if name]
    else:
        names = list(to)
    if names in ([], ["all"], ["*"]):
        return []
    if len(names) > RECIPIENTS_MAX:
        raise AppError(
            "INVALID_VALUE",
            f"to names at most {RECIPIENTS_MAX} recipients",
            detail={"field": "to", "max": RECIPIENTS_MAX},
        )
    result: list[str] = []
    for name in names:
        if name in BROADCAST_WORDS:
            raise AppError(
                "INVALID_NAME",
                f"{name!r} means broadcast and cannot be combined with other recipients",
                detail={"field": "to"},
            )
        check_agent_name(name, field="to")
        if name not in result:
            result.append(name)
    return result


class _ExistingId(Exception):
    def __init__(self, message: Message) -> None:
        self.message = message


def _existing_or_conflict(message_id: str, *, channel: Channel, sender: str) -> Message | None:
    existing = Message.objects.select_related("channel").filter(pk=message_id).first()
    if existing is None:
        return None
    if existing.channel_id != channel.pk or existing.sender != sender:
        raise AppError(
            "ID_CONFLICT",
            f"message id {message_id!r} is already used by another sender or channel",
            detail={"id": message_id},
        )
    return existing


def _allocate_seq(channel_id: int) -> int:
    # One write that also reads: on PostgreSQL the row lock serializes posters of a channel and
    # makes seqs commit-ordered; on SQLite the transaction already holds the write lock.
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Channel._meta.db_table} SET last_seq = last_seq + 1 "
            "WHERE id = %s RETURNING last_seq",
            [channel_id],
        )
        return int(cursor.fetchone()[0])


@write_atomic()
def message_post(
    *,
    channel: Channel,
    sender: str,
    title: str,
    body: str = "",
    to: str | list[str] | None = None,
    reply_to: int | None = None,
    status: str = "discussion",
    kind: str = Message.Kind.MESSAGE,
    message_id: str | None = None,
    conversation_id: str = "",
    correlation_id: str = "",
    data: Any = None,
    content_type: str = "",
    metadata: dict[str, str] | None = None,
    access_change: bool = False,
    ts: datetime | None = None,
    sender_kind: str | None = None,
    signal_type: str = "",
    envelope: bool = False,
    budget: bool = True,
) -> tuple[Message, bool]:
    """Allocate the next seq and store the message; returns (message, created).

    A retry with the same ``message_id`` from the same sender in the same channel returns the
    first message with created=False. ``access_change`` marks the audit of a change of members
    or visibility: its ring says ``"access": true`` and never carries the message, so every
    live subscriber reads it back through the access check (see ``channel_update``). ``ts``
    (default now) lets an event's message carry the instant its body names.

    A status ``event.*`` belongs to event messages (``event_post``) only: the reference's
    ``event read`` parses every message so labelled and fails on the first that is no event,
    so one such post would break it for the whole channel of a synced folder.

    ``sender_kind`` (provenance: ``agent`` or ``human``) is the sender's identity's kind; the
    caller that holds the sender's Agent passes it, else it is looked up by name (a sender that
    is no agent, such as an admin's user name, counts as an agent).

    A status of the server's audit messages (``agentchat.core.rules.audit``) belongs to
    ``audit_post`` only: a client's message so labelled would read as the server's record.

    ``signal_type`` makes the message an EP-0118 signal (``services.signal_post``, which checks
    the type): read per message by ``read_signals`` besides the cursor. A direct channel
    (``services.direct``) takes only the messages of HTTP v1 envelopes (``envelope=True``, from
    ``services.envelopes``).

    The sender's presence row (its last activity) is written in the same transaction, and an
    agent's post is taken from its post budget (``agentchat.core.identity.rates``; a retry
    answered with the first message costs nothing; ``budget=False`` for the server's own
    ``loop.suspected``). The post is counted by the loop guard (``services.loopguard``), whose
    crossing of its threshold posts one ``loop.suspected`` audit message right after it.
    Raises INVALID_NAME, INVALID_VALUE, STATUS_RESERVED, FIELD_TOO_LARGE, REPLY_TO_NOT_FOUND,
    ID_CONFLICT, CHANNEL_DIRECT, RATE_LIMITED, LOOP_SUSPECTED.

    In steps: validate and normalize (``_message_validate``), return the first message of a
    retry (``_existing_or_conflict``), check ``reply_to``, insert under the next seq
    (``_message_insert``), ring the channel once committed (``_message_push``).
    """
    recipients = _message_validate(
        title=title,
        body=body,
        to=to,
        status=status,
        kind=kind,
        message_id=message_id,
        conversation_id=conversation_id,
        correlation_id=correlation_id,
        data=data,
        content_type=content_type,
        metadata=metadata,
        envelope=envelope,
    )
    if not envelope:
        direct_channel_refuse(channel, "posts, events or audit messages of its own")
    if message_id is not None and (
        existing := _existing_or_conflict(message_id, channel=channel, sender=sender)
    ):
        return existing, False
    _reply_to_check(channel, reply_to)
    message = Message(
        id=message_id or f"msg_{uuid.uuid4().hex}",
        channel=channel,
        sender=sender,
        sender_kind=sender_kind or _kind_of(sender),
        to=recipients,
        recipients=recipients_column(recipients),
        reply_to=reply_to,
        status=status,
        title=title,
        body=body,
        kind=kind,
        conversation_id=conversation_id,
        correlation_id=correlation_id,
        data=data,
        content_type=content_type,
        metadata=metadata or {},
        signal_type=signal_type,
    )
    inserted = _message_insert(message, client_id=message_id is not None, ts=ts, budget=budget)
    if inserted[0] is not message:
        return inserted[0], False
    channel.last_seq = message.seq
    _message_push(message, access_change=access_change)
    if inserted[1] is not None and inserted[1].flagged_now:
        _loop_suspected_post(message, inserted[1])
    return message, True


def _message_validate(
    *,
    title: str,
    body: str,
    to: str | list[str] | None,
    status: str,
    kind: str,
    message_id: str | None,
    conversation_id: str,
    correlation_id: str,
    data: Any,
    content_type: str,
    metadata: dict[str, str] | None,
    envelope: bool = False,
) -> list[str]:
    """Check every field of a post before anything is written; returns the recipients,
    normalized."""
    text_check(title, field="title", single_line=True, allow_empty=False, max_chars=TITLE_MAX)
    text_check(body, field="body")
    text_check(status, field="status", single_line=True, allow_empty=False, max_chars=STATUS_MAX)
    # Compared as the reserved statuses are: ``EVENT.status``, and ``event.`` spelled with
    # full-width letters, read as events too.
    if status_key(status).startswith(events.STATUS_PREFIX) and kind != Message.Kind.EVENT:
        raise AppError(
            "INVALID_VALUE",
            f"status {events.STATUS_PREFIX}* is reserved for events (POST …/events/)",
            detail={"field": "status"},
        )
    if kind != Message.Kind.AUDIT and is_reserved(status):
        raise AppError(
            "STATUS_RESERVED",
            f"status {status.strip()!r} is reserved for the server's audit messages",
            detail={"field": "status", "status": status},
        )
    if not envelope and is_envelope_status(status):
        raise AppError(
            "STATUS_RESERVED",
            f"status {status.strip()!r} is reserved for HTTP v1's receipts and contact shares",
            detail={"field": "status", "status": status},
        )
    for field, value in (
        ("conversation_id", conversation_id),
        ("correlation_id", correlation_id),
        ("content_type", content_type),
    ):
        text_check(value, field=field, single_line=True)
    if data is not None:
        json_value_check(data, field="data")
    for key, value in (metadata or {}).items():
        text_check(key, field="metadata", single_line=True)
        text_check(value, field="metadata")
    recipients = recipients_normalize(to)
    if message_id is not None:
        record_id_check(
            message_id,
            what="id",
            code="INVALID_VALUE",
            max_length=MESSAGE_ID_MAX,
            detail={"field": "id"},
        )
    return recipients


def _reply_to_check(channel: Channel, reply_to: int | None) -> None:
    if reply_to is not None and not Message.objects.filter(channel=channel, seq=reply_to).exists():
        raise AppError(
            "REPLY_TO_NOT_FOUND",
            f"reply_to #{reply_to} is not a message of channel {channel.name!r}",
            detail={"reply_to": reply_to},
        )


def _message_insert(
    message: Message, *, client_id: bool, ts: datetime | None, budget: bool
) -> tuple[Message, LoopFlag | None]:
    """Insert the message under the channel's next seq, with the sender's presence, counted by
    the loop guard; returns the message stored under its id (this one, or the first of a retry,
    ``client_id``: the id is the client's, that committed meanwhile) and what the guard did."""
    flag: LoopFlag | None = None
    channel, sender = message.channel, message.sender
    try:
        # The savepoint lets a duplicate id undo the increment; a fresh uuid needs none.
        with transaction.atomic(savepoint=client_id):
            # First the sender's post budget (so an agent's posts in several channels lock
            # its bucket before any channel's counter); a retry's savepoint gives it back.
            if budget and message.sender_kind == Agent.Kind.AGENT:
                rate_take(agent=sender)
            message.seq = _allocate_seq(channel.pk)
            if client_id and (
                existing := _existing_or_conflict(message.id, channel=channel, sender=sender)
            ):
                raise _ExistingId(existing)  # undoes the increment with the savepoint
            # now, after the seq's row lock: the order of ts follows the order of seq
            message.ts = ts or timezone.now()
            message.json_size = message_json_size(message)
            # Under the channel's row lock, as the seq: posts of a channel count in order.
            flag = loop_guard_step(message, now=clock.now())
            row_insert(message)
            _presence_sent(message)
    except _ExistingId as exc:
        return exc.message, None
    except IntegrityError:
        # The same id committed concurrently in another channel (no shared row lock).
        if client_id and (
            existing := _existing_or_conflict(message.id, channel=channel, sender=sender)
        ):
            return existing, None
        raise
    return message, flag


def _loop_suspected_post(message: Message, flag: LoopFlag) -> None:
    """The loop guard's one audit message of a flag, from the sender whose post crossed the
    threshold, outside its post budget; none in a direct channel (envelopes only)."""
    channel = message.channel
    suspected: Message | None = None
    if channel.direct_pair is None:
        config = loop_config()
        payload = {
            "run": flag.run,
            "from_seq": flag.from_seq,
            "to_seq": message.seq,
            "threshold": config.messages if config else flag.run,
            "window_seconds": config.seconds if config else None,
            "cooldown_seconds": config.cooldown if config else None,
            "refusing": bool(config and config.refuse),
        }
        subject = f"#{flag.from_seq}-#{message.seq}"
        suspected, _ = message_post(
            channel=channel,
            sender=message.sender,
            sender_kind=message.sender_kind,
            title=audit_title(EVENT_LOOP_SUSPECTED, subject),
            body=audit_body(payload),
            status=EVENT_LOOP_SUSPECTED,
            kind=Message.Kind.AUDIT,
            budget=False,
        )
    loop_flag_record(channel_id=channel.pk, seq=suspected.seq if suspected else None)


def _message_push(message: Message, *, access_change: bool) -> None:
    """Ring the channel's group once the post commits; the message rides along when small."""
    event: dict[str, Any] = {
        "kind": "message",
        "channel_id": message.channel_id,
        "seq": message.seq,
        "from": message.sender,
        "to": message.to,
    }
    if access_change:
        event["access"] = True
    elif message.json_size <= PUSH_INLINE_LIMIT and message.data is None:
        event["message"] = message_to_dict(message)
    push_on_commit(channel_group(message.channel_id), event)


def _kind_of(sender: str) -> str:
    kind = Agent.objects.filter(name=sender).values_list("kind", flat=True).first()
    return kind or Agent.Kind.AGENT


def _presence_sent(message: Message) -> None:
    """The sender's last activity, one statement (an upsert: no read first)."""
    table = connection.ops.quote_name(Presence._meta.db_table)
    sent_at = connection.ops.adapt_datetimefield_value(message.ts)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (channel_id, agent, last_seq, last_sent_at, harness, status, "
            "status_ts) VALUES (%s, %s, %s, %s, '', '', '') "
            "ON CONFLICT (channel_id, agent) DO UPDATE "
            "SET last_seq = excluded.last_seq, last_sent_at = excluded.last_sent_at",
            [message.channel_id, message.sender, message.seq, sent_at],
        )
