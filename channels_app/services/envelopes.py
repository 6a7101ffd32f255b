"""HTTP v1 envelopes: send a message, a receipt or a contact share to one agent's inbox.

Each is one transaction (``_deliver``): the pair's direct channel (made by its first envelope),
the envelope's message in it (``message_post``: the channel's seq, its ring), the recipient's
next inbox seq_num (``mailbox.inbox_seq_take``) and the ``Delivery``; on commit it rings the
recipient's inbox group and the monitor's group (``groups``), doorbells that carry the inbox
and the seq only: a follower reads the inbox back from its cursor.

Envelope ids are unique per sender (``Delivery`` ``(sender, envelope_id)``): one agent cannot
take an id another agent means to use. A caller-supplied id makes a retry return the first
envelope (created False) when its content is the same (the request's digest), ID_CONFLICT
otherwise; retries that run at once make one envelope (the second waits on the first's unique
row, then finds it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from django.db import IntegrityError, transaction

from agentchat.core.db.rows import RowSelect, row_insert
from agentchat.core.db.transactions import write_atomic
from agentchat.core.live.push import push_on_commit
from agentchat.core.models import Agent
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import check_agent_name
from channels_app import envelopes as records
from channels_app.contacts import contact_get
from channels_app.inbox import delivery_received
from channels_app.models import Delivery, Message
from channels_app.services.direct import direct_channel_for
from channels_app.services.groups import MONITOR_GROUP, inbox_group
from channels_app.services.mailbox import inbox_seq_take
from channels_app.services.messages import message_post
from channels_app.services.monitorseq import monitor_number_on_commit

DELIVERY_RING = "delivery"


@dataclass(frozen=True)
class Sent:
    """A sent envelope: its delivery and message rows, and whether this call made it (False:
    the retry of an envelope sent before)."""

    delivery: Delivery
    message: Message
    created: bool

    def envelope(self) -> dict[str, Any]:
        return records.envelope_to_dict(self.delivery, self.message)


# Every envelope looks its recipient up (RowSelect spares it the queryset compiler).
_AGENT_BY_NAME = RowSelect((Agent, "a"), from_="{Agent} a", where="a.name = %s")


def _recipient(to: object) -> Agent:
    name = check_agent_name(to, field="to")
    row = _AGENT_BY_NAME.first([name])
    if row is None:
        raise AppError("AGENT_NOT_FOUND", f"no agent {name!r}", detail={"to": name})
    return cast(Agent, row[0])


# A retry's lookup, on the hot path of every send with a caller's id.
_SENT_BY_ID = RowSelect(
    (Delivery, "d"),
    (Message, "m"),
    (Agent, "a"),
    from_="{Delivery} d JOIN {Message} m ON m.id = d.message_id "
    "JOIN {Agent} a ON a.id = d.recipient_id",
    where="d.sender = %s AND d.envelope_id = %s",
)


def _existing(sender: str, envelope_id: str, digest: str) -> Sent | None:
    """The sender's envelope of this id: the same content returns it, other content is
    ID_CONFLICT."""
    row = _SENT_BY_ID.first([sender, envelope_id])
    if row is None:
        return None
    found, message, recipient = cast(tuple[Delivery, Message, Agent], row)
    if found.request_digest != digest:
        raise AppError(
            "ID_CONFLICT",
            f"envelope id {envelope_id!r} was used by {sender} for another envelope",
            detail={"id": envelope_id},
        )
    found.message, found.recipient = message, recipient
    return Sent(found, message, created=False)


def _deliver(
    *,
    sender: Agent,
    recipient: Agent,
    kind: str,
    envelope_id: str | None,
    digest: str,
    text: str | None,
    data: Any,
    content_type: str | None,
    metadata: dict[str, str],
    conversation_id: str,
    correlation_id: str | None,
    reply_to: int | None = None,
) -> Sent:
    """Store and deliver one envelope, in the caller's write transaction (see the module)."""
    if envelope_id is not None and (found := _existing(sender.name, envelope_id, digest)):
        return found
    channel = direct_channel_for(sender.name, recipient.name)
    try:
        # A savepoint for a caller's id only: a concurrent retry's unique row undoes it all (a
        # generated id meets no such row).
        with transaction.atomic(savepoint=envelope_id is not None):
            message, _ = message_post(
                channel=channel,
                sender=sender.name,
                sender_kind=sender.kind,
                title=records.envelope_title(kind, text=text, data=data, content_type=content_type),
                body=text or "",
                to=[recipient.name],
                reply_to=reply_to,
                status=kind,
                conversation_id=conversation_id,
                correlation_id=correlation_id or "",
                data=data,
                content_type=content_type or "",
                metadata=metadata,
                envelope=True,
            )
            seq, delivered_at = inbox_seq_take(recipient.pk, message.ts)
            delivery = row_insert(
                Delivery(
                    message=message,
                    recipient=recipient,
                    seq=seq,
                    sender=sender.name,
                    envelope_id=envelope_id or message.id,
                    kind=kind,
                    has_text=text is not None,
                    delivered_at=delivered_at,
                    request_digest=digest,
                )
            )
    except IntegrityError:
        if envelope_id is None or not (found := _existing(sender.name, envelope_id, digest)):
            raise
        return found
    monitor_number_on_commit()  # before the rings: a monitor follow reads it numbered
    ring = {"kind": DELIVERY_RING, "inbox": recipient.pk, "seq": seq}
    push_on_commit(inbox_group(recipient.pk), ring)
    push_on_commit(MONITOR_GROUP, {**ring, "name": recipient.name})
    return Sent(delivery, message, created=True)


def _deliver_data(
    *,
    sender: Agent,
    recipient: Agent,
    kind: str,
    envelope_id: str | None,
    digested: dict[str, Any],
    data: dict[str, Any],
    conversation_id: str,
    reply_to: int | None = None,
) -> Sent:
    """``_deliver`` an envelope the server writes (a receipt, a contact share): its content
    ``data`` only (no text, content type, metadata or correlation id); the retry digest of
    ``kind``, ``digested`` and ``data``."""
    return _deliver(
        sender=sender,
        recipient=recipient,
        kind=kind,
        envelope_id=envelope_id,
        digest=records.request_digest({"kind": kind, **digested, **data}),
        text=None,
        data=data,
        content_type=None,
        metadata={},
        conversation_id=conversation_id,
        correlation_id=None,
        reply_to=reply_to,
    )


@write_atomic()
def envelope_send(
    *,
    sender: Agent,
    to: str,
    envelope_id: str | None = None,
    conversation_id: str | None = None,
    correlation_id: str | None = None,
    text: str | None = None,
    data: Any = None,
    content_type: str | None = None,
    metadata: dict[str, str] | None = None,
) -> Sent:
    """Send a message envelope to ``to``'s inbox (``POST /v1/agents/<id>/messages``). Omitted:
    ``envelope_id`` (``msg_`` + 32 hex digits) and ``conversation_id`` (``conv_`` + 32) are
    generated, the other values null, metadata {}. Raises INVALID_VALUE, INVALID_TYPE,
    INVALID_NAME, INVISIBLE_CHARACTER, FIELD_TOO_LARGE, JSON_TOO_DEEP, AGENT_NOT_FOUND,
    ID_CONFLICT."""
    if envelope_id is not None:
        records.envelope_id_check(envelope_id)
    conversation_id = records.thread_id_check(conversation_id, field="conversation_id")
    correlation_id = records.thread_id_check(correlation_id, field="correlation_id")
    text = records.text_field_check(text)
    data = records.data_field_check(data)
    content_type = records.content_type_check(content_type)
    metadata = records.string_map_check(metadata, field="metadata")
    recipient = _recipient(to)
    digest = records.request_digest(
        {
            "kind": Delivery.Kind.MESSAGE,
            "to": recipient.name,
            "conversation_id": conversation_id,
            "correlation_id": correlation_id,
            "text": text,
            "data": data,
            "content_type": content_type,
            "metadata": metadata,
        }
    )
    return _deliver(
        sender=sender,
        recipient=recipient,
        kind=Delivery.Kind.MESSAGE,
        envelope_id=envelope_id,
        digest=digest,
        text=text,
        data=data,
        content_type=content_type,
        metadata=metadata,
        conversation_id=conversation_id or records.conversation_id_new(),
        correlation_id=correlation_id,
    )


@write_atomic()
def receipt_send(
    *,
    sender: Agent,
    message_id: str,
    status: str,
    to: str | None = None,
    detail: str | None = None,
    conversation_id: str | None = None,
    envelope_id: str | None = None,
) -> Sent:
    """A receipt for an envelope ``sender`` received (``POST /v1/agents/<id>/receipts``): a new
    envelope of kind ``receipt`` in the original sender's inbox, ``message.data`` =
    ``{message_id, status, detail}``, in reply to the original in their direct channel; the
    original never changes. ``to``, when given, is the original's sender; ``conversation_id``
    defaults to the original's. Raises INVALID_VALUE, INVALID_NAME, INVISIBLE_CHARACTER,
    MESSAGE_NOT_FOUND, AGENT_NOT_FOUND, ID_CONFLICT."""
    records.envelope_id_check(message_id, field="message_id")
    records.receipt_status_check(status)
    detail = records.detail_check(detail)
    conversation_id = records.thread_id_check(conversation_id, field="conversation_id")
    if envelope_id is not None:
        records.envelope_id_check(envelope_id)
    if to is not None:
        check_agent_name(to, field="to")
    original = delivery_received(agent=sender, envelope_id=message_id, sender=to)
    recipient = _recipient(original.sender)
    return _deliver_data(
        sender=sender,
        recipient=recipient,
        kind=Delivery.Kind.RECEIPT,
        envelope_id=envelope_id,
        digested={"to": recipient.name, "conversation_id": conversation_id},
        data={"message_id": message_id, "status": status, "detail": detail},
        conversation_id=conversation_id
        or original.message.conversation_id
        or records.conversation_id_new(),
        reply_to=original.message.seq,
    )


@write_atomic()
def contact_share_send(
    *, sender: Agent, to: str, contact_id: str, conversation_id: str | None = None
) -> Sent:
    """Share a card of ``sender``'s address book with ``to`` (``POST …/contact-shares``): an
    envelope of kind ``contact.share`` whose ``message.data.contact`` is the whole card, as it
    stands now. Raises INVALID_NAME, INVALID_VALUE, INVISIBLE_CHARACTER, AGENT_NOT_FOUND,
    CONTACT_NOT_FOUND."""
    check_agent_name(contact_id, field="contact_id")
    conversation_id = records.thread_id_check(conversation_id, field="conversation_id")
    recipient = _recipient(to)
    card = contact_get(owner=sender, contact_id=contact_id)
    return _deliver_data(
        sender=sender,
        recipient=recipient,
        kind=Delivery.Kind.CONTACT_SHARE,
        envelope_id=None,
        digested={"to": to},
        data={"contact": card},
        conversation_id=conversation_id or records.conversation_id_new(),
    )
