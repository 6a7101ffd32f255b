"""Soak (PERF-NOTES B9): mixed load on one server for minutes, watching for leaks and loss.

    .venv/bin/python bench/bench_soak.py [--minutes 10] [--rate 40] [--json PATH]

Starts a server on a throwaway SQLite database (with the harness bench_core.py uses) and runs,
all at once: posters (directed and broadcast messages, at a bounded total rate), readers
(``read``), long-poll waiters, websocket subscribers that reconnect with ``since`` now and then,
and task and path-lock workers (create / claim / done, lock / check / unlock). Every 10 s it
samples the server's memory, threads, open files, CPU and the SQLite WAL's size. At the end it
checks that nothing was lost: the channel's seqs are contiguous and equal the acknowledged
posts, every subscriber saw every message exactly once, every waiter's cursor only moved
forward, and SQLite's integrity check passes; and that RSS and open file descriptors are flat:
the least-squares slope over the last two thirds of the samples, times that window, within a
tolerance (RSS: 5 % of the warm RSS, at least 3 MB; fds: 3). Prints the samples and a verdict;
never asserted in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import (
    Server,
    channel_create,
    create_tokens,
    migrate,
    proc_cpu_s,
    proc_fds,
    proc_rss_mb,
    proc_threads,
    project_env,
    raise_nofile,
    seqs_of,
)
from rawhttp import HttpError, RawHttp

POSTERS, READERS, WAITERS, SUBSCRIBERS, TASKERS = 4, 2, 4, 2, 2
SAMPLE_S = 10.0


class Soak:
    def __init__(self, url: str, ws_url: str, tokens: dict[str, str], until: float) -> None:
        self.url, self.ws_url, self.tokens, self.until = url, ws_url, tokens, until
        self.acked: list[int] = []
        self.errors: dict[str, int] = {}
        self.counts: dict[str, int] = {}
        self.seen: dict[str, list[int]] = {}  # subscriber -> seqs in arrival order
        self.cursor_regressions = 0

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1

    def count(self, kind: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def running(self) -> bool:
        return time.monotonic() < self.until

    def subscribing(self, seqs: list[int]) -> bool:
        """Load is on, or the subscriber has yet to see the last acknowledged post (10 s grace)."""
        if self.running():
            return True
        caught_up = bool(seqs) and seqs[-1] >= max(self.acked, default=0)
        return not caught_up and time.monotonic() < self.until + 10

    async def poster(self, k: int, interval: float) -> None:
        async with RawHttp(self.url, self.tokens[f"poster{k}"]) as http:
            i = 0
            while self.running():
                i += 1
                size = random.randint(0, 2000)
                body: dict[str, Any] = {"title": f"soak {k}-{i}", "body": "x" * size}
                if i % 3 == 0:
                    body["to"] = f"waiter{i % WAITERS}"
                try:
                    status, posted = await http.json(
                        "POST", "/api/v1/channels/soak/messages/", body
                    )
                except (OSError, HttpError):
                    self.error("post transport")
                    await asyncio.sleep(interval)
                    continue
                if status == 201:
                    self.acked.append(posted["seq"])
                    self.count("post")
                else:
                    self.error(f"post {status}")
                await asyncio.sleep(interval * random.uniform(0.5, 1.5))

    async def reader(self, k: int) -> None:
        async with RawHttp(self.url, self.tokens[f"reader{k}"]) as http:
            last = 0
            while self.running():
                status, result = await http.json("POST", "/api/v1/channels/soak/read/", {})
                if status != 200:
                    self.error(f"read {status}")
                else:
                    self.count("read")
                    self.cursor_regressions += result["cursor"] < last
                    last = result["cursor"]
                await asyncio.sleep(0.2)

    async def waiter(self, k: int) -> None:
        async with RawHttp(self.url, self.tokens[f"waiter{k}"]) as http:
            last = 0
            while self.running():
                status, result = await http.json("GET", "/api/v1/channels/soak/wait/?timeout=5")
                if status != 200:
                    self.error(f"wait {status}")
                    await asyncio.sleep(0.5)
                    continue
                self.count("wait timed out" if result.get("timed_out") else "wait woken")
                cursor = result.get("cursor")
                if cursor is not None:
                    self.cursor_regressions += cursor < last
                    last = cursor

    async def subscriber(self, k: int) -> None:
        from websockets.asyncio.client import connect

        name = f"subscriber{k}"
        seqs = self.seen.setdefault(name, [])
        token = self.tokens[name]
        while self.subscribing(seqs):
            since = seqs[-1] if seqs else 0
            url = f"{self.ws_url}/ws/channels/soak/?token={token}&since={since}"
            try:
                async with connect(url, ping_interval=None, open_timeout=30) as ws:
                    self.count("ws connect")
                    # Stay 5-30 s, then reconnect with since: nothing may be lost or repeated.
                    stay = time.monotonic() + random.uniform(5, 30)
                    while self.subscribing(seqs) and (
                        time.monotonic() < stay or not self.running()
                    ):
                        try:
                            raw = await asyncio.wait_for(ws.recv(), 1)
                        except TimeoutError:
                            continue
                        frame = json.loads(raw)
                        if frame.get("type") == "message":
                            seqs.append(frame["message"]["seq"])
            except OSError:
                self.error("ws transport")
                await asyncio.sleep(1)

    async def tasker(self, k: int) -> None:
        async with RawHttp(self.url, self.tokens[f"tasker{k}"]) as http:
            i = 0
            base = "/api/v1/channels/work"
            while self.running():
                i += 1
                task_id = f"T{k}-{i}"
                steps = [
                    ("POST", f"{base}/tasks/", {"id": task_id, "title": "soak"}, 201),
                    ("POST", f"{base}/tasks/{task_id}/claim/", {}, 200),
                    ("POST", f"{base}/tasks/{task_id}/done/", {}, 200),
                ]
                for method, path, body, expected in steps:
                    status, _ = await http.json(method, path, body)
                    if status != expected:
                        self.error(f"task {status}")
                path_body = {"paths": [f"src/{k}/{i}.py"]}
                status, lock = await http.json("POST", f"{base}/locks/", path_body)
                if status != 201:
                    self.error(f"lock {status}")
                else:
                    await http.json("POST", f"{base}/locks/check/", path_body)
                    status, _ = await http.json("DELETE", f"{base}/locks/{lock['lock_id']}/")
                    if status != 200:
                        self.error(f"unlock {status}")
                self.count("task+lock cycle")
                await asyncio.sleep(0.5)


def flatness(samples: list[dict], key: str, tolerance: float) -> dict[str, Any]:
    """Whether ``key`` is flat: the least-squares slope over the last two thirds of the samples
    (the first third is warm-up: caches, pools, the first reconnects), and the growth that slope
    makes over that window. Flat when that growth is at most ``tolerance`` (in the key's unit)."""
    tail = samples[len(samples) // 3 :]
    if len(tail) < 3:
        return {"flat": None, "reason": "fewer than 3 samples after warm-up"}
    xs = [s["t_s"] for s in tail]
    ys = [float(s[key]) for s in tail]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    growth = slope * (xs[-1] - xs[0])
    return {
        "from_s": xs[0],
        "to_s": xs[-1],
        "slope_per_min": round(slope * 60, 4),
        "growth_over_window": round(growth, 2),
        "tolerance": tolerance,
        "min": min(ys),
        "max": max(ys),
        "flat": growth <= tolerance,
    }


def wal_mb(db: Path) -> float:
    wal = Path(f"{db}-wal")
    return round(wal.stat().st_size / 2**20, 1) if wal.exists() else 0.0


async def sample_loop(server: Server, db: Path, until: float, samples: list[dict]) -> None:
    started = time.monotonic()
    cpu_before, t_before = proc_cpu_s(server.pid), started
    while time.monotonic() < until:
        await asyncio.sleep(min(SAMPLE_S, max(0.1, until - time.monotonic())))
        cpu, now = proc_cpu_s(server.pid), time.monotonic()
        samples.append(
            {
                "t_s": round(now - started, 1),
                "rss_mb": proc_rss_mb(server.pid),
                "threads": proc_threads(server.pid),
                "fds": proc_fds(server.pid),
                "cpu_pct": round(100 * (cpu - cpu_before) / (now - t_before), 1),
                "wal_mb": wal_mb(db),
            }
        )
        cpu_before, t_before = cpu, now


async def soak(server: Server, db: Path, tokens: dict[str, str], seconds: float, rate: float):
    until = time.monotonic() + seconds
    run = Soak(server.url, server.ws_url, tokens, until)
    samples: list[dict] = []
    jobs = [sample_loop(server, db, until, samples)]
    jobs += [run.poster(k, POSTERS / rate) for k in range(POSTERS)]
    jobs += [run.reader(k) for k in range(READERS)]
    jobs += [run.waiter(k) for k in range(WAITERS)]
    jobs += [run.subscriber(k) for k in range(SUBSCRIBERS)]
    jobs += [run.tasker(k) for k in range(TASKERS)]
    started = time.monotonic()
    await asyncio.gather(*jobs)
    return run, samples, time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=40.0, help="posts per second, in total")
    parser.add_argument("--json", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    raise_nofile()
    tmp = Path(tempfile.mkdtemp(prefix="agentchat-soak-"))
    db = tmp / "db.sqlite3"
    try:
        env = project_env(tmp)  # SQLite in tmp/db.sqlite3
        # Four agents posting 40/s look like a loop to the guard, whose notices would be
        # stored messages nobody acknowledged: the soak watches leaks and loss, not the guard.
        env["AGENTCHAT_LOOP_GUARD_MESSAGES"] = "0"
        migrate(env)
        names = [
            *(f"poster{k}" for k in range(POSTERS)),
            *(f"reader{k}" for k in range(READERS)),
            *(f"waiter{k}" for k in range(WAITERS)),
            *(f"subscriber{k}" for k in range(SUBSCRIBERS)),
            *(f"tasker{k}" for k in range(TASKERS)),
        ]
        tokens = create_tokens(env, names)
        server = Server(env, tmp / "server.log")
        try:
            channel_create(server.url, tokens["poster0"], "soak")
            channel_create(server.url, tokens["poster0"], "work")
            run, samples, took = asyncio.run(soak(server, db, tokens, args.minutes * 60, args.rate))
            stored = seqs_of(server.url, tokens["reader0"], "soak")
            locked = server.locked_count()
        finally:
            exit_s = server.stop()
        with sqlite3.connect(db) as conn:
            integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    warm = samples[min(2, len(samples) - 1)] if samples else {}
    last = samples[-1] if samples else {}
    total_messages = len(stored)
    per_subscriber = {
        name: {
            "frames": len(seqs),
            "duplicates": len(seqs) - len(set(seqs)),
            "missing": len(set(stored) - set(seqs)),
            "in_order": seqs == sorted(seqs),
        }
        for name, seqs in run.seen.items()
    }
    result = {
        "minutes": args.minutes,
        "rate_per_s": args.rate,
        "elapsed_s": round(took, 1),
        "counts": run.counts,
        "errors": run.errors,
        "database_is_locked": locked,
        "acked_posts": len(run.acked),
        "stored_messages": total_messages,
        # Task and lock audits go to the other channel: every stored message here was acked.
        "seqs_contiguous": stored == list(range(1, total_messages + 1)),
        "acked_all_stored": sorted(run.acked) == stored,
        "subscribers": per_subscriber,
        "cursor_regressions": run.cursor_regressions,
        "integrity_check": integrity,
        "rss_mb_after_warmup": warm.get("rss_mb"),
        "rss_mb_at_end": last.get("rss_mb"),
        "rss_drift_pct": round(100 * (last["rss_mb"] - warm["rss_mb"]) / warm["rss_mb"], 1)
        if warm and last
        else None,
        "wal_mb_max": max((s["wal_mb"] for s in samples), default=None),
        "threads_max": max((s["threads"] for s in samples), default=None),
        "fds_first_last": [samples[0]["fds"], last["fds"]] if samples else None,
        "sigterm_exit_s": exit_s,
        "samples": samples,
    }
    # RSS: flat when the trend over the last two thirds adds at most 5 % of the warm RSS (and
    # at least 3 MB: the allocator's arenas move by a few MB). Open files: at most 3 more
    # (a reconnecting subscriber or a waiter between two requests is in or out of a sample).
    rss_base = float(warm.get("rss_mb") or 0.0)
    result["rss_flat"] = flatness(samples, "rss_mb", max(3.0, 0.05 * rss_base))
    result["fds_flat"] = flatness(samples, "fds", 3.0)
    result["threads_flat"] = flatness(samples, "threads", 2.0)
    ok = (
        not run.errors
        and result["rss_flat"]["flat"] is not False
        and result["fds_flat"]["flat"] is not False
        and not locked
        and result["seqs_contiguous"]
        and result["acked_all_stored"]
        and not run.cursor_regressions
        and integrity == "ok"
        and all(
            s["duplicates"] == 0 and s["missing"] == 0 and s["in_order"]
            for s in per_subscriber.values()
        )
    )
    print(f"\nSoak, {args.minutes} min, {args.rate:g} posts/s, SQLite, one daphne process")
    print(f"{'t (s)':>7} {'RSS MB':>8} {'threads':>8} {'fds':>6} {'CPU %':>7} {'WAL MB':>8}")
    for s in samples:
        print(
            f"{s['t_s']:>7} {s['rss_mb']:>8} {s['threads']:>8} {s['fds']:>6} "
            f"{s['cpu_pct']:>7} {s['wal_mb']:>8}"
        )
    print(f"operations: {json.dumps(run.counts)}")
    print(f"errors: {json.dumps(run.errors)}; 'database is locked': {locked}")
    print(
        f"posts acked {len(run.acked)}, messages stored {total_messages} "
        f"(contiguous {result['seqs_contiguous']}, every ack stored {result['acked_all_stored']})"
    )
    print(f"subscribers: {json.dumps(per_subscriber)}")
    print(
        f"cursor regressions {run.cursor_regressions}; integrity_check {integrity}; "
        f"RSS {result['rss_mb_after_warmup']} -> {result['rss_mb_at_end']} MB "
        f"({result['rss_drift_pct']} %); WAL max {result['wal_mb_max']} MB; "
        f"exit after SIGTERM {exit_s} s"
    )
    for key in ("rss_flat", "fds_flat", "threads_flat"):
        f = result[key]
        if f.get("flat") is None:
            print(f"{key}: unknown ({f['reason']})")
            continue
        print(
            f"{key}: {f['flat']} (last two thirds, {f['from_s']}-{f['to_s']} s: slope "
            f"{f['slope_per_min']}/min, trend growth {f['growth_over_window']} <= tolerance "
            f"{f['tolerance']:g}; range {f['min']:g}..{f['max']:g})"
        )
    verdict = "nothing lost, no errors, RSS and open files flat" if ok else "PROBLEMS (see above)"
    print("verdict:", verdict)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
