"""``agentchat inbox`` and ``agentchat monitor``: HTTP v1's inbox replay and admin monitor,
and with ``--follow`` their live event streams (``agentchat.client.sse``), which reconnect by
themselves from the last delivered cursor.

Each delivery is one line: ``<seq_num> <timestamp> <from> -> <to> <kind> <text>`` (the
monitor's begin with the inbox's name); with ``--json`` the delivery's JSON as the server sent
it, one a line when following, the pages' deliveries in one body otherwise. A replay ends with
the cursor to resume from on stderr (``next cursor: N``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from agentchat.client import ops
from agentchat.client.api import Client, seg
from agentchat.client.errors import ClientError
from agentchat.client.sse import follow
from agentchat.client.verbs import err, out, out_json

ADMIN_TOKEN_ENV = "AGENT_CHAT_ADMIN_TOKEN"
PAGES_MAX = 10_000  # a replay stops after this many pages (about 1 GiB): resume from its cursor


def _line(delivery: dict[str, Any], *, monitor: bool) -> str:
    envelope = delivery.get("envelope") or {}
    message = envelope.get("message") or {}
    text = message.get("text")
    shown = (text if isinstance(text, str) else "").replace("\n", " ")
    if not shown and message.get("data") is not None:
        shown = json.dumps(message["data"], ensure_ascii=False)
    head = f"{delivery.get('inbox')} " if monitor else ""
    return (
        f"{head}{delivery.get('seq_num')} {delivery.get('timestamp')} {envelope.get('from')} -> "
        f"{envelope.get('to')} {envelope.get('kind')} {shown}\n"
    )


def _print(data: str, *, as_json: bool, monitor: bool) -> None:
    if as_json:
        out_json(data)
    else:
        out(_line(json.loads(data), monitor=monitor))
    sys.stdout.flush()


def _replay(client: Client, path: str, cursor: Any, *, as_json: bool, monitor: bool) -> int:
    deliveries: list[dict[str, Any]] = []
    page: dict[str, Any] = {}
    for _ in range(PAGES_MAX):
        page = client.request("GET", path, params={} if cursor is None else {"cursor": cursor})
        if not isinstance(page, dict) or not isinstance(page.get("deliveries"), list):
            raise ClientError("BAD_RESPONSE", f"GET {path}: no deliveries in the answer")
        for delivery in page["deliveries"]:
            if as_json:
                deliveries.append(delivery)
            else:
                out(_line(delivery, monitor=monitor))
        more = page["next_cursor"] != cursor and bool(page["deliveries"])
        cursor = page["next_cursor"]
        if not more:
            break
    if as_json:
        tails = {"tails": page.get("tails")} if monitor else {"tail": page.get("tail")}
        out_json(
            json.dumps(
                {"deliveries": deliveries, "next_cursor": cursor, **tails}, ensure_ascii=False
            )
        )
    else:
        err(f"next cursor: {cursor}")
    return 0


def cmd_inbox(client: Client, args: argparse.Namespace) -> int:
    path = f"/v1/agents/{seg(ops.me(client))}/inbox"
    cursor = None if args.cursor is None else str(args.cursor)
    if not args.follow:
        return _replay(client, path, args.cursor, as_json=args.json, monitor=False)
    for _, data in follow(client, path, cursor=cursor):
        _print(data, as_json=args.json, monitor=False)
    return 0


def cmd_monitor(client: Client, args: argparse.Namespace) -> int:
    token = os.environ.get(ADMIN_TOKEN_ENV)
    if not token:
        raise ClientError(
            "CONFIG_INVALID", f"the monitor needs the admin token: set {ADMIN_TOKEN_ENV}"
        )
    path = "/v1/monitor"
    with Client(client.url, token, call_timeout=client.call_timeout) as admin:
        if not args.follow:
            return _replay(admin, path, args.cursor, as_json=args.json, monitor=True)
        for _, data in follow(admin, path, cursor=args.cursor):
            _print(data, as_json=args.json, monitor=True)
    return 0


def register(command: Any) -> None:
    """Add ``inbox`` and ``monitor`` through the CLI's ``command(name, func, help)``."""
    p = command("inbox", cmd_inbox, "replay (or --follow) your HTTP v1 inbox")
    p.add_argument("--cursor", type=int, help="the next seq_num to read (default 0)")
    p.add_argument("--follow", action="store_true", help="stream deliveries as they arrive")
    p = command("monitor", cmd_monitor, f"the admin monitor of every inbox (${ADMIN_TOKEN_ENV})")
    p.add_argument("--cursor", help="the opaque cursor to resume from (default: every start)")
    p.add_argument("--follow", action="store_true", help="stream deliveries as they arrive")
