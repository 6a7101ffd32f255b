"""Several server processes, and stopping one: each test starts its own daphne."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time

import httpx
import websockets
from django.db import connection

from channels_app.models import Channel, Message
from tests.conftest import (
    ServerProcess,
    auth,
    redis_reachable,
    redis_url_for_tests,
    require_service,
)


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

        async def scenario():
            async with (
                httpx.AsyncClient(timeout=30) as http,
                websockets.connect(f"{b.ws_url}/ws/channels/multi/?token={bob}") as ws,
            ):
                waiter = asyncio.create_task(
                    http.get(
                        f"{b.url}/api/v1/channels/multi/wait/",
                        params={"timeout": 20},
                        headers=auth(bob),
                    )
                )
                await asyncio.sleep(0.5)
                posted = await http.post(
                    f"{a.url}/api/v1/channels/multi/messages/",
                    json={"title": "across"},
                    headers=auth(alice),
                )
                assert posted.status_code == 201
                frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
                waited = await asyncio.wait_for(waiter, 10)
                return frame, waited.json()

        frame, waited = asyncio.run(scenario())
        assert frame["message"]["title"] == "across"
        assert [m["title"] for m in waited["messages"]] == ["across"]
    finally:
        a.stop()
        b.stop()


def test_sigterm_with_posts_and_waits_in_flight_exits_within_10_s(transactional_db, make_agent):
    _, alice = make_agent("alice")
    _, bob = make_agent("bob")
    server = ServerProcess()
    httpx.post(f"{server.url}/api/v1/channels/", json={"name": "stop"}, headers=auth(alice))
    acked: list[int] = []
    stop_posting = threading.Event()

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
                    acked.append(r.json()["seq"])

    def waiter():
        with contextlib.suppress(httpx.HTTPError):
            httpx.get(
                f"{server.url}/api/v1/channels/stop/wait/",
                params={"timeout": 60},
                headers=auth(bob),
                timeout=70,
            )

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
    time.sleep(1.0)
    assert acked, "posts were in flight"
    took = server.stop(timeout=15)
    stop_posting.set()
    for t in threads:
        t.join(20)
    for ws in sockets:
        loop.run_until_complete(ws.close())
    loop.close()
    assert took < 10, f"server took {took:.1f}s to exit on SIGTERM"
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

    threads = [threading.Thread(target=poster, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 20
    while len(acked) < 100 and time.monotonic() < deadline:
        time.sleep(0.05)
    first.proc.kill()  # SIGKILL: no shutdown code runs
    first.proc.wait()
    first.log.close()
    for t in threads:
        t.join(10)
    assert len(acked) >= 100

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
