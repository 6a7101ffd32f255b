"""Idle websocket subscribers: server memory while subscribers stop reading.

    .venv/bin/python bench/bench_idle_subscribers.py [--subscribers 4] [--backlog-mb 30]
        [--posts 2000] [--json PATH]

Starts a server on a throwaway SQLite database (as bench_core.py does) with a channel holding
``--backlog-mb`` of messages, opens ``--subscribers`` websockets with ``?since=0`` that finish
the handshake and then never read (a receive buffer of 16 KiB), and posts ``--posts`` more
messages while sampling the server's RSS every half second. Then it opens one subscriber that
reads, with ``?since=0``, and checks it gets every message once, in order. Prints the RSS
samples, when each idle subscriber was closed by the server, and the verdict. Figures only:
never asserted in tests.

Before the stream had flow control each idle subscriber cost about the size of the backlog
(the whole replay was queued in its connection); now the server sends only while the
connection drains, and closes one that stays full for AGENTCHAT_STREAM_STALL_SECONDS.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import (
    ROOT,
    Server,
    channel_create,
    create_tokens,
    migrate,
    proc_rss_mb,
    project_env,
    raise_nofile,
)
from rawhttp import RawHttp


def fill(env: dict[str, str], channel: str, megabytes: float, body_bytes: int) -> int:
    """Fill ``channel`` through the ORM in a child process; returns the number of messages."""
    count = max(1, int(megabytes * 1024 * 1024 // body_bytes))
    code = f"""
import uuid
from django.db import connection, transaction
from django.utils import timezone
from channels_app.models import Channel, Message
from channels_app.records import message_json_size
channel = Channel.objects.get(name={channel!r})
with transaction.atomic():
    with connection.cursor() as cursor:
        table = Channel._meta.db_table
        cursor.execute(f"UPDATE {{table}} SET last_seq = %s WHERE id = %s", [{count}, channel.pk])
    for start in range(1, {count} + 1, 50):
        rows = [
            Message(
                id=f"msg_{{uuid.uuid4().hex}}", channel=channel, seq=seq, sender="poster",
                to=[], recipients="", ts=timezone.now(), title=f"backlog {{seq}}",
                body="b" * {body_bytes},
            )
            for seq in range(start, min(start + 50, {count} + 1))
        ]
        for row in rows:
            row.json_size = message_json_size(row)
        Message.objects.bulk_create(rows)
"""
    subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env, check=True
    )
    return count


def idle_subscriber(port: int, channel: str, token: str) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.connect(("127.0.0.1", port))
    sock.sendall(
        (
            f"GET /ws/channels/{channel}/?since=0&token={token} HTTP/1.1\r\n"
            f"Host: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    status = sock.recv(12)
    if status != b"HTTP/1.1 101":
        raise RuntimeError(f"handshake refused: {status!r}")
    return sock  # and never read again


def tcp_established(sock: socket.socket) -> bool:
    return struct.unpack("B", sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1))[0] == 1


async def post_and_sample(
    server: Server,
    token: str,
    channel: str,
    posts: int,
    idle: list[socket.socket],
    linger: float,
) -> tuple[list[dict[str, Any]], dict[int, float]]:
    """Post, sampling RSS and which idle subscribers the server closed; then go on sampling for
    up to ``linger`` seconds until the server has closed every idle subscriber."""
    samples: list[dict[str, Any]] = []
    closed: dict[int, float] = {}
    started = time.monotonic()
    done = asyncio.Event()

    async def sample() -> None:
        while not done.is_set():
            now = round(time.monotonic() - started, 1)
            for index, sock in enumerate(idle):
                if index not in closed and not tcp_established(sock):
                    closed[index] = now
            samples.append({"t_s": now, "rss_mb": proc_rss_mb(server.pid)})
            await asyncio.sleep(0.5)

    sampler = asyncio.ensure_future(sample())
    async with RawHttp(server.url, token) as http:
        for i in range(posts):
            status, _ = await http.request(
                "POST", f"/api/v1/channels/{channel}/messages/", {"title": f"live {i}"}
            )
            if status != 201:
                raise RuntimeError(f"post {i}: {status}")
    deadline = time.monotonic() + linger
    while len(closed) < len(idle) and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
    await asyncio.sleep(1.0)  # one more sample
    done.set()
    await sampler
    return samples, closed


async def read_everything(server: Server, channel: str, token: str, expected: int) -> list[int]:
    import websockets

    seqs: list[int] = []
    url = f"{server.ws_url}/ws/channels/{channel}/?since=0&token={token}"
    async with websockets.connect(url, max_size=None) as ws:
        while len(seqs) < expected:
            seqs.append(json.loads(await asyncio.wait_for(ws.recv(), 60))["message"]["seq"])
    return seqs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subscribers", type=int, default=4)
    parser.add_argument("--backlog-mb", type=float, default=30.0)
    parser.add_argument("--body-kb", type=int, default=50)
    parser.add_argument("--posts", type=int, default=2000)
    parser.add_argument("--stall-seconds", type=float, default=None)
    parser.add_argument("--json", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    raise_nofile()
    tmp = Path(tempfile.mkdtemp(prefix="agentchat-idle-"))
    try:
        env = project_env(tmp)  # SQLite in tmp/db.sqlite3, the in-memory layer
        if args.stall_seconds is not None:
            env["AGENTCHAT_STREAM_STALL_SECONDS"] = str(args.stall_seconds)
        migrate(env)
        names = ["poster", "reader", *(f"idle{k}" for k in range(args.subscribers))]
        tokens = create_tokens(env, names)
        server = Server(env, tmp / "server.log")
        try:
            channel_create(server.url, tokens["poster"], "big")
            backlog = fill(env, "big", args.backlog_mb, args.body_kb * 1024)
            rss_start = proc_rss_mb(server.pid)
            idle = [
                idle_subscriber(server.port, "big", tokens[f"idle{k}"])
                for k in range(args.subscribers)
            ]
            stall = args.stall_seconds or float(env.get("AGENTCHAT_STREAM_STALL_SECONDS", 20))
            samples, closed = asyncio.run(
                post_and_sample(server, tokens["poster"], "big", args.posts, idle, stall + 15)
            )
            for sock in idle:
                sock.close()
            total = backlog + args.posts
            seqs = asyncio.run(read_everything(server, "big", tokens["reader"], total))
            rss_end = proc_rss_mb(server.pid)
        finally:
            server.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rss_max = max(s["rss_mb"] for s in samples)
    result = {
        "subscribers": args.subscribers,
        "backlog_messages": backlog,
        "backlog_mb": round(backlog * args.body_kb / 1024, 1),
        "live_posts": args.posts,
        "rss_mb_before_subscribers": rss_start,
        "rss_mb_max": rss_max,
        "rss_mb_growth_max": round(rss_max - rss_start, 1),
        "rss_mb_after_reader": rss_end,
        "idle_closed_by_server_at_s": [closed.get(k) for k in range(args.subscribers)],
        "reader_got_everything_once_in_order": seqs == list(range(1, total + 1)),
        "samples": samples,
    }
    print(
        f"{args.subscribers} idle ?since=0 subscribers on a {result['backlog_mb']} MB channel, "
        f"{args.posts} live posts:"
    )
    print(f"  server RSS before the subscribers   {rss_start:8.1f} MB")
    print(
        f"  server RSS, highest while posting   {rss_max:8.1f} MB (+{result['rss_mb_growth_max']})"
    )
    print(f"  server RSS after a full replay      {rss_end:8.1f} MB")
    print(f"  idle subscribers closed at (s)      {result['idle_closed_by_server_at_s']}")
    print(
        f"  a reading subscriber got all {total} messages once, in order: "
        f"{result['reader_got_everything_once_in_order']}"
    )
    print("  RSS samples (s: MB): " + ", ".join(f"{s['t_s']}: {s['rss_mb']}" for s in samples[::4]))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0 if result["reader_got_everything_once_in_order"] else 1


if __name__ == "__main__":
    sys.exit(main())
