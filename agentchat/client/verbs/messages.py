"""The CLI's channel and message commands: init, channels, roster, post, read, wait, peek and
claim (REFERENCE-CLI §2), their output lines the reference's."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable
from itertools import takewhile
from pathlib import PurePosixPath
from typing import Any

from agentchat.client import ops, shapes, text
from agentchat.client.api import Client, message_id, seg
from agentchat.client.errors import EXIT_USAGE, ClientError
from agentchat.client.safe import line
from agentchat.client.verbs import answer_out, chan, check_as, dump, err, out, out_json, values

BODY_MAX_BYTES = 768 * 1024
PEEK_LIMIT = 1000  # the server's largest peek page
MARKER = re.compile(r"task-[A-Za-z0-9][A-Za-z0-9_-]*\.md", re.ASCII)


def cmd_init(client: Client, args: argparse.Namespace) -> None:
    members = values([args.members] if args.members else [])
    body: dict[str, Any] = {"name": args.channel, "topic": args.topic or "", "members": members}
    if args.visibility:
        body["visibility"] = args.visibility
    answer = client.request("POST", "channels/", json=body, raw=args.json, expect=shapes.CHANNEL)
    if args.json:
        return out_json(answer)
    shown = ", ".join(members) if members else "(open)"
    page = f"{client.url}/c/{seg(args.channel)}/"
    out(f"created channel '{line(args.channel)}' at {page}  members={line(shown)}\n")


def cmd_channels(client: Client, args: argparse.Namespace) -> None:
    channels = list(ops.pages(client, "channels/", "channels", shape=shapes.CHANNELS))
    if args.json:
        return dump({"channels": channels, "more": False})
    if not channels:
        return out(f"(no channels yet on {client.url})\n")
    rows = []
    for channel in channels:
        last = None
        if channel.get("last_seq"):
            peek = client.request(
                "GET",
                f"channels/{seg(channel['name'])}/messages/",
                params={"limit": 1},
                expect=shapes.PEEK,
            )
            last = peek["messages"][-1] if peek["messages"] else None
        rows.append((channel, last))
    out(text.channels_table(rows))


def cmd_roster(client: Client, args: argparse.Namespace) -> None:
    answer = client.request("GET", chan(args), raw=args.json, expect=shapes.CHANNEL)
    if args.json:
        return out_json(answer)
    out(f"channel : {line(answer['name'])}\n")
    out(f"topic   : {line(answer.get('topic') or '(none)')}\n")
    out(f"members : {line(', '.join(answer.get('members') or []) or '(open)')}\n")
    out(f"messages: {answer.get('last_seq') or 0}\n")


def _body(args: argparse.Namespace) -> str:
    if args.body is not None:
        body: str = args.body
        return body
    if args.body_file is not None and args.body_file != "-":
        try:
            with open(args.body_file, "rb") as handle:
                raw = handle.read(BODY_MAX_BYTES + 1)
        except OSError as exc:
            raise ClientError("BODY_UNREADABLE", f"could not read body file: {exc}") from exc
        return _decoded(raw, f"body file {args.body_file}")
    if sys.stdin is None:
        raise ClientError("BODY_EMPTY", "empty body (pass --body, --body-file, or pipe via stdin)")
    if sys.stdin.isatty():
        err("agentchat: Enter message body; press Ctrl-D to finish.")
    try:
        raw = sys.stdin.buffer.read(BODY_MAX_BYTES + 1)
    except OSError as exc:
        raise ClientError("BODY_UNREADABLE", f"could not read body from stdin: {exc}") from exc
    data = _decoded(raw, "stdin")
    if not data.strip():
        raise ClientError("BODY_EMPTY", "empty body (pass --body, --body-file, or pipe via stdin)")
    return data


def _decoded(raw: bytes, where: str) -> str:
    if len(raw) > BODY_MAX_BYTES:
        raise ClientError(
            "FIELD_TOO_LARGE", f"the body from {where} is over {BODY_MAX_BYTES} bytes"
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ClientError("BODY_UNREADABLE", f"could not read {where} as UTF-8: {exc}") from exc


def _recipients(to: str | None) -> list[str]:
    if to is None:
        return []
    names = [name.strip() for name in to.strip().strip("[]").split(",") if name.strip()]
    return [] if names in ([], ["all"], ["*"]) else names


def cmd_post(client: Client, args: argparse.Namespace) -> None:
    payload: dict[str, Any] = {
        "id": message_id(),  # sent again with the post after a dropped answer: stored once
        "title": args.title,
        "body": _body(args),
        "to": _recipients(args.to),
        "status": args.status,
    }
    if args.sender is not None:
        payload["from"] = args.sender
    if args.reply is not None:
        payload["reply_to"] = args.reply
    answer = client.request(
        "POST",
        chan(args) + "messages/",
        json=payload,
        raw=args.json,
        expect=shapes.MESSAGE,
        retry=True,
    )
    answer_out(
        args,
        answer,
        lambda a: f"posted #{a['seq']} -> {line(args.channel)}/{text.message_file_name(a)}\n",
    )


def cmd_read(client: Client, args: argparse.Namespace) -> None:
    agent = ops.identity(client, args.agent)
    start = (
        0
        if args.all
        else client.request(
            "GET", chan(args) + "messages/", params={"limit": 1}, expect=shapes.PEEK
        )["cursor"]
    )
    shown: list[dict[str, Any]] = []
    if args.all or args.peek:
        top = start
        for message in ops.peek_after(client, args.channel, start):
            top = max(top, message["seq"])
            if args.all or ops.relevant(message, agent):
                _show(args, message, shown)
        cursor = start
        if not args.peek:
            cursor = client.request(
                "POST", chan(args) + "ack/", json={"seq": top}, expect=shapes.CURSOR
            )["cursor"]
    else:
        cursor, moved = start, True
        while True:
            try:
                if not moved:  # more, says the server, but the cursor stood still
                    raise ops.stalled(chan(args) + "read/")
                page = client.request("POST", chan(args) + "read/", expect=shapes.READ)
            except ClientError:
                # The pages before moved the cursor past what they held: printed already, or
                # with --json printed now (more: true) before the error is told.
                if args.json and shown:
                    dump({"messages": shown, "cursor": cursor, "more": True})
                raise
            for message in page["messages"]:
                _show(args, message, shown)
            moved, cursor = page["cursor"] > cursor, page["cursor"]
            if not page.get("more"):
                break
    if args.json:
        return dump({"messages": shown, "cursor": cursor, "more": False})
    if not shown:
        out(f"(no new messages for {line(agent)} in '{line(args.channel)}'; cursor at #{start})\n")


def _show(args: argparse.Namespace, message: dict[str, Any], shown: list[dict[str, Any]]) -> None:
    if args.json:
        shown.append(message)
    else:
        shown.append({"seq": message["seq"]})  # only counted
        out(text.message_block(message))
        sys.stdout.flush()


def cmd_wait(client: Client, args: argparse.Namespace) -> int:
    agent = ops.identity(client, args.agent)
    delivered: list[dict[str, Any]] = []

    def deliver(messages: list[dict[str, Any]]) -> None:
        if args.json:
            delivered.extend(messages)
            return
        for message in messages:
            out(text.message_block(message))
        sys.stdout.flush()

    try:
        cursor = ops.wait_relevant(
            client, args.channel, agent, timeout=args.timeout, deliver=deliver
        )
    except ops.WaitTimeout:
        if args.json:
            dump({"messages": [], "more": False, "timed_out": True})
        err(f"(timeout after {args.timeout}s: no new messages for {agent} in '{args.channel}')")
        return EXIT_USAGE
    if args.json:
        dump({"messages": delivered, "cursor": cursor, "more": False})
    return 0


def cmd_peek(client: Client, args: argparse.Namespace) -> None:
    path = chan(args) + "messages/"
    if args.n <= 0:
        client.request("GET", path, params={"limit": 1}, expect=shapes.PEEK)  # it must exist
        return dump({"messages": []}) if args.json else None
    limit = args.n if args.n <= PEEK_LIMIT else 1
    page = client.request("GET", path, params={"limit": limit}, expect=shapes.PEEK)
    messages: Iterable[dict[str, Any]] = page["messages"]
    if page["more"] and 0 < len(page["messages"]) < args.n:
        # Earlier ones left out (past one page, or the server's byte budget cut it): from the
        # seq n before the last, a page at a time, printed as read.
        top = page["messages"][-1]["seq"]
        pages = ops.peek_after(client, args.channel, max(0, top - args.n))
        messages = takewhile(lambda m: m["seq"] <= top, pages)
    if args.json:
        return dump({"messages": list(messages)})
    shown = 0
    for message in messages:
        out(text.message_block(message))
        shown += 1
    if not shown:
        out(f"(channel '{line(args.channel)}' is empty)\n")


def cmd_claim(client: Client, args: argparse.Namespace) -> None:
    marker = args.task
    if not MARKER.fullmatch(marker):
        raise ClientError(
            "INVALID_NAME", f"invalid task name (expected task-<id>.md marker): {marker!r}"
        )
    check_as(client, args.agent)
    answer = client.request(
        "POST", chan(args) + f"claims/{seg(marker)}/", raw=args.json, expect=shapes.CLAIM
    )
    if args.json:
        return out_json(answer)
    claimed = f"{PurePosixPath(marker).stem}.CLAIMED-{text.slug(answer['owner'])}.md"
    out(f"claimed {marker} -> {claimed}\n")
