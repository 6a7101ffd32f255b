"""The folder import's writes: channels, messages, presence, cursors, markers."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any, NamedTuple

from django.db import IntegrityError
from django.utils import timezone

from agentchat.core.db.rows import rows_insert
from agentchat.core.db.transactions import write_atomic
from agentchat.core.models import Agent
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import check_agent_name, check_channel_name
from channels_app import events
from channels_app.models import Channel, Cursor, MarkerClaim, Message, Presence
from channels_app.records import message_json_size
from channels_app.services.channels import (
    channel_insert,
    members_normalize,
    roster_check,
    topic_check,
    visibility_check,
)
from channels_app.services.messages import recipients_column

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
    # The file's ``type:`` when it is a signal type (agentchat.folder.render writes it so).
    signal_type: str = ""


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
    topic_check(topic, imported=True)
    members = members_normalize(members)
    visibility_check(visibility)
    with write_atomic():
        if visibility == Channel.Visibility.MEMBERS:
            Agent.objects.bulk_create([Agent(name=name) for name in members], ignore_conflicts=True)
        roster_check(visibility=visibility, members=members)
        channel = channel_insert(
            name=name, topic=topic, members=members, visibility=visibility, last_seq=last_seq
        )
        if created_at is not None:  # created_at is auto_now_add: set after the insert
            fields: dict[str, Any] = {
                "created_at": created_at,
                "spellings": {"created": created_text},
            }
            Channel.objects.filter(pk=channel.pk).update(**fields)
            for field, value in fields.items():
                setattr(channel, field, value)
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
        # Its fields are the message's columns as they are, but for the file and the id.
        columns = item._asdict()
        del columns["source"], columns["message_id"]
        message = Message(
            id=item.message_id or f"msg_{uuid.uuid4().hex}",
            channel=channel,
            # A file's claim is no identity: every imported message is an agent's, marked
            # imported (channels_app.approval_rule never counts it as a person's answer).
            sender_kind=Agent.Kind.AGENT,
            imported=True,
            recipients=recipients_column(item.to),
            kind=message_kind_of(item.status),
            **columns,
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
