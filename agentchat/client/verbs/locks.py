"""The CLI's path lock commands: lock, check, unlock, recover, recover-pending."""

from __future__ import annotations

import argparse
import json

from agentchat.client import shapes
from agentchat.client.api import Client
from agentchat.client.errors import ClientError
from agentchat.client.safe import line
from agentchat.client.verbs import chan, check_as, duration, out, out_json

LOCK_ID_LENGTH = 32
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
    if args.json:
        return out_json(answer)
    paths = ", ".join(entry["normalized_path"] for entry in answer["paths"])
    out(f"locked {line(answer['lock_id'])} -> {line(args.channel)}/{line(paths)}\n")


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


def _looks_like_lock_id(target: str) -> bool:
    return len(target) == LOCK_ID_LENGTH and all(ch in "0123456789abcdef" for ch in target)


def _simple_norm(path: str) -> str:
    return "/".join(part for part in path.split("/") if part not in ("", ".")) or "."


def _lock_of(client: Client, args: argparse.Namespace) -> str:
    """The lock id a target names: a lock id, else the one lock holding that exact path."""
    if _looks_like_lock_id(args.target):
        try:
            client.request("GET", chan(args) + f"locks/{args.target}/", expect=shapes.LOCK)
            target: str = args.target
            return target
        except ClientError as error:
            if error.code != "PATH_LOCK_NOT_FOUND":
                raise
    wanted = _simple_norm(args.target)
    answer = client.request(
        "POST", chan(args) + "locks/check/", json={"paths": [args.target]}, expect=shapes.CHECK
    )
    ids = [
        record["lock_id"]
        for record in answer["conflicts"]
        if any(entry["normalized_path"] == wanted for entry in record["paths"])
    ]
    if not ids:
        raise ClientError("PATH_LOCK_NOT_FOUND", f"lock record does not exist: {args.target}")
    if len(ids) > 1:
        raise ClientError(
            "PATH_LOCK_CONFLICT",
            f"path target matches multiple lock records: {args.target}",
            {"lock_ids": ids},
        )
    lock_id: str = ids[0]
    return lock_id


def cmd_unlock(client: Client, args: argparse.Namespace) -> None:
    check_as(client, args.owner)
    if _looks_like_lock_id(args.target):
        try:
            answer = client.request(
                "DELETE", chan(args) + f"locks/{args.target}/", raw=True, expect=shapes.LOCK
            )
        except ClientError as error:
            if error.code != "PATH_LOCK_NOT_FOUND":
                raise
            answer = None
    else:
        answer = None
    if answer is None:
        answer = client.request(
            "DELETE",
            chan(args) + "locks/",
            params={"path": args.target},
            raw=True,
            expect=shapes.LOCK,
        )
    if args.json:
        return out_json(answer)
    out(f"unlocked {line(json.loads(answer)['lock_id'])} from {line(args.channel)}\n")


def cmd_recover(client: Client, args: argparse.Namespace) -> None:
    check_as(client, args.owner)
    lock_id = _lock_of(client, args)
    body = {"reason": args.reason, "lease_seconds": duration(args.lease_seconds)}
    answer = client.request(
        "POST", chan(args) + f"locks/{lock_id}/recover/", json=body, raw=args.json, expect=RECOVERED
    )
    if args.json:
        return out_json(answer)
    out(
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
