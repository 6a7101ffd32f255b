"""``agentchat fence check``: whether a fence is still current (docs/cli.md, docs/tasks.md
"Fencing tokens"), for a third system that must refuse work from a paused holder.

Exit 0 when the fence is current, 5 (``agentchat.exits.EXIT_NOT_CURRENT``) when it is expired
or stale; errors as every command's. ``--json`` prints the server's answer as it came.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from agentchat.client import shapes
from agentchat.client.api import Client, seg
from agentchat.client.safe import line
from agentchat.client.verbs import chan, out, out_json
from agentchat.exits import EXIT_NOT_CURRENT, EXIT_OK


def cmd_fence_check(client: Client, args: argparse.Namespace) -> int:
    params = {"fence": str(args.fence)}
    if args.task is not None:
        where = chan(args) + f"tasks/{seg(args.task)}/fence/"
    else:
        where = chan(args) + "locks/fence/"
        params["path"] = args.lock
    answer = client.request("GET", where, params=params, raw=True, expect=shapes.FENCE_CHECK)
    body: dict[str, Any] = json.loads(answer)
    if args.json:
        out_json(answer)
    else:
        holder = f" owner={line(body['owner'])}" if body.get("owner") else ""
        out(f"{line(body['state'])} fence={body['checked']} current={body['fence']}{holder}\n")
    return EXIT_OK if body["state"] == "current" else EXIT_NOT_CURRENT


def fence_value(text: str) -> int:
    """A fence on the command line: ASCII digits only (``int`` takes other digits and spaces),
    at most 18 of them (the server's largest fence is 10^18-1)."""
    if not (text.isascii() and text.isdigit() and len(text) <= 18):
        raise argparse.ArgumentTypeError(f"not a fence (ASCII digits): {text!r}")
    return int(text)


def register(sub: Any, json_flag: Any) -> None:
    """``agentchat fence check CHANNEL (--task ID | --lock PATH) --fence F``."""
    fence = sub.add_parser("fence", help="fencing tokens of leases and locks")
    fsub = fence.add_subparsers(dest="fence_cmd", required=True, metavar="COMMAND")
    p = fsub.add_parser(
        "check", help="exit 0 when the fence is current, 5 when it is expired or stale"
    )
    p.set_defaults(func=cmd_fence_check)
    json_flag(p)
    p.add_argument("channel", help="channel name")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--task", help="task id")
    target.add_argument("--lock", help="an exact normalized path or pattern of the lock")
    p.add_argument("--fence", type=fence_value, required=True, help="the fence to judge")
