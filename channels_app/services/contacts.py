"""HTTP v1 address books: save a card (``PUT …/contacts/<cid>``) and accept a received contact
share (``POST …/contact-shares/<msg_id>/accept``), each a ``contact.upsert`` event appended to
the owner's log with the card as it now stands (``Contact``), in one transaction.

The event's seq is the owner's next (``mailbox.book_seq_take``), taken first: its row lock
serializes the writes of one address book, so "is the card new" and "was this share accepted"
are judged after every earlier write committed (two PUTs of a new card: one 201, one 200).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from agentchat.core.db.transactions import write_atomic
from agentchat.core.identity.rates import rate_take
from agentchat.core.models import Agent
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import check_agent_name
from channels_app import envelopes as records
from channels_app.inbox import delivery_received
from channels_app.models import Contact, ContactEvent, Delivery
from channels_app.services.mailbox import book_seq_take


class _Undo(Exception):
    """Rolls the savepoint back (the seq taken) and carries what to answer instead."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer


def _upsert(
    owner: Agent, card: dict[str, Any], seq: int, *, source: str, share: Delivery | None = None
) -> tuple[ContactEvent, bool]:
    """Append the event under ``seq`` and write the card; returns (event, the card is new)."""
    now = timezone.now()
    event = ContactEvent.objects.create(
        owner=owner,
        seq=seq,
        contact_id=card["id"],
        card=card,
        source=source,
        share_from=share.sender if share is not None else "",
        share_id=share.envelope_id if share is not None else "",
        created_at=now,
    )
    written = Contact.objects.filter(owner=owner, contact_id=card["id"]).update(
        card=card, event_seq=seq, updated_at=now
    )
    if not written:
        Contact.objects.create(
            owner=owner, contact_id=card["id"], card=card, event_seq=seq, updated_at=now
        )
    return event, not written


@write_atomic()
def contact_put(*, owner: Agent, contact_id: str, card: Any) -> tuple[dict[str, Any], bool]:
    """Save ``card`` as ``contact_id`` in ``owner``'s address book; returns (the card as stored,
    created). The card's ``id`` must be ``contact_id``. A card equal to the stored one appends
    no event; a change takes one from the owner's post budget. Raises RATE_LIMITED,
    INVALID_NAME, INVALID_TYPE, INVALID_VALUE, INVISIBLE_CHARACTER, UNKNOWN_FIELD,
    MISSING_FIELD."""
    check_agent_name(contact_id, field="contact_id")
    stored = records.contact_card_check(card)
    if stored["id"] != contact_id:
        raise AppError(
            "INVALID_VALUE",
            f"the card's id {stored['id']!r} is not the contact id of the path {contact_id!r}",
            detail={"field": "id"},
        )
    try:
        with transaction.atomic():
            seq = book_seq_take(owner.pk)
            current = (
                Contact.objects.filter(owner=owner, contact_id=contact_id)
                .values_list("card", flat=True)
                .first()
            )
            if current == stored:
                raise _Undo(False)
            if owner.kind == Agent.Kind.AGENT:
                rate_take(agent=owner.name)  # a change costs one post; a same card, nothing
            _, created = _upsert(owner, stored, seq, source=ContactEvent.Source.PUT)
    except _Undo as undo:
        return stored, bool(undo.answer)
    return stored, created


@write_atomic()
def contact_share_accept(*, owner: Agent, message_id: str) -> tuple[ContactEvent, bool]:
    """Accept the contact share ``message_id`` that ``owner`` received: a ``contact.upsert``
    event of its card in ``owner``'s address book (the received envelope never changes).
    Accepting it again answers the first acceptance (created False). Raises INVALID_VALUE,
    MESSAGE_NOT_FOUND (no share of that id was delivered to ``owner``)."""
    records.envelope_id_check(message_id, field="message_id")
    share = delivery_received(agent=owner, envelope_id=message_id, kind=Delivery.Kind.CONTACT_SHARE)
    accepted = ContactEvent.objects.filter(
        owner=owner,
        source=ContactEvent.Source.SHARE,
        share_from=share.sender,
        share_id=share.envelope_id,
    )
    try:
        with transaction.atomic():
            seq = book_seq_take(owner.pk)
            first = accepted.first()
            if first is not None:
                raise _Undo(first)
            shared = share.message.data
            assert isinstance(shared, dict)  # a share's data is {"contact": card}
            event, _ = _upsert(
                owner,
                shared["contact"],
                seq,
                source=ContactEvent.Source.SHARE,
                share=share,
            )
    except _Undo as undo:
        return undo.answer, False
    return event, True
