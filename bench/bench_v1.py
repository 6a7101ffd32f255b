"""HTTP v1 envelopes beside channel posts: posts/s and latency with 8 concurrent clients.

    .venv/bin/python bench/bench_v1.py [--each 150] [--database-url postgres://…]

Sections, each on the same server (a throwaway SQLite file unless ``--database-url`` names an
empty database of its own, which is migrated and left filled):

- channel posts: 8 clients posting to one channel (the channel's counter row is shared);
- envelopes to one inbox: 8 senders to ``bob`` (each pair its direct channel; bob's inbox
  counter row is shared, as the channel's is above);
- envelopes to eight inboxes: sender ``k`` to recipient ``k``;
- inbox replay: pages of 100 of bob's inbox, one client.

Printed as JSON; the envelope rows carry their ratio to the channel posts. Nothing here is run
by the test suite. Live delivery over Server-Sent Events: bench_sse.py.
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
    proc_cpu_s,
    project_env,
)
from rawhttp import HttpError, RawHttp

CLIENTS = 8


async def _load(
    srv: Server,
    tokens: list[str],
    paths: list[str],
    bodies: list[Any],
    each: int,
    text_field: str,
) -> dict[str, Any]:
    lat: list[float] = []
    errors = 0
    clients = [await RawHttp(srv.url, token).open() for token in tokens]

    async def worker(k: int) -> None:
        nonlocal errors
        for i in range(each):
            t = time.perf_counter()
            try:
                status, _ = await clients[k].request(
                    "POST", paths[k], {**bodies[k], text_field: f"{i}"}
                )
                errors += status != 201
            except (OSError, HttpError):
                errors += 1
            lat.append(time.perf_counter() - t)

    cpu0, started = proc_cpu_s(srv.pid), time.perf_counter()
    await asyncio.gather(*(worker(k) for k in range(len(tokens))))
    elapsed = time.perf_counter() - started
    cpu = proc_cpu_s(srv.pid) - cpu0
    for client in clients:
        await client.close()
    return {
        "posts": len(lat),
        "posts_per_s": round(len(lat) / elapsed, 1),
        **lat_summary(lat),
        "errors": errors,
        "server_cpu_ms_per_post": round(cpu * 1000 / max(1, len(lat)), 2),
    }


async def channel_posts(srv: Server, tokens: dict[str, str], each: int) -> dict[str, Any]:
    names = [f"s{k}" for k in range(CLIENTS)]
    channel_create(srv.url, tokens[names[0]], "bench-v1")
    path = "/api/v1/channels/bench-v1/messages/"
    bodies = [{"title": "post"} for _ in names]
    return await _load(srv, [tokens[n] for n in names], [path] * CLIENTS, bodies, each, "body")


async def envelopes(
    srv: Server, tokens: dict[str, str], each: int, recipients: list[str]
) -> dict[str, Any]:
    names = [f"s{k}" for k in range(CLIENTS)]
    paths = [f"/v1/agents/{n}/messages" for n in names]
    bodies = [{"to": recipients[k]} for k in range(CLIENTS)]
    return await _load(srv, [tokens[n] for n in names], paths, bodies, each, "text")


async def replay(srv: Server, token: str, pages: int) -> dict[str, Any]:
    lat: list[float] = []
    async with RawHttp(srv.url, token) as client:
        cursor = 0
        for _ in range(pages):
            t = time.perf_counter()
            _, body = await client.request("GET", f"/v1/agents/bob/inbox?cursor={cursor}")
            lat.append(time.perf_counter() - t)
            page = json.loads(body)
            cursor = page["next_cursor"] if page["next_cursor"] < page["tail"] else 0
    return {"pages": len(lat), **lat_summary(lat)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--each", type=int, default=150, help="posts per client per section")
    parser.add_argument("--database-url")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-v1-") as tmp:
        env = project_env(Path(tmp), args.database_url)
        migrate(env)
        names = [f"s{k}" for k in range(CLIENTS)] + ["bob"] + [f"r{k}" for k in range(CLIENTS)]
        tokens = create_tokens(env, names)
        srv = Server(env, Path(tmp) / "server.log")
        run = Run()
        try:
            run.section("channel posts, 8 clients", channel_posts, srv, tokens, args.each)
            run.section(
                "envelopes, 8 senders to one inbox",
                envelopes,
                srv,
                tokens,
                args.each,
                ["bob"] * CLIENTS,
            )
            run.section(
                "envelopes, 8 senders to 8 inboxes",
                envelopes,
                srv,
                tokens,
                args.each,
                [f"r{k}" for k in range(CLIENTS)],
            )
            run.section("inbox replay, pages of 100", replay, srv, tokens["bob"], 100)
        finally:
            srv.stop()
    res = run.results
    base = res["channel posts, 8 clients"].get("posts_per_s")
    for name, section in res.items():
        if name.startswith("envelopes") and base and "posts_per_s" in section:
            section["ratio_to_channel_posts"] = round(section["posts_per_s"] / base, 2)
    log("done")
    print(json.dumps({"machine": machine_info(), "results": res}, indent=2))


if __name__ == "__main__":
    main()
