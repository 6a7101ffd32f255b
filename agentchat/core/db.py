"""Write transactions.

``write_atomic()`` is the transaction boundary of every service that writes. On SQLite it first
takes a process-wide FIFO lock: SQLite's busy handler is unfair (single writers starved for
seconds at 8 concurrent posters), and a FIFO hand-off bounds the tail. On PostgreSQL it is a
plain ``transaction.atomic()``; row locks and conditional updates do the rest.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from channels.db import database_sync_to_async
from django.db import DEFAULT_DB_ALIAS, connections, transaction


class FifoLock:
    """A lock granted strictly in arrival order (a ticket lock)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._next_ticket = 0
        self._serving = 0

    def acquire(self) -> None:
        with self._cond:
            ticket = self._next_ticket
            self._next_ticket += 1
            while self._serving != ticket:
                self._cond.wait()

    def release(self) -> None:
        with self._cond:
            self._serving += 1
            self._cond.notify_all()


_sqlite_writer = FifoLock()


@contextmanager
def write_atomic(using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    connection = connections[using]
    # Nested writes (an audit message inside a task mutation) join the outer transaction.
    serialize = connection.vendor == "sqlite" and not connection.in_atomic_block
    if serialize:
        _sqlite_writer.acquire()
    try:
        with transaction.atomic(using=using):
            yield
    finally:
        if serialize:
            _sqlite_writer.release()


def db_call(func: Any) -> Any:
    """Run ORM work from async code on a bounded worker pool; the connection is closed after
    each call (CONN_MAX_AGE=0), so an awaiting consumer holds no thread and no connection."""
    return database_sync_to_async(func, thread_sensitive=False)
