"""Import benchmark: ``import_folder`` of a reference folder of 10,000 messages.

    .venv/bin/python bench/bench_import.py [--messages 10000 50000] [--database-url URL]
                                           [--json PATH]

For each size: writes a reference folder (``tests/folder/sample.py``: the reference's exact
bytes, written directly since filling it through the reference's ``post`` is quadratic),
checks with the reference CLI (when installed) that it reads it, then imports it into a fresh
database in a separate process and prints the wall time, the two passes (reading and judging
outside any transaction; the one write transaction, which is what a running server's writers
wait for on SQLite) and the import process's peak RSS above its start (Django loaded).
Bounded in count and time; no network but the database.
"""

from __future__ import annotations

import argparse
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
from harness import ROOT, log, machine_info, migrate, postgres_admin, project_env
from reference import REF_VENV_DEFAULT

sys.path.insert(0, str(ROOT))
from tests.folder.sample import write_reference_channel

# Runs in its own process, so that its peak RSS is the import's.
HELPER = r"""
import json, resource, sys, time
from contextlib import contextmanager
import django
django.setup()
from agentchat.folder import load
from channels_app.models import Message

times = {}
real = load.write_atomic

@contextmanager
def timed():
    start = time.perf_counter()
    with real():
        yield
    times["transaction_s"] = time.perf_counter() - start

load.write_atomic = timed
base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
done = load.folder_import(root=__import__("pathlib").Path(sys.argv[1]))
times["total_s"] = time.perf_counter() - start
times["plan_s"] = times["total_s"] - times["transaction_s"]
times["messages"] = Message.objects.count()
times["base_rss_mb"] = base_kb / 1024
times["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(times))
"""


def reference_reads(root: Path, channel: str) -> str | None:
    """The reference's ``peek -n 1`` of the folder: its last message's ``seq:`` line."""
    cli = (
        Path(os.environ.get("AGENTCHAT_REFERENCE_VENV") or REF_VENV_DEFAULT) / "bin" / "agent-chat"
    )
    if not cli.exists():
        return None
    run = subprocess.run(
        [str(cli), "--root", str(root), "peek", channel, "-n", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    seqs = [line for line in run.stdout.splitlines() if line.startswith("seq: ")]
    return seqs[-1] if run.returncode == 0 and seqs else run.stderr.strip()


def one(size: int, database_url: str | None) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-import-"))
    try:
        root = tmp / "root"
        start = time.perf_counter()
        write_reference_channel(root, "bulk", size)
        written = time.perf_counter() - start
        seen = reference_reads(root, "bulk")
        env = project_env(tmp, database_url)
        if database_url:
            name = database_url.rsplit("/", 1)[1]
            server = database_url.rsplit("/", 1)[0]
            postgres_admin(server, f'DROP DATABASE IF EXISTS "{name}"')
            postgres_admin(server, f'CREATE DATABASE "{name}"')
        migrate(env)
        run = subprocess.run(
            [sys.executable, "-c", HELPER, str(root)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if run.returncode != 0:
            raise SystemExit(run.stderr)
        result = json.loads(run.stdout.strip().splitlines()[-1])
        result.update(size=size, write_folder_s=written, reference_last=seen)
        return result
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--messages", type=int, nargs="+", default=[10_000])
    parser.add_argument("--database-url", help="a PostgreSQL URL (its database is recreated)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = []
    for size in args.messages:
        log(f"importing a reference folder of {size} messages")
        result = one(size, args.database_url)
        results.append(result)
        print(
            f"{size:>7} messages: import {result['total_s']:.2f} s "
            f"(read+judge {result['plan_s']:.2f} s, write transaction "
            f"{result['transaction_s']:.2f} s), {size / result['total_s']:.0f} messages/s, "
            f"peak RSS {result['peak_rss_mb']:.0f} MB (start {result['base_rss_mb']:.0f} MB); "
            f"reference reads it: {result['reference_last']!r}"
        )
    if args.json:
        args.json.write_text(json.dumps({"machine": machine_info(), "results": results}, indent=2))


if __name__ == "__main__":
    main()
