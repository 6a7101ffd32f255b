"""Several server processes behind nginx, on PostgreSQL + Redis: posts/s with 8 clients and
push p50/p99 with 1, 2 and 3 processes, as ratios over one process, in one run; and where the
CPU of a post goes: the app processes, PostgreSQL (its backends, from /proc) and Redis.

    .venv/bin/python bench/bench_scale.py [--each 150] [--pushes 150] [--json FILE]

It starts its own PostgreSQL (initdb in a temp dir, a spare port, as user postgres when run as
root; default settings, fsync on) and its own redis-server, so that their CPU is this run's
only, and nginx with deploy/nginx-agentchat.conf (the upstream and the listen line replaced):
the shared instances are never touched. All on loopback. Per process count it also measures
the idle CPU of the app processes (their timers: the stream sweep, presence, revocation
checks) over a quiet window, and the CPU of each app process per post it served, so that the
growth of CPU per post with processes can be split into background work and work per post
(docs/scale.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import (
    ROOT,
    Server,
    channel_create,
    create_tokens,
    lat_summary,
    log,
    machine_info,
    migrate,
    proc_cpu_s,
    project_env,
    seqs_of,
)
from rawhttp import HttpError, RawHttp

from agentchat.serve import free_port

CLIENTS = 8


def _as_postgres(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


class Postgres:
    def __init__(self, root: Path) -> None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
        if not found:
            raise SystemExit("no /usr/lib/postgresql/*/bin/pg_ctl")
        self.bin = Path(found[-1]).parent
        self.root = root / "pg"
        self.root.mkdir()
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self.data = self.root / "data"
        self.port = free_port()
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-sync")
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} -c max_connections=100"
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.root / "log"),
            "-w",
            "start",
        )
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/agentchat"
        self._run(
            "createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "agentchat"
        )
        self.postmaster = int((self.data / "postmaster.pid").read_text().split()[0])

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run(_as_postgres([str(self.bin / tool), *args]), check=True, cwd=self.root,
                       capture_output=True, timeout=120)  # fmt: skip

    def cpu_s(self) -> float:
        """CPU of the postmaster and every process it started (backends, WAL writer, …),
        those alive now: a backend's CPU is counted while its pool keeps it."""
        total = 0.0
        for pid in [self.postmaster, *_children(self.postmaster)]:
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                total += proc_cpu_s(pid)
        return total

    def close(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")


def ctx_switches(pid: int) -> tuple[int, int]:
    """(voluntary, involuntary) context switches of every thread of ``pid`` so far."""
    voluntary = involuntary = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    voluntary += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches:"):
                    involuntary += int(line.split()[1])
        except FileNotFoundError:
            pass  # a thread that ended meanwhile
    return voluntary, involuntary


def perf_record(pid: int, out: Path) -> subprocess.Popen[bytes] | None:
    """``perf record`` of one app process while the posts run (None without perf)."""
    if shutil.which("perf") is None:
        return None
    return subprocess.Popen(
        ["perf", "record", "-q", "-F", "499", "-p", str(pid), "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def perf_split(process: subprocess.Popen[bytes], out: Path) -> dict[str, float]:
    """Where that process's samples fell, by object: the interpreter, the kernel, libpq…"""
    import signal as signals

    process.send_signal(signals.SIGINT)
    process.wait(30)
    report = subprocess.run(
        ["perf", "report", "-i", str(out), "--stdio", "--sort", "dso", "-q"],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    split: dict[str, float] = {}
    for line in report.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].endswith("%"):
            split[parts[1]] = float(parts[0].rstrip("%"))
    return dict(sorted(split.items(), key=lambda kv: -kv[1])[:8])


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


class Redis:
    def __init__(self) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        self.url = f"redis://127.0.0.1:{self.port}/0"
        import redis

        for _ in range(200):
            try:
                if redis.Redis.from_url(self.url).ping():
                    return
            except redis.RedisError:
                time.sleep(0.05)
        raise SystemExit("redis-server did not start")

    def cpu_s(self) -> float:
        return proc_cpu_s(self.proc.pid)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


class Nginx:
    """nginx with the deploy's config, its upstream set to ``ports``."""

    def __init__(self, root: Path, ports: list[int]) -> None:
        self.root = root / f"nginx-{len(ports)}"
        self.root.mkdir()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.ws_url = f"ws://127.0.0.1:{self.port}"
        site = nginx_site(ports, f"127.0.0.1:{self.port}")
        (self.root / "nginx.conf").write_text(nginx_main(self.root, site))
        self.proc = subprocess.Popen(
            ["nginx", "-p", str(self.root), "-c", str(self.root / "nginx.conf")],
            stdout=subprocess.DEVNULL,
        )
        import httpx

        for _ in range(200):
            try:
                httpx.get(self.url + "/api/v1/me/", timeout=1)
                return
            except httpx.HTTPError:
                time.sleep(0.05)
        raise SystemExit("nginx did not start: " + (self.root / "error.log").read_text()[-2000:])

    def cpu_s(self) -> float:
        return sum(proc_cpu_s(pid) for pid in [self.proc.pid, *_children(self.proc.pid)])

    def close(self) -> None:
        self.proc.terminate()  # nginx's fast shutdown: the master stops its workers
        self.proc.wait()


def nginx_site(upstreams: list[int] | list[str], listen: str) -> str:
    """deploy/nginx-agentchat.conf with these upstream servers and this listen address."""
    lines = []
    for line in (ROOT / "deploy" / "nginx-agentchat.conf").read_text().splitlines():
        if line.rstrip().endswith("# agentchat-upstream"):
            if upstreams is not None:  # the shipped line's parameters, on these servers
                options = line.split("#")[0].strip().rstrip(";").split()[2:]
                for where in upstreams:
                    target = f"127.0.0.1:{where}" if isinstance(where, int) else where
                    lines.append(f"    server {' '.join([target, *options])};")
                upstreams = None  # type: ignore[assignment]
            continue
        if line.rstrip().endswith("# agentchat-listen"):
            line = f"    listen {listen};"
        lines.append(line)
    return "\n".join(lines) + "\n"


def nginx_main(root: Path, site: str) -> str:
    return (
        f"daemon off;\nworker_processes 1;\npid {root}/nginx.pid;\nerror_log {root}/error.log;\n"
        f"user root;\nevents {{ worker_connections 4096; }}\nhttp {{\n"
        f"access_log off;\nclient_body_temp_path {root}/body;\nproxy_temp_path {root}/proxy;\n"
        f"fastcgi_temp_path {root}/fastcgi;\nuwsgi_temp_path {root}/uwsgi;\n"
        f"scgi_temp_path {root}/scgi;\n{site}}}\n"
    )


def post_body(i: int) -> dict[str, Any]:
    return {"title": f"scale {i}", "body": "hello world, " * 8}


async def posts(url: str, tokens: list[str], channel: str, each: int) -> dict[str, Any]:
    path = f"/api/v1/channels/{channel}/messages/"
    lat: list[float] = []
    errors: dict[int, int] = {}
    clients = [await RawHttp(url, token).open() for token in tokens]

    async def worker(k: int) -> None:
        for i in range(each):
            t = time.perf_counter()
            try:
                status, _ = await clients[k].request("POST", path, post_body(i))
            except (OSError, HttpError):
                status = 0
            if status != 201:
                errors[status] = errors.get(status, 0) + 1
            lat.append(time.perf_counter() - t)

    started = time.perf_counter()
    await asyncio.gather(*(worker(k) for k in range(len(clients))))
    elapsed = time.perf_counter() - started
    for client in clients:
        await client.close()
    return {
        "posts": len(lat),
        "elapsed_s": round(elapsed, 3),
        "posts_per_s": round(len(lat) / elapsed, 1),
        "errors": errors,
        **lat_summary(lat),
    }


async def pushes(url: str, ws_url: str, poster: str, subscriber: str, channel: str, n: int) -> dict:
    """Post (through nginx: any process) to a websocket subscriber (on one process): the
    time from sending the post to the frame."""
    from websockets.asyncio.client import connect

    path = f"/api/v1/channels/{channel}/messages/"
    arrivals: dict[int, float] = {}
    frame = asyncio.Event()
    lat: list[float] = []
    missing = 0
    async with (
        connect(f"{ws_url}/ws/channels/{channel}/?token={subscriber}", ping_interval=None) as ws,
        RawHttp(url, poster) as client,
    ):

        async def reader() -> None:
            async for raw in ws:
                data = json.loads(raw)
                if data.get("type") == "message":
                    arrivals[data["message"]["seq"]] = time.perf_counter()
                    frame.set()

        reading = asyncio.create_task(reader())
        try:
            for i in range(5):  # warm-up: every process has served a post
                await client.request("POST", path, post_body(-i))
            for i in range(n):
                await asyncio.sleep(0.01)
                frame.clear()
                t0 = time.perf_counter()
                _, posted = await client.json("POST", path, post_body(i))
                seq = posted["seq"]
                until = time.monotonic() + 5
                while seq not in arrivals and time.monotonic() < until:
                    frame.clear()
                    try:
                        await asyncio.wait_for(frame.wait(), 5)
                    except TimeoutError:
                        break
                if seq not in arrivals:
                    missing += 1
                    continue
                lat.append(arrivals[seq] - t0)
        finally:
            reading.cancel()
    return {**lat_summary(lat), "missing_frames": missing}


def measure(n: int, tmp: Path, env: dict[str, str], tokens: dict[str, str], pg: Postgres,
            redis: Redis, args: argparse.Namespace) -> dict[str, Any]:  # fmt: skip
    servers = [Server(env, tmp / f"server-{n}-{k}.log") for k in range(n)]
    nginx = Nginx(tmp, [s.port for s in servers])
    try:
        posters = [tokens[f"p{k}"] for k in range(CLIENTS)]
        channel = f"scale-{n}"
        channel_create(nginx.url, posters[0], channel)
        asyncio.run(posts(nginx.url, posters, channel, 5))  # warm-up: pools, imports
        # Idle: what the processes spend with nothing to do (their timers).
        quiet = 3.0
        idle0 = [proc_cpu_s(s.pid) for s in servers]
        time.sleep(quiet)
        idle = [proc_cpu_s(s.pid) - c for s, c in zip(servers, idle0, strict=True)]
        app0 = [proc_cpu_s(s.pid) for s in servers]
        ctx0 = [ctx_switches(s.pid) for s in servers]
        pg0, redis0, nginx0 = pg.cpu_s(), redis.cpu_s(), nginx.cpu_s()
        perf = perf_record(servers[0].pid, tmp / f"perf-{n}.data") if args.perf else None
        result = asyncio.run(posts(nginx.url, posters, channel, args.each))
        app = [proc_cpu_s(s.pid) - c for s, c in zip(servers, app0, strict=True)]
        ctx = [ctx_switches(s.pid) for s in servers]
        if perf is not None:
            result["perf_app0_dso_percent"] = perf_split(perf, tmp / f"perf-{n}.data")
        count = max(1, result["posts"])
        elapsed = result["elapsed_s"]
        idle_rate = [x / quiet for x in idle]
        result |= {
            "stored": len(seqs_of(nginx.url, posters[0], channel)),
            "app_cpu_ms_per_post": round(sum(app) * 1000 / count, 2),
            "app_cpu_ms_per_post_minus_idle": round(
                (sum(app) - sum(idle_rate) * elapsed) * 1000 / count, 2
            ),
            "app_cpu_s_each": [round(x, 2) for x in app],
            "app_ctx_switches_per_post": [
                round(sum(a[i] - b[i] for a, b in zip(ctx, ctx0, strict=True)) / count, 2)
                for i in (0, 1)
            ],  # (voluntary, involuntary), all app processes
            "app_idle_cpu_ms_per_s_each": [round(x * 1000, 1) for x in idle_rate],
            "postgres_cpu_ms_per_post": round((pg.cpu_s() - pg0) * 1000 / count, 2),
            "redis_cpu_ms_per_post": round((redis.cpu_s() - redis0) * 1000 / count, 3),
            "nginx_cpu_ms_per_post": round((nginx.cpu_s() - nginx0) * 1000 / count, 2),
        }
        channel_create(nginx.url, tokens["pusher"], f"push-{n}")
        result["push"] = asyncio.run(
            pushes(
                nginx.url, nginx.ws_url, tokens["pusher"], tokens["sub"], f"push-{n}", args.pushes
            )
        )
        return result
    finally:
        nginx.close()
        for server in servers:
            server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--each", type=int, default=150, help="posts per client (8 clients)")
    parser.add_argument("--pushes", type=int, default=150)
    parser.add_argument("--processes", default="1,2,3")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--perf", action="store_true", help="perf record one app process")
    args = parser.parse_args()
    for tool in ("nginx", "redis-server"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed")
    tmp = Path(tempfile.mkdtemp(prefix="agentchat-bench-scale-"))
    os.chmod(tmp, 0o755)
    pg = Postgres(tmp)
    redis = Redis()
    try:
        env = project_env(tmp, pg.url, redis.url)
        env["AGENTCHAT_SERVER_CPU"] = "auto"
        migrate(env)
        tokens = create_tokens(env, [f"p{k}" for k in range(CLIENTS)] + ["pusher", "sub"])
        results: dict[str, Any] = {"machine": machine_info(), "clients": CLIENTS}
        for n in [int(x) for x in args.processes.split(",")]:
            log(f"{n} process(es) ...")
            results[str(n)] = measure(n, tmp, env, tokens, pg, redis, args)
            log(f"{n}: {json.dumps(results[str(n)])}")
        base = results.get("1")
        if base:
            for n in args.processes.split(","):
                r = results[n]
                r["posts_per_s_over_1"] = round(r["posts_per_s"] / base["posts_per_s"], 2)
                r["push_p50_over_1"] = round(r["push"]["p50_ms"] / base["push"]["p50_ms"], 2)
        results["machine_end"] = machine_info()
        print(json.dumps(results, indent=2))
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
        return 0
    finally:
        redis.close()
        pg.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
