"""Core benchmark: this server against the reference CLI, on this machine, in one run.

Usage::

    .venv/bin/python bench/bench_core.py [--quick] [--json PATH] [--skip-reference]

It creates a throwaway SQLite database in a temp dir, migrates it, creates agents with
``manage.py create_agent_token``, starts our server as ``make run`` does
(``agentchat.serve.ServerProcess``, the launcher the tests use) on a free 127.0.0.1 port, and
measures HTTP posts/s (sequential and 8 concurrent clients),
post -> websocket push and post -> wait latency, reading 10 new messages in a 100- and a
100,000-message channel, and 1,000 parked waiters woken by one post. Then it measures the same
operations through the reference CLI (``agent-chat-plugin`` in a cached scratch venv under
/tmp) and prints a table with the ratios ours/reference and the targets set for it. Every loop
has a count and a deadline; all traffic goes to 127.0.0.1. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# bench/ is on sys.path as the script's folder. The harness, the reference driver and the report
# are modules of their own, which every bench script imports.
from harness import (
    ROOT,  # noqa: F401  (for scripts that import it from here, as before)
    Run,
    Server,
    auth,
    channel_create,
    create_tokens,
    django_helper,
    lat_summary,
    log,
    machine_info,
    migrate,
    ms,
    pct,
    postgres_admin,
    proc_cpu_s,
    proc_fds,
    proc_rss_mb,
    proc_threads,
    project_env,
    raise_nofile,
    run_helper,
    seqs_of,
)
from rawhttp import HttpError, RawHttp
from reference import REF_PACKAGE, REF_VENV_DEFAULT, Ref, ensure_ref_venv, ref_fill
from report import Report, fmt, fmt_ratio, print_table, ratio

REF_HISTORIC_8PROC = (24.0, 34.0)  # posts/s the reference managed with 8 processes
WAIT_TIMEOUT_S = 120  # the long-poll timeout our waiters ask for; far beyond every deadline

TARGETS = {
    "push_p50_ms": 10.0,
    "wait_p50_ms": 10.0,
    "read_ratio": 1.5,
    "conc_vs_ref": 10.0,
    "max_post_ms": 250.0,
    "fanout_s": 1.5,
}


@dataclass(frozen=True)
class Plan:
    seq_posts: int
    conc_clients: int
    conc_posts_each: int
    push_samples: int
    wait_samples: int
    read_reps: int
    read_small: int
    read_big: int
    fanout_lp: int
    fanout_mixed_ws: int  # >0: a second fan-out run with this many websockets added
    ref_seq_posts: int
    ref_conc_procs: int
    ref_conc_posts_each: int
    ref_wait_samples: int
    ref_read_reps: int
    ref_read_big: int
    section_budget_s: float


FULL = Plan(
    seq_posts=800,
    conc_clients=8,
    conc_posts_each=150,
    push_samples=300,
    wait_samples=200,
    read_reps=15,
    read_small=100,
    read_big=100_000,
    fanout_lp=1000,
    fanout_mixed_ws=1000,
    ref_seq_posts=100,
    ref_conc_procs=8,
    ref_conc_posts_each=40,
    ref_wait_samples=6,
    ref_read_reps=7,
    ref_read_big=100_000,
    section_budget_s=90,
)
QUICK = Plan(
    seq_posts=150,
    conc_clients=8,
    conc_posts_each=40,
    push_samples=50,
    wait_samples=30,
    read_reps=5,
    read_small=100,
    read_big=100_000,
    fanout_lp=1000,
    fanout_mixed_ws=0,
    ref_seq_posts=20,
    ref_conc_procs=8,
    ref_conc_posts_each=10,
    ref_wait_samples=3,
    ref_read_reps=3,
    ref_read_big=100_000,
    section_budget_s=40,
)


# --- Our server: sections ------------------------------------------------------------------


def post_json(i: int, to: str | None = "bob") -> dict[str, Any]:
    body: dict[str, Any] = {"title": f"bench message {i}", "body": "hello world, " * 8}
    if to is not None:
        body["to"] = to
    return body


async def ours_posts_sequential(srv: Server, token: str, n: int, budget: float) -> dict[str, Any]:
    channel = "bench-seq"
    channel_create(srv.url, token, channel)
    path = f"/api/v1/channels/{channel}/messages/"
    lat: list[float] = []
    errors = 0
    async with RawHttp(srv.url, token) as client:
        for i in range(10):  # warm-up, not counted
            await client.request("POST", path, post_json(-i))
        cpu0, started = proc_cpu_s(srv.pid), time.perf_counter()
        deadline = time.monotonic() + budget
        for i in range(n):
            if time.monotonic() > deadline:
                break
            t = time.perf_counter()
            try:
                status, _ = await client.request("POST", path, post_json(i))
                errors += status != 201
            except (OSError, HttpError):
                errors += 1
            lat.append(time.perf_counter() - t)
        elapsed = time.perf_counter() - started
        cpu = proc_cpu_s(srv.pid) - cpu0
    return {
        "posts": len(lat),
        "truncated": len(lat) < n,
        "elapsed_s": round(elapsed, 3),
        "posts_per_s": round(len(lat) / elapsed, 1),
        **lat_summary(lat),
        "errors": errors,
        "server_cpu_ms_per_post": round(cpu * 1000 / max(1, len(lat)), 2),
    }


async def ours_posts_concurrent(
    srv: Server, tokens: list[str], reader_token: str, each: int, budget: float
) -> dict[str, Any]:
    channel = "bench-conc"
    channel_create(srv.url, tokens[0], channel)
    path = f"/api/v1/channels/{channel}/messages/"
    lat: list[list[float]] = [[] for _ in tokens]
    errors = [0] * len(tokens)
    statuses: dict[int, int] = {}
    deadline = time.monotonic() + budget
    clients = [await RawHttp(srv.url, token).open() for token in tokens]

    async def worker(k: int) -> None:
        for i in range(each):
            if time.monotonic() > deadline:
                return
            t = time.perf_counter()
            try:
                status, _ = await clients[k].request("POST", path, post_json(i, to=None))
                if status != 201:
                    errors[k] += 1
                    statuses[status] = statuses.get(status, 0) + 1
            except (OSError, HttpError):
                errors[k] += 1
            lat[k].append(time.perf_counter() - t)

    cpu0, started = proc_cpu_s(srv.pid), time.perf_counter()
    await asyncio.gather(*(worker(k) for k in range(len(tokens))))
    elapsed = time.perf_counter() - started
    cpu = proc_cpu_s(srv.pid) - cpu0
    for client in clients:
        await client.close()
    every = [x for xs in lat for x in xs]
    stored = seqs_of(srv.url, reader_token, channel)
    ok_posts = len(every) - sum(errors)
    return {
        "clients": len(tokens),
        "posts": len(every),
        "truncated": len(every) < each * len(tokens),
        "elapsed_s": round(elapsed, 3),
        "posts_per_s": round(len(every) / elapsed, 1),
        **lat_summary(every),
        "over_250ms": sum(x > 0.25 for x in every),
        "errors": sum(errors),
        "error_statuses": statuses,
        "stored": len(stored),
        "seqs_contiguous": stored == list(range(1, len(stored) + 1)),
        "stored_matches_acked": len(stored) == ok_posts,
        "server_cpu_ms_per_post": round(cpu * 1000 / max(1, len(every)), 2),
    }


async def _push_latency(srv: Server, poster: str, subscriber: str, n: int, budget: float) -> dict:
    from websockets.asyncio.client import connect

    channel = "bench-push"
    channel_create(srv.url, poster, channel)
    path = f"/api/v1/channels/{channel}/messages/"
    arrivals: dict[int, float] = {}
    frame = asyncio.Event()
    lat: list[float] = []
    frame_after_response: list[float] = []
    post_rtt: list[float] = []
    missing = 0
    async with (
        connect(
            f"{srv.ws_url}/ws/channels/{channel}/?token={subscriber}", ping_interval=None
        ) as ws,
        RawHttp(srv.url, poster) as client,
    ):

        async def reader() -> None:
            async for raw in ws:
                t = time.perf_counter()
                data = json.loads(raw)
                if data.get("type") == "message":
                    arrivals[data["message"]["seq"]] = t
                    frame.set()

        reading = asyncio.create_task(reader())
        try:
            for i in range(5):  # warm-up
                await client.request("POST", path, post_json(-i, to=None))
            await asyncio.sleep(0.2)
            deadline = time.monotonic() + budget
            for i in range(n):
                if time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.01)
                frame.clear()
                t0 = time.perf_counter()
                _, posted = await client.json("POST", path, post_json(i, to=None))
                t_resp = time.perf_counter()
                seq = posted["seq"]
                while seq not in arrivals and time.monotonic() < deadline + 5:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(frame.wait(), 5)
                    frame.clear()
                if seq not in arrivals:
                    missing += 1
                    continue
                lat.append(arrivals[seq] - t0)
                post_rtt.append(t_resp - t0)
                frame_after_response.append(arrivals[seq] - t_resp)
        finally:
            reading.cancel()
    return {
        **lat_summary(lat),
        "missing_frames": missing,
        "post_rtt_p50_ms": ms(pct(post_rtt, 0.5)),
        "frame_minus_response_p50_ms": ms(pct(frame_after_response, 0.5)),
        "frame_minus_response_p99_ms": ms(pct(frame_after_response, 0.99)),
    }


async def _wait_latency(srv: Server, poster: str, waiter: str, n: int, budget: float) -> dict:
    channel = "bench-wait"
    channel_create(srv.url, poster, channel)
    base = f"/api/v1/channels/{channel}"
    lat: list[float] = []
    bad = 0
    async with RawHttp(srv.url, waiter) as w, RawHttp(srv.url, poster) as p:
        await w.request("POST", f"{base}/ack/", {})

        async def wait_once() -> tuple[float, dict[str, Any]]:
            _, body = await w.json("GET", f"{base}/wait/?timeout={WAIT_TIMEOUT_S}")
            return time.perf_counter(), body

        for i in range(3):  # warm-up
            task = asyncio.create_task(wait_once())
            await asyncio.sleep(0.05)
            await p.request("POST", f"{base}/messages/", post_json(-i))
            await asyncio.wait_for(task, 30)
        deadline = time.monotonic() + budget
        for i in range(n):
            if time.monotonic() > deadline:
                break
            task = asyncio.create_task(wait_once())
            await asyncio.sleep(0.1)  # let it park (a waiter that is late still gets it)
            if task.done():
                bad += 1
                continue
            t0 = time.perf_counter()
            _, posted = await p.json("POST", f"{base}/messages/", post_json(i))
            try:
                t_done, body = await asyncio.wait_for(task, 30)
            except TimeoutError:
                bad += 1
                continue
            if [m["seq"] for m in body.get("messages", [])] != [posted["seq"]]:
                bad += 1
                continue
            lat.append(t_done - t0)
    return {**lat_summary(lat), "bad_returns": bad}


def ours_read(
    srv: Server, env: dict[str, str], poster: str, reader: str, plan: Plan, budget: float
) -> dict[str, Any]:
    import httpx

    sizes = {"small": plan.read_small, "big": plan.read_big}
    names = {key: f"bench-read-{size}" for key, size in sizes.items()}
    fills = {}
    for key, name in names.items():
        channel_create(srv.url, poster, name)
        log(f"filling {name} with {sizes[key]:,} messages (ORM bulk insert, separate process)")
        fills[key] = run_helper(
            env, {"op": "fill", "channel": name, "count": sizes[key], "sender": "filler"}, 300
        )
    times: dict[str, list[float]] = {"small": [], "big": []}
    wrong = 0
    deadline = time.monotonic() + budget
    with (
        httpx.Client(base_url=srv.url, headers=auth(poster), timeout=30) as p,
        httpx.Client(base_url=srv.url, headers=auth(reader), timeout=60) as r,
    ):
        for name in names.values():
            r.post(f"/api/v1/channels/{name}/ack/", json={}).raise_for_status()
        for rep in range(plan.read_reps + 1):  # rep 0 is a warm-up
            if rep and time.monotonic() > deadline:
                break
            for key, name in names.items():
                for i in range(10):
                    p.post(f"/api/v1/channels/{name}/messages/", json=post_json(i, to=None))
                t = time.perf_counter()
                resp = r.post(f"/api/v1/channels/{name}/read/", json={})
                took = time.perf_counter() - t
                if resp.status_code != 200 or len(resp.json()["messages"]) != 10:
                    wrong += 1
                if rep:
                    times[key].append(took)
    small, big = statistics.median(times["small"]), statistics.median(times["big"])
    return {
        "small_messages": sizes["small"],
        "big_messages": sizes["big"],
        "big_fill_s": fills["big"]["fill_s"],
        "reps": len(times["small"]),
        "small_median_ms": ms(small),
        "big_median_ms": ms(big),
        "small_all_ms": [ms(x) for x in times["small"]],
        "big_all_ms": [ms(x) for x in times["big"]],
        "ratio_big_small": round(big / small, 2),
        "wrong_reads": wrong,
    }


async def _quiet(pid: int, deadline: float, window: float = 0.3, limit: float = 0.05) -> bool:
    """True once the server used under ``limit`` of a core for two windows in a row."""
    quiet, before = 0, proc_cpu_s(pid)
    while time.monotonic() < deadline:
        await asyncio.sleep(window)
        now = proc_cpu_s(pid)
        quiet = quiet + 1 if (now - before) / window < limit else 0
        before = now
        if quiet >= 2:
            return True
    return False


def listen_overflows() -> int | None:
    """Linux's count of connections dropped because an accept queue was full (system-wide)."""
    try:
        lines = Path("/proc/net/netstat").read_text().splitlines()
    except OSError:
        return None
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("TcpExt:"):
            table = dict(zip(names.split()[1:], values.split()[1:], strict=False))
            return int(table.get("ListenOverflows", 0))
    return None


async def _fanout(
    srv: Server,
    channel: str,
    poster: str,
    lp_tokens: list[str],
    ws_token: str,
    ws_count: int,
    budget: float,
) -> dict[str, Any]:
    import httpx
    from websockets.asyncio.client import connect

    deadline = time.monotonic() + budget
    connect_gate = asyncio.Semaphore(50)  # daphne's listen backlog is small
    parked = {"lp": 0, "ws": 0}
    connect_s: list[float] = []
    # (kind, arrival time, status ok, seqs received); judged once the post's seq is known
    arrivals: list[tuple[str, float, bool, list[int]]] = []
    posted: dict[str, float] = {}
    early = 0

    def arrived(kind: str, ok: bool, seqs: list[int]) -> None:
        nonlocal early
        t = time.perf_counter()
        if "t0" not in posted:
            early += 1  # returned before the post: a failure, or a wake-up by nothing
        arrivals.append((kind, t, ok, seqs))

    async def long_poll(token: str) -> None:
        async with connect_gate:
            started = time.perf_counter()
            reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
            connect_s.append(time.perf_counter() - started)
            writer.write(
                (
                    f"GET /api/v1/channels/{channel}/wait/?timeout={WAIT_TIMEOUT_S} HTTP/1.1\r\n"
                    f"Host: 127.0.0.1:{srv.port}\r\nAuthorization: Bearer {token}\r\n"
                    "Connection: close\r\n\r\n"
                ).encode()
            )
            await writer.drain()
        parked["lp"] += 1
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.decode("latin-1").split("\r\n"):
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
            body = json.loads(await reader.readexactly(length))
            seqs = [m["seq"] for m in body.get("messages", [])]
            arrived("lp", head.startswith(b"HTTP/1.1 200"), seqs)
        finally:
            writer.close()

    async def websocket() -> None:
        async with connect_gate:
            started = time.perf_counter()
            ws = await connect(
                f"{srv.ws_url}/ws/channels/{channel}/?token={ws_token}",
                ping_interval=None,
                open_timeout=60,
            )
            connect_s.append(time.perf_counter() - started)
        parked["ws"] += 1
        try:
            data = json.loads(await ws.recv())
            arrived("ws", data.get("type") == "message", [data.get("message", {}).get("seq")])
        finally:
            await ws.close()

    threads_idle = proc_threads(srv.pid)
    overflows = listen_overflows()
    tasks = [asyncio.create_task(long_poll(tok)) for tok in lp_tokens]
    tasks += [asyncio.create_task(websocket()) for _ in range(ws_count)]
    expected = len(lp_tokens) + ws_count
    seq = None
    try:
        while sum(parked.values()) < expected and time.monotonic() < deadline:
            if any(t.done() and t.exception() for t in tasks):
                break
            await asyncio.sleep(0.1)
        setup_errors = [repr(t.exception()) for t in tasks if t.done() and t.exception()]
        quiet = await _quiet(srv.pid, min(deadline, time.monotonic() + 60))
        parked_state = {
            "requests_sent": parked["lp"],
            "websockets_open": parked["ws"],
            "server_threads": proc_threads(srv.pid),
            "server_threads_idle": threads_idle,
            "server_fds": proc_fds(srv.pid),
            "server_rss_mb": proc_rss_mb(srv.pid),
            "server_quiet_before_post": quiet,
            "slowest_connect_ms": ms(max(connect_s, default=None)),
            "listen_overflows_during_setup": (
                None if overflows is None else (listen_overflows() or 0) - overflows
            ),
        }
        async with httpx.AsyncClient(base_url=srv.url, headers=auth(poster), timeout=30) as p:
            posted["t0"] = t0 = time.perf_counter()
            r = await p.post(f"/api/v1/channels/{channel}/messages/", json=post_json(0, to=None))
            t_resp = time.perf_counter()
            seq = r.json()["seq"]
        pending = [t for t in tasks if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=max(1.0, min(30.0, deadline - time.monotonic())))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    good = [(kind, t - t0) for kind, t, ok, seqs in arrivals if ok and seq in seqs and t >= t0]
    delivered = [x for _, x in good]
    return {
        "long_poll": len(lp_tokens),
        "websockets": ws_count,
        **parked_state,
        "returned_before_post": early,
        "setup_errors": setup_errors[:5],
        "setup_error_count": len(setup_errors),
        "delivered": len(delivered),
        "wrong_or_failed": len(arrivals) - len(delivered),
        "undelivered": expected - len(arrivals),
        "post_rtt_ms": ms(t_resp - t0),
        "first_ms": ms(min(delivered, default=None)),
        "p50_ms": ms(pct(delivered, 0.5)),
        "last_ms": ms(max(delivered) if len(delivered) == expected else None),
        "last_delivered_ms": ms(max(delivered, default=None)),
        "last_by_kind_ms": {
            kind: ms(max((x for k, x in good if k == kind), default=None)) for kind in ("lp", "ws")
        },
    }


# --- The reference CLI ---------------------------------------------------------------------


def ref_posts_sequential(ref: Ref, n: int, budget: float) -> dict[str, Any]:
    ref.run("init", "seq")
    lat: list[float] = []
    deadline = time.monotonic() + budget
    started = time.perf_counter()
    for i in range(n):
        if time.monotonic() > deadline:
            break
        t = time.perf_counter()
        ref.post("seq", "alice", f"bench message {i}", to="bob")
        lat.append(time.perf_counter() - t)
    elapsed = time.perf_counter() - started
    return {
        "posts": len(lat),
        "elapsed_s": round(elapsed, 3),
        "posts_per_s": round(len(lat) / elapsed, 1),
        **lat_summary(lat),
    }


def ref_posts_concurrent(ref: Ref, procs: int, each: int, budget: float) -> dict[str, Any]:
    ref.run("init", "conc")
    barrier = threading.Barrier(procs + 1)
    deadline = time.monotonic() + budget
    errors = [0] * procs
    lat: list[list[float]] = [[] for _ in range(procs)]

    def worker(k: int) -> None:
        barrier.wait(timeout=60)
        for i in range(each):
            if time.monotonic() > deadline:
                return
            t = time.perf_counter()
            try:
                ref.post("conc", f"w{k}", f"c {i}")
            except subprocess.SubprocessError:
                errors[k] += 1
            lat[k].append(time.perf_counter() - t)

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(procs)]
    for thread in threads:
        thread.start()
    barrier.wait(timeout=60)
    started = time.perf_counter()
    for thread in threads:
        thread.join(timeout=budget + 60)
    elapsed = time.perf_counter() - started
    every = [x for xs in lat for x in xs]
    seqs = ref.seqs("conc")
    return {
        "processes": procs,
        "posts": len(every),
        "elapsed_s": round(elapsed, 3),
        "posts_per_s": round(len(every) / elapsed, 1),
        **lat_summary(every),
        "errors": sum(errors),
        "files": len(seqs),
        "duplicates": len(seqs) - len(set(seqs)),
    }


def ref_wait_latency(ref: Ref, n: int, budget: float) -> dict[str, Any]:
    interval = 5.0  # the CLI's default --interval; not passed, so the default is what runs
    ref.run("init", "wait")
    ref.run("read", "wait", "--as", "bob")  # creates bob's cursor
    lat: list[float] = []
    bad = 0
    deadline = time.monotonic() + budget
    for k in range(n):
        if time.monotonic() > deadline:
            break
        waiter = subprocess.Popen(
            ref.argv("wait", "wait", "--as", "bob", "--timeout", "60"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            # Start-up, then spread the post over the poll phase (as the reference was measured).
            time.sleep(0.4 + (k + 0.5) / n * interval)
            t0 = time.perf_counter()
            ref.post("wait", "alice", f"ping {k}", to="bob")
            code = waiter.wait(timeout=interval + 30)
            lat.append(time.perf_counter() - t0)
            bad += code != 0
        finally:
            if waiter.poll() is None:
                waiter.kill()
                waiter.wait(timeout=10)
    return {"interval_s": interval, **lat_summary(lat), "bad_returns": bad}


def ref_read(ref: Ref, small: int, big: int, reps: int, budget: float) -> dict[str, Any]:
    sizes = {"small": small, "big": big}
    names = {key: f"read{size}" for key, size in sizes.items()}
    fill_s = {}
    for key, name in names.items():
        log(f"reference: writing {sizes[key]:,} message files into {name}")
        fill_s[key] = ref_fill(ref, name, sizes[key])
    times: dict[str, list[float]] = {"small": [], "big": []}
    wrong = 0
    deadline = time.monotonic() + budget
    for rep in range(reps + 1):  # rep 0 is a warm-up
        if rep and time.monotonic() > deadline:
            break
        for key, name in names.items():
            for i in range(10):
                ref.post(name, "alice", f"new {rep} {i}")
            t = time.perf_counter()
            out = ref.run("read", name, "--as", "reader", capture=True)
            took = time.perf_counter() - t
            if out.stdout.count("=" * 70) != 10:
                wrong += 1
            if rep:
                times[key].append(took)
    small_t, big_t = statistics.median(times["small"]), statistics.median(times["big"])
    return {
        "small_messages": small,
        "big_messages": big,
        "big_fill_s": round(fill_s["big"], 2),
        "reps": len(times["small"]),
        "small_median_ms": ms(small_t),
        "big_median_ms": ms(big_t),
        "ratio_big_small": round(big_t / small_t, 2),
        "wrong_reads": wrong,
    }


# --- Orchestration -------------------------------------------------------------------------


def measure_ours(
    run: Run, plan: Plan, tmp: Path, database_url: str | None, redis_url: str | None
) -> None:
    env = project_env(tmp, database_url, redis_url)
    log(f"migrating {env['DATABASE_URL']}")
    migrate(env)
    workers = [f"w{k}" for k in range(plan.conc_clients)]
    log("creating agents with manage.py create_agent_token")
    tokens = create_tokens(env, ["alice", "bob", "reader", *workers])
    fan = run_helper(env, {"op": "agents", "prefix": "fan", "count": plan.fanout_lp}, 300)["tokens"]
    srv = Server(env, tmp / "server.log")
    run.results["server"] = {
        "command": " ".join(srv.command),
        "pid": srv.pid,
        "threads_at_start": proc_threads(srv.pid),
    }
    budget = plan.section_budget_s
    try:
        run.section(
            "ours_posts_sequential",
            ours_posts_sequential,
            srv,
            tokens["alice"],
            plan.seq_posts,
            budget,
        )
        run.section(
            "ours_posts_concurrent",
            ours_posts_concurrent,
            srv,
            [tokens[w] for w in workers],
            tokens["reader"],
            plan.conc_posts_each,
            budget,
        )
        run.results["ours_posts_concurrent"]["database_is_locked_in_log"] = srv.locked_count()
        run.section(
            "ours_push_latency",
            _push_latency,
            srv,
            tokens["alice"],
            tokens["bob"],
            plan.push_samples,
            budget,
        )
        run.section(
            "ours_wait_latency",
            _wait_latency,
            srv,
            tokens["alice"],
            tokens["bob"],
            plan.wait_samples,
            budget,
        )
        run.section(
            "ours_read", ours_read, srv, env, tokens["alice"], tokens["reader"], plan, budget
        )
        channel_create(srv.url, tokens["alice"], "bench-fanout")
        run.section(
            "ours_fanout",
            _fanout,
            srv,
            "bench-fanout",
            tokens["alice"],
            fan,
            tokens["bob"],
            0,
            budget + 30,
        )
        if plan.fanout_mixed_ws:
            run.section(
                "ours_fanout_mixed",
                _fanout,
                srv,
                "bench-fanout",
                tokens["alice"],
                fan,
                tokens["bob"],
                plan.fanout_mixed_ws,
                budget + 30,
            )
    finally:
        locked = srv.locked_count()
        log_tail = srv.log_text()[-3000:]
        took = srv.stop()
        run.results["server"].update(
            {
                "database_is_locked_in_log": locked,
                "sigterm_exit_s": took,
                "log_tail": log_tail,
            }
        )


def measure_reference(run: Run, plan: Plan, tmp: Path, venv: Path) -> None:
    try:
        binary = ensure_ref_venv(venv)
    except (subprocess.SubprocessError, OSError) as exc:
        run.results["reference_install"] = {"error": f"{type(exc).__name__}: {exc}"}
        return
    ref = Ref(binary, tmp / "refroot")
    budget = plan.section_budget_s
    run.section("ref_posts_sequential", ref_posts_sequential, ref, plan.ref_seq_posts, budget)
    run.section(
        "ref_posts_concurrent",
        ref_posts_concurrent,
        ref,
        plan.ref_conc_procs,
        plan.ref_conc_posts_each,
        budget,
    )
    run.section("ref_wait_latency", ref_wait_latency, ref, plan.ref_wait_samples, budget)
    run.section(
        "ref_read", ref_read, ref, plan.read_small, plan.ref_read_big, plan.ref_read_reps, budget
    )


# --- Report --------------------------------------------------------------------------------


def build_report(res: dict[str, Any]) -> tuple[list[list[str]], dict[str, Any]]:
    def g(section: str, key: str) -> Any:
        return res.get(section, {}).get(key)

    def pair(section: str, a: str, b: str, unit: str = " ms") -> str:
        return f"{fmt(g(section, a))} / {fmt(g(section, b))}{unit}"

    report = Report()
    row = report.row

    seq_o, seq_r = (
        g("ours_posts_sequential", "posts_per_s"),
        g("ref_posts_sequential", "posts_per_s"),
    )
    r = ratio(seq_o, seq_r)
    row("HTTP posts/s, sequential (1 client)", fmt(seq_o, "/s"), fmt(seq_r, "/s"), fmt_ratio(r))
    row(
        "  post latency p50 / max",
        pair("ours_posts_sequential", "p50_ms", "max_ms"),
        pair("ref_posts_sequential", "p50_ms", "max_ms"),
    )
    conc_o, conc_r = (
        g("ours_posts_concurrent", "posts_per_s"),
        g("ref_posts_concurrent", "posts_per_s"),
    )
    basis = conc_r if conc_r else REF_HISTORIC_8PROC[1]
    r = ratio(conc_o, basis)
    row(
        "HTTP posts/s, 8 concurrent clients",
        fmt(conc_o, "/s"),
        fmt(conc_r, "/s") if conc_r else f"({basis:g}/s hist.)",
        fmt_ratio(r),
        ">= 10x reference",
        None if r is None else r >= TARGETS["conc_vs_ref"],
        "conc_vs_ref",
    )
    row(
        "  post latency p50 / p99",
        pair("ours_posts_concurrent", "p50_ms", "p99_ms"),
        pair("ref_posts_concurrent", "p50_ms", "p99_ms"),
    )
    maxes = [g("ours_posts_sequential", "max_ms"), g("ours_posts_concurrent", "max_ms")]
    max_post = max((m for m in maxes if m is not None), default=None)
    row(
        "  max single post (seq + concurrent)",
        fmt(max_post, " ms"),
        "",
        "",
        "<= 250 ms",
        None if max_post is None else max_post <= TARGETS["max_post_ms"],
        "max_post",
    )
    errs = (g("ours_posts_sequential", "errors") or 0) + (g("ours_posts_concurrent", "errors") or 0)
    locked = g("server", "database_is_locked_in_log")
    row(
        "  errors / 'database is locked' in log",
        f"{errs} / {fmt(locked)}",
        "",
        "",
        "0 / 0",
        errs == 0 and locked == 0,
        "errors",
    )
    row(
        "  stored seqs 1..N contiguous, = acked",
        f"{g('ours_posts_concurrent', 'seqs_contiguous')}, "
        f"{g('ours_posts_concurrent', 'stored_matches_acked')}",
        f"dups {fmt(g('ref_posts_concurrent', 'duplicates'))}",
    )
    row(
        "  server CPU per post (seq / 8 clients)",
        f"{fmt(g('ours_posts_sequential', 'server_cpu_ms_per_post'))} / "
        f"{fmt(g('ours_posts_concurrent', 'server_cpu_ms_per_post'))} ms",
    )
    push50, refwait50 = g("ours_push_latency", "p50_ms"), g("ref_wait_latency", "p50_ms")
    row(
        "post -> websocket push p50",
        fmt(push50, " ms"),
        "no push",
        fmt_ratio(ratio(push50, refwait50), " of ref wait"),
        "<= 10 ms",
        None if push50 is None else push50 <= TARGETS["push_p50_ms"],
        "push_p50",
    )
    row(
        "  push p99 / frame after POST response p50",
        f"{fmt(g('ours_push_latency', 'p99_ms'))} / "
        f"{fmt(g('ours_push_latency', 'frame_minus_response_p50_ms'))} ms",
    )
    wait50 = g("ours_wait_latency", "p50_ms")
    row(
        "post -> wait return p50",
        fmt(wait50, " ms"),
        fmt(refwait50, " ms"),
        fmt_ratio(ratio(wait50, refwait50)),
        "<= 10 ms",
        None if wait50 is None else wait50 <= TARGETS["wait_p50_ms"],
        "wait_p50",
    )
    row(
        "  wait p99 (ref: max, --interval 5 s)",
        fmt(g("ours_wait_latency", "p99_ms"), " ms"),
        fmt(g("ref_wait_latency", "max_ms"), " ms"),
    )
    small_o, small_r = g("ours_read", "small_median_ms"), g("ref_read", "small_median_ms")
    big_o, big_r = g("ours_read", "big_median_ms"), g("ref_read", "big_median_ms")
    bign_o, bign_r = g("ours_read", "big_messages"), g("ref_read", "big_messages")
    row(
        "read 10 new, 100-msg channel (median)",
        fmt(small_o, " ms"),
        fmt(small_r, " ms"),
        fmt_ratio(ratio(small_o, small_r)),
    )
    row(
        f"read 10 new, {fmt(bign_o)}-msg channel",
        fmt(big_o, " ms"),
        fmt(big_r, " ms") + ("" if bign_r in (None, bign_o) else f" ({fmt(bign_r)} msgs)"),
        fmt_ratio(ratio(big_o, big_r)),
    )
    rr = g("ours_read", "ratio_big_small")
    row(
        "  read ratio big / small",
        fmt(rr),
        fmt(g("ref_read", "ratio_big_small")),
        "",
        "<= 1.5",
        None if rr is None else rr <= TARGETS["read_ratio"],
        "read_ratio",
    )
    for section, label in (("ours_fanout", "long-poll"), ("ours_fanout_mixed", "LP + ws")):
        if section not in res:
            continue
        n = (g(section, "long_poll") or 0) + (g(section, "websockets") or 0)
        last = g(section, "last_ms")
        ran = "error" not in res[section]
        row(
            f"{n:,} parked waiters ({label}): all delivered",
            fmt(last, " ms"),
            "",
            "",
            "<= 1.5 s" if section == "ours_fanout" else "",
            (last is not None and last <= TARGETS["fanout_s"] * 1000) if ran else None,
            "fanout" if section == "ours_fanout" else None,
        )
        row(
            "  delivered / p50 / undelivered",
            f"{fmt(g(section, 'delivered'))} / {fmt(g(section, 'p50_ms'))} ms / "
            f"{fmt(g(section, 'undelivered'))}",
        )
        row(
            "  server threads parked (idle) / RSS",
            f"{fmt(g(section, 'server_threads'))} ({fmt(g(section, 'server_threads_idle'))}) / "
            f"{fmt(g(section, 'server_rss_mb'))} MB",
        )
        row(
            "  slowest connect / accept-queue drops",
            f"{fmt(g(section, 'slowest_connect_ms'))} ms / "
            f"{fmt(g(section, 'listen_overflows_during_setup'))}",
        )
    row("server exit after SIGTERM", fmt(g("server", "sigterm_exit_s"), " s"))
    return report.rows, report.checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller counts (about 3 minutes)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument(
        "--skip-reference", action="store_true", help="do not measure the reference CLI"
    )
    parser.add_argument(
        "--ref-venv",
        type=Path,
        default=REF_VENV_DEFAULT,
        help=f"scratch venv for {REF_PACKAGE} (reused if present)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (for debugging)")
    parser.add_argument(
        "--postgres",
        metavar="URL",
        help="run our server on PostgreSQL: a throwaway database is created on the server at "
        "URL (e.g. postgres://postgres@127.0.0.1:5432) and dropped afterwards",
    )
    parser.add_argument("--redis", metavar="URL", help="use the Redis channel layer at URL")
    parser.add_argument("--django-helper", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.django_helper:
        print(json.dumps(django_helper(json.loads(args.django_helper))))
        return 0

    def on_term(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    plan = QUICK if args.quick else FULL
    nofile = raise_nofile()
    run = Run()
    started = time.time()
    run.results.update(
        {
            "mode": "quick" if args.quick else "full",
            "plan": asdict(plan),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "machine_start": machine_info(),
            "nofile_limit": list(nofile),
        }
    )
    tmp = Path(tempfile.mkdtemp(prefix="agentchat-bench-"))
    log(f"temp dir {tmp}; mode {run.results['mode']}")
    run.results["backend"] = (
        f"{'PostgreSQL' if args.postgres else 'SQLite'} + "
        f"{'Redis' if args.redis else 'in-memory'} layer"
    )
    pg_database = f"agentchat_bench_{os.getpid()}" if args.postgres else None
    try:
        database_url = None
        if args.postgres:
            postgres_admin(args.postgres, f'CREATE DATABASE "{pg_database}"')
            database_url = f"{args.postgres.rstrip('/')}/{pg_database}"
        run.section("ours", measure_ours, run, plan, tmp, database_url, args.redis)
        if not args.skip_reference:
            measure_reference(run, plan, tmp, args.ref_venv)
    finally:
        if pg_database:
            postgres_admin(args.postgres, f'DROP DATABASE IF EXISTS "{pg_database}" WITH (FORCE)')
        if args.keep:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    run.results["machine_end"] = machine_info()
    run.results["total_s"] = round(time.time() - started, 1)
    rows, checks = build_report(run.results)
    run.results["targets"] = checks
    errors = run.errors()

    info = run.results
    print(
        f"AgentChat core benchmark ({info['mode']}), {info['started']}, "
        f"{info['machine_start']['cpus']} CPUs, Python {info['machine_start']['python']}, "
        f"{info['backend']}, one daphne process"
    )
    print(
        f"load average at start {info['machine_start']['loadavg']}, at end "
        f"{info['machine_end']['loadavg']}: the load generator, the server and anything else "
        "running share these cores, so figures are noisy (±25% between runs is normal)."
    )
    print()
    print_table(rows, Report.HEADER)
    print()
    ref_big = info.get("ref_read", {}).get("big_messages")
    print(
        "Notes: ours = HTTP round trips to daphne; reference = one `agent-chat` process per "
        "operation (about 45 ms of it is interpreter start-up). Latencies are measured from "
        "just before the POST (ours) or the `agent-chat post` process (reference) to the "
        "frame / response / exit. Reference wait uses its default --interval 5 s, "
        f"{info['plan']['ref_wait_samples']} samples. Reference read channel: "
        f"{fmt(ref_big)} message files written directly in its format."
        if not args.skip_reference
        else "Notes: ours = HTTP round trips to daphne. The reference CLI was not measured "
        "(--skip-reference); the 8-client target is judged against the 34 posts/s it reached "
        "here before."
    )
    if errors:
        print("Sections that failed: " + "; ".join(f"{k}: {v}" for k, v in errors.items()))
    print(f"Total time {info['total_s']} s.")
    if args.json:
        args.json.write_text(json.dumps(run.results, indent=2, default=str) + "\n")
        print(f"JSON written to {args.json}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
