"""Each message is delivered once: two reads of one agent in one channel at once, and a client
that goes away while its page is being committed (a review of the first hardening fixes).

On PostgreSQL two reads could both start from the same cursor (each in its own transaction at
READ COMMITTED) and deliver the same messages twice; the cursor could even move back. A wait
whose client disconnected while its read was on a database thread still committed the move,
so the page was never sent and never delivered."""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.db import connection, connections

from agentchat.asgi import application
from channels_app import live, services
from channels_app.models import Cursor
from channels_app.selectors import cursor_get
from channels_app.services import (
    CursorMove,
    channel_create,
    cursors_compare_and_set,
    message_post,
    message_read,
)
from tests.conftest import auth, in_thread
from tests.signals import until, wait_until, waits_behind_us

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def backlog(make_agent):
    make_agent("alice")
    bob, bob_token = make_agent("bob")
    channel = channel_create(name="races", created_by="alice")
    for n in range(1, 21):
        message_post(channel=channel, sender="alice", title=f"m{n}")
    return channel, bob, bob_token


def test_two_reads_at_once_deliver_each_message_once(backlog, monkeypatch):
    # A PostgreSQL case at heart (READ COMMITTED let both start from one cursor); on SQLite
    # the writer runs one read at a time and this passes by construction. .ci/run runs both.
    channel, bob, _ = backlog
    first_inside, second_started, second_done = (threading.Event() for _ in range(3))
    real_page = services.cursors.message_page

    def page(**kwargs):
        result = real_page(**kwargs)
        if threading.current_thread().name == "first":
            first_inside.set()
            # Hold the first read's transaction open until the second one either finished
            # (it did not wait for us: the bug) or waits for us.
            wait_until(
                lambda: second_done.is_set() or waits_behind_us(second_started),
                what="the second read finished or waits for the first",
            )
        return result

    monkeypatch.setattr(services.cursors, "message_page", page)
    results: dict[str, list[int]] = {}

    def read(name: str, limit: int) -> None:
        threading.current_thread().name = name
        try:
            if name == "second":
                first_inside.wait(10)
                second_started.set()
            page_ = message_read(channel=channel, agent=bob, limit=limit)
            results[name] = [int(part.split(b'"seq":')[1].split(b",")[0]) for part in page_.parts]
        finally:
            if name == "second":
                second_done.set()
            connections.close_all()

    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(read, "first", 5), pool.submit(read, "second", 5)]
        for future in futures:
            future.result(timeout=30)
    delivered = results["first"] + results["second"]
    assert results["first"] == [1, 2, 3, 4, 5]
    assert results["second"] == [6, 7, 8, 9, 10]  # not 1-5 again
    assert sorted(delivered) == delivered and len(set(delivered)) == 10
    assert cursor_get(agent=bob, channel=channel) == 10


def test_many_concurrent_reads_over_http_deliver_every_message_exactly_once(live, make_agent):
    """Real clients on a real server: 8 readers of one agent, one message a page. (It can fail
    only on PostgreSQL, where .ci/run runs it too: SQLite's writer serializes the reads.)"""
    make_agent("alice")
    bob, bob_token = make_agent("bob")
    channel = channel_create(name="races", created_by="alice")
    for n in range(1, 61):
        message_post(channel=channel, sender="alice", title=f"m{n}")

    async def reader(http: httpx.AsyncClient) -> list[int]:
        seen = []
        while True:
            r = await http.post(
                f"{live.url}/api/v1/channels/races/read/?limit=1", headers=auth(bob_token)
            )
            assert r.status_code == 200, r.text
            messages = r.json()["messages"]
            if not messages:
                return seen
            seen.extend(m["seq"] for m in messages)

    async def scenario() -> list[list[int]]:
        async with httpx.AsyncClient(timeout=30) as http:
            return await asyncio.gather(*(reader(http) for _ in range(8)))

    per_reader = asyncio.run(scenario())
    delivered = sorted(seq for seen in per_reader for seq in seen)
    assert delivered == list(range(1, 61))  # each once: no duplicate, none lost
    assert all(seen == sorted(seen) for seen in per_reader)
    assert cursor_get(agent=bob, channel=channel) == 60


def test_a_wait_whose_client_leaves_during_its_commit_moves_nothing(backlog, monkeypatch):
    channel, bob, bob_token = backlog
    inside, proceed, finished = threading.Event(), threading.Event(), threading.Event()
    real_page = services.cursors.message_page
    real_read = live.message_read

    def page(**kwargs):
        result = real_page(**kwargs)
        inside.set()
        proceed.wait(10)  # the client leaves while the page is on the database thread
        return result

    def read(**kwargs):
        try:
            return real_read(**kwargs)
        finally:
            finished.set()

    monkeypatch.setattr(services.cursors, "message_page", page)
    monkeypatch.setattr(live, "message_read", read)

    async def scenario() -> list[dict]:
        client = Client(
            method="GET", path="/api/v1/channels/races/wait/", query=b"timeout=20", token=bob_token
        )
        incoming, sent = client.incoming, client.sent
        app = asyncio.create_task(client.run())
        await until(inside.is_set, what="the wait's read is on a database thread")
        await incoming.put({"type": "http.disconnect"})
        await asyncio.wait_for(app, 10)
        proceed.set()
        await until(finished.is_set, what="the read's transaction ended")
        return sent

    sent = asyncio.run(scenario())
    assert sent == []
    assert cursor_get(agent=bob, channel=channel) == 0  # before the fix: 20, never sent
    monkeypatch.setattr(services.cursors, "message_page", real_page)
    assert len(message_read(channel=channel, agent=bob).parts) == 20  # delivered later


def test_a_read_whose_client_leaves_during_its_commit_moves_nothing(backlog, monkeypatch):
    channel, bob, bob_token = backlog
    inside, proceed, finished = threading.Event(), threading.Event(), threading.Event()
    real_page = services.cursors.message_page
    real_read = services.message_read

    def page(**kwargs):
        result = real_page(**kwargs)
        inside.set()
        proceed.wait(10)  # the client leaves while the page is on the database thread
        return result

    given = {}

    def read(**kwargs):
        given.update(kwargs)
        try:
            return real_read(**kwargs)
        finally:
            finished.set()

    monkeypatch.setattr(services.cursors, "message_page", page)
    monkeypatch.setattr(services, "message_read", read)

    async def scenario() -> list[dict]:
        client = Client(
            method="POST", path="/api/v1/channels/races/read/", query=b"", token=bob_token
        )
        incoming, sent = client.incoming, client.sent
        app = asyncio.create_task(client.run())
        await until(inside.is_set, what="the read is on a database thread")
        await incoming.put({"type": "http.disconnect"})
        await until(lambda: given["abandoned"].is_set(), what="the lane saw the client leave")
        proceed.set()
        await asyncio.wait_for(app, 10)
        await until(finished.is_set, what="the read's transaction ended")
        return sent

    sent = asyncio.run(scenario())
    assert sent == []  # no one to answer
    assert cursor_get(agent=bob, channel=channel) == 0  # before the fix: 20, never sent
    monkeypatch.setattr(services.cursors, "message_page", real_page)
    assert len(message_read(channel=channel, agent=bob).parts) == 20  # delivered later


class Client:
    """An HTTP client of the ASGI application driven by the test: its body is empty, it leaves
    when the test puts ``{"type": "http.disconnect"}`` in ``incoming``; ``sent`` is what the
    server sent it."""

    def __init__(self, *, method: str, path: str, query: bytes, token: str) -> None:
        self.incoming: asyncio.Queue = asyncio.Queue()
        self.incoming.put_nowait({"type": "http.request", "body": b""})
        self.sent: list[dict] = []
        self.scope = {
            "type": "http",
            "method": method,
            "path": path,
            "query_string": query,
            "headers": [(b"host", b"testserver"), *auth_header(token)],
            "server": ("testserver", 80),
        }

    async def run(self) -> None:
        async def send(message: dict) -> None:
            self.sent.append(message)

        await application(self.scope, self.incoming.get, send)


def auth_header(token: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {token}".encode())]


class _SetDuringTheBatch(threading.Event):
    """Unset when the move is made, set when the batch looks again before its commit: a client
    that left while the other moves of its ring were written."""

    def __init__(self) -> None:
        super().__init__()
        self.looks = 0

    def is_set(self) -> bool:
        self.looks += 1
        return self.looks > 1


def test_a_ring_move_whose_client_left_before_the_commit_is_put_back(backlog, make_agent):
    channel, bob, _ = backlog
    carol, _ = make_agent("carol")
    Cursor.objects.create(agent=bob, channel=channel, seq=3)
    dave, _ = make_agent("dave")
    moved = cursors_compare_and_set(
        moves=[
            CursorMove(bob.pk, channel.pk, 3, 4, abandoned=_SetDuringTheBatch()),
            CursorMove(carol.pk, channel.pk, 0, 4, abandoned=threading.Event()),
            CursorMove(dave.pk, channel.pk, 0, 4, abandoned=_SetDuringTheBatch()),
        ]
    )
    assert moved == [False, True, False]
    assert cursor_get(agent=bob, channel=channel) == 3
    assert cursor_get(agent=carol, channel=channel) == 4
    # A cursor the move made is removed again, not left at 0 (presence would show a read).
    assert not Cursor.objects.filter(agent=dave).exists()
    gone = threading.Event()
    gone.set()
    assert cursors_compare_and_set(moves=[CursorMove(bob.pk, channel.pk, 3, 5, None, gone)]) == [
        False
    ]
    assert cursor_get(agent=bob, channel=channel) == 3


def test_a_wait_answers_before_it_leaves_the_layer(backlog, counted_reads, monkeypatch):
    """The review's case: a wait whose cursor moved still left its group and freed its inbox
    (round trips on Redis) before the live endpoint sent the answer; a client that left meanwhile
    lost the message. Now the answer goes out first."""
    channel, bob, bob_token = backlog
    Cursor.objects.create(agent=bob, channel=channel, seq=20)  # parks: nothing new for bob
    flags: dict[str, asyncio.Event] = {}
    real_cleanup = live._wait_cleanup

    async def slow_cleanup(*args):
        flags["cleaning"].set()
        await flags["release"].wait()  # stands for the layer's round trips
        await real_cleanup(*args)
        flags["cleaned"].set()

    monkeypatch.setattr(live, "_wait_cleanup", slow_cleanup)

    async def scenario() -> tuple[list[dict], list[dict]]:
        flags.update(cleaning=asyncio.Event(), release=asyncio.Event(), cleaned=asyncio.Event())
        client = Client(
            method="GET", path="/api/v1/channels/races/wait/", query=b"timeout=20", token=bob_token
        )
        incoming, sent = client.incoming, client.sent
        app = asyncio.create_task(client.run())
        await counted_reads.parked()
        await in_thread(lambda: message_post(channel=channel, sender="alice", title="hi"))
        await until(flags["cleaning"].is_set, what="the wait moved the cursor and cleans up")
        when_cleaning = list(sent)
        await incoming.put({"type": "http.disconnect"})  # the client leaves now
        flags["release"].set()
        await asyncio.wait_for(app, 10)
        await asyncio.wait_for(flags["cleaned"].wait(), 10)
        return when_cleaning, sent

    when_cleaning, sent = asyncio.run(scenario())
    assert cursor_get(agent=bob, channel=channel) == 21
    assert [m["type"] for m in when_cleaning] == ["http.response.start", "http.response.body"]
    assert json.loads(when_cleaning[1]["body"])["messages"][0]["title"] == "hi"
    assert sent == when_cleaning  # answered once


class _HoldsItsFirstLook(threading.Event):
    """Never set; its first is_set() (made just before its move's UPDATE) waits until the other
    batch gets there too: only widens the window between two statements of a batch."""

    def __init__(self, barrier: threading.Barrier) -> None:
        super().__init__()
        self.barrier = barrier
        self.first = True

    def is_set(self) -> bool:
        if self.first:
            self.first = False
            self.barrier.wait(10)
        return False


def test_two_batches_naming_the_same_cursors_in_opposite_orders_do_not_deadlock(make_agent):
    """Two processes woken by one ring (their waiters joined in different orders) moved the
    same two cursors in opposite orders: PostgreSQL found a deadlock and the loser's whole
    batch answered 500 (the review's scratch test). A PostgreSQL case: SQLite's writer runs
    one batch at a time."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks of PostgreSQL (.ci/run runs this on PostgreSQL)")
    make_agent("alice")
    a, _ = make_agent("a")
    b, _ = make_agent("b")
    channel = channel_create(name="dl", created_by="alice")
    message_post(channel=channel, sender="alice", title="m1")
    for agent in (a, b):
        Cursor.objects.create(agent=agent, channel=channel, seq=0)
    barrier = threading.Barrier(2)

    def batch(first, second):
        try:
            return cursors_compare_and_set(
                moves=[
                    CursorMove(first.pk, channel.pk, 0, 1),
                    CursorMove(second.pk, channel.pk, 0, 1, abandoned=_HoldsItsFirstLook(barrier)),
                ]
            )
        finally:
            connections.close_all()

    with ThreadPoolExecutor(2) as pool:
        one, two = pool.submit(batch, a, b), pool.submit(batch, b, a)
        results = [one.result(30), two.result(30)]
    # One batch moved both cursors, the other found them moved: no error.
    assert sorted(map(sorted, results)) == [[False, False], [True, True]]
    assert {cursor_get(agent=x, channel=channel) for x in (a, b)} == {1}
