"""HTTP v1 live follow (Server-Sent Events) beside the websocket push, in one run:

    .venv/bin/python bench/bench_sse.py [--n 200] [--idle 200] [--database-url postgres://…]

- websocket push: a post to a channel → the frame on a subscriber's ``/ws/channels/<name>/``;
- SSE delivery: an envelope sent to bob → the ``event: envelope`` on bob's inbox follow;
  each a round at a time (post, wait for the arrival), p50/p99 of post-to-arrival;
- idle SSE followers: the server's RSS and thread count before and with ``--idle`` streams of
  carol's inbox open (each started: its ``: ready`` read), and one envelope then reaching them
  all (the per-agent cap of follows raised for it);
- replay flood (``--replay 100``, ``--only-replay``: the hostile run's probe): bob's inbox
  filled with 1,000 envelopes of 20 KB, then ``--replay`` follows of it from cursor 0 at once
  (past AGENTCHAT_SSE_MAX_PER_AGENT refused 429), while another agent posts: its post latency
  alone and beside them, and the follows' statuses.

Printed as JSON. Nothing here is run by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import (
    Run,
    Server,
    channel_create,
    create_tokens,
    lat_summary,
    log,
    machine_info,
    migrate,
    proc_rss_mb,
    proc_threads,
    project_env,
    raise_nofile,
)
from rawhttp import RawHttp
from websockets.asyncio.client import connect


async def ws_push(srv: Server, tokens: dict[str, str], n: int) -> dict[str, Any]:
    channel = "bench-sse-ws"
    channel_create(srv.url, tokens["alice"], channel)
    path = f"/api/v1/channels/{channel}/messages/"
    lat: list[float] = []
    async with (
        connect(f"{srv.ws_url}/ws/channels/{channel}/?token={tokens['bob']}") as ws,
        RawHttp(srv.url, tokens["alice"]) as client,
    ):
        for i in range(n + 5):
            t0 = time.perf_counter()
            status, _ = await client.request("POST", path, {"title": f"m{i}", "body": "x"})
            assert status == 201, status
            while json.loads(await asyncio.wait_for(ws.recv(), 30)).get("type") != "message":
                pass
            if i >= 5:  # warm-up
                lat.append(time.perf_counter() - t0)
    return {"post_to_frame": lat_summary(lat)}


async def _follow(srv: Server, token: str, path: str) -> tuple[Any, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", srv.port, limit=1 << 22)
    writer.write(
        (
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            "Accept: text/event-stream\r\n\r\n"
        ).encode()
    )
    await writer.drain()
    while b": ready" not in await reader.readline():
        pass
    return reader, writer


async def _next_event(reader: Any) -> bytes:
    while True:
        line = await asyncio.wait_for(reader.readline(), 30)
        if line.startswith(b"data: "):
            return line


async def sse_delivery(srv: Server, tokens: dict[str, str], n: int) -> dict[str, Any]:
    reader, writer = await _follow(srv, tokens["bob"], "/v1/agents/bob/inbox?cursor=0")
    lat: list[float] = []
    try:
        async with RawHttp(srv.url, tokens["alice"]) as client:
            for i in range(n + 5):
                t0 = time.perf_counter()
                status, _ = await client.request(
                    "POST", "/v1/agents/alice/messages", {"to": "bob", "text": f"m{i}"}
                )
                assert status == 201, status
                await _next_event(reader)
                if i >= 5:
                    lat.append(time.perf_counter() - t0)
    finally:
        writer.close()
    return {"post_to_event": lat_summary(lat)}


async def idle_followers(srv: Server, tokens: dict[str, str], count: int) -> dict[str, Any]:
    warm = await _follow(srv, tokens["bob"], "/v1/agents/bob/inbox?cursor=0&limit=1")
    before = {"rss_mb": proc_rss_mb(srv.pid), "threads": proc_threads(srv.pid)}
    started = time.perf_counter()
    streams = [warm]
    path = "/v1/agents/carol/inbox"
    for _ in range(count):
        streams.append(await _follow(srv, tokens["carol"], path))
    open_s = time.perf_counter() - started
    await asyncio.sleep(1)
    after = {"rss_mb": proc_rss_mb(srv.pid), "threads": proc_threads(srv.pid)}
    try:
        async with RawHttp(srv.url, tokens["alice"]) as client:
            t0 = time.perf_counter()
            await client.request("POST", "/v1/agents/alice/messages", {"to": "carol", "text": "x"})
            await asyncio.gather(*(_next_event(reader) for reader, _ in streams[1:]))
            fan_out = time.perf_counter() - t0
    finally:
        for _, writer in streams:
            writer.close()
    return {
        "followers": count,
        "before": before,
        "with_followers": after,
        "rss_per_follower_kb": round((after["rss_mb"] - before["rss_mb"]) * 1024 / count, 1),
        "threads_added": after["threads"] - before["threads"],
        "open_all_s": round(open_s, 2),
        "one_envelope_to_all_s": round(fan_out, 3),
    }


async def _replay(srv: Server, token: str, events: int) -> int:
    """One follow of bob's inbox from cursor 0 read to its ``events``-th event: its status."""
    reader, writer = await asyncio.open_connection("127.0.0.1", srv.port, limit=1 << 22)
    try:
        writer.write(
            (
                "GET /v1/agents/bob/inbox?cursor=0 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
            ).encode()
        )
        status = int((await reader.readline()).split()[1])
        if status != 200:
            return status
        seen = 0
        while seen < events:
            line = await asyncio.wait_for(reader.readline(), 120)
            seen += line.startswith(b"data: ")
        return status
    finally:
        writer.close()


async def _victim(srv: Server, token: str, stop: asyncio.Event) -> list[float]:
    lat: list[float] = []
    async with RawHttp(srv.url, token) as client:
        while not stop.is_set():
            t0 = time.perf_counter()
            status, _ = await client.request(
                "POST", "/v1/agents/victim/messages", {"to": "carol", "text": "v"}
            )
            assert status == 201, status
            lat.append(time.perf_counter() - t0)
    return lat


async def replay_flood(
    srv: Server, tokens: dict[str, str], follows: int, events: int = 1000
) -> dict[str, Any]:
    """The hostile run's probe: ``follows`` follows of one inbox from cursor 0 (``events``
    envelopes of 20 KB) while another agent posts; its post latency alone and beside them."""
    async with RawHttp(srv.url, tokens["alice"]) as client:
        for i in range(events):
            status, _ = await client.request(
                "POST", "/v1/agents/alice/messages", {"to": "bob", "text": f"{i} " + "x" * 20_000}
            )
            assert status == 201, status
    stop = asyncio.Event()
    alone = asyncio.ensure_future(_victim(srv, tokens["victim"], stop))
    await asyncio.sleep(3)
    stop.set()
    alone_lat = await alone
    stop = asyncio.Event()
    beside = asyncio.ensure_future(_victim(srv, tokens["victim"], stop))
    started = time.perf_counter()
    statuses = await asyncio.gather(*(_replay(srv, tokens["bob"], events) for _ in range(follows)))
    took = time.perf_counter() - started
    stop.set()
    beside_lat = await beside
    return {
        "follows": follows,
        "statuses": {str(code): statuses.count(code) for code in sorted(set(statuses))},
        "replays_done_s": round(took, 2),
        "victim_post_alone": lat_summary(alone_lat),
        "victim_post_beside": lat_summary(beside_lat),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=200, help="rounds per latency section")
    parser.add_argument("--idle", type=int, default=200, help="idle SSE followers")
    parser.add_argument("--database-url")
    parser.add_argument(
        "--replay", type=int, default=100, help="follows of one inbox replaying from cursor 0"
    )
    parser.add_argument("--only-replay", action="store_true", help="the replay flood only")
    args = parser.parse_args()
    raise_nofile()
    with tempfile.TemporaryDirectory(prefix="bench-sse-") as tmp:
        env = project_env(Path(tmp), args.database_url)
        migrate(env)
        tokens = create_tokens(env, ["alice", "bob", "carol", "victim"])
        run = Run()
        if not args.only_replay:
            # The idle followers are one agent's: above the per-agent cap of follows.
            env["AGENTCHAT_SSE_MAX_PER_AGENT"] = str(args.idle + 2)
            srv = Server(env, Path(tmp) / "server.log")
            try:
                run.section("websocket push", ws_push, srv, tokens, args.n)
                run.section("SSE delivery", sse_delivery, srv, tokens, args.n)
                run.section("idle SSE followers", idle_followers, srv, tokens, args.idle)
            finally:
                srv.stop()
            del env["AGENTCHAT_SSE_MAX_PER_AGENT"]  # the replay flood meets the default cap
        srv = Server(env, Path(tmp) / "server-replay.log")
        try:
            run.section("replay flood", replay_flood, srv, tokens, args.replay)
        finally:
            srv.stop()
    res = run.results
    ws = res.get("websocket push", {}).get("post_to_frame", {})
    sse = res.get("SSE delivery", {}).get("post_to_event", {})
    if ws.get("p50_ms") and sse.get("p50_ms"):
        res["SSE delivery"]["p50_ratio_to_websocket"] = round(sse["p50_ms"] / ws["p50_ms"], 2)
    log("done")
    print(json.dumps({"machine": machine_info(), "results": res}, indent=2))


if __name__ == "__main__":
    main()
