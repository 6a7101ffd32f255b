"""Event and audit messages: ``event_post`` and ``audit_post``."""

from __future__ import annotations

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
def event_post(*, channel: Channel, agent: str, request: events.EventRequest) -> PostedEvent:
    """Post the capability or status event ``request`` (REFERENCE-CLI §3.12; judged at the
    boundary by ``events.event_request_parse``) as ``agent``: the server fills
    ``schema_version``, ``agent`` and ``ts`` (now, UTC, to the second; the message's ``ts`` is
    the same instant, with its microseconds) and posts it as a broadcast message of kind
    ``event`` whose body is the compact JSON, updating ``agent``'s presence in the same
    transaction.

    Raises FIELD_TOO_LARGE (the message's bounds, ``message_post``).
    """
    now = timezone.now()
    event = request.event(agent=agent, ts=ts_seconds(now))
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
