"""An agent's HTTP v1 counters (``Mailbox``): the next inbox seq_num and the next address-book
event seq, each taken by one upsert in the transaction that writes what it numbers.

Why a counter row and not the table's autoincrement id: an id is handed out when a transaction
inserts, not when it commits, so on PostgreSQL a delivery numbered 5 can commit after one
numbered 6, and a reader that read 6 and moved its cursor past it never sees 5. The upsert
takes the counter row's lock until the transaction ends: the next delivery to the same inbox
waits for this one to commit (or roll back) before it is numbered, so numbers commit in order
and a committed number has every smaller one committed before it. On SQLite the write
transaction (``BEGIN IMMEDIATE``) serializes writers anyway.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.db import connection
from django.utils.dateparse import parse_datetime

from channels_app.models import Mailbox


def _table() -> str:
    return connection.ops.quote_name(Mailbox._meta.db_table)


def inbox_seq_take(agent_id: int, now: datetime) -> tuple[int, datetime]:
    """The next seq_num of the agent's inbox and the delivery's timestamp (the later of
    ``now`` and the inbox's last one, so that an inbox's timestamps never go back when the
    clock does). Call inside the delivery's transaction."""
    table = _table()
    at = connection.ops.adapt_datetimefield_value(now)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (agent_id, inbox_tail, inbox_at, book_tail) "
            "VALUES (%s, 1, %s, 0) ON CONFLICT (agent_id) DO UPDATE SET "
            f"inbox_tail = {table}.inbox_tail + 1, "
            f"inbox_at = CASE WHEN {table}.inbox_at IS NULL "
            f"OR {table}.inbox_at < excluded.inbox_at "
            f"THEN excluded.inbox_at ELSE {table}.inbox_at END "
            "RETURNING inbox_tail, inbox_at",
            [agent_id, at],
        )
        tail, stamp = cursor.fetchone()
    return int(tail) - 1, _as_datetime(stamp)


def book_seq_take(agent_id: int) -> int:
    """The next seq of the agent's address-book events. Call inside the event's transaction."""
    table = _table()
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (agent_id, inbox_tail, inbox_at, book_tail) "
            "VALUES (%s, 0, NULL, 1) ON CONFLICT (agent_id) DO UPDATE SET "
            f"book_tail = {table}.book_tail + 1 RETURNING book_tail",
            [agent_id],
        )
        return int(cursor.fetchone()[0]) - 1


def _as_datetime(value: object) -> datetime:
    """A timestamp column read back raw: a datetime on PostgreSQL, the stored text on SQLite
    (naive, UTC, as Django writes it there)."""
    if isinstance(value, datetime):
        parsed = value
    else:
        parsed = parse_datetime(str(value))  # type: ignore[assignment]
        if parsed is None:
            raise ValueError(f"not a timestamp: {value!r}")
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
