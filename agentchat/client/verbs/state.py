"""The CLI's state, compaction and event commands."""

from __future__ import annotations

import argparse
import json
from typing import Any

from agentchat.client import ops, shapes, text
from agentchat.client.api import Client
from agentchat.client.errors import ClientError
from agentchat.client.safe import line
from agentchat.client.verbs import answer_out, chan, check_as, dump, out, out_json, values


def _no_audit(args: argparse.Namespace) -> None:
    if args.no_audit:
        raise ClientError(
            "USAGE", "--no-audit: a server always posts the state.compacted audit message"
        )


def _compact(client: Client, args: argparse.Namespace) -> Any:
    _no_audit(args)
    check_as(client, args.actor)
    return client.request(
        "POST",
        chan(args) + "compact/",
        json={"strict": args.strict},
        raw=True,
        expect=shapes.COMPACT,
    )


def cmd_state(client: Client, args: argparse.Namespace) -> None:
    if args.write:
        return answer_out(args, _compact(client, args), lambda a: _compacted(args) + "\n")
    check_as(client, args.actor)
    params = {"strict": "true"} if args.strict else {}
    if args.json:
        return out_json(
            client.request("GET", chan(args) + "state/", params=params, raw=True, expect=dict)
        )
    params["format"] = "md"
    # The Markdown must arrive as text: a JSON answer (parsed as such) is BAD_RESPONSE.
    summary = client.request(
        "GET", chan(args) + "state/", params=params, accept="text/markdown", expect=shapes.TEXT
    )
    out(summary or "")


def cmd_compact(client: Client, args: argparse.Namespace) -> None:
    answer_out(args, _compact(client, args), lambda a: _compacted(args, json.loads(a)) + "\n")


def _compacted(args: argparse.Namespace, counts: dict[str, Any] | None = None) -> str:
    """The reference's line for a compaction, with its counts when ``counts`` is given."""
    done = f"compacted state for {line(args.channel)} -> {line(args.channel)}/state.md"
    if counts is None:
        return done
    return (
        f"{done} (open_tasks={counts['open_tasks_count']}, locks={counts['path_locks_count']}, "
        f"decisions={counts['decisions_count']})"
    )


def cmd_event_post(client: Client, args: argparse.Namespace) -> None:
    check_as(client, args.sender)
    body: dict[str, Any] = {"type": args.event_type, "harness": args.harness}
    if args.event_type == "capability":
        if args.primitives:
            body["primitives"] = values(args.primitives)
    else:
        body["status"] = args.status
        if args.detail is not None:
            body["detail"] = args.detail
    answer = client.request(
        "POST", chan(args) + "events/", json=body, raw=args.json, expect=shapes.EVENT_POSTED
    )
    answer_out(
        args,
        answer,
        lambda a: f"posted event {line(a['event']['event'])} -> {line(args.channel)}\n",
    )


def cmd_event_read(client: Client, args: argparse.Namespace) -> None:
    path = chan(args) + "events/"
    # From the start: without `after` the server answers the last page, and paging forward from
    # there would leave out every earlier event.
    query: dict[str, Any] = {"type": args.event_type, "limit": 1000, "after": 0}
    events: list[dict[str, Any]] = []
    while True:
        body = client.request("GET", path, params=query, expect=shapes.EVENTS)
        for item in body["events"]:
            if args.json:
                events.append(item)
            else:
                out(text.event_line(item["event"]))
        if not body.get("more") or not body["events"]:
            break
        if body["events"][-1]["seq"] <= query.get("after", 0):
            raise ops.stalled(path)
        query["after"] = body["events"][-1]["seq"]
    if args.json:
        dump({"events": events, "more": False})
