"""State summary benchmark: the summary and a compaction of a big channel, time and memory.

    .venv/bin/python bench/bench_state.py [--messages 100000] [--reference] [--json PATH]

On a throwaway SQLite database (``--database-url`` for PostgreSQL): fills a channel with
``--messages`` messages through the ORM (1 % each decisions, blockers and verification
evidence, the rest discussion, bodies of about 200 bytes), 200 tasks (open, leased, blocked,
done) and 20 locks, then measures in a fresh process: the summary (JSON and markdown), its peak
Python memory (tracemalloc) and the process's peak RSS, a compaction and how long it held the
write transaction, a compaction after 10 more messages and a summary after 10 more (both go
on from the stored fold of the compaction before). With ``--reference``: the channel
written as the reference's folder and ``agent-chat state`` timed on it (the same markdown is
checked). Traffic only to the local database.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))


def fill(count: int) -> dict[str, Any]:
    import uuid
    from datetime import timedelta

    from django.db import connection, transaction
    from django.utils import timezone

    from agentchat.core.identity.services import agent_get_or_create
    from agentchat.core.rules.parsed import Parsed
    from agentchat.core.rules.records import Duration
    from channels_app.models import Channel, Message
    from channels_app.records import message_json_size
    from channels_app.services import channel_create
    from locks_app.selectors import lock_paths_parse
    from locks_app.services import lock_acquire
    from tasks_app.services import lease_claim, lease_complete, task_block, task_create

    for name in ("alice", "bob", "carol"):
        agent_get_or_create(name=name)
    channel = channel_create(name="big", created_by="alice", topic="a big channel")
    filler = "lorem ipsum dolor sit amet " * 7
    kinds = {0: ("Decision: choice", "decision"), 1: ("Blocker: stuck", "blocker"),
             2: ("Verification: ran", "verified")}  # fmt: skip
    started = time.perf_counter()
    left, last = count, 0
    while left:
        n = min(10_000, left)
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(
                    f"UPDATE {Channel._meta.db_table} SET last_seq = last_seq + %s "
                    "WHERE id = %s RETURNING last_seq",
                    [n, channel.pk],
                )
                last = int(cursor.fetchone()[0])
            now = timezone.now()
            rows = []
            for seq in range(last - n + 1, last + 1):
                title, status = kinds.get(seq % 100, (f"message {seq}", "discussion"))
                row = Message(
                    id=f"msg_{uuid.uuid4().hex}",
                    channel=channel,
                    seq=seq,
                    sender=("alice", "bob", "carol")[seq % 3],
                    to=[],
                    recipients="",
                    ts=now,
                    status=status,
                    title=title,
                    body=f"{filler}#{seq}\nsecond line",
                )
                row.json_size = message_json_size(row)
                rows.append(row)
            Message.objects.bulk_create(rows)
        left -= n
    fill_s = time.perf_counter() - started
    channel.refresh_from_db()
    for i in range(200):
        task = task_create(
            channel=channel, created_by="alice", task_id=f"T-{i:04d}", title=f"task {i}"
        )
        if i % 4 == 1:
            lease_claim(
                channel=channel,
                task_id=task.task_id,
                actor="bob",
                duration=Parsed.ok(timedelta(seconds=3600)),
            )
        elif i % 4 == 2:
            task_block(channel=channel, task_id=task.task_id, actor="alice")
        elif i % 4 == 3:
            lease_claim(
                channel=channel,
                task_id=task.task_id,
                actor="carol",
                duration=Parsed.ok(timedelta(seconds=60)),
            )
            lease_complete(channel=channel, task_id=task.task_id, actor="carol")
    for i in range(20):
        lock_acquire(
            channel=channel,
            owner="carol",
            paths=lock_paths_parse([f"src/mod{i}/"]),
            lease_seconds=Duration.parse(timedelta(hours=1).total_seconds()),
        )
    return {"fill_s": round(fill_s, 2), "last_seq": Channel.objects.get(pk=channel.pk).last_seq}


def measure(reference: Path | None) -> dict[str, Any]:
    from agentchat.state import selectors, services
    from agentchat.state.markdown import state_markdown
    from channels_app.models import Channel
    from channels_app.services import message_post

    channel = Channel.objects.get(name="big")
    result: dict[str, Any] = {"messages": channel.last_seq}
    started = time.perf_counter()
    summary = selectors.state_summary(channel=channel)
    result["summary_s"] = round(time.perf_counter() - started, 2)
    started = time.perf_counter()
    markdown = state_markdown(summary)
    result["markdown_s"] = round(time.perf_counter() - started, 3)
    # Memory in a second run: tracing slows Python down several times.
    del summary
    tracemalloc.start()
    summary = selectors.state_summary(channel=channel)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    result["summary_peak_python_mb"] = round(peak / 2**20, 1)
    result["summary_bytes_json"] = len(json.dumps(summary))
    result["markdown_bytes"] = len(markdown.encode())
    result["sections"] = {k: len(summary[k]) for k in ("decisions", "blockers", "verification")}

    held: list[float] = []
    commit = services._compact_commit

    def timed_commit(**kwargs: Any) -> Any:
        begun = time.perf_counter()
        try:
            return commit(**kwargs)
        finally:
            held.append(time.perf_counter() - begun)

    services._compact_commit = timed_commit  # type: ignore[assignment]
    started = time.perf_counter()
    snapshot = services.state_compact(channel=channel, actor="alice")
    result["compact_s"] = round(time.perf_counter() - started, 2)
    result["compact_write_transaction_s"] = round(held[-1], 3)
    for i in range(10):
        message_post(channel=channel, sender="bob", title=f"Decision: late {i}", body="x")
    started = time.perf_counter()
    services.state_compact(channel=channel, actor="alice")
    result["compact_after_10_s"] = round(time.perf_counter() - started, 2)
    result["compact_after_10_write_transaction_s"] = round(held[-1], 3)
    for i in range(10):
        message_post(channel=channel, sender="carol", title=f"evidence: late {i}", body="y")
    started = time.perf_counter()
    selectors.state_summary(channel=channel)
    result["summary_after_compaction_and_10_s"] = round(time.perf_counter() - started, 2)
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)

    if reference is not None:
        from tests.folder.write import write_channel

        from tests.reference import ref

        folder_root = Path(tempfile.mkdtemp(prefix="bench-state-ref-"))
        started = time.perf_counter()
        write_channel(folder_root, Channel.objects.get(pk=channel.pk))
        result["folder_write_s"] = round(time.perf_counter() - started, 1)
        ours = state_markdown(selectors.state_summary(channel=channel))
        started = time.perf_counter()
        out = ref(folder_root, "state", "big")
        result["reference_state_s"] = round(time.perf_counter() - started, 2)
        result["reference_same_markdown"] = out.stdout == ours
        del snapshot
    return result


def child(op: str, reference: str | None) -> None:
    import django

    django.setup()
    output = (
        fill(int(op.split(":")[1]))
        if op.startswith("fill")
        else measure(Path(reference) if reference else None)
    )
    print(json.dumps(output))


def run(env: dict[str, str], *args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600, check=False,
    )  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--reference", action="store_true")
    parser.add_argument("--database-url")
    parser.add_argument("--json")
    parser.add_argument("--child")
    parser.add_argument("--ref-flag")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.ref_flag)
        return
    from harness import migrate, project_env

    with tempfile.TemporaryDirectory(prefix="bench-state-") as tmp:
        env = project_env(Path(tmp), database_url=args.database_url)
        migrate(env)
        result = {"fill": run(env, f"fill:{args.messages}")}
        extra = ["--ref-flag", "1"] if args.reference else []
        result["state"] = run(env, "measure", *extra)
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentchat.settings")
    main()
