"""The fixed cost of a request (issue 22 §1): server CPU and instructions per post and per
``GET me/``, with a count that repeats on a loaded machine.

    .venv/bin/python bench/bench_request_cost.py [--n 400] [--callgrind] [--py-spy OUT]
        [--postgres URL]

One server on a throwaway database (SQLite unless ``--postgres``), one keep-alive connection
(``rawhttp.py``), 50 warm-up requests, then ``--n`` posts one after another and ``--n`` ``GET
me/``. Server CPU per request comes from ``/proc/<pid>/stat`` (user + system) around each
block. ``--callgrind`` runs the server under ``valgrind --tool=callgrind`` with instrumentation
off, turned on (``callgrind_control -i on``) around each block only: instructions per request
repeat within a fraction of a percent, whatever else the machine runs (the wall clock and the
CPU figures do not, under valgrind). ``--py-spy OUT`` samples the server's thread that holds
the GIL with py-spy (pip install py-spy; a flamegraph-ready ``raw`` file) for where the time
goes. ``--postgres URL`` also reports the
CPU the database's backends spent per post (the server's connections, from ``pg_stat_activity``
pids). JSON on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

# This checkout's server, whatever the venv has installed (harness.ROOT is the same folder).
sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]

from harness import (  # noqa: E402
    channel_create,
    create_tokens,
    migrate,
    postgres_admin,
    proc_cpu_s,
    project_env,
)
from rawhttp import RawHttp  # noqa: E402

import agentchat.serve as serve  # noqa: E402

_daphne_command = serve.daphne_command


def _wrapped(prefix: list[str]) -> Any:
    def command(*args: Any, **kwargs: Any) -> list[str]:
        return [*prefix, *_daphne_command(*args, **kwargs)]

    return command


def _server_pid(srv: serve.ServerProcess) -> int:
    """The server's process (under valgrind, valgrind's, which runs it)."""
    pid = srv.pid
    for _ in range(3):
        exe = os.readlink(f"/proc/{pid}/exe")
        if "python" in exe or "valgrind" in exe or "memcheck" in exe or "callgrind" in exe:
            return pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if not children:
            return pid
        pid = int(children[0])
    return pid


def _callgrind(pid: int, *args: str) -> str:
    return subprocess.run(
        ["callgrind_control", *args, str(pid)], capture_output=True, text=True, check=False
    ).stdout


def _pg_backend_cpu(database_url: str | None) -> float:
    """CPU seconds of the database's backends of the bench database (PostgreSQL only)."""
    if not database_url:
        return 0.0
    import psycopg

    name = database_url.rsplit("/", 1)[1]
    with psycopg.connect(database_url, autocommit=True) as conn:
        pids = [
            row[0]
            for row in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                [name],
            )
        ]
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):  # a backend that ended meanwhile
            total += proc_cpu_s(pid)
    return total


def _callgrind_dumped(pid: int) -> int:
    """Dump callgrind's counts since the last zeroing; the instructions counted."""
    folder = Path(os.readlink(f"/proc/{pid}/cwd"))
    before = set(folder.glob("callgrind.out.*")) | set(_OUT.glob("callgrind.out.*"))
    _callgrind(pid, "--dump")
    for _ in range(600):
        made = (set(folder.glob("callgrind.out.*")) | set(_OUT.glob("callgrind.out.*"))) - before
        for path in made:
            text = path.read_text(errors="replace")
            found = re.search(r"^totals: (\d+)", text, re.MULTILINE)
            if found:
                return int(found.group(1))
        time.sleep(0.5)
    raise RuntimeError("callgrind wrote no dump")


_OUT = Path(tempfile.gettempdir())


async def _block(
    pid: int,
    client: RawHttp,
    method: str,
    path: str,
    bodies: list[Any],
    *,
    callgrind: bool,
    database_url: str | None,
) -> dict[str, Any]:
    if callgrind:
        _callgrind(pid, "--zero")
        _callgrind(pid, "-i", "on")
    cpu, db_cpu, wall = proc_cpu_s(pid), _pg_backend_cpu(database_url), time.perf_counter()
    for body in bodies:
        status, _ = await client.request(method, path, body)
        if status not in (200, 201):
            raise RuntimeError(f"{method} {path}: {status}")
    wall = time.perf_counter() - wall
    cpu, db_cpu = proc_cpu_s(pid) - cpu, _pg_backend_cpu(database_url) - db_cpu
    n = len(bodies)
    out: dict[str, Any] = {
        "n": n,
        "server_cpu_ms": round(cpu * 1000 / n, 3),
        "per_s": round(n / wall, 1),
    }
    if database_url:
        out["database_cpu_ms"] = round(db_cpu * 1000 / n, 3)
    if callgrind:
        _callgrind(pid, "-i", "off")
        out["instructions"] = _callgrind_dumped(pid) // n
    return out


async def measure(
    srv: serve.ServerProcess, token: str, n: int, *, callgrind: bool, database_url: str | None
):
    pid = _server_pid(srv)
    posts = [{"title": f"cost {i}", "body": "hello world, " * 8, "to": "bob"} for i in range(n)]
    path = "/api/v1/channels/bench-cost/messages/"
    async with RawHttp(srv.url, token) as client:
        for i in range(50):
            await client.request("POST", path, {"title": f"warm {i}", "body": "x"})
            await client.request("GET", "/api/v1/me/")
        result = {
            "post": await _block(
                pid, client, "POST", path, posts, callgrind=callgrind, database_url=database_url
            ),
            "me": await _block(
                pid,
                client,
                "GET",
                "/api/v1/me/",
                [None] * n,
                callgrind=callgrind,
                database_url=database_url,
            ),
        }
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--callgrind", action="store_true")
    parser.add_argument("--py-spy", metavar="OUT")
    parser.add_argument("--postgres", metavar="URL")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-cost-"))
    database_url = None
    if args.postgres:
        name = f"bench_cost_{uuid.uuid4().hex[:8]}"
        postgres_admin(args.postgres, f'CREATE DATABASE "{name}"')
        database_url = f"{args.postgres.rstrip('/')}/{name}"
    try:
        env = project_env(tmp, database_url)
        migrate(env)
        tokens = create_tokens(env, ["alice", "bob"])
        if args.callgrind:
            global _OUT
            _OUT = tmp
            serve.daphne_command = _wrapped(
                [
                    "valgrind",
                    "--tool=callgrind",
                    "--instr-atstart=no",
                    f"--callgrind-out-file={tmp}/callgrind.out.%p",
                ]
            )
        # Under valgrind the start alone takes a minute or two.
        srv = serve.ServerProcess(env=env, log_dir=tmp, start_timeout=600)
        spy = None
        try:
            channel_create(srv.url, tokens["alice"], "bench-cost")
            if args.py_spy:
                spy = subprocess.Popen(
                    [
                        str(Path(sys.executable).parent / "py-spy"),
                        *("record", "--pid", str(srv.pid), "-r", "250", "--format", "raw"),
                        *("-o", args.py_spy, "--gil"),
                    ]
                )
                time.sleep(1)  # py-spy attaches
            result = asyncio.run(
                measure(
                    srv,
                    tokens["alice"],
                    args.n,
                    callgrind=args.callgrind,
                    database_url=database_url,
                )
            )
        finally:
            if spy is not None:
                spy.send_signal(signal.SIGINT)  # py-spy writes its file on an interrupt
                spy.wait(timeout=60)
            srv.stop(timeout=60)
        result["database"] = "postgresql" if database_url else "sqlite"
        result["loadavg"] = [round(x, 2) for x in os.getloadavg()]
        print(json.dumps(result))
    finally:
        if database_url:
            postgres_admin(args.postgres, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    sys.exit(main())
