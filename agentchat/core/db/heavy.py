"""Heavy requests: what one agent may make the server do at once, and for how long.

A request that can cost more than a few milliseconds of database work (the state summary, a
compaction, a search, a peek (up to a megabyte of messages), the lists, event reads: a view
that says ``heavy = True``, or names the methods in ``heavy_methods``) is run by the API lane

- on a pool of threads of its own (``agentchat.core.db.transactions.run_db_heavy``,
  AGENTCHAT_DB_HEAVY_THREADS), so that it never holds the threads that posts, reads, peeks and
  acks need;
- through a gate (``HeavyGate``) that hands out those threads: one at a time per agent
  (whichever of its tokens a request carries: the lane's ``heavy_gate_key``), a second one
  waiting, holding no thread, until the first is answered, past AGENTCHAT_HEAVY_QUEUE_PER_AGENT
  waiting refused 429 HEAVY_REQUEST_BUSY; a free thread to the waiting agent that has had the
  least heavy time; one thread kept from the long requests for the bounded ones (a peek,
  ``heavy_bounded = True``); a waiting request whose client hung up never runs;
- within a work budget (``work_budget``, AGENTCHAT_HEAVY_BUDGET_SECONDS of database time): on
  SQLite a progress handler aborts the statement running past the deadline, on PostgreSQL
  ``statement_timeout`` does, and ``budget_check`` stops Python work between chunks; any of
  them answers 503 WORK_BUDGET_EXCEEDED and the transaction rolls back.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

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
T = TypeVar("T")


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


def person_key(user_pk: int) -> bytes:
    """The heavy gate's key of a signed-in person (the dashboard's pages, a browser's
    websockets): never an API key (``a<id>`` and digests)."""
    return f"user:{user_pk}".encode()


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


def view_heavy_bounded(view: Any) -> bool:
    """Whether the heavy requests of the view class ``view`` are bounded (``heavy_bounded =
    True``): a page read whose limit and the byte budget bound its work (a peek), which may
    use the thread the gate keeps from the long ones."""
    return bool(getattr(view, "heavy_bounded", False))


class _Ticket:
    """A heavy request in the gate: waiting for its turn, then running."""

    __slots__ = ("bounded", "order", "turn")

    def __init__(self, bounded: bool, order: int) -> None:
        self.bounded = bounded
        self.order = order  # arrival: ties go to the earlier
        self.turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()


class _Agent:
    """One key's requests: at most one running, the others waiting in arrival order; and the
    heavy time it has had (``finish``, on the gate's virtual clock)."""

    __slots__ = ("finish", "running", "start", "waiting")

    def __init__(self) -> None:
        self.waiting: deque[_Ticket] = deque()
        self.running: _Ticket | None = None
        self.start = 0.0
        self.finish = 0.0


class HeavyGate:
    """The door of the heavy pool, one per event loop (``heavy_gate()``): it hands out the
    pool's AGENTCHAT_DB_HEAVY_THREADS threads, so that no request waits in the pool itself.

    - One heavy request running per key (the lane's key: the agent, whichever of its tokens
      the request carries); up to AGENTCHAT_HEAVY_QUEUE_PER_AGENT more wait, on the event loop
      and holding no thread; past that HEAVY_REQUEST_BUSY.
    - A free thread goes to the waiting key that has had the least heavy time (start-time fair
      queuing: a key's next request starts, on a virtual clock, where its previous one
      finished, and never before the clock, so that idle time earns nothing), ties in arrival
      order. An agent peeking now and then is served before agents that loop summaries.
    - Long requests hold at most all threads but one: the last is kept for the bounded ones
      (``bounded``: a peek, whose work its limit and the byte budget bound),
      so that a peek never waits for a summary to end.
    - A waiting request whose client has gone (``gone`` done) leaves the queue and never runs.
    """

    KEPT_IDLE = 1024  # idle keys whose heavy time is remembered (ahead of the clock)

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._agents: dict[bytes, _Agent] = {}
        self._clock = clock
        self._virtual = 0.0  # the start of the latest request given a thread
        self._running = 0
        self._running_long = 0
        self._arrivals = 0

    async def run(
        self,
        key: bytes,
        call: Callable[[], Awaitable[T]],
        *,
        bounded: bool = False,
        gone: asyncio.Future[Any] | None = None,
        queue: int | None = None,
    ) -> T | None:
        """``await call()`` in its turn; None, without calling it, when ``gone`` is done first
        (the client left while the request waited). ``queue`` (AGENTCHAT_HEAVY_QUEUE_PER_AGENT
        by default) is how many of the key's requests may wait past the running one: a caller
        whose own count is bounded otherwise (the live follows' reads) may wait longer."""
        queue = settings.AGENTCHAT_HEAVY_QUEUE_PER_AGENT if queue is None else queue
        if self.waiting(key) > queue:
            raise AppError(
                "HEAVY_REQUEST_BUSY",
                f"this agent has a heavy request running and {queue} waiting: "
                "wait for their answers",
                detail={"queue": queue},
            )
        agent = self._agents.setdefault(key, _Agent())
        ticket = _Ticket(bounded, self._arrivals)
        self._arrivals += 1
        agent.waiting.append(ticket)
        self._dispatch()
        try:
            if gone is None:
                await ticket.turn
            else:
                await asyncio.wait((ticket.turn, gone), return_when=asyncio.FIRST_COMPLETED)
            if gone is not None and gone.done():
                return None
            started = self._clock()
            try:
                return await call()
            finally:
                agent.finish = agent.start + (self._clock() - started)
        finally:
            self._leave(key, agent, ticket)

    def _leave(self, key: bytes, agent: _Agent, ticket: _Ticket) -> None:
        if agent.running is ticket:
            agent.running = None
            self._running -= 1
            self._running_long -= not ticket.bounded
        else:
            ticket.turn.cancel()
            agent.waiting.remove(ticket)
        idle = not agent.waiting and agent.running is None
        if idle and agent.finish <= self._virtual and self._agents.get(key) is agent:
            del self._agents[key]  # its next request would start at the clock anyway
        if len(self._agents) > self.KEPT_IDLE:
            self._forget()
        self._dispatch()

    def _dispatch(self) -> None:
        threads = settings.AGENTCHAT_DB_HEAVY_THREADS
        long_max = max(1, threads - 1)
        while self._running < threads:
            ready = [
                (max(agent.finish, self._virtual), agent.waiting[0].order, agent)
                for agent in self._agents.values()
                if agent.running is None
                and agent.waiting
                and (agent.waiting[0].bounded or self._running_long < long_max)
            ]
            if not ready:
                return
            start, _, agent = min(ready, key=lambda entry: entry[:2])
            ticket = agent.waiting.popleft()
            agent.running, agent.start, self._virtual = ticket, start, start
            self._running += 1
            self._running_long += not ticket.bounded
            ticket.turn.set_result(None)

    def _forget(self) -> None:
        """Too many idle keys kept: forget the heavy time of every idle one (bounded memory;
        they start again at the clock)."""
        for key in [
            key
            for key, agent in self._agents.items()
            if agent.running is None and not agent.waiting
        ]:
            del self._agents[key]

    def waiting(self, key: bytes) -> int:
        """How many heavy requests of ``key`` run or wait."""
        agent = self._agents.get(key)
        return 0 if agent is None else len(agent.waiting) + (agent.running is not None)


_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, HeavyGate] = (
    weakref.WeakKeyDictionary()
)


def heavy_gate() -> HeavyGate:
    """The running event loop's gate: the server's one loop has one; each of the tests' loops
    has its own (a gate's futures belong to one loop)."""
    loop = asyncio.get_running_loop()
    gate = _gates.get(loop)
    if gate is None:
        gate = _gates[loop] = HeavyGate()
    return gate
