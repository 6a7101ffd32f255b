"""The CLI's path lock commands: lock, check, unlock, recover, recover-pending."""

from __future__ import annotations

import argparse
import json
from typing import Any

from agentchat.client import ops, shapes
from agentchat.client.api import Client
from agentchat.client.safe import line
from agentchat.client.verbs import answer_out, chan, check_as, duration, out, out_json

# A recovery's answer names who held the lock before and why it was taken over.
RECOVERED = {
    **shapes.LOCK,
    "previous_owner": shapes.TEXT,
    "recovery_reason": shapes.TEXT,
}


def cmd_lock(client: Client, args: argparse.Namespace) -> None:
    check_as(client, args.owner)
    body = {"paths": args.paths, "lease_seconds": duration(args.lease_seconds)}
    answer = client.request(
        "POST", chan(args) + "locks/", json=body, raw=args.json, expect=shapes.LOCK
    )
    answer_out(args, answer, lambda a: _locked_line(a, args.channel))


def _locked_line(answer: dict[str, Any], channel: str) -> str:
    paths = ", ".join(entry["normalized_path"] for entry in answer["paths"])
    return f"locked {line(answer['lock_id'])} -> {line(channel)}/{line(paths)}\n"


def cmd_check(client: Client, args: argparse.Namespace) -> None:
    check_as(client, args.owner)
    answer = client.request(
        "POST",
        chan(args) + "locks/check/",
        json={"paths": args.paths},
        raw=args.json,
        expect=shapes.CHECK,
    )
    if args.json:
        return out_json(answer)
    if not answer["conflicts"]:
        return out("available\n")
    for record in answer["conflicts"]:
        out(
            f"locked {line(record['lock_id'])} owner={line(record['owner'])} "
            f"expires={line(record['expires_at'])}\n"
        )


def cmd_unlock(client: Client, args: argparse.Namespace) -> None:
    check_as(client, args.owner)
    where = chan(args) + "locks/"
    fence = {} if args.fence is None else {"fence": str(args.fence)}
    answer = ops.lock_target(
        args.target,
        lambda lock_id: client.request(
            "DELETE", f"{where}{lock_id}/", params=fence or None, raw=True, expect=shapes.LOCK
        ),
        lambda path: client.request(
            "DELETE", where, params={"path": path, **fence}, raw=True, expect=shapes.LOCK
        ),
    )
    answer_out(
        args,
        answer,
        lambda a: f"unlocked {line(json.loads(a)['lock_id'])} from {line(args.channel)}\n",
    )


def cmd_recover(client: Client, args: argparse.Namespace) -> None:
    check_as(client, args.owner)
    where = chan(args) + "locks/"
    body = {"reason": args.reason, "lease_seconds": duration(args.lease_seconds)}
    answer = ops.lock_target(
        args.target,
        lambda lock_id: client.request(
            "POST", f"{where}{lock_id}/recover/", json=body, raw=args.json, expect=RECOVERED
        ),
        lambda path: client.request(
            "POST",
            f"{where}recover/",
            json={"path": path, **body},
            raw=args.json,
            expect=RECOVERED,
        ),
    )
    answer_out(args, answer, _recovered_line)


def _recovered_line(answer: dict[str, Any]) -> str:
    return (
        f"recovered {line(answer['lock_id'])} for {line(answer['owner'])} "
        f"previous_owner={line(answer['previous_owner'])} "
        f"reason={line(answer['recovery_reason'])}\n"
    )


def cmd_recover_pending(client: Client, args: argparse.Namespace) -> None:
    # A server's lock mutations are single transactions: nothing is ever pending. The
    # reference says so in these words when its folder holds no transaction either.
    check_as(client, args.actor)
    client.request("GET", chan(args), expect=shapes.CHANNEL)
    out(f"recovered pending path-lock transaction in {line(args.channel)}\n")
