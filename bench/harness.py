"""What every benchmark script shares: a project on a throwaway database, our server in a child
process, statistics, probes of the server process, and sections that run under a budget.

    from harness import Run, Server, create_tokens, migrate, project_env, ...

The server is ``agentchat.serve.ServerProcess``, the launcher the tests use too: the very
command line ``make run`` starts, back once the server serves. ``python bench/harness.py
--django-helper JSON`` is the child process that bulk-creates agents and fills channels
through the ORM (``run_helper``). Nothing here is run by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import resource
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from agentchat.serve import ServerProcess  # noqa: E402  (the project root is on sys.path now)

# --- Output and statistics -----------------------------------------------------------------


def log(text: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def pct(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..1) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))]


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)


def lat_summary(seconds: list[float]) -> dict[str, Any]:
    return {
        "n": len(seconds),
        "p50_ms": ms(pct(seconds, 0.5)),
        "p99_ms": ms(pct(seconds, 0.99)),
        "max_ms": ms(max(seconds) if seconds else None),
    }


def machine_info() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


# --- The server process --------------------------------------------------------------------


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def proc_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def proc_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


class Server(ServerProcess):
    """Our server for a benchmark, its output in ``log_path``."""

    def __init__(self, env: Mapping[str, str], log_path: Path) -> None:
        super().__init__(env=env, log_dir=log_path.parent, log_name=log_path.name)

    def log_text(self) -> str:
        return self.output()

    def locked_count(self) -> int:
        return self.output().count("database is locked")

    def stop(self, timeout: float = 10.0) -> float | None:
        """SIGTERM, then SIGKILL after ``timeout``. The seconds it took to exit, or None."""
        took = super().stop(timeout)
        return None if took is None else round(took, 2)


def raise_nofile(want: int = 8192) -> tuple[int, int]:
    """Raise this process's open-file limit (the server inherits it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


# --- A project on a throwaway database -----------------------------------------------------


def project_env(
    tmp: Path, database_url: str | None = None, redis_url: str | None = None
) -> dict[str, str]:
    """The environment of our processes: a SQLite file in ``tmp`` unless ``database_url``,
    the in-memory channel layer unless ``redis_url``, ``tmp`` as the data folder (its
    generated secret key and static root stay out of the checkout's), no post budget unless
    AGENTCHAT_POST_RATE says one."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url or f"sqlite:///{tmp / 'db.sqlite3'}",
        "AGENTCHAT_DATA_DIR": str(tmp / "data"),
        "DJANGO_SETTINGS_MODULE": "agentchat.settings",
        "DEBUG": "0",
        "LOG_LEVEL": "WARNING",
        # The benchmarks measure the server, not the post budget: a client posting thousands
        # in a burst would meet it (docs/agents.md).
        "AGENTCHAT_POST_RATE": os.environ.get("AGENTCHAT_POST_RATE", ""),
    }
    env.pop("REDIS_URL", None)  # the single-process default: in-memory channel layer
    if redis_url:
        env["REDIS_URL"] = redis_url
    return env


def migrate(env: Mapping[str, str]) -> None:
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"],
        cwd=ROOT,
        env=dict(env),
        check=True,
        timeout=300,
    )


def create_tokens(env: Mapping[str, str], names: list[str]) -> dict[str, str]:
    """A token for each agent, made with ``manage.py create_agent_token`` as a user would."""
    from concurrent.futures import ThreadPoolExecutor

    def one(name: str) -> str:
        out = subprocess.run(
            [sys.executable, "manage.py", "create_agent_token", name],
            cwd=ROOT,
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return out.stdout.strip().splitlines()[-1]

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(names, pool.map(one, names), strict=True))


def django_helper(spec: dict[str, Any]) -> dict[str, Any]:
    """Runs in a child process: bulk agent creation and a fast channel fill through the ORM."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentchat.settings")
    import uuid

    import django

    django.setup()
    from django.db import connection, transaction
    from django.utils import timezone

    from agentchat.core.identity.services import agent_get_or_create, token_create
    from channels_app.models import Channel, Message
    from channels_app.records import message_json_size

    if spec["op"] == "agents":
        tokens = []
        for i in range(spec["count"]):
            agent = agent_get_or_create(name=f"{spec['prefix']}{i:04d}")
            tokens.append(token_create(agent=agent, label="bench"))
        return {"tokens": tokens}
    if spec["op"] == "fill":
        channel = Channel.objects.get(name=spec["channel"])
        table = Channel._meta.db_table
        left, batch = spec["count"], 10_000
        started = time.perf_counter()
        while left:
            n = min(batch, left)
            # One transaction per batch: the counter moves with the rows it covers, so
            # Channel.last_seq always equals the highest committed seq.
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute(
                        f"UPDATE {table} SET last_seq = last_seq + %s WHERE id = %s "
                        "RETURNING last_seq",
                        [n, channel.pk],
                    )
                    last = int(cursor.fetchone()[0])
                now = timezone.now()
                rows = [
                    Message(
                        id=f"msg_{uuid.uuid4().hex}",
                        channel=channel,
                        seq=seq,
                        sender=spec["sender"],
                        to=[],
                        recipients="",
                        ts=now,
                        title=f"fill {seq}",
                        body=f"filler message {seq}",
                    )
                    for seq in range(last - n + 1, last + 1)
                ]
                for row in rows:
                    row.json_size = message_json_size(row)
                Message.objects.bulk_create(rows)
            left -= n
        return {"last_seq": last, "fill_s": round(time.perf_counter() - started, 2)}
    raise ValueError(f"unknown helper op {spec['op']!r}")


def run_helper(env: Mapping[str, str], spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--django-helper", json.dumps(spec)],
        cwd=ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"helper {spec['op']} failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def postgres_admin(server_url: str, statement: str) -> None:
    """Run a statement (CREATE / DROP DATABASE) in the server's ``postgres`` database."""
    import psycopg

    with psycopg.connect(f"{server_url.rstrip('/')}/postgres", autocommit=True) as conn:
        conn.execute(statement)


# --- HTTP helpers (httpx: set-up and checks, not the measured load) -------------------------


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def channel_create(url: str, token: str, name: str) -> None:
    import httpx

    r = httpx.post(f"{url}/api/v1/channels/", json={"name": name}, headers=auth(token), timeout=30)
    if r.status_code != 201:
        raise RuntimeError(f"create channel {name}: {r.status_code} {r.text[:300]}")


def seqs_of(url: str, token: str, channel: str) -> list[int]:
    import httpx

    seqs: list[int] = []
    with httpx.Client(base_url=url, headers=auth(token), timeout=30) as client:
        for _ in range(100_000):  # bounded
            r = client.get(
                f"/api/v1/channels/{channel}/messages/",
                params={"after": seqs[-1] if seqs else 0, "limit": 1000},
            )
            r.raise_for_status()
            answer = r.json()
            page = [m["seq"] for m in answer["messages"]]
            seqs += page
            # A page stops at 1000 messages or at AGENTCHAT_READ_MAX_BYTES: ``more`` says which.
            if not page or not answer.get("more"):
                break
    return seqs


# --- Sections ------------------------------------------------------------------------------


class Run:
    """Results by section; a section that raises records its error and the run goes on."""

    def __init__(self) -> None:
        self.results: dict[str, Any] = {}

    def section(self, name: str, func: Callable[..., Any], *args: Any) -> dict[str, Any]:
        log(f"{name} ...")
        started = time.monotonic()
        try:
            result = func(*args)
            if asyncio.iscoroutine(result):
                result = asyncio.run(result)
            result = result or {}
        except Exception as exc:  # one broken section must not lose the others
            traceback.print_exc()
            result = {"error": f"{type(exc).__name__}: {exc}"}
        result["section_s"] = round(time.monotonic() - started, 1)
        self.results[name] = result
        log(f"{name}: {json.dumps(result)[:400]}")
        return result

    def errors(self) -> dict[str, str]:
        return {
            k: v["error"] for k, v in self.results.items() if isinstance(v, dict) and "error" in v
        }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="The benchmarks' Django helper (a child).")
    parser.add_argument("--django-helper", required=True)
    print(json.dumps(django_helper(json.loads(parser.parse_args().django_helper))))
