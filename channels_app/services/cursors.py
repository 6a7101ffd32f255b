"""Cursors: read pages that move them, and set, ack and compare-and-set."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import NamedTuple

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from agentchat.core.db.transactions import write_atomic
from agentchat.core.identity.revocation import token_is_live
from agentchat.core.models import Agent, ApiToken
from agentchat.core.rules.errors import AppError, ClientGone
from channels_app.models import Channel, Cursor
from channels_app.selectors import (
    READ_LIMIT_MAX,
    READ_SCAN_ROWS,
    channel_last_seq_visible,
    cursor_get,
    message_page,
    messages_relevant_exist,
)


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
    more: bool  # relevant messages may remain after this page: read again at once
    last_seq: int  # the channel's last seq as the read saw it
    # The last seq the read examined: nothing after the cursor up to it is relevant but what
    # the page holds (below last_seq when the row budget, READ_SCAN_ROWS, ran out). None: last_seq.
    scanned: int | None = None


def _scan_start(cursor: int, known: tuple[int, int] | None) -> int:
    """Where a read's scan starts: after the cursor, or after ``known`` = (a cursor, the last
    seq an earlier read from it examined, finding nothing relevant) when the cursor has not
    moved back since (relevance never changes, so what was irrelevant stays so)."""
    if known is not None and known[0] <= cursor:
        return max(cursor, known[1])
    return cursor


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


def message_read(
    *,
    channel: Channel,
    agent: Agent,
    limit: int = READ_LIMIT_MAX,
    max_bytes: int | None = None,
    advance_if_empty: bool = True,
    token_id: int | None = None,
    abandoned: threading.Event | None = None,
    known: tuple[int, int] | None = None,
) -> ReadPage:
    """SPEC §5/§8, paged: the relevant messages after the cursor, at most ``limit`` of them and
    ``max_bytes`` of JSON (AGENTCHAT_READ_MAX_BYTES; always at least one). When relevant
    messages remain, ``more`` is true and the cursor moves to the last one delivered; otherwise
    it moves to the channel's last seq, past the irrelevant ones.

    A read examines at most READ_SCAN_ROWS messages (relevant or not) after where it starts:
    when they run out before the channel's last seq, it answers what it found with ``more``
    true and the cursor on the last message examined (past irrelevant ones only: never past a
    relevant one not sent), and the next read goes on from there. ``known`` (a wait's
    earlier empty reads, see ``_scan_start``) spares a wait re-examining what it has.

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
    start = _scan_start(cursor, known)
    if start >= last_seq:
        return ReadPage([], cursor, False, last_seq)  # nothing new: no write transaction
    if not advance_if_empty:
        window = min(last_seq, start + READ_SCAN_ROWS)
        if not messages_relevant_exist(channel=channel, name=agent.name, after=start, upto=window):
            return ReadPage([], cursor, False, last_seq, window)
    with write_atomic():
        _token_check(token_id)
        # Re-read inside the write transaction: the counter row and every message up to it are
        # committed together, so nothing at or below last_seq can appear later.
        last_seq = channel_last_seq_visible(channel, viewer=agent.name)
        cursor = _cursor_for_update(agent=agent, channel=channel)
        start = _scan_start(cursor, known)
        window = min(last_seq, start + READ_SCAN_ROWS)
        page = message_page(
            channel=channel,
            name=agent.name,
            after=start,
            upto=window,
            limit=limit,
            max_bytes=max_bytes,
        )
        scanned = page.last if page.more else window
        if scanned > cursor and (page.parts or advance_if_empty):
            _cursor_set(agent=agent, channel=channel, seq=scanned)
            cursor = scanned
        if abandoned is not None and abandoned.is_set():
            raise ClientGone
    more = page.more or (window < last_seq and cursor == scanned)
    return ReadPage(page.parts, cursor, more, last_seq, scanned)


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
