"""Dashboard page times: a channel of 10,000 messages, the channel list with 200 channels and
the overview with 50 agents at work (each with a status event, a message, a leased task and a
lock; a few expired), each opened by a signed-in person, against the 300 ms target (the
overview and the channel: 100 ms, issue 21).

    .venv/bin/python bench/bench_dashboard.py [--quick] [--postgres URL]

Starts our server on a throwaway SQLite database (or a throwaway PostgreSQL database on the
server at URL), fills one channel with 10,000 messages (through the ORM in a child process)
and makes 200 more channels, signs in through the form, then times each page over localhost
(the response's full time, an upper bound of the server's). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import ROOT, Server, lat_summary, log, migrate, project_env, run_helper

TARGET_MS = 300.0
TARGETS_MS = {"overview, 50 agents": 100.0, "nav (sidebar JSON)": 100.0}
SETUP = """
from django.contrib.auth import get_user_model
from agentchat.core.identity.services import agent_get_or_create
from channels_app import services
agent_get_or_create(name="filler")
get_user_model().objects.create_user("ann", password="bench-password")
services.channel_create(name="big", created_by="filler", topic="10,000 messages")
for i in range({channels}):
    room = services.channel_create(name=f"room-{{i:03d}}", created_by="filler", topic=f"room {{i}}")
    services.message_post(channel=room, sender="filler", title=f"hello {{i}}", to=["ann"])
from datetime import timedelta
from agentchat.core.rules import clock
from agentchat.core.rules.records import Duration
from channels_app.events import event_request_parse
from locks_app import services as locks
from locks_app.selectors import lock_paths_parse
from tasks_app import services as tasks
from tasks_app.models import Lease
from agentchat.core.rules.parsed import Parsed
work = [services.channel_create(name=f"work-{{i}}", created_by="filler") for i in range(5)]
for n in range({agents}):
    name = f"bot-{{n:02d}}"
    agent_get_or_create(name=name)
    room = work[n % 5]
    services.event_post(channel=room, agent=name, request=event_request_parse(
        {{"type": "status", "harness": "omp", "status": "busy", "detail": f"T-{{n}}"}}, agent=name))
    services.message_post(channel=room, sender=name, title=f"progress {{n}}", to=["ann"])
    tasks.task_create(channel=room, task_id=f"T-{{n}}", title=f"task {{n}}", created_by=name)
    tasks.lease_claim(channel=room, task_id=f"T-{{n}}", actor=name,
                      duration=Parsed.ok(timedelta(seconds=900)))
    locks.lock_acquire(channel=room, owner=name, paths=lock_paths_parse([f"src/{{name}}.py"]),
                       lease_seconds=Duration.parse(600))
past = clock.now() - timedelta(minutes=5)
Lease.objects.filter(task__task_id__in=["T-0", "T-1", "T-2"]).update(
    claimed_at=past - timedelta(hours=1), updated_at=past - timedelta(hours=1),
    lease_expires_at=past)
"""


def _database(args: argparse.Namespace, tmp: Path) -> tuple[str | None, str | None]:
    if not args.postgres:
        return None, None
    name = f"agentchat_bench_dashboard_{int(time.time())}"
    subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", name], check=True)
    return f"{args.postgres.rstrip('/')}/{name}", name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests")
    parser.add_argument("--postgres", help="a PostgreSQL server URL (postgres://user@host:port)")
    args = parser.parse_args()
    rounds = 10 if args.quick else 40
    with tempfile.TemporaryDirectory(prefix="agentchat-bench-dashboard-") as name:
        tmp = Path(name)
        url, pg_name = _database(args, tmp)
        env = project_env(tmp, database_url=url)
        try:
            migrate(env)
            subprocess.run(
                [sys.executable, "manage.py", "shell", "-c", SETUP.format(channels=200, agents=50)],
                cwd=ROOT, env=env, check=True, timeout=600,
            )  # fmt: skip
            filled = run_helper(
                env, {"op": "fill", "channel": "big", "count": 10_000, "sender": "filler"}, 600
            )
            log(f"filled big: {filled}")
            server = Server(env, tmp / "server.log")
            try:
                with httpx.Client(base_url=server.url, follow_redirects=False) as client:
                    form = client.get("/signin/")
                    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
                    assert token, "no CSRF token on the sign-in form"
                    signed = client.post(
                        "/signin/",
                        data={"username": "ann", "password": "bench-password",
                              "csrfmiddlewaretoken": token.group(1)},
                    )  # fmt: skip
                    assert signed.status_code == 302, signed.status_code
                    rows = []
                    for label, path in (
                        ("channel of 10,000 messages", "/c/big/"),
                        ("channel list, 201 channels", "/channels/"),
                        ("overview, 50 agents", "/"),
                        ("nav (sidebar JSON)", "/nav/"),
                        ("tasks board (empty)", "/c/big/tasks/"),
                    ):
                        assert client.get(path).status_code == 200  # warm
                        times = []
                        for _ in range(rounds):
                            started = time.perf_counter()
                            response = client.get(path)
                            times.append(time.perf_counter() - started)
                            assert response.status_code == 200
                        rows.append((label, lat_summary(times), len(response.content)))
            finally:
                server.stop()
        finally:
            if pg_name:
                subprocess.run(["dropdb", "-h", "127.0.0.1", "-U", "postgres", pg_name])
    print(f"{'page':32} {'p50 ms':>8} {'p99 ms':>8} {'bytes':>9}  target {TARGET_MS:.0f} ms")
    for label, summary, size in rows:
        verdict = "ok" if summary["p50_ms"] <= TARGETS_MS.get(label, TARGET_MS) else "MISSED"
        print(f"{label:32} {summary['p50_ms']:>8} {summary['p99_ms']:>8} {size:>9}  {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
