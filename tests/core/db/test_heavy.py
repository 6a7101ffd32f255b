"""Heavy requests (agentchat.core.db.heavy) cannot hold the threads short requests need: they run
on a pool of their own, one at a time per agent, a free thread to the agent that had the least
heavy time, one thread kept from the long ones for the bounded ones (a peek), a waiting one
whose client left never run, within a work budget answered 503 WORK_BUDGET_EXCEEDED when it
runs out. Counted, not timed: which pool ran what, what a held heavy request let through, in
which order the gate started them, what the budget refused. (Real clients against a real
server: tests/core/http/test_lane_heavy.py.)"""

from __future__ import annotations

import asyncio
import threading

import pytest
from django.db import connection
from django.urls import get_resolver

from agentchat.core.db import transactions as db
from agentchat.core.db.heavy import HeavyGate, view_heavy_bounded, view_is_heavy, work_budget
from agentchat.core.http import lane
from agentchat.core.identity.services import token_authenticate, token_create, token_revoke
from agentchat.core.models import ApiToken, token_digest
from agentchat.core.rules.errors import AppError
from channels_app.api.views import MessageListPostApi
from channels_app.models import Channel, Message

# A statement of a few million virtual machine steps (SQLite) / a second (PostgreSQL).
SLOW_SQLITE = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000000) "
    "SELECT count(*) FROM n"
)


@pytest.fixture
def routed(monkeypatch):
    """The views each pool ran: {"short": [...], "heavy": [...]}, by request path."""
    seen: dict[str, list[str]] = {"short": [], "heavy": []}
    real_short, real_heavy = lane.run_db, lane.run_db_heavy

    async def short(func, request, *args, **kwargs):
        seen["short"].append(f"{request.method} {request.path}")
        return await real_short(func, request, *args, **kwargs)

    async def heavy(func, request, *args, **kwargs):
        seen["heavy"].append(f"{request.method} {request.path}")
        return await real_heavy(func, request, *args, **kwargs)

    monkeypatch.setattr(lane, "run_db", short)
    monkeypatch.setattr(lane, "run_db_heavy", heavy)
    return seen


@pytest.mark.django_db
def test_heavy_views_run_on_the_heavy_pool_and_short_ones_do_not(api_for, routed):
    alice = api_for("alice")
    assert alice.post("/api/v1/channels/", {"name": "c"}, format="json").status_code == 201
    assert (
        alice.post("/api/v1/channels/c/messages/", {"title": "hi"}, format="json").status_code
        == 201
    )
    heavy = [
        "/api/v1/channels/c/state/",
        "/api/v1/search/?q=hi",
        "/api/v1/channels/",
        "/api/v1/channels/c/tasks/",
        "/api/v1/channels/c/locks/",
        "/api/v1/channels/c/events/",
        "/api/v1/channels/c/presence/",
        "/api/v1/approvals/",
        "/api/v1/channels/c/messages/",
    ]
    for path in heavy:
        assert alice.get(path).status_code == 200, path
    # HEAD runs the view's get: the same work, so the same pool, gate and budget.
    assert alice.head("/api/v1/channels/c/messages/?limit=1000").status_code == 200
    assert alice.post("/api/v1/channels/c/read/").status_code == 200
    assert [entry.split("?")[0] for entry in routed["heavy"]] == [
        f"GET {path.split('?')[0]}" for path in heavy
    ] + ["HEAD /api/v1/channels/c/messages/"]
    assert routed["short"] == [
        "POST /api/v1/channels/",
        "POST /api/v1/channels/c/messages/",
        "POST /api/v1/channels/c/read/",
    ]


def test_short_work_is_served_while_every_heavy_thread_is_held():
    # The real pools (no test executor): heavy work held at a barrier on every heavy thread
    # leaves the short pool free.
    heavy_threads = db._heavy_executor()._max_workers
    release = threading.Event()
    held = threading.Semaphore(0)
    names: list[str] = []

    def heavy() -> str:
        names.append(threading.current_thread().name)
        held.release()
        release.wait(30)
        return "heavy"

    async def main() -> tuple[str, list[str], bool]:
        loop = asyncio.get_running_loop()
        holders = [asyncio.ensure_future(db.run_db_heavy(heavy)) for _ in range(heavy_threads)]
        for _ in range(heavy_threads):
            await loop.run_in_executor(None, held.acquire)
        short = await db.run_db(lambda: threading.current_thread().name)
        still_held = not any(holder.done() for holder in holders)
        release.set()
        assert await asyncio.gather(*holders) == ["heavy"] * heavy_threads
        return short, names, still_held

    short, heavy_names, still_held = asyncio.run(main())
    assert still_held
    assert short.startswith("agentchat-db_")
    assert all(name.startswith("agentchat-db-heavy") for name in heavy_names)


async def until(condition) -> None:
    """Bounded by the caller's wait_for: a gate that never lets a request in fails instead of
    hanging."""
    while not condition():
        await asyncio.sleep(0)


class Held:
    """Heavy calls the test holds: each one says it started, then runs until released."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self._releases: dict[str, asyncio.Event] = {}

    def call(self, name: str):
        release = self._releases[name] = asyncio.Event()

        async def held() -> str:
            self.started.append(name)
            await release.wait()
            return name

        return held

    def release(self, name: str) -> None:
        self._releases[name].set()

    async def started_count(self, count: int) -> None:
        await asyncio.wait_for(until(lambda: len(self.started) >= count), 10)


def test_one_heavy_request_at_a_time_per_key(settings):
    settings.AGENTCHAT_HEAVY_QUEUE_PER_AGENT = 2
    settings.AGENTCHAT_DB_HEAVY_THREADS = 3  # two for long requests: b's is not held by a's
    order: list[str] = []

    async def main() -> None:
        gate = HeavyGate()
        release = asyncio.Event()

        async def held() -> str:
            order.append("first")
            await release.wait()
            return "first"

        async def quick(name: str) -> str:
            order.append(name)
            return name

        first = asyncio.ensure_future(gate.run(b"a", held))
        await asyncio.wait_for(until(lambda: "first" in order), 10)
        # Another key is not held up.
        assert await gate.run(b"b", lambda: quick("other")) == "other"
        queued = [asyncio.ensure_future(gate.run(b"a", lambda n=n: quick(n))) for n in "xy"]
        await asyncio.wait_for(until(lambda: gate.waiting(b"a") >= 3), 10)
        with pytest.raises(AppError) as refused:
            await gate.run(b"a", lambda: quick("z"))
        assert refused.value.code == "HEAVY_REQUEST_BUSY"
        assert refused.value.status == 429
        assert order == ["first", "other"]  # the queued ones wait for the first
        release.set()
        assert await asyncio.wait_for(asyncio.gather(first, *queued), 10) == ["first", "x", "y"]
        assert gate.waiting(b"a") == 0

    asyncio.run(main())
    assert order == ["first", "other", "x", "y"]


def test_a_free_thread_goes_to_the_agent_that_had_the_least_heavy_time(settings):
    # One thread; a's first request holds it for 10 s (of the gate's clock), while a's second
    # and then b's first wait. Arrival order would run a's second next; the fair gate runs b's.
    settings.AGENTCHAT_DB_HEAVY_THREADS = 1
    now = [0.0]
    held = Held()

    async def main() -> list[str]:
        gate = HeavyGate(clock=lambda: now[0])
        a1 = asyncio.ensure_future(gate.run(b"a", held.call("a1")))
        await held.started_count(1)
        a2 = asyncio.ensure_future(gate.run(b"a", held.call("a2")))
        await asyncio.wait_for(until(lambda: gate.waiting(b"a") == 2), 10)
        b1 = asyncio.ensure_future(gate.run(b"b", held.call("b1")))
        await asyncio.wait_for(until(lambda: gate.waiting(b"b") == 1), 10)
        now[0] = 10.0
        held.release("a1")
        await held.started_count(2)
        now[0] = 10.5  # b's took half a second: a has still had more
        c1 = asyncio.ensure_future(gate.run(b"c", held.call("c1")))
        await asyncio.wait_for(until(lambda: gate.waiting(b"c") == 1), 10)
        held.release("b1")
        await held.started_count(3)
        for name in ("a2", "c1"):
            held.release(name)
        await asyncio.wait_for(asyncio.gather(a1, a2, b1, c1), 10)
        return held.started

    # c arrived after a's second yet goes first: c has had no heavy time, a ten seconds.
    assert asyncio.run(main()) == ["a1", "b1", "c1", "a2"]


def test_a_bounded_request_gets_the_thread_that_long_ones_may_not_take(settings):
    # Two threads: a's long request holds one, c's long request waits for it (the other is
    # kept), and b's peek runs at once on the kept one.
    settings.AGENTCHAT_DB_HEAVY_THREADS = 2
    held = Held()

    async def main() -> tuple[list[str], list[str]]:
        gate = HeavyGate()
        a1 = asyncio.ensure_future(gate.run(b"a", held.call("a1")))
        await held.started_count(1)
        c1 = asyncio.ensure_future(gate.run(b"c", held.call("c1")))
        await asyncio.wait_for(until(lambda: gate.waiting(b"c") == 1), 10)
        b1 = asyncio.ensure_future(gate.run(b"b", held.call("b1"), bounded=True))
        await held.started_count(2)
        while_held = list(held.started)
        held.release("b1")
        held.release("a1")
        await held.started_count(3)
        held.release("c1")
        await asyncio.wait_for(asyncio.gather(a1, b1, c1), 10)
        return while_held, held.started

    while_held, started = asyncio.run(main())
    assert while_held == ["a1", "b1"]  # without the kept thread: ["a1", "c1"]
    assert started == ["a1", "b1", "c1"]


def test_a_waiting_request_whose_client_left_never_runs_and_frees_its_place(settings):
    settings.AGENTCHAT_DB_HEAVY_THREADS = 1
    settings.AGENTCHAT_HEAVY_QUEUE_PER_AGENT = 1
    held = Held()

    async def main() -> list[str]:
        gate = HeavyGate()
        loop = asyncio.get_running_loop()
        a1 = asyncio.ensure_future(gate.run(b"a", held.call("a1")))
        await held.started_count(1)
        gone = loop.create_future()
        a2 = asyncio.ensure_future(gate.run(b"a", held.call("a2"), gone=gone))
        await asyncio.wait_for(until(lambda: gate.waiting(b"a") == 2), 10)
        with pytest.raises(AppError):  # the queue is full
            await gate.run(b"a", held.call("refused"))
        gone.set_result(None)  # the client of a2 leaves
        assert await asyncio.wait_for(a2, 10) is None
        assert gate.waiting(b"a") == 1  # its place is free at once
        a3 = asyncio.ensure_future(gate.run(b"a", held.call("a3")))
        held.release("a1")
        await held.started_count(2)
        held.release("a3")
        assert await asyncio.wait_for(asyncio.gather(a1, a3), 10) == ["a1", "a3"]
        assert gate.waiting(b"a") == 0
        return held.started

    assert asyncio.run(main()) == ["a1", "a3"]  # a2 never ran


@pytest.mark.django_db(transaction=True)  # the lookup runs on the pool: committed rows
def test_the_tokens_of_one_agent_are_one_heavy_gate_key(make_agent, monkeypatch):
    alice, first = make_agent("alice")
    second = token_create(agent=alice)
    bob, bobs = make_agent("bob")
    lookups: list[str] = []

    real_run_db = lane.run_db

    async def counted(func, token):  # the lane's lookup on the short pool
        lookups.append(token)
        return await real_run_db(func, token)

    monkeypatch.setattr(lane, "run_db", counted)

    def key(header: str) -> bytes:
        scope = {"headers": [(b"host", b"testserver"), (b"authorization", header.encode())]}
        return asyncio.run(lane.heavy_gate_key(scope))

    alices = {key(f"Bearer {first}"), key(f"bearer {second}"), key(f"Bearer  {first}")}
    assert alices == {b"a%d" % alice.pk}
    # Its token acting as its sub-agents (AgentChat-As) is still alice: one key, one queue.
    for acting in ("alice.s0", "alice.s1.deep"):
        scope = {
            "headers": [
                (b"host", b"testserver"),
                (b"authorization", f"Bearer {first}".encode()),
                (b"agentchat-as", acting.encode()),
            ]
        }
        assert asyncio.run(lane.heavy_gate_key(scope)) == b"a%d" % alice.pk
    assert lookups == [first, second]  # one select for a token not seen yet, then known
    token_authenticate(bobs)  # authentication fills what the gate looks up
    assert key(f"Bearer {bobs}") == b"a%d" % bob.pk
    assert lookups == [first, second]
    # A token that names no agent keys by itself (its view refuses it), apart from agents.
    unknown = key("Bearer nope")
    assert unknown.startswith(b"t") and unknown == key("bearer  nope") != key("Bearer other")
    # A revoked token no longer counts as the agent's.
    token_revoke(token=ApiToken.objects.get(digest=token_digest(second)))
    assert key(f"Bearer {second}") not in alices
    assert key(f"Bearer {first}") in alices
    # Unparsable headers keep a key of their own each, and no header at all is one more.
    odd = {key(h) for h in ("Basic tok", "Bearer", "tok")}
    assert len(odd) == 3 and not odd & {*alices, unknown} and b"" not in odd
    assert asyncio.run(lane.heavy_gate_key({"headers": []})) == b""


def test_only_a_peek_is_a_bounded_heavy_request():
    # The views whose heavy work their limit and the byte budget bound: the others (state,
    # compaction, search, the lists, event reads, lock checks) are long.
    views = {
        pattern.callback.cls
        for pattern in _url_patterns(get_resolver())
        if getattr(pattern.callback, "cls", None) is not None
    }
    heavy = {view for view in views if view_is_heavy(view, "GET") or view_is_heavy(view, "POST")}
    assert len(heavy) >= 10
    assert {view for view in heavy if view_heavy_bounded(view)} == {MessageListPostApi}


def _url_patterns(resolver):
    for pattern in resolver.url_patterns:
        if hasattr(pattern, "url_patterns"):
            yield from _url_patterns(pattern)
        else:
            yield pattern


@pytest.mark.django_db(transaction=True)  # PostgreSQL: the abort ends the test's transaction
def test_the_database_aborts_a_statement_past_the_budget():
    with pytest.raises(AppError) as exc, work_budget(0), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_sleep(2)")
        else:
            cursor.execute(SLOW_SQLITE)
    assert (exc.value.code, exc.value.status) == ("WORK_BUDGET_EXCEEDED", 503)
    # The connection serves on, without the budget.
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute(SLOW_SQLITE)
            assert cursor.fetchone() == (5000000,)


@pytest.mark.django_db(transaction=True)
def test_a_heavy_request_past_its_budget_is_refused_and_a_short_one_is_not(api_for, settings):
    alice = api_for("alice")
    alice.post("/api/v1/channels/", {"name": "c"}, format="json")
    settings.AGENTCHAT_HEAVY_BUDGET_SECONDS = 0
    r = alice.get("/api/v1/channels/c/state/")
    assert (r.status_code, r.json()["error"]["code"]) == (503, "WORK_BUDGET_EXCEEDED")
    r = alice.post("/api/v1/channels/c/messages/", {"title": "short"}, format="json")
    assert r.status_code == 201
    assert Message.objects.filter(channel=Channel.objects.get(name="c")).count() == 1


@pytest.mark.django_db
def test_the_lane_answers_a_refused_heavy_request_with_its_code(api_for, settings):
    alice = api_for("alice")
    alice.post("/api/v1/channels/", {"name": "c"}, format="json")
    settings.AGENTCHAT_HEAVY_QUEUE_PER_AGENT = -1  # no room at all: every heavy one refused
    r = alice.get("/api/v1/channels/c/state/")
    assert (r.status_code, r.json()["error"]["code"]) == (429, "HEAVY_REQUEST_BUSY")
    r = alice.post("/api/v1/channels/c/messages/", {"title": "short"}, format="json")
    assert r.status_code == 201
