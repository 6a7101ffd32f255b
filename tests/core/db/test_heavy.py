"""Heavy requests (agentchat.core.db.heavy) cannot hold the threads short requests need: they run
on a pool of their own, one at a time per token, within a work budget answered 503
WORK_BUDGET_EXCEEDED when it runs out. Counted, not timed: which pool ran what, what a held
heavy request let through, what the budget refused."""

from __future__ import annotations

import asyncio
import threading

import pytest
from django.db import connection

from agentchat.core.db import transactions as db
from agentchat.core.db.heavy import HeavyGate, work_budget
from agentchat.core.http import lane
from agentchat.core.rules.errors import AppError
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


def test_one_heavy_request_at_a_time_per_token(settings):
    settings.AGENTCHAT_HEAVY_QUEUE_PER_AGENT = 2
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

        async def until(condition) -> None:
            while not condition():
                await asyncio.sleep(0)

        first = asyncio.ensure_future(gate.run(b"a", held))
        # Bounded: a gate that never lets the first in fails here instead of hanging.
        await asyncio.wait_for(until(lambda: "first" in order), 10)
        # Another token is not held up.
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


def test_every_spelling_of_one_token_is_one_heavy_gate_key():
    def scope(header: bytes) -> dict:
        return {"headers": [(b"host", b"testserver"), (b"authorization", header)]}

    one = {lane.heavy_gate_key(scope(h)) for h in (b"Bearer tok", b"bearer tok", b"Bearer  tok")}
    assert len(one) == 1
    assert lane.heavy_gate_key(scope(b"Bearer other")) not in one
    # Unparsable headers keep a key of their own each (their views refuse them).
    odd = {lane.heavy_gate_key(scope(h)) for h in (b"Basic tok", b"Bearer", b"tok")}
    assert len(odd) == 3 and not odd & one and b"" not in odd
    assert lane.heavy_gate_key({"headers": []}) == b""


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
