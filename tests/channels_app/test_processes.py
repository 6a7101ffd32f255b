"""Several server processes, and stopping one: each test starts its own daphne."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time

import httpx
import websockets

from channels_app.models import Message
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
