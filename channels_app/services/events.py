"""Event and audit messages: ``event_post`` and ``audit_post``."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, NamedTuple

from django.utils import timezone

from agentchat.core.db.transactions import write_atomic
from agentchat.core.rules.audit import AUDIT_STATUSES
from agentchat.core.rules.records import ts_seconds
from channels_app import events
from channels_app.models import Channel, Message, Presence
from channels_app.records import audit_body, audit_title
from channels_app.services.messages import message_post


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
    EVENT_DUPLICATE_PRIMITIVE, EVENT_UNKNOWN_PRIMITIVE, EVENT_INVALID_STATUS…), FIELD_TOO_LARGE,
    INVISIBLE_CHARACTER (``events.event_visible_check``).
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
    events.event_visible_check(event)
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
    payload names. ``event`` must be one of ``agentchat.core.rules.audit.AUDIT_STATUSES`` (the one
    list of the statuses clients may not take).
    """
    if event not in AUDIT_STATUSES:
        raise ValueError(
            f"audit event {event!r} is not in agentchat.core.rules.audit.AUDIT_STATUSES"
        )
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
