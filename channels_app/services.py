"""Every write of channels_app, one transaction each (``write_atomic``).

``message_post`` is also the audit path of tasks_app and locks_app: called inside their
transaction, the audit message commits with the change or not at all.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models.functions import Lower
from django.utils import timezone

from agentchat.core.audit import AUDIT_STATUSES, is_reserved
from agentchat.core.db import write_atomic
from agentchat.core.errors import AppError, ClientGone
from agentchat.core.models import Agent, ApiToken
from agentchat.core.names import check_agent_name, check_channel_name, is_record_id
from agentchat.core.push import group_name, push_on_commit
from agentchat.core.records import ts_seconds
from agentchat.core.revocation import token_is_live
from agentchat.core.rows import row_insert, rows_insert
from agentchat.core.validation import json_value_check, text_check
from channels_app import events
from channels_app.locking import channel_lock
from channels_app.models import Channel, Cursor, MarkerClaim, Message, Presence
from channels_app.records import audit_body, audit_title, message_json_size, message_to_dict
from channels_app.selectors import (
    READ_LIMIT_MAX,
    channel_last_seq_visible,
    channel_not_found,
    channel_visible,
    message_page,
    messages_relevant_exist,
)

BROADCAST_WORDS = {"all", "*"}
# A message whose JSON is at most this big rides along with its push, so subscribers need not
# read it back; bigger ones are fetched by seq.
PUSH_INLINE_LIMIT = 16 * 1024
MESSAGE_ID_MAX = 128
TITLE_MAX = 1000
STATUS_MAX = 100
# Bounded so that the channel.updated audit, which carries the before and after of each
# changed field, always fits in a message body.
TOPIC_MAX = 4096
MEMBERS_MAX = 1000
RECIPIENTS_MAX = MEMBERS_MAX  # a message's `to`: as many as a roster may hold
EVENT_CHANNEL_UPDATED = "channel.updated"
VISIBILITIES = tuple(Channel.Visibility.values)


def channel_group(channel_id: int) -> str:
    return group_name("channel", channel_id)


# Rung on commit by the changes that no message announces: a channel made, a marker claimed.
# ``sync_folder --follow`` listens to it (beside every channel's group) on the Redis layer.
ROSTER_GROUP = group_name("roster", 0)


def members_normalize(members: Iterable[str]) -> list[str]:
    """Validated agent names, duplicates dropped, order kept. Raises INVALID_NAME,
    INVALID_VALUE (more than MEMBERS_MAX)."""
    result: list[str] = []
    for member in members:
        check_agent_name(member, field="members")
        if member not in result:
            result.append(member)
            if len(result) > MEMBERS_MAX:
                raise AppError(
                    "INVALID_VALUE",
                    f"a channel has at most {MEMBERS_MAX} members",
                    detail={"field": "members", "max": MEMBERS_MAX},
                )
    return result


def topic_check(topic: object) -> str:
    """Raises INVALID_VALUE (also over TOPIC_MAX characters), FIELD_TOO_LARGE,
    INVISIBLE_CHARACTER (a topic may span lines, but is a title of sorts)."""
    return text_check(topic, field="topic", max_chars=TOPIC_MAX, visible=True)


def roster_check(*, visibility: str, members: list[str]) -> None:
    """A members-only channel must keep someone who can see it: at least one member that is an
    agent (names on a roster need not be agents yet; a roster of none would hide the channel
    from everyone, its own audit trail included). Raises CHANNEL_MEMBERS_REQUIRED."""
    if visibility != Channel.Visibility.MEMBERS:
        return
    if not members or not Agent.objects.filter(name__in=members).exists():
        raise AppError(
            "CHANNEL_MEMBERS_REQUIRED",
            "a members-only channel needs at least one member that is an agent",
            detail={"field": "members"},
        )


def visibility_check(visibility: object) -> str:
    """``open`` or ``members``. Raises INVALID_VALUE."""
    if visibility not in VISIBILITIES or not isinstance(visibility, str):
        raise AppError(
            "INVALID_VALUE",
            f"visibility must be one of: {', '.join(VISIBILITIES)}",
            detail={"field": "visibility", "choices": list(VISIBILITIES)},
        )
    return visibility


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


@write_atomic()
def channel_create(
    *,
    name: str,
    created_by: str,
    topic: str = "",
    members: Iterable[str] = (),
    visibility: str = Channel.Visibility.OPEN,
) -> Channel:
    """Create a channel. A members-only channel always has its creator on the roster (put
    first when the request did not name it): a creator could not see its own channel otherwise.

    Raises INVALID_NAME, INVALID_VALUE, FIELD_TOO_LARGE, CHANNEL_MEMBERS_REQUIRED (the creator
    is no agent), CHANNEL_EXISTS (names are unique case-insensitively, so the name of a
    members-only channel is taken for non-members too: the 409 says that much, nothing more)."""
    check_channel_name(name)
    topic_check(topic)
    members = members_normalize(members)
    visibility_check(visibility)
    if visibility == Channel.Visibility.MEMBERS and created_by not in members:
        members = members_normalize([created_by, *members])
    roster_check(visibility=visibility, members=members)
    if Channel.objects.annotate(lname=Lower("name")).filter(lname=name.lower()).exists():
        raise AppError("CHANNEL_EXISTS", f"channel {name!r} already exists", detail={"name": name})
    try:
        with transaction.atomic():
            channel = Channel.objects.create(
                name=name,
                topic=topic,
                members=members,
                created_by=created_by,
                visibility=visibility,
            )
            push_on_commit(ROSTER_GROUP, {"kind": "channel.created", "channel": channel.pk})
            return channel
    except IntegrityError:
        raise AppError(
            "CHANNEL_EXISTS", f"channel {name!r} already exists", detail={"name": name}
        ) from None


@write_atomic()
def channel_update(
    *,
    channel: Channel,
    actor: str,
    topic: str | None = None,
    members: Iterable[str] | None = None,
    visibility: str | None = None,
    admin: bool = False,
) -> Channel:
    """Change the topic, members or visibility of a channel and post one ``channel.updated``
    audit message from ``actor`` in the same transaction: the before and after of each changed
    field. A request that changes nothing writes and posts nothing.

    The rules, so that nobody ends up with a channel nobody can see unnoticed:
    - ``actor`` must see the channel, judged on the row as locked here (a removal that commits
      first wins); ``admin=True`` (the Django admin, ``actor`` = ``admin_actor``) skips that.
    - Whoever makes a channel members-only is put on its roster when missing (first) — except
      an admin, who is not an agent of the channel.
    - A member may remove itself (it then no longer sees the channel), but a members-only
      channel always keeps a member that is an agent (``roster_check``).
    - A channel that names a maintainer (SPEC §9) is changed by its maintainer only (and the
      admin); without one, by anyone who sees it, as in the reference.

    Returns the channel as written. Raises CHANNEL_NOT_FOUND, CHANNEL_NOT_MAINTAINER,
    INVALID_NAME, INVALID_VALUE, FIELD_TOO_LARGE, CHANNEL_MEMBERS_REQUIRED.
    """
    if topic is not None:
        topic_check(topic)
    if members is not None:
        members = members_normalize(members)
    if visibility is not None:
        visibility_check(visibility)
    # The row lock serializes concurrent updates on PostgreSQL (on SQLite the write transaction
    # already does), so each audit's "before" is what the previous update wrote.
    current = channel_lock(channel)
    if current is None or not (admin or channel_visible(current, actor)):
        raise channel_not_found(channel.name)
    if current.maintainer and not admin and actor != current.maintainer:
        raise AppError(
            "CHANNEL_NOT_MAINTAINER",
            f"channel {current.name} is governed by {current.maintainer}: only they change it",
            detail={"channel": current.name, "maintainer": current.maintainer, "actor": actor},
        )
    before: dict[str, Any] = {
        "members": list(current.members),
        "topic": current.topic,
        "visibility": current.visibility,
    }
    after = dict(before)
    if topic is not None:
        after["topic"] = topic
    if members is not None:
        after["members"] = members
    if visibility is not None:
        after["visibility"] = visibility
    private = Channel.Visibility.MEMBERS
    if (
        before["visibility"] != private
        and after["visibility"] == private
        and not admin
        and actor not in after["members"]
    ):
        after["members"] = members_normalize([actor, *after["members"]])
    changed = sorted(field for field in after if after[field] != before[field])
    if {"members", "visibility"} & set(changed):
        roster_check(visibility=after["visibility"], members=after["members"])
    if not changed:
        return current
    for field in changed:
        setattr(current, field, after[field])
    current.save(update_fields=changed)
    audit_post(
        channel=current,
        actor=actor,
        event=EVENT_CHANNEL_UPDATED,
        subject=current.name,
        payload={
            "actor": actor,
            "after": {field: after[field] for field in changed},
            "before": {field: before[field] for field in changed},
            "changed_fields": changed,
            "channel": current.name,
            "event": EVENT_CHANNEL_UPDATED,
        },
        access_change=bool({"members", "visibility"} & set(changed)),
    )
    return current


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

    A status of the server's audit messages (``agentchat.core.audit``) belongs to
    ``audit_post`` only: a client's message so labelled would read as the server's record.

    The sender's presence row (its last activity) is written in the same transaction.
    Raises INVALID_NAME, INVALID_VALUE, STATUS_RESERVED, FIELD_TOO_LARGE, REPLY_TO_NOT_FOUND,
    ID_CONFLICT.
    """
    text_check(title, field="title", single_line=True, allow_empty=False, max_chars=TITLE_MAX)
    text_check(body, field="body")
    text_check(status, field="status", single_line=True, allow_empty=False, max_chars=STATUS_MAX)
    if status.startswith(events.STATUS_PREFIX) and kind != Message.Kind.EVENT:
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
    if message_id is not None and not is_record_id(message_id, max_length=MESSAGE_ID_MAX):
        raise AppError(
            "INVALID_VALUE",
            "id must match [A-Za-z0-9][A-Za-z0-9._-]* and be at most 128 characters",
            detail={"field": "id"},
        )
    if message_id is not None and (
        existing := _existing_or_conflict(message_id, channel=channel, sender=sender)
    ):
        return existing, False
    if reply_to is not None and not Message.objects.filter(channel=channel, seq=reply_to).exists():
        raise AppError(
            "REPLY_TO_NOT_FOUND",
            f"reply_to #{reply_to} is not a message of channel {channel.name!r}",
            detail={"reply_to": reply_to},
        )
    try:
        # The savepoint lets a duplicate id undo the increment; a fresh uuid needs none.
        with transaction.atomic(savepoint=message_id is not None):
            seq = _allocate_seq(channel.pk)
            if message_id is not None and (
                existing := _existing_or_conflict(message_id, channel=channel, sender=sender)
            ):
                raise _ExistingId(existing)  # undoes the increment with the savepoint
            message = Message(
                id=message_id or f"msg_{uuid.uuid4().hex}",
                channel=channel,
                seq=seq,
                sender=sender,
                sender_kind=sender_kind or _kind_of(sender),
                to=recipients,
                recipients=recipients_column(recipients),
                reply_to=reply_to,
                ts=ts or timezone.now(),
                status=status,
                title=title,
                body=body,
                kind=kind,
                conversation_id=conversation_id,
                correlation_id=correlation_id,
                data=data,
                content_type=content_type,
                metadata=metadata or {},
            )
            message.json_size = message_json_size(message)
            row_insert(message)
            _presence_sent(message)
    except _ExistingId as exc:
        return exc.message, False
    except IntegrityError:
        # The same id committed concurrently in another channel (no shared row lock).
        if message_id is not None and (
            existing := _existing_or_conflict(message_id, channel=channel, sender=sender)
        ):
            return existing, False
        raise
    channel.last_seq = seq
    message.channel = channel
    event: dict[str, Any] = {
        "kind": "message",
        "channel_id": channel.pk,
        "seq": seq,
        "from": sender,
        "to": recipients,
    }
    if access_change:
        event["access"] = True
    elif message.json_size <= PUSH_INLINE_LIMIT and data is None:
        event["message"] = message_to_dict(message)
    push_on_commit(channel_group(channel.pk), event)
    return message, True


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


class PostedEvent(NamedTuple):
    message: Message
    event: dict[str, Any]


@write_atomic()
def event_post(
    *,
    channel: Channel,
    agent: str,
    type: Any,
    harness: Any = None,
    primitives: Any = None,
    status: Any = None,
    detail: Any = None,
    unknown_fields: Iterable[str] = (),
) -> PostedEvent:
    """Post a capability or status event (REFERENCE-CLI §3.12) as ``agent``: the server fills
    ``schema_version``, ``agent`` and ``ts`` (now, UTC, to the second; the message's ``ts`` is
    the same instant, with its microseconds), validates the event against the shipped schema
    and posts it as a broadcast message of kind ``event`` whose body is the compact JSON,
    updating ``agent``'s presence in the same transaction. None is an omitted field; a
    capability event without primitives advertises all eight. ``unknown_fields`` names fields
    the request carried beside these.

    Raises the codes of ``events.event_validate`` (EVENT_UNKNOWN_FIELD, EVENT_INVALID_TYPE,
    EVENT_REQUIRED_FIELD_MISSING, EVENT_INVALID_TEXT, EVENT_INVALID_PRIMITIVES,
    EVENT_DUPLICATE_PRIMITIVE, EVENT_UNKNOWN_PRIMITIVE, EVENT_INVALID_STATUS…), FIELD_TOO_LARGE.
    """
    now = timezone.now()
    event = events.event_validate(
        events.event_build(
            type=type,
            agent=agent,
            harness=harness,
            ts=ts_seconds(now),
            primitives=primitives,
            status=status,
            detail=detail,
        ),
        extra_unknown=unknown_fields,
    )
    posted = events.event_message(event)
    message, _ = message_post(
        channel=channel,
        sender=agent,
        title=posted.title,
        body=posted.body,
        to=None,
        status=posted.status,
        kind=Message.Kind.EVENT,
        ts=now,
    )
    fields: dict[str, Any] = {"harness": event["harness"]}
    if event["event"] == "status":
        fields.update(
            status=event["status"],
            detail=event.get("detail"),
            status_ts=event["ts"],
            status_seq=message.seq,
        )
    else:
        fields.update(primitives=event["primitives"], capability_seq=message.seq)
    Presence.objects.filter(channel=channel, agent=agent).update(**fields)
    return PostedEvent(message, event)


def audit_post(
    *,
    channel: Channel,
    actor: str,
    event: str,
    subject: str | None,
    payload: dict[str, Any],
    access_change: bool = False,
    ts: datetime | None = None,
) -> Message:
    """Post the audit message of a task, lease, lock or channel mutation, in the caller's
    transaction.

    The reference CLI's format (REFERENCE-CLI §3.13): a broadcast whose status is the event,
    titled ``<event> <subject>`` (the event alone when ``subject`` is None), with the payload
    as key-sorted, indented JSON. ``ts`` (default now) lets the message carry the instant its
    payload names. ``event`` must be one of ``agentchat.core.audit.AUDIT_STATUSES`` (the one
    list of the statuses clients may not take).
    """
    if event not in AUDIT_STATUSES:
        raise ValueError(f"audit event {event!r} is not in agentchat.core.audit.AUDIT_STATUSES")
    message, _ = message_post(
        channel=channel,
        sender=actor,
        title=audit_title(event, subject),
        body=audit_body(payload),
        to=None,
        status=event,
        kind=Message.Kind.AUDIT,
        access_change=access_change,
        ts=ts,
    )
    return message


def _cursor_set(*, agent: Agent, channel: Channel, seq: int) -> None:
    updated = Cursor.objects.filter(agent=agent, channel=channel).update(
        seq=seq, updated_at=timezone.now()
    )
    if not updated:
        try:
            with transaction.atomic():
                Cursor.objects.create(agent=agent, channel=channel, seq=seq)
        except IntegrityError:  # created concurrently (PostgreSQL): set it
            Cursor.objects.filter(agent=agent, channel=channel).update(seq=seq)


def cursor_get(*, agent: Agent, channel: Channel) -> int:
    return (
        Cursor.objects.filter(agent=agent, channel=channel).values_list("seq", flat=True).first()
        or 0
    )


def _cursor_for_update(*, agent: Agent, channel: Channel) -> int:
    """The cursor, which no other transaction may move until this one ends: two reads of one
    agent in one channel at once deliver each message once, and the cursor never moves back.
    SQLite's write transaction is exclusive already; on PostgreSQL the cursor's row is locked
    (made first, at 0, when missing, which reads as no cursor)."""
    if connection.vendor != "postgresql":
        return cursor_get(agent=agent, channel=channel)
    locked = Cursor.objects.select_for_update().filter(agent=agent, channel=channel)
    seq = locked.values_list("seq", flat=True).first()
    if seq is None:
        Cursor.objects.bulk_create(
            [Cursor(agent=agent, channel=channel, seq=0, updated_at=timezone.now())],
            ignore_conflicts=True,
        )
        seq = locked.values_list("seq", flat=True).first()
    return seq or 0


class ReadPage(NamedTuple):
    parts: list[bytes]  # the delivered messages, each rendered as JSON (message_json)
    cursor: int  # the caller's cursor afterwards
    more: bool  # relevant messages remain after this page: read again at once
    last_seq: int  # the channel's last seq as the read saw it


def read_page_body(page: ReadPage, *, timed_out: bool = False) -> bytes:
    """The response body of a read or wait: ``{"messages": [...], "cursor", "more"}`` (and
    ``"timed_out": true`` for a wait that timed out), assembled from parts already rendered, so
    it cannot fail once the cursor has moved."""
    return b'{"messages":[%s],"cursor":%d,"more":%s%s}' % (
        b",".join(page.parts),
        page.cursor,
        b"true" if page.more else b"false",
        b',"timed_out":true' if timed_out else b"",
    )


def _token_check(token_id: int | None) -> None:
    if token_id is not None and not token_is_live(token_id):
        raise AppError("AUTH_INVALID", "the token is unknown or revoked")


def messages_read(
    *,
    channel: Channel,
    agent: Agent,
    limit: int = READ_LIMIT_MAX,
    max_bytes: int | None = None,
    advance_if_empty: bool = True,
    token_id: int | None = None,
    abandoned: threading.Event | None = None,
) -> ReadPage:
    """SPEC §5/§8, paged: the relevant messages after the cursor, at most ``limit`` of them and
    ``max_bytes`` of JSON (AGENTCHAT_READ_MAX_BYTES; always at least one). When relevant
    messages remain, ``more`` is true and the cursor moves to the last one delivered; otherwise
    it moves to the channel's last seq, past the irrelevant ones.

    The messages are rendered inside the transaction that moves the cursor: a message that
    cannot be sent (JSON cannot carry it) fails the read and moves nothing. With
    ``advance_if_empty=False`` (wait) the cursor moves only when something relevant is
    returned, so a wait that times out leaves it where it was. With ``token_id`` (a live
    session) a token revoked meanwhile moves nothing. ``abandoned`` is set (from any thread)
    when the client goes away: looked at last, just before the transaction commits, so a move
    whose response has no one to reach is undone. Raises AUTH_INVALID (``token_id`` revoked),
    CHANNEL_NOT_FOUND (the agent may no longer see the channel: checked again inside the write
    transaction), ClientGone (``abandoned`` was set: nothing moved).
    """
    max_bytes = max_bytes or settings.AGENTCHAT_READ_MAX_BYTES
    last_seq = channel_last_seq_visible(channel, viewer=agent.name)
    cursor = cursor_get(agent=agent, channel=channel)
    if cursor >= last_seq:
        return ReadPage([], cursor, False, last_seq)  # nothing new: no write transaction
    if not advance_if_empty and not messages_relevant_exist(
        channel=channel, name=agent.name, after=cursor, upto=last_seq
    ):
        return ReadPage([], cursor, False, last_seq)
    with write_atomic():
        _token_check(token_id)
        # Re-read inside the write transaction: the counter row and every message up to it are
        # committed together, so nothing at or below last_seq can appear later.
        last_seq = channel_last_seq_visible(channel, viewer=agent.name)
        cursor = _cursor_for_update(agent=agent, channel=channel)
        page = message_page(
            channel=channel,
            name=agent.name,
            after=cursor,
            upto=last_seq,
            limit=limit,
            max_bytes=max_bytes,
        )
        target = page.last if page.more else last_seq
        if target > cursor and (page.parts or advance_if_empty):
            _cursor_set(agent=agent, channel=channel, seq=target)
            cursor = target
        if abandoned is not None and abandoned.is_set():
            raise ClientGone
    return ReadPage(page.parts, cursor, page.more, last_seq)


class CursorMove(NamedTuple):
    agent_id: int
    channel_id: int
    expected: int  # where the cursor must stand (a missing cursor stands at 0)
    new: int
    token_id: int | None = None  # when given, the token must not be revoked
    abandoned: threading.Event | None = None  # set when the move's response has no one to reach


@write_atomic()
def cursors_compare_and_set(*, moves: Sequence[CursorMove]) -> list[bool]:
    """Move many cursors in one transaction: each moves only if it still stands at
    ``expected``, its token (when given) is live and its client is still there (``abandoned``
    not set, looked at again just before the commit). Returns, per move, whether it happened.
    One ring can wake a thousand waiters; their cursor writes share this transaction instead of
    taking one each."""
    table = Cursor._meta.db_table
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    # The token's check rides in each statement: one statement per move, as without it.
    live = (
        f" AND EXISTS (SELECT 1 FROM {ApiToken._meta.db_table} "
        "WHERE id = %s AND revoked_at IS NULL)"
    )
    results = [False] * len(moves)
    inserted = [False] * len(moves)
    # In one order everywhere (agent, channel): two processes' batches for the same cursors
    # in opposite orders would deadlock on PostgreSQL's row locks.
    order = sorted(range(len(moves)), key=lambda i: (moves[i].agent_id, moves[i].channel_id))
    with connection.cursor() as cursor:
        for index in order:
            move = moves[index]
            if move.abandoned is not None and move.abandoned.is_set():
                continue
            where = [move.agent_id, move.channel_id]
            check, check_args = ("", []) if move.token_id is None else (live, [move.token_id])
            cursor.execute(
                f"UPDATE {table} SET seq = %s, updated_at = %s "
                f"WHERE agent_id = %s AND channel_id = %s AND seq = %s{check}",
                [move.new, now, *where, move.expected, *check_args],
            )
            moved = cursor.rowcount == 1
            if not moved and move.expected == 0:
                # SELECT … WHERE: SQLite parses ON CONFLICT after a SELECT only with a WHERE.
                cursor.execute(
                    f"INSERT INTO {table} (agent_id, channel_id, seq, updated_at) "
                    f"SELECT %s, %s, %s, %s WHERE 1 = 1{check} "
                    "ON CONFLICT (agent_id, channel_id) DO NOTHING",
                    [*where, move.new, now, *check_args],
                )
                moved = inserted[index] = cursor.rowcount == 1
            results[index] = moved
        for index in order:
            move = moves[index]
            if results[index] and move.abandoned is not None and move.abandoned.is_set():
                # Its client left while the others moved: undo it before the commit.
                if inserted[index]:
                    cursor.execute(
                        f"DELETE FROM {table} WHERE agent_id = %s AND channel_id = %s",
                        [move.agent_id, move.channel_id],
                    )
                else:
                    cursor.execute(
                        f"UPDATE {table} SET seq = %s WHERE agent_id = %s AND channel_id = %s",
                        [move.expected, move.agent_id, move.channel_id],
                    )
                results[index] = False
    return results


@write_atomic()
def cursor_ack(*, channel: Channel, agent: Agent, seq: int | None = None) -> int:
    """Set the cursor without reading (IASP CQS); default: the channel's max. Raises
    INVALID_SEQ, CHANNEL_NOT_FOUND (the agent may no longer see the channel)."""
    last_seq = channel_last_seq_visible(channel, viewer=agent.name)
    if seq is None:
        seq = last_seq
    if not 0 <= seq <= last_seq:
        raise AppError(
            "INVALID_SEQ",
            f"seq must be between 0 and the channel's last seq ({last_seq})",
            detail={"seq": seq, "last_seq": last_seq},
        )
    _cursor_set(agent=agent, channel=channel, seq=seq)
    return seq


@write_atomic()
def marker_claim(*, channel: Channel, marker: str, owner: str) -> MarkerClaim:
    """Exactly one agent claims a marker; the unique row decides. Raises INVALID_NAME,
    MARKER_ALREADY_CLAIMED."""
    if not is_record_id(marker, max_length=128):
        raise AppError(
            "INVALID_NAME",
            "marker must match [A-Za-z0-9][A-Za-z0-9._-]* and be at most 128 characters",
            detail={"field": "marker"},
        )
    existing = MarkerClaim.objects.filter(channel=channel, marker=marker).first()
    if existing is None:
        try:
            with transaction.atomic():
                claim = MarkerClaim.objects.create(channel=channel, marker=marker, owner=owner)
                push_on_commit(ROSTER_GROUP, {"kind": "marker.claimed", "channel": channel.pk})
                return claim
        except IntegrityError:
            existing = MarkerClaim.objects.get(channel=channel, marker=marker)
    raise AppError(
        "MARKER_ALREADY_CLAIMED",
        f"marker {marker!r} is already claimed by {existing.owner}",
        detail={"marker": marker, "owner": existing.owner},
    )


# --- the folder import (agentchat.folder.load): rows as a reference folder spelled them ------

IMPORT_BATCH = 500


def message_kind_of(status: str) -> str:
    """An imported message's kind, judged by its status as the reference labels them: an
    event (``event.*``, checked as one by the import) or a message. Never ``audit``: an
    audit-shaped file (``task.created``…) is a message someone wrote into a folder, not a
    record this server made."""
    if status.startswith(events.STATUS_PREFIX):
        return Message.Kind.EVENT
    return Message.Kind.MESSAGE


class ImportedMessage(NamedTuple):
    """One message file, parsed and checked (``agentchat.folder.importer``)."""

    source: str  # the file, for errors
    seq: int
    message_id: str | None  # None: the server makes one
    sender: str  # free text: a reference folder may name anyone
    to: list[str]
    reply_to: int | None
    ts: datetime
    ts_text: str
    status: str
    title: str
    body: str
    conversation_id: str
    correlation_id: str
    content_type: str
    data: Any
    metadata: dict[str, str]
    frontmatter: list[list[str]]
    # What the file's sender_kind key claimed ("human"; "" for none): kept for the sync to
    # write back (Message.claimed_sender_kind), never the stored provenance.
    claimed_sender_kind: str = ""


class ImportedPresence(NamedTuple):
    """A sender's presence as the messages it sent make it (what ``message_post`` and
    ``event_post`` write as they go)."""

    agent: str
    last_seq: int
    last_sent_at: datetime
    harness: str = ""
    status: str = ""
    detail: str | None = None
    status_ts: str = ""
    status_seq: int | None = None
    primitives: list[str] | None = None
    capability_seq: int | None = None


def channel_import(
    *,
    name: str,
    topic: str,
    members: list[str],
    visibility: str,
    created_at: datetime | None,
    created_text: str | None,
    last_seq: int,
) -> Channel:
    """Create a channel as a folder's ``_meta.json`` describes it, its counter at ``last_seq``
    (the highest seq of its messages), in the caller's transaction. Raises INVALID_NAME,
    INVALID_VALUE, FIELD_TOO_LARGE, CHANNEL_MEMBERS_REQUIRED, CHANNEL_EXISTS.

    The members of a members-only channel are made agents when missing (without tokens):
    its roster is who may see it, and it must name an agent (``roster_check``)."""
    check_channel_name(name)
    topic_check(topic)
    members = members_normalize(members)
    visibility_check(visibility)
    with write_atomic():
        if visibility == Channel.Visibility.MEMBERS:
            Agent.objects.bulk_create([Agent(name=name) for name in members], ignore_conflicts=True)
        roster_check(visibility=visibility, members=members)
        if Channel.objects.annotate(lname=Lower("name")).filter(lname=name.lower()).exists():
            raise AppError(
                "CHANNEL_EXISTS", f"channel {name!r} already exists", detail={"name": name}
            )
        fields: dict[str, Any] = {}
        if created_at is not None:
            fields.update(created_at=created_at, spellings={"created": created_text})
        try:
            with transaction.atomic():
                channel = Channel.objects.create(
                    name=name,
                    topic=topic,
                    members=members,
                    visibility=visibility,
                    last_seq=last_seq,
                )
        except IntegrityError:
            raise AppError(
                "CHANNEL_EXISTS", f"channel {name!r} already exists", detail={"name": name}
            ) from None
        if fields:  # created_at is auto_now_add: set after the insert
            Channel.objects.filter(pk=channel.pk).update(**fields)
            for field, value in fields.items():
                setattr(channel, field, value)
        # Once the import commits (a rolled-back import rings nothing).
        push_on_commit(ROSTER_GROUP, {"kind": "channel.created", "channel": channel.pk})
    return channel


def messages_import(*, channel: Channel, messages: Iterable[ImportedMessage]) -> int:
    """Store messages with the seq, sender, times and text their files had, marked imported
    (``Message.imported``: no provenance, no audit; see ``message_kind_of``) (no seq is
    allocated: the channel's counter is set by ``channel_import``), in batches, in the caller's
    transaction. Returns how many. Raises ID_CONFLICT (a message id is taken, naming the file)."""
    count = 0
    batch: list[tuple[ImportedMessage, Message]] = []

    def flush() -> None:
        ids = {row.id: item.source for item, row in batch if item.message_id is not None}
        taken = list(Message.objects.filter(pk__in=ids).values_list("pk", flat=True)[:1])
        if taken:
            raise AppError(
                "ID_CONFLICT",
                f"{ids[taken[0]]}: message id {taken[0]!r} is already used",
                detail={"file": ids[taken[0]], "id": taken[0]},
            )
        try:
            rows_insert([row for _, row in batch])
        except IntegrityError:  # an id posted meanwhile (checked just above)
            raise AppError(
                "ID_CONFLICT",
                f"{batch[0][0].source}: a message id of this batch is already used",
                detail={"file": batch[0][0].source},
            ) from None
        batch.clear()

    for item in messages:
        message = Message(
            id=item.message_id or f"msg_{uuid.uuid4().hex}",
            channel=channel,
            seq=item.seq,
            sender=item.sender,
            # A file's claim is no identity: every imported message is an agent's, marked
            # imported (channels_app.approval_rule never counts it as a person's answer).
            sender_kind=Agent.Kind.AGENT,
            imported=True,
            claimed_sender_kind=item.claimed_sender_kind,
            to=item.to,
            recipients=recipients_column(item.to),
            reply_to=item.reply_to,
            ts=item.ts,
            ts_text=item.ts_text,
            status=item.status,
            title=item.title,
            body=item.body,
            kind=message_kind_of(item.status),
            conversation_id=item.conversation_id,
            correlation_id=item.correlation_id,
            data=item.data,
            content_type=item.content_type,
            metadata=item.metadata,
            frontmatter=item.frontmatter,
        )
        message.json_size = message_json_size(message)
        message.__dict__.pop("_json", None)  # not kept: the batch would hold every rendering
        batch.append((item, message))
        count += 1
        if len(batch) >= IMPORT_BATCH:
            flush()
    if batch:
        flush()
    return count


def presence_import(*, channel: Channel, rows: Iterable[ImportedPresence]) -> None:
    """The presence rows of a channel's senders, in the caller's transaction."""
    Presence.objects.bulk_create(
        (Presence(channel=channel, **row._asdict()) for row in rows), batch_size=IMPORT_BATCH
    )


def cursors_import(*, channel: Channel, cursors: Iterable[tuple[str, int]]) -> None:
    """Cursors as (agent name, seq), the agents made when missing, in the caller's
    transaction. Raises INVALID_NAME."""
    cursors = list(cursors)
    names = [name for name, _ in cursors]
    for name in names:
        check_agent_name(name, field="cursor")
    Agent.objects.bulk_create(
        [Agent(name=name) for name in names], ignore_conflicts=True, batch_size=IMPORT_BATCH
    )
    agents = dict(Agent.objects.filter(name__in=names).values_list("name", "pk"))
    now = timezone.now()
    Cursor.objects.bulk_create(
        (
            Cursor(agent_id=agents[name], channel=channel, seq=seq, updated_at=now)
            for name, seq in cursors
        ),
        batch_size=IMPORT_BATCH,
    )


def markers_import(*, channel: Channel, claims: Iterable[tuple[str, str, str, str]]) -> None:
    """Claimed legacy markers as (source file, marker, owner, the file's text), in the caller's
    transaction. Raises MARKER_ALREADY_CLAIMED (a marker claimed twice, naming the file)."""
    seen: dict[str, str] = {}
    rows = []
    for source, marker, owner, text in claims:
        if marker in seen:
            raise AppError(
                "MARKER_ALREADY_CLAIMED",
                f"{source}: marker {marker!r} is also claimed by {seen[marker]}",
                detail={"file": source, "marker": marker},
            )
        seen[marker] = source
        rows.append(MarkerClaim(channel=channel, marker=marker, owner=owner, text=text))
    MarkerClaim.objects.bulk_create(rows, batch_size=IMPORT_BATCH)
