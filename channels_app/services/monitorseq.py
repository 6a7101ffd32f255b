"""The monitor's sequence: one number per delivery across every inbox (``Delivery.mseq``), in
commit order, so that the admin monitor's cursor is one number however many inboxes there are.

A delivery is stored without one. Once it has committed, ``monitor_number`` gives the
committed deliveries that have none the next numbers, in one short transaction that holds the
lock of the ``MonitorTail`` row: numberings run one after another, and each one's statements
start after the previous one committed (PostgreSQL's READ COMMITTED takes a snapshot per
statement, after the lock), so each batch is numbered above every number committed before it
and becomes visible whole. So the numbers visible to a reader are always 1..tail with no hole
still to fill: a reader that has passed ``n`` never sees a new number below it, and a
delivery that committed late is numbered late, after what a reader already has. On SQLite the
write transaction serializes the numberings anyway.

Who numbers: the delivering request right after its commit (``monitor_number_on_commit``),
and every monitor read before it reads (so a delivery whose request died between its commit
and its numbering is numbered by the next read). Within a batch the order is the monitor's
presentation order (timestamp, inbox, seq_num); an inbox's deliveries commit in seq_num order,
so their numbers keep it. The lock is held only by this module's few statements, never while
a client is waited for: no client can stall the numbering of another's deliveries.
"""

from __future__ import annotations

import logging

from django.db import DatabaseError, connection, transaction

from agentchat.core.db.transactions import write_atomic
from channels_app.models import Delivery, MonitorTail

log = logging.getLogger(__name__)

# Deliveries numbered by one transaction, and batches by one call (a read after a long
# outage numbers at most this many; the next call goes on: what is not numbered yet is not
# visible, so nothing is passed).
NUMBER_BATCH = 500
NUMBER_BATCHES_MAX = 20


def _tail_lock() -> int:
    """Lock the tail row (made on first use) and return the last number given."""
    table = connection.ops.quote_name(MonitorTail._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (id, tail) VALUES (1, 0) ON CONFLICT (id) DO UPDATE SET "
            f"tail = {table}.tail RETURNING tail"
        )
        return int(cursor.fetchone()[0])


def monitor_tail() -> int:
    """The last monitor number given (0: none yet)."""
    return int(MonitorTail.objects.filter(pk=1).values_list("tail", flat=True).first() or 0)


def _unnumbered() -> bool:
    return Delivery.objects.filter(mseq__isnull=True).exists()


def monitor_number(*, queued: bool = False) -> int:
    """Number the committed deliveries that have no monitor number yet; how many it numbered.
    Call outside a transaction that wrote deliveries (their numbers come after they commit).
    ``queued`` (a monitor read): each batch's write transaction takes its turn at SQLite's
    first-in-first-out writer queue like every other write (``write_atomic``); the delivering
    request's hook runs while its own turn is still held, so it writes without queueing."""
    numbered = 0
    for _ in range(NUMBER_BATCHES_MAX):
        if not _unnumbered():  # the common case: nothing to write, no lock taken
            break
        with write_atomic() if queued else transaction.atomic():
            tail = _tail_lock()
            pks = list(
                Delivery.objects.filter(mseq__isnull=True)
                .order_by("delivered_at", "recipient_id", "seq")
                .values_list("pk", flat=True)[:NUMBER_BATCH]
            )
            if not pks:
                break
            table = connection.ops.quote_name(Delivery._meta.db_table)
            with connection.cursor() as cursor:
                cursor.executemany(
                    f"UPDATE {table} SET mseq = %s WHERE message_id = %s AND mseq IS NULL",
                    [(tail + i + 1, pk) for i, pk in enumerate(pks)],
                )
            MonitorTail.objects.filter(pk=1).update(tail=tail + len(pks))
        numbered += len(pks)
        if len(pks) < NUMBER_BATCH:
            break
    return numbered


def _number_after_commit() -> None:
    try:
        monitor_number()
    except DatabaseError:  # the next monitor read numbers it: nothing is lost
        log.warning("monitor numbering failed after a delivery; the next read numbers it")


def monitor_number_on_commit() -> None:
    """Number the delivery being written (and any other waiting) once its transaction commits."""
    transaction.on_commit(_number_after_commit)
