"""Redis restarted under live waiters and websocket subscribers (docs/deployment.md,
"Faults"): posts go on while it is down (the doorbell is lost, not the message), the waiters
and subscribers find every message by their cursor (the sweep, or a websocket reconnected with
``since``), and afterwards the server holds no leaked group subscription, thread or Redis
connection (each counted against the same figure before the fault).

On a private redis-server (tests/faults/instances.py): the shared one is never restarted. It
runs in the SQLite suite only, on which the server needs no other service; the PostgreSQL
suite runs every live test on the shared Redis already, so the fault costs CI one run.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import websockets
from django.db import connection

from channels_app.models import Channel
from channels_app.services import channel_group
from tests.channels_app.test_processes import redis_group_channel, redis_subscribed
from tests.conftest import ServerProcess, auth
from tests.faults.instances import PrivateRedis
from tests.signals import wait_until

POSTS = 6
WAITERS = 3
SUBSCRIBERS = 2


def test_redis_restart_loses_no_message_and_leaks_nothing(transactional_db, make_agent):
    if connection.vendor != "sqlite":
        pytest.skip("the SQLite suite runs it (see the module's docstring)")
    _, alice = make_agent("alice")
    waiters = [make_agent(f"waiter{i}")[1] for i in range(WAITERS)]
    subscribers = [make_agent(f"sub{i}")[1] for i in range(SUBSCRIBERS)]
    rds = PrivateRedis()
    server = None
    try:
        # One thread in each database pool, so the pools' threads are all there once each pool
        # has served a read (below): what the count adds after the fault is a leak.
        server = ServerProcess(
            env={
                "REDIS_URL": rds.url,
                "AGENTCHAT_STREAM_SWEEP_SECONDS": "1",
                "AGENTCHAT_DB_THREADS": "1",
                "AGENTCHAT_DB_HEAVY_THREADS": "1",
            }
        )
        r = httpx.post(f"{server.url}/api/v1/channels/", json={"name": "rr"}, headers=auth(alice))
        assert r.status_code == 201
        group = redis_group_channel(rds.url, channel_group(Channel.objects.get(name="rr").pk))
        probe = rds.client()

        def server_clients() -> int:
            return len(probe.client_list()) - 1  # all but the probe itself

        def group_subscribers() -> int:
            return dict(probe.pubsub_numsub(group)).get(group.encode(), 0)

        async def live_wave(fault: bool) -> tuple[list[list[int]], list[list[int]], int]:
            """Waiters and subscribers parked on the channel; with ``fault``, Redis is killed
            while they are and the posts go in: they must find every message without it (a
            wait parked anew while Redis is down has no doorbell at all). Every client
            collects the seqs it got."""
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
                reconnects = 0

                async def waiter(token: str) -> list[int]:
                    got: list[int] = []
                    while len(got) < POSTS:
                        r = await http.get(
                            "/api/v1/channels/rr/wait/", params={"timeout": 20},
                            headers=auth(token),
                        )  # fmt: skip
                        assert r.status_code == 200, r.text
                        got += [m["seq"] for m in r.json()["messages"]]
                    return got

                async def subscriber(token: str, since: int) -> list[int]:
                    nonlocal reconnects
                    got: list[int] = []
                    while len(got) < POSTS:
                        last = got[-1] if got else since
                        url = f"{server.ws_url}/ws/channels/rr/?since={last}&token={token}"
                        async with websockets.connect(url) as ws:
                            try:
                                while len(got) < POSTS:
                                    frame = json.loads(await asyncio.wait_for(ws.recv(), 20))
                                    if frame.get("type") == "message":
                                        got.append(frame["message"]["seq"])
                            except websockets.ConnectionClosed:
                                reconnects += 1  # the stream ended: resume by cursor
                    return got

                last_seq = (await http.get("/api/v1/channels/rr/", headers=auth(alice))).json()
                since = last_seq["last_seq"]
                parked = [asyncio.ensure_future(waiter(t)) for t in waiters]
                parked += [asyncio.ensure_future(subscriber(t, since)) for t in subscribers]
                await redis_subscribed(rds.url, group)
                if fault:
                    await asyncio.to_thread(rds.kill)
                for i in range(POSTS):
                    r = await http.post(
                        "/api/v1/channels/rr/messages/", json={"title": f"m{i}"},
                        headers=auth(alice),
                    )  # fmt: skip
                    assert r.status_code == 201, r.text  # Redis down: the post still stands
                results = await asyncio.wait_for(asyncio.gather(*parked), 60)
                return results[:WAITERS], results[WAITERS:], reconnects

        async def replay_one() -> None:
            url = f"{server.ws_url}/ws/channels/rr/?since=0&token={subscribers[0]}"
            async with websockets.connect(url) as ws:
                while json.loads(await asyncio.wait_for(ws.recv(), 20)).get("type") != "message":
                    pass

        def subscriptions() -> int:
            return len(probe.pubsub_channels("agentchat.*"))

        def settled() -> tuple[int, int, int]:
            return subscriptions(), server_clients(), server.threads()

        # A wave without a fault first: the pools' threads and the layer's connections the
        # server keeps, to compare with.
        asyncio.run(live_wave(fault=False))
        asyncio.run(replay_one())  # a replay reads on the heavy pool: its one thread starts
        wait_until(lambda: group_subscribers() == 0, what="the first wave left the group")
        before = settled()
        waited, streamed, _ = asyncio.run(live_wave(fault=True))
        expected = list(range(POSTS + 1, 2 * POSTS + 1))
        for got in waited + streamed:
            assert got == expected, got  # every message, once, in order
        rds.start()  # empty: the server's layer reconnects and subscribes again
        wait_until(lambda: subscriptions() >= before[0], timeout=15, what="the layer resubscribed")
        waited, streamed, _ = asyncio.run(live_wave(fault=False))  # the doorbell works again
        for got in waited + streamed:
            assert got == list(range(2 * POSTS + 1, 3 * POSTS + 1)), got
        # Nothing leaked: no subscription of a wait or stream that ended during the outage
        # (the reconnection would have renewed it), no extra connection or thread.
        wait_until(lambda: settled() <= before, timeout=15, what=f"back to {before}: {settled()}")
        assert "INTERNAL_ERROR" not in server.output()
    finally:
        if server is not None:
            server.stop()
        rds.close()
