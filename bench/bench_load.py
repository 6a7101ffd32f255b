"""Load (issue 22 §5): many live readers on one server process while a few clients post.

    .venv/bin/python bench/bench_load.py [--subscribers 500] [--waiters 200] [--clients 8]
        [--posts 10] [--interval 8.0] [--database-url URL] [--redis-url URL] [--json PATH]

One server process (a throwaway SQLite file unless ``--database-url`` names an empty database
of its own, which is migrated and left filled; ``--redis-url`` puts the channel layer on Redis)
and, on loopback, in this one asyncio loop:

1. ``--subscribers`` websockets (``/ws/channels/load/?since=0``, each its own agent: the
   per-agent cap is 16), connected 50 at a time; once the server is idle its RSS and threads
   are sampled again: memory per idle subscriber = RSS delta / subscribers.
2. ``--waiters`` long-polls (``GET …/wait/?timeout=600``, each its own agent on its own
   keep-alive connection), parked; idle again, sampled: memory per parked waiter.
3. ``--clients`` posters, each posting ``--posts`` broadcasts one every ``--interval`` seconds
   (jittered, ±50 %). Every subscriber and every waiter must get every post exactly once
   (a waiter parks again at once after each answer: a wait moves its agent's cursor).

Delivery = from just before a POST is written to the arrival of that message at a subscriber
(its frame) or a waiter (its answer), over every (post, reader) pair. Server CPU per post =
the server's user+system CPU over the posting phase / posts: it includes the fan-out of each
post to every reader. Errors: a post not answered 201, a wait not answered 200, a websocket
closed, a message missing or repeated at any reader, a traceback in the server's output; they
must be 0. The loop guard is off (8 agents posting 80 broadcasts in a row look like a loop to
it, and its notice would take a seq). Prints a table and a JSON line; never asserted in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import (
    Server,
    channel_create,
    lat_summary,
    log,
    machine_info,
    migrate,
    proc_cpu_s,
    proc_fds,
    proc_rss_mb,
    proc_threads,
    project_env,
    raise_nofile,
    run_helper,
)
from rawhttp import HttpError, RawHttp

CHANNEL = "load"


async def wait_idle(pid: int, quiet_s: float = 1.0, below: float = 0.05, limit_s: float = 120):
    """Until the server spent less than ``below`` of a core for ``quiet_s`` (or ``limit_s``)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        cpu, t = proc_cpu_s(pid), time.monotonic()
        await asyncio.sleep(quiet_s)
        if (proc_cpu_s(pid) - cpu) / (time.monotonic() - t) < below:
            return
    log("server did not become idle")


def probe(server: Server) -> dict[str, Any]:
    return {
        "rss_mb": proc_rss_mb(server.pid),
        "threads": proc_threads(server.pid),
        "fds": proc_fds(server.pid),
    }


class Load:
    def __init__(self, server: Server) -> None:
        self.server = server
        self.sent: dict[str, float] = {}  # title -> monotonic time just before its POST
        self.acked: list[int] = []
        self.errors: dict[str, int] = {}
        self.sub_arrivals: dict[int, list[tuple[str, int, float]]] = {}
        self.wait_arrivals: dict[int, list[tuple[str, int, float]]] = {}
        self.wait_answers = 0
        self.parked: set[int] = set()

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1

    async def subscribe(self, k: int, token: str, ready: asyncio.Event, gate: asyncio.Semaphore):
        from websockets.asyncio.client import connect

        arrivals = self.sub_arrivals.setdefault(k, [])
        url = f"{self.server.ws_url}/ws/channels/{CHANNEL}/?since=0&token={token}"
        try:
            async with gate:
                ws = await connect(url, ping_interval=None, open_timeout=60, max_size=None)
            ready.set()
            async with ws:
                async for raw in ws:
                    now = time.monotonic()
                    frame = json.loads(raw)
                    if frame.get("type") == "message":
                        message = frame["message"]
                        arrivals.append((message["title"], message["seq"], now))
                    else:
                        self.error(f"ws frame {frame.get('type')}")
            self.error("ws closed by the server")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a refused handshake, a reset: counted, never hidden
            ready.set()
            self.error(f"ws {type(exc).__name__}")

    async def wait_loop(self, k: int, token: str, gate: asyncio.Semaphore) -> None:
        arrivals = self.wait_arrivals.setdefault(k, [])
        path = f"/api/v1/channels/{CHANNEL}/wait/?timeout=600"
        async with gate:
            http = await RawHttp(self.server.url, token).open()
        try:
            while True:
                self.parked.add(k)
                try:
                    status, answer = await http.json("GET", path)
                except (OSError, HttpError):
                    self.error("wait transport")
                    await asyncio.sleep(0.5)
                    continue
                finally:
                    self.parked.discard(k)
                now = time.monotonic()
                self.wait_answers += 1
                if status != 200:
                    self.error(f"wait {status}")
                    await asyncio.sleep(0.5)
                    continue
                for message in answer["messages"]:
                    arrivals.append((message["title"], message["seq"], now))
        finally:
            await http.close()

    async def poster(self, k: int, token: str, posts: int, interval: float) -> None:
        async with RawHttp(self.server.url, token) as http:
            await asyncio.sleep(random.uniform(0, interval))
            for i in range(posts):
                title = f"load {k}-{i}"
                self.sent[title] = time.monotonic()
                body = {"title": title, "body": "a broadcast of the load bench " * 4}
                try:
                    status, posted = await http.json(
                        "POST", f"/api/v1/channels/{CHANNEL}/messages/", body
                    )
                except (OSError, HttpError):
                    self.error("post transport")
                    continue
                if status == 201:
                    self.acked.append(posted["seq"])
                else:
                    self.error(f"post {status}")
                await asyncio.sleep(interval * random.uniform(0.5, 1.5))


def readers_summary(load: Load, arrivals: dict[int, list[tuple[str, int, float]]]) -> dict:
    expected = sorted(load.acked)
    latencies: list[float] = []
    missing = repeated = 0
    for got in arrivals.values():
        seqs = [seq for _, seq, _ in got]
        missing += len(set(expected) - set(seqs))
        repeated += len(seqs) - len(set(seqs))
        latencies += [t - load.sent[title] for title, _, t in got if title in load.sent]
    return {
        "readers": len(arrivals),
        "deliveries": len(latencies),
        "missing": missing,
        "repeated": repeated,
        **lat_summary(latencies),
    }


def all_delivered(load: Load, total: int) -> bool:
    return all(len(a) >= total for a in load.sub_arrivals.values()) and all(
        len(a) >= total for a in load.wait_arrivals.values()
    )


async def scenario(server: Server, tokens: dict[str, list[str]], args: argparse.Namespace):
    load = Load(server)
    out: dict[str, Any] = {}
    gate = asyncio.Semaphore(50)
    await wait_idle(server.pid)
    out["idle"] = probe(server)

    readies = [asyncio.Event() for _ in tokens["sub"]]
    subs = [
        asyncio.ensure_future(load.subscribe(k, token, readies[k], gate))
        for k, token in enumerate(tokens["sub"])
    ]
    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in readies)), 300)
    await wait_idle(server.pid)
    out["with_subscribers"] = probe(server)

    waits = [
        asyncio.ensure_future(load.wait_loop(k, token, gate))
        for k, token in enumerate(tokens["wait"])
    ]
    deadline = time.monotonic() + 120
    while len(load.parked) < len(waits) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    await wait_idle(server.pid)
    out["with_waiters"] = probe(server)
    out["wait_answers_before_posts"] = load.wait_answers  # 0: every wait parked

    cpu0, wall0, own0 = proc_cpu_s(server.pid), time.monotonic(), time.process_time()
    await asyncio.gather(
        *(
            load.poster(k, token, args.posts, args.interval)
            for k, token in enumerate(tokens["post"])
        )
    )
    posted_s = time.monotonic() - wall0
    total = len(load.acked)
    deadline = time.monotonic() + 120
    while not all_delivered(load, total) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    drained_s = time.monotonic() - wall0
    cpu1, own1 = proc_cpu_s(server.pid), time.process_time()
    await wait_idle(server.pid, quiet_s=0.5)
    out["after_posts"] = probe(server)
    for task in subs + waits:
        task.cancel()
    await asyncio.gather(*subs, *waits, return_exceptions=True)

    out["posts"] = {
        "acked": total,
        "posting_s": round(posted_s, 2),
        "posts_per_s": round(total / posted_s, 1) if posted_s else None,
        "all_delivered_after_s": round(drained_s, 2),
        "server_cpu_ms_per_post": round(1000 * (cpu1 - cpu0) / total, 2) if total else None,
        "server_cpu_pct": round(100 * (cpu1 - cpu0) / drained_s, 1),
        "bench_cpu_ms_per_post": round(1000 * (own1 - own0) / total, 2) if total else None,
        # The channel's first seq may be its creation notice: contiguous from the first post.
        "first_seq": min(load.acked, default=None),
        "last_seq": max(load.acked, default=None),
        "acked_seqs_repeated": len(load.acked) - len(set(load.acked)),
        "seqs_never_acked": sorted(
            set(range(min(load.acked, default=1), max(load.acked, default=0) + 1)) - set(load.acked)
        )[:20],
        "seqs_contiguous": sorted(load.acked)
        == list(range(min(load.acked, default=1), min(load.acked, default=1) + total)),
    }
    out["subscribers"] = readers_summary(load, load.sub_arrivals)
    out["waiters"] = readers_summary(load, load.wait_arrivals)
    out["wait_answers"] = load.wait_answers
    out["errors"] = load.errors
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subscribers", type=int, default=500)
    parser.add_argument("--waiters", type=int, default=200)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--posts", type=int, default=10, help="posts per client")
    parser.add_argument("--interval", type=float, default=8.0, help="seconds between posts")
    parser.add_argument("--database-url", help="an empty database of its own (default SQLite)")
    parser.add_argument("--redis-url", help="the channel layer on Redis (default in-memory)")
    parser.add_argument("--json", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    nofile = raise_nofile(4 * (args.subscribers + args.waiters) + 1024)
    tmp = Path(tempfile.mkdtemp(prefix="agentchat-load-"))
    try:
        env = project_env(tmp, args.database_url, args.redis_url)
        # 8 agents posting 80 messages in a row look like a loop to the guard, whose notice
        # would take a seq: the bench measures delivery, not the guard (docs/agents.md).
        env["AGENTCHAT_LOOP_GUARD_MESSAGES"] = "0"
        migrate(env)
        tokens: dict[str, list[str]] = {}
        for prefix, count in (("post", args.clients), ("sub", args.subscribers)):
            spec = {"op": "agents", "prefix": prefix, "count": count}
            tokens[prefix] = run_helper(env, spec, timeout=600)["tokens"]
        spec = {"op": "agents", "prefix": "wait", "count": args.waiters}
        tokens["wait"] = run_helper(env, spec, timeout=600)["tokens"]
        server = Server(env, tmp / "server.log")
        try:
            channel_create(server.url, tokens["post"][0], CHANNEL)
            channel_create(server.url, tokens["post"][0], "warm")
            # Warm the post path (imports, the first queries) on another channel.
            import httpx

            for i in range(5):
                httpx.post(
                    f"{server.url}/api/v1/channels/warm/messages/",
                    json={"title": f"warm {i}"},
                    headers={"Authorization": f"Bearer {tokens['post'][0]}"},
                    timeout=30,
                )
            result = asyncio.run(scenario(server, tokens, args))
            output = server.log_text()
        finally:
            exit_s = server.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    tracebacks = output.count("Traceback") + output.count("INTERNAL_ERROR")
    if tracebacks:
        result["errors"]["server tracebacks"] = tracebacks
    for part in ("subscribers", "waiters"):
        for kind in ("missing", "repeated"):
            if result[part][kind]:
                result["errors"][f"{part} {kind}"] = result[part][kind]
    idle, subs, waits = result["idle"], result["with_subscribers"], result["with_waiters"]
    result["kib_per_idle_subscriber"] = round(
        1024 * (subs["rss_mb"] - idle["rss_mb"]) / max(1, args.subscribers), 1
    )
    result["kib_per_parked_waiter"] = round(
        1024 * (waits["rss_mb"] - subs["rss_mb"]) / max(1, args.waiters), 1
    )
    result["sigterm_exit_s"] = exit_s
    result["database"] = "postgresql" if args.database_url else "sqlite"
    result["channel_layer"] = "redis" if args.redis_url else "in-memory"
    result["nofile"] = list(nofile)
    result["machine"] = machine_info()

    posts, sub, wait = result["posts"], result["subscribers"], result["waiters"]
    print(
        f"\nLoad: {args.subscribers} websocket subscribers + {args.waiters} parked waits, "
        f"{args.clients} clients posting, one server process on {result['database']} "
        f"({result['channel_layer']} layer); load average {result['machine']['loadavg']}"
    )
    rows = [
        ("posts acked (seqs contiguous)", f"{posts['acked']} ({posts['seqs_contiguous']})"),
        ("posts/s offered", f"{posts['posts_per_s']}"),
        (
            "post -> subscriber frame p50 / p99 / max",
            f"{sub['p50_ms']} / {sub['p99_ms']} / {sub['max_ms']} ms ({sub['deliveries']})",
        ),
        (
            "post -> waiter answer p50 / p99 / max",
            f"{wait['p50_ms']} / {wait['p99_ms']} / {wait['max_ms']} ms ({wait['deliveries']})",
        ),
        ("every reader got every post once", f"{posts['all_delivered_after_s']} s after start"),
        ("server CPU per post (with its fan-out)", f"{posts['server_cpu_ms_per_post']} ms"),
        ("server CPU while posting", f"{posts['server_cpu_pct']} % of a core"),
        ("bench (client) CPU per post", f"{posts['bench_cpu_ms_per_post']} ms"),
        (
            "server RSS idle / +subscribers / +waiters",
            f"{idle['rss_mb']} / {subs['rss_mb']} / {waits['rss_mb']} MB",
        ),
        ("memory per idle subscriber", f"{result['kib_per_idle_subscriber']} KiB"),
        ("memory per parked waiter", f"{result['kib_per_parked_waiter']} KiB"),
        (
            "server threads idle / +subscribers / +waiters",
            f"{idle['threads']} / {subs['threads']} / {waits['threads']}",
        ),
        ("server fds with everything connected", f"{waits['fds']}"),
        ("RSS after the posts", f"{result['after_posts']['rss_mb']} MB"),
        ("errors", json.dumps(result["errors"]) if result["errors"] else "0"),
        ("exit after SIGTERM", f"{exit_s} s"),
    ]
    for name, value in rows:
        print(f"  {name:<44} {value}")
    print(json.dumps(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
