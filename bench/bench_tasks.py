"""Task, lease and path-lock benchmark (PERF-NOTES B7): this server against the reference CLI.

    .venv/bin/python bench/bench_tasks.py [--quick] [--skip-reference] [--json PATH]

Starts a server on a throwaway SQLite database (with the harness bench_core.py uses) and
prints, in one run: the latency of task create / claim / done and of lock / check / unlock over
HTTP, 8 workers racing to claim a pool of tasks (claims/s, and that every task went to exactly
one worker), and the same operations through the reference CLI (one process per operation)
with the ratios.
Bounded in count and time; traffic only to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import (
    Server,
    channel_create,
    create_tokens,
    lat_summary,
    migrate,
    project_env,
    raise_nofile,
)
from rawhttp import RawHttp
from reference import Ref, ensure_ref_venv

WORKERS = 8


def timed(samples: list[float], func: Any, *args: Any, **kwargs: Any) -> Any:
    started = time.perf_counter()
    result = func(*args, **kwargs)
    samples.append(time.perf_counter() - started)
    return result


async def timed_http(
    samples: list[float], client: RawHttp, method: str, path: str, body: Any = None
) -> tuple[int, Any]:
    started = time.perf_counter()
    result = await client.json(method, path, body)
    samples.append(time.perf_counter() - started)
    return result


async def ours_task_ops(url: str, token: str, n: int) -> dict[str, Any]:
    create: list[float] = []
    claim: list[float] = []
    done: list[float] = []
    base = "/api/v1/channels/bt/tasks"
    async with RawHttp(url, token) as http:
        for i in range(n):
            status, body = await timed_http(
                create, http, "POST", f"{base}/", {"id": f"T-{i}", "title": "t"}
            )
            assert status == 201, body
            status, body = await timed_http(claim, http, "POST", f"{base}/T-{i}/claim/", {})
            assert status == 200, body
            status, body = await timed_http(done, http, "POST", f"{base}/T-{i}/done/", {})
            assert status == 200, body
    return {"create": lat_summary(create), "claim": lat_summary(claim), "done": lat_summary(done)}


async def ours_lock_ops(url: str, token: str, n: int) -> dict[str, Any]:
    lock: list[float] = []
    check: list[float] = []
    unlock: list[float] = []
    base = "/api/v1/channels/bt/locks"
    async with RawHttp(url, token) as http:
        for i in range(n):
            paths = {"paths": [f"src/m{i}.py"]}
            status, body = await timed_http(lock, http, "POST", f"{base}/", paths)
            assert status == 201, body
            lock_id = body["lock_id"]
            status, body = await timed_http(check, http, "POST", f"{base}/check/", paths)
            assert status == 200, body
            status, body = await timed_http(unlock, http, "DELETE", f"{base}/{lock_id}/")
            assert status == 200, body
    return {"lock": lat_summary(lock), "check": lat_summary(check), "unlock": lat_summary(unlock)}


async def ours_claim_race(url: str, tokens: list[str], creator: str, n: int) -> dict[str, Any]:
    async with RawHttp(url, creator) as http:
        for i in range(n):
            status, body = await http.json(
                "POST", "/api/v1/channels/race/tasks/", {"id": f"R-{i}", "title": "r"}
            )
            assert status == 201, body
    won: dict[str, list[int]] = {}
    statuses: dict[int, int] = {}
    clients = [await RawHttp(url, token).open() for token in tokens]

    async def worker(k: int) -> None:
        order = list(range(n))
        random.shuffle(order)
        mine = []
        for i in order:
            status, _ = await clients[k].request(
                "POST", f"/api/v1/channels/race/tasks/R-{i}/claim/", {}
            )
            statuses[status] = statuses.get(status, 0) + 1
            if status == 200:
                mine.append(i)
        won[tokens[k]] = mine

    started = time.perf_counter()
    await asyncio.gather(*(worker(k) for k in range(len(tokens))))
    elapsed = time.perf_counter() - started
    for client in clients:
        await client.close()
    claimed = [i for mine in won.values() for i in mine]
    attempts = sum(statuses.values())
    return {
        "tasks": n,
        "workers": len(tokens),
        "attempts": attempts,
        "elapsed_s": round(elapsed, 3),
        "attempts_per_s": round(attempts / elapsed, 1),
        "claims_per_s": round(len(claimed) / elapsed, 1),
        "each_claimed_once": sorted(claimed) == list(range(n)),
        "statuses": statuses,
    }


def ref_ops(ref: Ref, n: int) -> dict[str, Any]:
    ref.run("init", "bt")
    create, claim, done, lock, check, unlock = [], [], [], [], [], []
    for i in range(n):
        timed(create, ref.run, "task", "create", "bt", f"T-{i}", "--from", "alice", "--title", "t")
        timed(claim, ref.run, "task", "claim", "bt", f"T-{i}", "--as", "alice")
        timed(done, ref.run, "task", "done", "bt", f"T-{i}", "--as", "alice")
        out = timed(lock, ref.run, "lock", "bt", f"src/m{i}.py", "--as", "alice", capture=True)
        lock_id = out.stdout.split()[1]
        timed(check, ref.run, "check", "bt", f"src/m{i}.py")
        timed(unlock, ref.run, "unlock", "bt", lock_id, "--as", "alice")
    return {
        name: lat_summary(values)
        for name, values in (
            ("create", create),
            ("claim", claim),
            ("done", done),
            ("lock", lock),
            ("check", check),
            ("unlock", unlock),
        )
    }


def ref_claim_race(ref: Ref, n: int) -> dict[str, Any]:
    ref.run("init", "race")
    for i in range(n):
        ref.run("task", "create", "race", f"R-{i}", "--from", "alice", "--title", "r")
    import subprocess

    won: list[int] = []
    lock = threading.Lock()

    def worker(k: int) -> None:
        order = list(range(n))
        random.shuffle(order)
        for i in order:
            r = subprocess.run(
                ref.argv("task", "claim", "race", f"R-{i}", "--as", f"w{k}"),
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            if r.returncode == 0:
                with lock:
                    won.append(i)

    started = time.perf_counter()
    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(worker, range(WORKERS)))
    elapsed = time.perf_counter() - started
    return {
        "tasks": n,
        "attempts_per_s": round(n * WORKERS / elapsed, 1),
        "claims_per_s": round(len(won) / elapsed, 1),
        "each_claimed_once": sorted(won) == list(range(n)),
    }


def p50(section: dict[str, Any], op: str) -> float | None:
    return (section.get(op) or {}).get("p50_ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller counts")
    parser.add_argument("--skip-reference", action="store_true")
    parser.add_argument("--json", help="also write the results as JSON here")
    parser.add_argument("--ref-venv", default="/tmp/agentchat-bench-refvenv")
    args = parser.parse_args(argv)
    ops_n, race_n = (30, 100) if args.quick else (100, 400)
    ref_ops_n, ref_race_n = (10, 16) if args.quick else (20, 40)
    raise_nofile()
    tmp = Path(tempfile.mkdtemp(prefix="agentchat-bench-tasks-"))
    results: dict[str, Any] = {"quick": args.quick}
    try:
        env = project_env(tmp)
        migrate(env)
        names = ["alice", *(f"w{k}" for k in range(WORKERS))]
        tokens = create_tokens(env, names)
        server = Server(env, tmp / "server.log")
        try:
            channel_create(server.url, tokens["alice"], "bt")
            channel_create(server.url, tokens["alice"], "race")
            results["ours_tasks"] = asyncio.run(ours_task_ops(server.url, tokens["alice"], ops_n))
            results["ours_locks"] = asyncio.run(ours_lock_ops(server.url, tokens["alice"], ops_n))
            results["ours_race"] = asyncio.run(
                ours_claim_race(
                    server.url, [tokens[f"w{k}"] for k in range(WORKERS)], tokens["alice"], race_n
                )
            )
        finally:
            server.stop()
        if not args.skip_reference:
            ref = Ref(ensure_ref_venv(Path(args.ref_venv)), tmp / "refroot")
            (tmp / "refroot").mkdir()
            results["ref_ops"] = ref_ops(ref, ref_ops_n)
            results["ref_race"] = ref_claim_race(ref, ref_race_n)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    ours = {**results["ours_tasks"], **results["ours_locks"]}
    theirs = results.get("ref_ops", {})
    print(
        f"\nTask / lease / lock benchmark ({'quick' if args.quick else 'full'}), "
        f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')}, {os.cpu_count()} CPUs, SQLite, one daphne process"
    )
    print(f"{'operation (p50)':32s} {'ours':>10s} {'reference':>12s} {'ours/ref':>10s}")
    for op in ("create", "claim", "done", "lock", "check", "unlock"):
        a, b = p50(ours, op), p50(theirs, op)
        ratio = f"{a / b:.3f}x" if a and b else "-"
        print(
            f"{'task ' + op if op in ('create', 'claim', 'done') else 'path ' + op:32s} "
            f"{a if a is not None else '-':>8} ms {b if b is not None else '-':>9} ms {ratio:>10s}"
        )
    race, ref_race = results["ours_race"], results.get("ref_race", {})
    print(
        f"{'8 workers racing to claim':32s} {race['claims_per_s']:>8}/s "
        f"{ref_race.get('claims_per_s', '-'):>9}/s "
        f"{(race['claims_per_s'] / ref_race['claims_per_s']) if ref_race else 0:>9.1f}x"
    )
    print(
        f"{'  attempts/s (incl. conflicts)':32s} {race['attempts_per_s']:>8}/s "
        f"{ref_race.get('attempts_per_s', '-'):>9}/s"
    )
    print(
        f"{'  every task claimed once':32s} {race['each_claimed_once']!s:>10s} "
        f"{ref_race.get('each_claimed_once', '-')!s:>12s}"
    )
    print(
        f"  ours: {race['tasks']} tasks, {race['attempts']} attempts, statuses {race['statuses']}"
    )
    print(
        "Reference: one `agent-chat` process per operation (about 45 ms is interpreter start-up)."
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
