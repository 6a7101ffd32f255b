"""Write transactions, and the threads that run database work for async code.

``write_atomic()`` is the transaction boundary of every service that writes. On SQLite it first
takes a process-wide FIFO lock: SQLite's busy handler is unfair (single writers starved for
seconds at 8 concurrent posters), and a FIFO hand-off bounds the tail. On PostgreSQL it is a
plain ``transaction.atomic()``; row locks and conditional updates do the rest.

``run_db`` runs ORM work for the API lane and the live endpoints on a small pool of
long-lived threads (AGENTCHAT_DB_THREADS); ``run_db_heavy`` runs the lane's heavy requests
(``agentchat.core.db.heavy``) on a pool of their own (AGENTCHAT_DB_HEAVY_THREADS), so that they
never hold the threads the short ones need; ``call_on_loop`` lets that work leave a callback
(a push) for the event loop to run with the result. ``inline_executor`` is the tests' way in.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, transaction

T = TypeVar("T")
logger = logging.getLogger(__name__)


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


_pool: ThreadPoolExecutor | None = None
_heavy_pool: ThreadPoolExecutor | None = None
# Tests only (tests/asgi_client.py): the in-process ASGI test client sets this in the context of
# each request it drives, and run_db hands that request's database work to it instead of the
# pool. It runs the work in the test's own thread, on the test's connection and inside the
# test's transaction, which the pool's threads, with connections of their own, would not see
# (and on SQLite would wait on). Those connections are the test's: run_db leaves them open.
inline_executor: ContextVar[Executor | None] = ContextVar("inline_executor", default=None)
_pool_lock = threading.Lock()
_thread_state = threading.local()


class _LoopHandBack:
    """Callbacks a pool thread leaves for the event loop that handed it its work.

    They run on the loop as soon as the call returns, in the same wake-up that delivers its
    result: a post's push no longer costs the loop a wake-up of its own (about 0.5 ms of CPU
    per post on this machine kind). Once the caller stopped waiting (cancelled), later
    callbacks go to the loop directly.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._pending: list[Callable[[], None]] = []
        self._open = True
        self._lock = threading.Lock()

    def add(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if self._open:
                self._pending.append(callback)
                return
        self.loop.call_soon_threadsafe(_run_logged, callback)

    def run(self) -> None:
        with self._lock:
            self._open = False
            pending, self._pending = self._pending, []
        for callback in pending:
            _run_logged(callback)


def _run_logged(callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception:
        logger.exception("a callback handed back to the event loop failed")


def call_on_loop(callback: Callable[[], None]) -> bool:
    """From a database-pool thread: run ``callback`` on the event loop that handed this thread
    its work, once that work returns. False (nothing scheduled) on any other thread."""
    hand_back = getattr(_thread_state, "hand_back", None)
    if hand_back is None:
        return False
    hand_back.add(callback)
    return True


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max_workers=settings.AGENTCHAT_DB_THREADS, thread_name_prefix="agentchat-db"
            )
        return _pool


def _heavy_executor() -> ThreadPoolExecutor:
    global _heavy_pool
    with _pool_lock:
        if _heavy_pool is None:
            # A heavy request is mostly Python (folding, rendering) and keeps the GIL; a short
            # request's thread takes it back after each database call or socket write, and by
            # default waits up to 5 ms for it each time: tens of such waits made a post 50 ms
            # (p50) beside a looping summary. A shorter interval bounds each wait.
            sys.setswitchinterval(min(sys.getswitchinterval(), settings.AGENTCHAT_GIL_SWITCH))
            _heavy_pool = ThreadPoolExecutor(
                max_workers=settings.AGENTCHAT_DB_HEAVY_THREADS,
                thread_name_prefix="agentchat-db-heavy",
            )
        return _heavy_pool


def _release_connections() -> None:
    # SQLite connections stay open in the pool's few long-lived threads: opening one costs
    # milliseconds, and closing the last one checkpoints and deletes the WAL. PostgreSQL ones go
    # back to the connection pool, so a thread holds none between calls. A connection left in
    # a transaction (a bug) or broken is closed either way.
    for conn in connections.all(initialized_only=True):
        if (
            conn.vendor != "sqlite"
            or conn.in_atomic_block
            or (conn.errors_occurred and not conn.is_usable())
        ):
            conn.close()


async def run_db(func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run ORM work from async code on a small pool of long-lived threads (the size is
    AGENTCHAT_DB_THREADS), so awaiting code holds no thread and no connection."""
    return await _run_on(_executor, func, *args, **kwargs)


async def run_db_heavy(func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``run_db`` on the heavy requests' own pool (AGENTCHAT_DB_HEAVY_THREADS)."""
    return await _run_on(_heavy_executor, func, *args, **kwargs)


async def _run_on(
    pool: Callable[[], ThreadPoolExecutor], func: Callable[..., T], /, *args: Any, **kwargs: Any
) -> T:
    loop = asyncio.get_running_loop()
    hand_back = _LoopHandBack(loop)
    inline = inline_executor.get()

    def call() -> T:
        _thread_state.hand_back = hand_back
        try:
            return func(*args, **kwargs)
        finally:
            _thread_state.hand_back = None
            if inline is None:
                _release_connections()

    try:
        return await loop.run_in_executor(pool() if inline is None else inline, call)
    finally:
        hand_back.run()
