"""The CLI's task commands (``agentchat task …``): tasks under leases, the reference's lines."""

from __future__ import annotations

import argparse
from typing import Any

from agentchat.client import ops, shapes, text
from agentchat.client.api import Client, seg
from agentchat.client.safe import line
from agentchat.client.verbs import (
    Command,
    answer_out,
    chan,
    check_as,
    dump,
    duration,
    out,
    values,
)


def _task_path(args: argparse.Namespace, action: str = "") -> str:
    return chan(args) + f"tasks/{seg(args.task_id)}/" + (f"{action}/" if action else "")


def _task_done(args: argparse.Namespace, verb: str, answer: Any) -> None:
    """The reference's line, to the letter (scripts match it); the lease's fence is in --json."""
    answer_out(args, answer, lambda a: f"{verb} task {line(a['id'])} [{line(a['status'])}]\n")


def cmd_task_create(client: Client, args: argparse.Namespace) -> None:
    body: dict[str, Any] = {"id": args.task_id, "title": args.title}
    if args.creator is not None:
        body["created_by"] = args.creator
    if args.owner:
        body["owner"] = args.owner
    for field in ("depends_on", "files_hint", "acceptance"):
        if items := values(getattr(args, field)):
            body[field] = items
    if args.branch is not None:
        body["branch"] = args.branch
    answer = client.request(
        "POST", chan(args) + "tasks/", json=body, raw=args.json, expect=shapes.TASK
    )
    _task_done(args, "created", answer)


def cmd_task_list(client: Client, args: argparse.Namespace) -> None:
    params = {"status": args.status, "owner": args.owner}
    tasks = list(ops.pages(client, chan(args) + "tasks/", "tasks", params, shape=shapes.TASKS))
    if args.json:
        return dump({"tasks": tasks, "more": False})
    out(text.task_table(tasks))


def cmd_task_show(client: Client, args: argparse.Namespace) -> None:
    answer = client.request("GET", _task_path(args), raw=args.json, expect=shapes.TASK)
    answer_out(args, answer, text.task_show)


def cmd_task_update(client: Client, args: argparse.Namespace) -> None:
    check_as(client, args.actor)
    raw = vars(args)
    body: dict[str, Any] = {
        field: raw[field] for field in ("title", "owner", "branch", "status") if field in raw
    }
    for field in ("depends_on", "files_hint", "acceptance"):
        if field in raw:
            body[field] = values(raw[field])
    if args.clear_owner:
        body.pop("owner", None)
        body["clear_owner"] = True
    if args.clear_branch:
        body.pop("branch", None)
        body["clear_branch"] = True
    answer = client.request("PATCH", _task_path(args), json=body, raw=args.json, expect=shapes.TASK)
    _task_done(args, "updated", answer)


def _task_action(action: str, verb: str, *, lease: bool = False, reason: bool = False) -> Command:
    def run(client: Client, args: argparse.Namespace) -> None:
        check_as(client, args.actor)
        body: dict[str, Any] = {}
        if lease:
            body["lease_seconds"] = duration(args.lease_seconds)
        if reason:
            body["reason"] = args.reason
        if getattr(args, "fence", None) is not None:
            body["fence"] = args.fence
        answer = client.request(
            "POST", _task_path(args, action), json=body, raw=args.json, expect=shapes.TASK
        )
        _task_done(args, verb, answer)

    return run


def cmd_task_recover_pending(client: Client, args: argparse.Namespace) -> None:
    check_as(client, args.actor)
    client.request("POST", chan(args) + "tasks/recover-pending/", json={})
    out(
        f"recovered pending lease transaction in {line(args.channel)}\n"
    )  # never: nothing is pending
