"""Several server processes, and stopping one: each test starts its own daphne."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import runpy
import socket
import threading
from pathlib import Path

import httpx
import redis
import websockets
from django.db import connection

from channels_app.models import Channel, Message
from channels_app.services import channel_group
from tests.conftest import (
    ServerProcess,
    auth,
    redis_reachable,
    redis_url_for_tests,
    require_service,
)

ROOT = Path(__file__).resolve().parent.parent.parent


def redis_group_channel(url: str, group: str) -> str:
    """The Redis pub/sub channel of a layer group, for servers configured with REDIS_URL=url:
    the settings' prefix, then channels-redis's naming. Were either to change, the probe would
    find no subscriber and the test would fail at its deadline, not pass."""
    env_before = os.environ.get("REDIS_URL")
    os.environ["REDIS_URL"] = url
    try:
        config = runpy.run_path(str(ROOT / "agentchat" / "settings.py"))["CHANNEL_LAYERS"]
    finally:
        if env_before is None:
            del os.environ["REDIS_URL"]
        else:
            os.environ["REDIS_URL"] = env_before
    return f"{config['default']['CONFIG']['prefix']}__group__{group}"


async def redis_subscribed(url: str, name: str, timeout: float = 10) -> None:
    """Return once some process subscribes to the pub/sub channel ``name`` on Redis."""
    client = redis.Redis.from_url(url)
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while dict(client.pubsub_numsub(name)).get(name.encode(), 0) < 1:
            assert loop.time() < deadline, f"nothing subscribed to {name} in {timeout} s"
            await asyncio.sleep(0.02)  # polling Redis, with a deadline
    finally:
        client.close()


def test_post_through_one_process_reaches_subscribers_of_another(transactional_db, make_agent):
    url = redis_url_for_tests()
    require_service("Redis", redis_reachable(url), f"no Redis at {url}")
    _, alice = make_agent("alice")
    _, bob = make_agent("bob")
    a = ServerProcess(env={"REDIS_URL": url})
    b = ServerProcess(env={"REDIS_URL": url})
    try:
        r = httpx.post(f"{a.url}/api/v1/channels/", json={"name": "multi"}, headers=auth(alice))
        assert r.status_code == 201
        group = redis_group_channel(url, channel_group(Channel.objects.get(name="multi").pk))

        async def scenario():
            async with httpx.AsyncClient(timeout=30) as http:
                waiter = asyncio.create_task(
                    http.get(
                        f"{b.url}/api/v1/channels/multi/wait/",
                        params={"timeout": 20},
                        headers=auth(bob),
                    )
                )
                # The waiter subscribes to the channel's group before it looks at the database;
                # only process b has a subscriber of this channel.
                await redis_subscribed(url, group)
                assert not waiter.done()
                # The stream joins the group before it accepts the handshake.
                ws = await websockets.connect(f"{b.ws_url}/ws/channels/multi/?token={bob}")
                posted = await http.post(
                    f"{a.url}/api/v1/channels/multi/messages/",
                    json={"title": "across"},
                    headers=auth(alice),
                )
                assert posted.status_code == 201
                try:
                    frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
                finally:
                    await ws.close()
                waited = await asyncio.wait_for(waiter, 10)
                return frame, waited.json()

        frame, waited = asyncio.run(scenario())
        assert frame["message"]["title"] == "across"
        assert [m["title"] for m in waited["messages"]] == ["across"]
    finally:
        a.stop()
        b.stop()


def test_sigterm_with_posts_and_waits_in_flight_exits_by_itself(transactional_db, make_agent):
    # It used to hang forever (serve.py). How fast it exits is a figure of bench_core.py; here
    # the deadline only tells "exited after SIGTERM" from "had to be killed".
    _, alice = make_agent("alice")
    _, bob = make_agent("bob")
    server = ServerProcess()
    httpx.post(f"{server.url}/api/v1/channels/", json={"name": "stop"}, headers=auth(alice))
    acked: list[int] = []
    progress = threading.Condition()
    stop_posting = threading.Event()
    waits_sent = threading.Semaphore(0)

    def poster():
        with httpx.Client(base_url=server.url, headers=auth(alice), timeout=5) as http:
            while not stop_posting.is_set():
                try:
                    r = http.post(
                        "/api/v1/channels/stop/messages/", json={"title": "x", "to": "carol"}
                    )
                except httpx.HTTPError:
                    return
                if r.status_code == 201:
                    with progress:
                        acked.append(r.json()["seq"])
                        progress.notify_all()

    def waiter():
        # The posts are to carol: bob's waits stay parked until the server goes.
        request = (
            f"GET /api/v1/channels/stop/wait/?timeout=60 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {bob}\r\nConnection: close\r\n\r\n"
        ).encode()
        with socket.create_connection(("127.0.0.1", server.port), timeout=70) as sock:
            sock.sendall(request)
            waits_sent.release()
            with contextlib.suppress(OSError):
                sock.recv(65536)

    threads = [threading.Thread(target=poster) for _ in range(3)] + [
        threading.Thread(target=waiter) for _ in range(20)
    ]
    for t in threads:
        t.start()

    async def subscribe():
        return [
            await websockets.connect(f"{server.ws_url}/ws/channels/stop/?token={bob}")
            for _ in range(5)
        ]

    loop = asyncio.new_event_loop()
    sockets = loop.run_until_complete(subscribe())
    for _ in range(20):
        assert waits_sent.acquire(timeout=30), "a wait request was not sent"
    # One event loop serves everything: once 20 more posts were answered, it has read the
    # waits that were already in its sockets.
    with progress:
        target = len(acked) + 20
        assert progress.wait_for(lambda: len(acked) >= target, timeout=30), "posts stalled"
    took = server.stop(timeout=20)
    stop_posting.set()
    for t in threads:
        t.join(20)
    for ws in sockets:
        loop.run_until_complete(ws.close())
    loop.close()
    assert took is not None, "the server had to be killed: it did not exit on SIGTERM"
    # Nothing acknowledged was lost.
    stored = set(Message.objects.filter(channel__name="stop").values_list("seq", flat=True))
    assert set(acked) <= stored


def test_sigkill_mid_posts_loses_nothing_acknowledged_and_retries_stay_idempotent(
    transactional_db, make_agent
):
    _, alice = make_agent("alice")
    first = ServerProcess()
    r = httpx.post(f"{first.url}/api/v1/channels/", json={"name": "crash"}, headers=auth(alice))
    assert r.status_code == 201
    acked: dict[str, int] = {}
    attempted: list[str] = []
    lock = threading.Lock()
    hundred_acked = threading.Event()

    def poster(k: int) -> None:
        with httpx.Client(base_url=first.url, headers=auth(alice), timeout=5) as http:
            for i in range(10_000):
                message_id = f"p{k}-{i}"
                with lock:
                    attempted.append(message_id)
                try:
                    r = http.post(
                        "/api/v1/channels/crash/messages/",
                        json={"id": message_id, "title": f"post {i}"},
                    )
                except httpx.HTTPError:
                    return  # the server is gone
                assert r.status_code == 201, r.text
                with lock:
                    acked[message_id] = r.json()["seq"]
                    if len(acked) >= 100:
                        hundred_acked.set()

    threads = [threading.Thread(target=poster, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    assert hundred_acked.wait(30), f"only {len(acked)} posts were acknowledged"
    first.kill()  # SIGKILL: no shutdown code runs
    for t in threads:
        t.join(10)

    def stored() -> dict[str, int]:
        return dict(Message.objects.filter(channel__name="crash").values_list("id", "seq"))

    def assert_consistent(rows: dict[str, int]) -> None:
        assert sorted(rows.values()) == list(range(1, len(rows) + 1))  # no gap, no duplicate
        assert Channel.objects.get(name="crash").last_seq == len(rows)

    after_crash = stored()
    assert_consistent(after_crash)
    assert all(after_crash.get(mid) == seq for mid, seq in acked.items())  # acked were kept
    assert set(after_crash) <= set(attempted)
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA integrity_check")
            assert cursor.fetchone()[0] == "ok"

    # A restarted server takes every retry: committed ids answer 200 with their first seq,
    # the rest are stored once.
    second = ServerProcess()
    try:
        with httpx.Client(base_url=second.url, headers=auth(alice), timeout=10) as http:
            for message_id in attempted:
                r = http.post(
                    "/api/v1/channels/crash/messages/",
                    json={"id": message_id, "title": "retry"},
                )
                assert r.status_code == (200 if message_id in after_crash else 201), r.text
                if message_id in after_crash:
                    assert r.json()["seq"] == after_crash[message_id]
    finally:
        second.stop()
    final = stored()
    assert set(final) == set(attempted)
    assert_consistent(final)
