"""Path-lock benchmark: lock and check latency against the held paths,
the glob patterns that once stalled the server, and a post's latency elsewhere meanwhile.

    .venv/bin/python bench/bench_locks.py [--quick] [--postgres URL] [--json PATH]

Starts a server on a throwaway SQLite database (or a throwaway PostgreSQL database on the
server at URL) and measures, for 10, 100, 1,000 and 10,000 held paths in the channel
(``d<k>/f<i>.py`` under 100 directories, held 64 paths a lock, filled through the service in
a child process):

* lock + unlock of 1 new path and of 64 new paths, and lock of a pattern with a literal
  prefix (``new/<n>/**/*.py``);
* check of 1 path overlapping one held lock, of the 64 paths of one held lock, of 1 path
  overlapping none, and of the leading-wildcard pattern ``*.md`` (every held path is a
  candidate of such a pattern: the one case that grows with the held paths);
* meanwhile, another agent posting to another channel every 20 ms: its post latency.

Then held patterns anchored at the workspace: another agent holds as many patterns of 16
wildcards from the first segment on (``*a*b*…*o*x<i>q``) as a channel may
(AGENTCHAT_PATH_LOCK_MAX_ROOT_PATTERNS), each a candidate of every request, and we lock and
check 64 concrete paths with long first segments (once refused with
PATH_LOCK_PATTERN_TOO_COMPLEX: the held patterns' comparisons were paid from our budget).

Then the glob "CPU bomb": 64 patterns such as ``*a*b*c*…*p*x1q`` locked, and a check of 64
similar ones; the same within the 16-wildcard limit; and 64 patterns crafted to spend the
whole work budget, with the same poster running (answers and times). Every loop has a count and a
deadline; all traffic goes to 127.0.0.1. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import (
    ROOT,
    Server,
    channel_create,
    create_tokens,
    lat_summary,
    postgres_admin,
    raise_nofile,
)
from rawhttp import RawHttp

LEVELS = (10, 100, 1_000, 10_000)
PATHS_PER_LOCK = 64
DIRECTORIES = 100
BOMB_LETTERS = "abcdefghijklmnop"


def held_path(i: int) -> str:
    return f"d{i % DIRECTORIES}/f{i}.py"


def bomb_pattern(i: int, tail: str = "q") -> str:
    return "".join(f"*{c}" for c in BOMB_LETTERS) + f"*x{i}{tail}"


def fill_helper(spec: dict[str, Any]) -> dict[str, Any]:
    """Runs in a child process: lock paths ``start..stop`` through the service, 64 a lock."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentchat.settings")
    import django

    django.setup()
    from agentchat.core.rules.records import Duration
    from channels_app.models import Channel
    from locks_app.selectors import lock_paths_parse
    from locks_app.services import lock_acquire

    channel = Channel.objects.get(name=spec["channel"])
    started = time.perf_counter()
    for first in range(spec["start"], spec["stop"], PATHS_PER_LOCK):
        paths = [held_path(i) for i in range(first, min(first + PATHS_PER_LOCK, spec["stop"]))]
        lock_acquire(
            channel=channel,
            owner="filler",
            paths=lock_paths_parse(paths),
            lease_seconds=Duration.parse(86_000),
        )
    return {"fill_s": round(time.perf_counter() - started, 2)}


def fill(env: dict[str, str], channel: str, start: int, stop: int) -> float:
    out = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--fill-helper",
            json.dumps({"channel": channel, "start": start, "stop": stop}),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"fill failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["fill_s"]


class Poster:
    """Another agent posting to another channel every ``gap`` seconds while a section runs.
    On exit the post in flight is awaited, so a post held up by the section is counted."""

    def __init__(self, url: str, token: str, channel: str, gap: float = 0.02) -> None:
        self.http = RawHttp(url, token)
        self.path = f"/api/v1/channels/{channel}/messages/"
        self.gap = gap
        self.samples: list[float] = []
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            started = time.perf_counter()
            status, _ = await self.http.request("POST", self.path, {"title": f"p{i}", "body": "x"})
            assert status == 201, status
            self.samples.append(time.perf_counter() - started)
            i += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.gap)

    async def __aenter__(self) -> Poster:
        await self.http.open()
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._stop.set()
        await asyncio.wait_for(self._task, 600)
        await self.http.close()


async def timed(
    samples: list[float], http: RawHttp, method: str, path: str, body: Any = None
) -> tuple[int, Any]:
    started = time.perf_counter()
    status, answer = await http.json(method, path, body)
    samples.append(time.perf_counter() - started)
    return status, answer


async def measure_level(
    url: str, token: str, poster_token: str, held: int, reps: int, budget: float
) -> dict[str, Any]:
    base = "/api/v1/channels/locks/locks"
    ops: dict[str, list[float]] = {
        name: []
        for name in (
            "lock 1",
            "unlock 1",
            "lock 64",
            "unlock 64",
            "lock pattern",
            "check 1 (1 conflict)",
            "check 1 (none)",
            "check 64 (1 lock)",
            "check *.md (root pattern)",
        )
    }
    deadline = time.monotonic() + budget
    async with RawHttp(url, token) as http, Poster(url, poster_token, "elsewhere") as poster:
        for rep in range(reps):
            if time.monotonic() > deadline:
                break
            tag = f"{held}-{rep}"
            status, body = await timed(
                ops["lock 1"], http, "POST", f"{base}/", {"paths": [f"new/{tag}/a.py"]}
            )
            assert status == 201, body
            status, body = await timed(
                ops["unlock 1"], http, "DELETE", f"{base}/{body['lock_id']}/"
            )
            assert status == 200, body
            paths = [f"new/{tag}/m{j}.py" for j in range(PATHS_PER_LOCK)]
            status, body = await timed(ops["lock 64"], http, "POST", f"{base}/", {"paths": paths})
            assert status == 201, body
            status, body = await timed(
                ops["unlock 64"], http, "DELETE", f"{base}/{body['lock_id']}/"
            )
            assert status == 200, body
            pattern = {"paths": [f"new/{tag}/**/*.py"]}
            status, body = await timed(ops["lock pattern"], http, "POST", f"{base}/", pattern)
            assert status == 201, body
            await http.json("DELETE", f"{base}/{body['lock_id']}/")
            i = (rep * 7919) % held
            status, body = await timed(
                ops["check 1 (1 conflict)"],
                http,
                "POST",
                f"{base}/check/",
                {"paths": [held_path(i)]},
            )
            assert status == 200 and len(body["conflicts"]) == 1, str(body)[:300]
            one_lock = [path["normalized_path"] for path in body["conflicts"][0]["paths"]]
            status, body = await timed(
                ops["check 1 (none)"], http, "POST", f"{base}/check/", {"paths": [f"new/{tag}"]}
            )
            assert status == 200 and body["conflicts"] == [], body
            # The paths of that held lock (up to 64): the same answer (one record) every time.
            status, body = await timed(
                ops["check 64 (1 lock)"], http, "POST", f"{base}/check/", {"paths": one_lock}
            )
            assert status == 200 and len(body["conflicts"]) == 1, str(body)[:300]
            status, body = await timed(
                ops["check *.md (root pattern)"],
                http,
                "POST",
                f"{base}/check/",
                {"paths": ["*.md"]},
            )
            assert status == 200 and body["conflicts"] == [], body
    result = {name: lat_summary(values) for name, values in ops.items()}
    result["post elsewhere"] = lat_summary(poster.samples)
    return result


def long_paths(tag: str) -> list[str]:
    return [f"{'abcdefghijklmnopqrstuvwxyz' * 2}{tag}{j}/f.py" for j in range(PATHS_PER_LOCK)]


async def measure_held_patterns(
    url: str, token: str, holder_token: str, poster_token: str, reps: int
) -> dict[str, Any]:
    base = "/api/v1/channels/patterns/locks"
    sixteen = "".join(f"*{c}" for c in BOMB_LETTERS[:15])
    result: dict[str, Any] = {}
    async with RawHttp(url, holder_token) as holder:
        held = 0
        while True:  # as many as the channel may hold (the server's setting)
            status, body = await holder.json("POST", f"{base}/", {"paths": [f"{sixteen}*x{held}q"]})
            if status != 201:
                result["held"] = held
                result["next"] = {"status": status, "code": body["error"]["code"]}
                break
            held += 1
            assert held <= 10_000, "no cap on held root patterns"
    ops: dict[str, list[float]] = {
        name: [] for name in ("lock 64 long", "unlock 64 long", "check 64 long", "check 1")
    }
    async with RawHttp(url, token) as http, Poster(url, poster_token, "elsewhere") as poster:
        for rep in range(reps):
            paths = long_paths(f"r{rep}")
            status, body = await timed(
                ops["check 64 long"], http, "POST", f"{base}/check/", {"paths": paths}
            )
            assert status == 200 and body["conflicts"] == [], str(body)[:300]
            status, body = await timed(
                ops["check 1"], http, "POST", f"{base}/check/", {"paths": [paths[0]]}
            )
            assert status == 200 and body["conflicts"] == [], str(body)[:300]
            status, body = await timed(
                ops["lock 64 long"], http, "POST", f"{base}/", {"paths": paths}
            )
            assert status == 201, str(body)[:300]
            status, body = await timed(
                ops["unlock 64 long"], http, "DELETE", f"{base}/{body['lock_id']}/"
            )
            assert status == 200, body
    result.update({name: lat_summary(values) for name, values in ops.items()})
    result["post elsewhere"] = lat_summary(poster.samples)
    return result


async def measure_bomb(url: str, token: str, poster_token: str) -> dict[str, Any]:
    base = "/api/v1/channels/bomb/locks"
    result: dict[str, Any] = {}
    async with RawHttp(url, token) as http, Poster(url, poster_token, "elsewhere") as poster:
        sixteen = "".join(f"*{c}" for c in BOMB_LETTERS[:15])
        for name, path, paths in (
            ("lock 64 patterns", f"{base}/", [bomb_pattern(i) for i in range(64)]),
            ("check 64 patterns", f"{base}/check/", [bomb_pattern(i, "r") for i in range(64)]),
            # Within the limit of 16 wildcards: compared, and the lock granted.
            ("lock 64 x 16 wildcards", f"{base}/", [f"{sixteen}*x{i}q" for i in range(64)]),
            ("check 64 x 16 wildcards", f"{base}/check/", [f"{sixteen}*x{i}r" for i in range(64)]),
            # Disjoint only by length and with compatible ends: the budget runs out.
            ("lock 64 budget eaters", f"{base}/", ["?" * 16 + "z" * i for i in range(64)]),
        ):
            samples: list[float] = []
            status, body = await timed(samples, http, "POST", path, {"paths": paths})
            code = body.get("error", {}).get("code") if isinstance(body, dict) else None
            result[name] = {"status": status, "code": code, "ms": round(samples[0] * 1000, 1)}
    result["post elsewhere"] = lat_summary(poster.samples)
    return result


def fmt(summary: dict[str, Any]) -> str:
    if not summary.get("n"):
        return "-"
    return f"{summary['p50_ms']:.1f} / {summary['max_ms']:.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--postgres", help="run on a throwaway database on this server URL")
    parser.add_argument("--levels", default=",".join(str(n) for n in LEVELS))
    parser.add_argument("--json", help="also write the results as JSON here")
    parser.add_argument("--fill-helper", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.fill_helper:
        print(json.dumps(fill_helper(json.loads(args.fill_helper))))
        return 0
    levels = [int(n) for n in args.levels.split(",")]
    reps, level_budget = (5, 60.0) if args.quick else (20, 180.0)
    raise_nofile()
    tmp = Path(tempfile.mkdtemp(prefix="agentchat-bench-locks-"))
    pg_name = f"agentchat_bench_locks_{os.getpid()}"
    results: dict[str, Any] = {"quick": args.quick, "levels": {}}
    try:
        env = {**os.environ}
        env.pop("REDIS_URL", None)
        # One holder fills the channel's whole allowance of root patterns: the worst case of
        # every request's comparisons (under the per-agent cap, several agents reach it alike).
        env.setdefault(
            "AGENTCHAT_PATH_LOCK_MAX_ROOT_PATTERNS_PER_AGENT",
            env.get("AGENTCHAT_PATH_LOCK_MAX_ROOT_PATTERNS", "32"),
        )
        if args.postgres:
            postgres_admin(args.postgres, f'CREATE DATABASE "{pg_name}"')
            env["DATABASE_URL"] = f"{args.postgres.rstrip('/')}/{pg_name}"
        else:
            env["DATABASE_URL"] = f"sqlite:///{tmp / 'db.sqlite3'}"
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True
        )
        tokens = create_tokens(env, ["alice", "bob", "filler"])
        server = Server(env, tmp / "server.log")
        try:
            for name in ("locks", "elsewhere", "bomb", "patterns"):
                channel_create(server.url, tokens["alice"], name)
            held = 0
            for level in levels:
                fill_s = fill(env, "locks", held, level)
                held = level
                print(f"held {held} paths (filled in {fill_s} s); measuring…", flush=True)
                measured = asyncio.run(
                    measure_level(
                        server.url, tokens["alice"], tokens["bob"], held, reps, level_budget
                    )
                )
                results["levels"][str(held)] = {"fill_s": fill_s, **measured}
            results["held_patterns"] = asyncio.run(
                measure_held_patterns(
                    server.url, tokens["alice"], tokens["filler"], tokens["bob"], reps
                )
            )
            results["bomb"] = asyncio.run(measure_bomb(server.url, tokens["alice"], tokens["bob"]))
            results["server_log_tracebacks"] = server.log_text().count("Traceback")
        finally:
            server.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if args.postgres:
            postgres_admin(args.postgres, f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')

    database = "PostgreSQL" if args.postgres else "SQLite"
    print(
        f"\nPath-lock benchmark ({'quick' if args.quick else 'full'}), "
        f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')}, {os.cpu_count()} CPUs, {database}, "
        "one daphne process. Latency p50 / max in ms, by paths held in the channel:"
    )
    names = list(next(iter(results["levels"].values())).keys())[1:]
    print(f"{'operation':28s}" + "".join(f"{level:>18,}" for level in levels))
    for name in names:
        cells = "".join(f"{fmt(results['levels'][str(level)][name]):>18s}" for level in levels)
        print(f"{name:28s}{cells}")
    held = results["held_patterns"]
    print(
        f"\nAnother agent holds {held['held']} patterns from the first segment on (the next: "
        f"{held['next']['status']} {held['next']['code']}); 64 concrete paths, p50 / max ms:"
    )
    for name, value in held.items():
        if name not in ("held", "next"):
            print(f"  {name:26s} {fmt(value)}")
    print("\nGlob patterns, 64 per request (another agent posting meanwhile):")
    for name, value in results["bomb"].items():
        if name == "post elsewhere":
            print(f"  {name:26s} p50 / max {fmt(value)} ms ({value['n']} posts)")
        else:
            print(f"  {name:26s} {value['status']} {value['code'] or ''} in {value['ms']} ms")
    print(f"tracebacks in the server log: {results['server_log_tracebacks']}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
