"""Reads of the HTTP v1 address books: an agent's contacts (cards as they stand) and its log of
``contact.upsert`` events, each only its owner's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from agentchat.core.http.pages import ListPage, PageWindow, list_page, size_of
from agentchat.core.models import Agent
from agentchat.core.rules.encode import json_bytes
from agentchat.core.rules.errors import AppError
from channels_app.envelopes import contact_event_to_dict
from channels_app.inbox import cursor_page_body, inbox_cursor_check
from channels_app.models import Contact, ContactEvent, Mailbox


def contact_get(*, owner: Agent, contact_id: str) -> dict[str, Any]:
    """The card ``contact_id`` of ``owner``'s address book. Raises CONTACT_NOT_FOUND."""
    card = (
        Contact.objects.filter(owner=owner, contact_id=contact_id)
        .values_list("card", flat=True)
        .first()
    )
    if card is None:
        raise AppError(
            "CONTACT_NOT_FOUND",
            f"no contact {contact_id!r} in {owner.name}'s address book",
            detail={"contact_id": contact_id},
        )
    return dict(card)


def contact_list(*, owner: Agent, window: PageWindow) -> ListPage:
    """A page of ``owner``'s cards by id (``agentchat.core.http.pages``)."""
    return list_page(
        Contact.objects.filter(owner=owner),
        key="contact_id",
        size=size_of("card"),
        window=window,
        load=lambda rows: rows.only("contact_id", "card"),
        render=lambda row: row.card,
    )


def book_tail(owner: Agent) -> int:
    tail = Mailbox.objects.filter(agent=owner).values_list("book_tail", flat=True).first()
    return int(tail or 0)


@dataclass(frozen=True)
class BookPage:
    parts: list[bytes]
    next_cursor: int
    tail: int

    def body(self) -> bytes:
        return cursor_page_body(b"events", self.parts, self.next_cursor, self.tail)


def contact_event_dict(event: ContactEvent) -> dict[str, Any]:
    return contact_event_to_dict(
        event.seq,
        card=event.card,
        source=event.source,
        share_from=event.share_from,
        share_id=event.share_id,
        at=event.created_at,
    )


def address_book_page(
    *, owner: Agent, cursor: int | None, limit: int, max_bytes: int | None = None
) -> BookPage:
    """``owner``'s ``contact.upsert`` events from ``cursor`` (the next seq to read, 0 when
    None), at most ``limit`` and about ``max_bytes`` of JSON (at least one), as an inbox page
    pages. Raises INVALID_CURSOR (a cursor beyond the tail)."""
    max_bytes = max_bytes or settings.AGENTCHAT_READ_MAX_BYTES
    tail = book_tail(owner)
    start = cursor or 0
    inbox_cursor_check(start, tail, of="address book")
    parts: list[bytes] = []
    total = 0
    next_cursor = start
    rows = ContactEvent.objects.filter(owner=owner, seq__gte=start, seq__lt=tail).order_by("seq")
    for event in rows[:limit].iterator(chunk_size=64):
        part = json_bytes(contact_event_dict(event))
        if parts and total + len(part) > max_bytes:
            break
        parts.append(part)
        total += len(part) + 1
        next_cursor = event.seq + 1
    return BookPage(parts, next_cursor, tail)
