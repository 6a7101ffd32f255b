"""Heavy requests: what one agent may make the server do at once, and for how long.

A request that can cost more than a few milliseconds of database work (the state summary, a
compaction, a search, a peek (up to a megabyte of messages), the lists, event reads: a view
that says ``heavy = True``, or names the methods in ``heavy_methods``) is run by the API lane

- on a pool of threads of its own (``agentchat.core.db.transactions.run_db_heavy``,
  AGENTCHAT_DB_HEAVY_THREADS), so that it never holds the threads that posts, reads, peeks and
  acks need;
- one at a time per token (``HeavyGate``): a second heavy request of the same token waits,
  holding no thread, until the first is answered; past AGENTCHAT_HEAVY_QUEUE_PER_AGENT waiting
  it is refused 429 HEAVY_REQUEST_BUSY. One agent thus occupies at most one heavy thread;
- within a work budget (``work_budget``, AGENTCHAT_HEAVY_BUDGET_SECONDS of database time): on
  SQLite a progress handler aborts the statement running past the deadline, on PostgreSQL
  ``statement_timeout`` does, and ``budget_check`` stops Python work between chunks; any of
  them answers 503 WORK_BUDGET_EXCEEDED and the transaction rolls back.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from agentchat.core.rules.errors import AppError

# SQLite calls the progress handler every this many virtual machine instructions (about a
# millisecond of work here): often enough to stop close to the deadline, rarely enough that
# taking the GIL for each call (from a thread that released it to run the query) does not
# slow the short requests' threads (at 10,000 a search beside a victim's posts doubled
# their p99).
PROGRESS_STEPS = 100_000

_state = threading.local()


def budget_exceeded(seconds: float) -> AppError:
    return AppError(
        "WORK_BUDGET_EXCEEDED",
        f"the request ran out of its work budget ({seconds:g} s of database work): "
        "narrow it, or retry",
        detail={"budget_seconds": seconds},
    )


class _Budget:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.expired = False
        self.paused = False

    def over(self) -> bool:
        if self.paused:
            return False
        if time.monotonic() >= self.deadline:
            self.expired = True
        return self.expired


def budget_check() -> None:
    """Between chunks of Python work in a budgeted request: raises WORK_BUDGET_EXCEEDED once
    its deadline passed. Does nothing outside a budget."""
    budget: _Budget | None = getattr(_state, "budget", None)
    if budget is not None and budget.over():
        raise budget_exceeded(budget.seconds)


@contextmanager
def budget_paused() -> Iterator[None]:
    """Work the budget does not stop: a request that ran out stores its progress with it."""
    budget: _Budget | None = getattr(_state, "budget", None)
    if budget is None:
        yield
        return
    budget.paused = True
    try:
        yield
    finally:
        budget.paused = False


def budget_active() -> bool:
    """Whether this thread runs within a work budget (a heavy request)."""
    return getattr(_state, "budget", None) is not None


@contextmanager
def work_budget(seconds: float | None = None, using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """Run the block within ``seconds`` (AGENTCHAT_HEAVY_BUDGET_SECONDS) of work on this
    thread's connection; raises WORK_BUDGET_EXCEEDED past it. Nested budgets keep the outer."""
    if budget_active():
        yield
        return
    seconds = settings.AGENTCHAT_HEAVY_BUDGET_SECONDS if seconds is None else seconds
    budget = _Budget(seconds)
    connection = connections[using]
    connection.ensure_connection()
    vendor = connection.vendor
    _state.budget = budget
    try:
        if vendor == "sqlite":
            raw = connection.connection
            raw.set_progress_handler(lambda: 1 if budget.over() else 0, PROGRESS_STEPS)
        elif vendor == "postgresql":
            # Per statement; budget_check bounds the sum between statements. For the session
            # (a request may run statements outside a transaction), reset below; within a
            # transaction for it only (its end, a rollback too, undoes it).
            scope = "LOCAL " if connection.in_atomic_block else ""
            with connection.cursor() as cursor:
                cursor.execute(f"SET {scope}statement_timeout = %s", [max(1, int(seconds * 1000))])
        try:
            yield
        except DatabaseError as exc:
            if budget.expired or _statement_timed_out(exc):
                raise budget_exceeded(seconds) from None
            raise
    finally:
        _state.budget = None
        if vendor == "sqlite" and connection.connection is not None:
            connection.connection.set_progress_handler(None, 0)
        elif vendor == "postgresql" and connection.connection is not None:
            _timeout_reset(connection)


def _statement_timed_out(exc: DatabaseError) -> bool:
    cause: Any = exc.__cause__
    return getattr(cause, "sqlstate", None) == "57014" or getattr(cause, "pgcode", None) == "57014"


def _timeout_reset(connection: Any) -> None:
    status = getattr(getattr(connection.connection, "info", None), "transaction_status", None)
    if getattr(status, "name", "") == "INERROR":
        return  # an aborted transaction: its rollback undoes a SET LOCAL, and a SET is reset
        # by the next budget, or when the pool resets the connection
    scope = "LOCAL " if connection.in_atomic_block else ""
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"SET {scope}statement_timeout = DEFAULT")
    except DatabaseError:
        if not connection.in_atomic_block:
            connection.close()


def view_is_heavy(view: Any, method: str | None) -> bool:
    """Whether the view class ``view`` says that ``method`` is heavy: ``heavy = True`` for all
    of its methods, or ``heavy_methods``. HEAD is GET: Django runs the view's ``get`` for it,
    the same work with the body dropped."""
    if view is None:
        return False
    if method is not None and method.upper() == "HEAD":
        method = "GET"
    methods = getattr(view, "heavy_methods", ())
    return bool(getattr(view, "heavy", False)) or (method or "").upper() in methods


class HeavyGate:
    """At most one heavy request running per token; up to ``queue`` more wait (on the event
    loop, holding no thread), beyond that HEAVY_REQUEST_BUSY. Keyed by a digest of the bearer
    token as authentication parses it (``key``): the gate runs before authentication, and an
    unauthenticated request is refused at once by its view anyway."""

    def __init__(self) -> None:
        self._locks: dict[bytes, asyncio.Lock] = {}
        self._waiting: dict[bytes, int] = {}

    @staticmethod
    def key(credential: str | bytes | None) -> bytes:
        """The gate's key of ``credential``: the request's token as its parser reads it (the
        API lane's ``heavy_gate_key``), so that every spelling of one header is one key."""
        if not credential:
            return b""
        raw = credential.encode() if isinstance(credential, str) else credential
        return hashlib.blake2b(raw, digest_size=16).digest()

    @contextmanager
    def _counted(self, key: bytes) -> Iterator[None]:
        self._waiting[key] = self._waiting.get(key, 0) + 1
        try:
            yield
        finally:
            self._waiting[key] -= 1
            if not self._waiting[key]:
                del self._waiting[key]
                self._locks.pop(key, None)

    async def run(self, key: bytes, call: Any) -> Any:
        """``await call()`` once no other heavy request of ``key`` runs."""
        queue = settings.AGENTCHAT_HEAVY_QUEUE_PER_AGENT
        if self._waiting.get(key, 0) > queue:
            raise AppError(
                "HEAVY_REQUEST_BUSY",
                f"this token has a heavy request running and {queue} waiting: "
                "wait for their answers",
                detail={"queue": queue},
            )
        with self._counted(key):
            lock = self._locks.setdefault(key, asyncio.Lock())
            async with lock:
                return await call()

    def waiting(self, key: bytes) -> int:
        """How many heavy requests of ``key`` run or wait (tests)."""
        return self._waiting.get(key, 0)
