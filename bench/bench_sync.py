"""Folder sync benchmark: ``manage.py sync_folder`` of a channel of 100,000
messages (time, peak RSS, files written), then an incremental sync after 10 new messages (time,
files written), then a sync with nothing new, and a ``--verify`` sync that reads every file.

    .venv/bin/python bench/bench_sync.py [--messages N] [--quick] [--json PATH]

A throwaway SQLite project (``harness.project_env``), filled through the ORM in a child
(``harness.run_helper`` "fill"), then each sync is a process of its own running ``sync_folder``
timed around ``call_command`` (Django's start-up apart), its peak RSS its own ``ru_maxrss``
and the RSS the sync added over the process after start-up. The 10 new messages are posted
through the service in a child, as a server would. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import ROOT, Run, log, machine_info, migrate, project_env, run_helper

CHANNEL = "big"
POST_10 = r"""
import django, sys
django.setup()
from channels_app.models import Channel
from channels_app.services import message_post
channel = Channel.objects.get(name=sys.argv[1])
for i in range(int(sys.argv[2])):
    message_post(channel=channel, sender="alice", title=f"new {i}", body=f"new body {i}")
"""
MAKE_CHANNEL = r"""
import django, sys
django.setup()
from agentchat.core.identity.services import agent_get_or_create
from channels_app.services import channel_create
agent_get_or_create(name="alice")
channel_create(name=sys.argv[1], created_by="alice", topic="bench")
"""
SUMMARY = re.compile(r"(\d+) file\(s\) written, (\d+) removed")


def django_child(env: dict[str, str], code: str, *args: str) -> None:
    subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env, check=True, timeout=600)


SYNC_CHILD = r"""
import io, json, resource, sys, time
import django
django.setup()
from django.core.management import call_command
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out = io.StringIO()
started = time.perf_counter()
call_command("sync_folder", *sys.argv[1:], stdout=out)
took = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"stdout": out.getvalue(), "sync_s": took, "rss_kb": peak, "base_kb": before}))
"""


def sync(env: dict[str, str], root: Path, *flags: str) -> dict[str, Any]:
    """One process running ``sync_folder``: the sync's own time (Django's start-up apart), the
    process's peak RSS and how much of it the sync added, what it says it wrote."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", SYNC_CHILD, "--root", str(root), *flags],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"sync_folder failed: {done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    match = SUMMARY.search(result["stdout"])
    return {
        "sync_s": round(result["sync_s"], 3),
        "process_wall_s": round(wall, 2),
        "peak_rss_mb": round(result["rss_kb"] / 1024, 1),
        "rss_added_mb": round((result["rss_kb"] - result["base_kb"]) / 1024, 1),
        "files_written": int(match[1]) if match else None,
        "files_removed": int(match[2]) if match else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="10,000 messages")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    count = 10_000 if args.quick else args.messages
    tmp = Path(tempfile.mkdtemp(prefix="bench-sync-"))
    env = project_env(tmp)
    run = Run()
    results: dict[str, Any] = {"machine": machine_info(), "messages": count}
    log(f"project in {tmp}")
    migrate(env)
    django_child(env, MAKE_CHANNEL, CHANNEL)
    results["fill"] = run_helper(
        env, {"op": "fill", "channel": CHANNEL, "count": count, "sender": "alice"}, 3600
    )
    root = tmp / "root"
    results["full"] = run.section("full sync", sync, env, root)
    files = sum(1 for _ in os.scandir(root / CHANNEL))
    results["full"]["files_in_channel_folder"] = files
    started = time.perf_counter()
    django_child(env, POST_10, CHANNEL, "10")
    results["post_10_s"] = round(time.perf_counter() - started, 2)
    results["incremental_10"] = run.section("incremental sync, 10 new", sync, env, root)
    results["nothing_new"] = run.section("sync, nothing new", sync, env, root)
    results["verify"] = run.section("sync --verify (reads every file)", sync, env, root, "--verify")
    results["errors"] = run.errors()
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    for label, key in (
        (f"sync of {count:,} messages", "full"),
        ("incremental, 10 new messages", "incremental_10"),
        ("nothing new", "nothing_new"),
        ("--verify (reads every file)", "verify"),
    ):
        one = results[key]
        print(
            f"{label}: {one.get('sync_s')} s, {one.get('files_written')} files written, "
            f"peak RSS {one.get('peak_rss_mb')} MB (+{one.get('rss_added_mb')} MB over start-up)"
        )


if __name__ == "__main__":
    main()
