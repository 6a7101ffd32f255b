"""``agentchat``: the reference CLI's commands over HTTP (REFERENCE-CLI §2 and §5).

``agentchat [--url URL] [--token TOKEN] COMMAND ...``. The commands, arguments, flags and
output lines are the reference's; the folder is replaced by a server (``--url``, see
``agentchat.client.config``) and the identity by the token. The identity flags (``--as``,
``--from``, ``--created-by``, ``--owner`` where it names the actor) are optional and default to
the token's agent; one naming another agent is refused with ``SENDER_MISMATCH`` (exit 1) and
nothing is done: ``post`` sends it as ``from`` and ``task create`` as ``created_by`` (the server
refuses them), every other command compares it with ``GET /api/v1/me/`` first.

Exit status: 0 success; 1 plain errors (no server, AUTH_*, CHANNEL_*, SENDER_MISMATCH,
PATH_LOCK_*, STATE_*); 2 usage errors, TASK_*, LEASE_*, EVENT_* and a wait that timed out;
3 a lost marker claim; 130 Ctrl-C. Errors are one stderr line, ``agentchat: CODE: message``.
``--json`` prints the REST body as the server sent it (a list that takes several pages: its
items in one body).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import PurePosixPath
from typing import Any, NoReturn

from agentchat.client import extra_commands, ops, text
from agentchat.client.api import Client, seg
from agentchat.client.config import config_load
from agentchat.client.errors import EXIT_INTERRUPTED, EXIT_USAGE, ClientError

BODY_MAX_BYTES = 768 * 1024
EVENT_TYPES = ("capability", "status")
EVENT_STATUSES = ("ready", "busy", "idle", "blocked", "stopped")
LOCK_ID_LENGTH = 32
PEEK_LIMIT = 1000  # the server's largest peek page
MARKER = re.compile(r"task-[A-Za-z0-9][A-Za-z0-9_-]*\.md", re.ASCII)

Command = Callable[[Client, argparse.Namespace], int | None]


def out(chunk: str) -> None:
    sys.stdout.write(chunk)


def chan(args: argparse.Namespace) -> str:
    return f"channels/{seg(args.channel)}/"


def values(items: Sequence[str] | None) -> list[str]:
    """A repeatable option's values, each split on ``,``, blanks dropped (as the reference)."""
    return [part.strip() for item in items or [] for part in item.split(",") if part.strip()]


def duration(value: float) -> float | str:
    """A duration as sent: a number, or the text of one JSON cannot carry (NaN, infinities),
    which the server refuses with its *_INVALID_DURATION code."""
    return value if math.isfinite(value) else str(value)


def check_as(client: Client, claimed: str | None) -> None:
    if claimed is not None:
        ops.identity(client, claimed)


def dump(body: Any) -> None:
    out(json.dumps(body, ensure_ascii=False) + "\n")


# --- channels and messages ------------------------------------------------------------------


def cmd_init(client: Client, args: argparse.Namespace) -> None:
    members = values([args.members] if args.members else [])
    body: dict[str, Any] = {"name": args.channel, "topic": args.topic or "", "members": members}
    if args.visibility:
        body["visibility"] = args.visibility
    answer = client.request("POST", "channels/", json=body, raw=args.json)
    if args.json:
        return out(answer + "\n")
    shown = ", ".join(members) if members else "(open)"
    page = f"{client.url}/c/{seg(args.channel)}/"
    out(f"created channel '{args.channel}' at {page}  members={shown}\n")


def cmd_channels(client: Client, args: argparse.Namespace) -> None:
    channels = list(ops.pages(client, "channels/", "channels"))
    if args.json:
        return dump({"channels": channels, "more": False})
    if not channels:
        return out(f"(no channels yet on {client.url})\n")
    rows = []
    for channel in channels:
        last = None
        if channel.get("last_seq"):
            peek = client.request(
                "GET", f"channels/{seg(channel['name'])}/messages/", params={"limit": 1}
            )
            last = peek["messages"][-1] if peek["messages"] else None
        rows.append((channel, last))
    out(text.channels_table(rows))


def cmd_roster(client: Client, args: argparse.Namespace) -> None:
    answer = client.request("GET", chan(args), raw=args.json)
    if args.json:
        return out(answer + "\n")
    out(f"channel : {answer['name']}\n")
    out(f"topic   : {answer.get('topic') or '(none)'}\n")
    out(f"members : {', '.join(answer.get('members') or []) or '(open)'}\n")
    out(f"messages: {answer.get('last_seq') or 0}\n")


def _body(args: argparse.Namespace) -> str:
    if args.body is not None:
        return args.body
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
        print("agentchat: Enter message body; press Ctrl-D to finish.", file=sys.stderr)
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
        "title": args.title,
        "body": _body(args),
        "to": _recipients(args.to),
        "status": args.status,
    }
    if args.sender is not None:
        payload["from"] = args.sender
    if args.reply is not None:
        payload["reply_to"] = args.reply
    answer = client.request("POST", chan(args) + "messages/", json=payload, raw=args.json)
    if args.json:
        return out(answer + "\n")
    out(f"posted #{answer['seq']} -> {args.channel}/{text.message_file_name(answer)}\n")


def cmd_read(client: Client, args: argparse.Namespace) -> None:
    agent = ops.identity(client, args.agent)
    start = (
        0
        if args.all
        else client.request("GET", chan(args) + "messages/", params={"limit": 1})["cursor"]
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
            cursor = client.request("POST", chan(args) + "ack/", json={"seq": top})["cursor"]
    else:
        cursor = start
        while True:
            try:
                page = client.request("POST", chan(args) + "read/")
            except ClientError:
                # The pages before moved the cursor past what they held: printed already, or
                # with --json printed now (more: true) before the error is told.
                if args.json and shown:
                    dump({"messages": shown, "cursor": cursor, "more": True})
                raise
            for message in page["messages"]:
                _show(args, message, shown)
            cursor = page["cursor"]
            if not page.get("more"):
                break
    if args.json:
        return dump({"messages": shown, "cursor": cursor, "more": False})
    if not shown:
        out(f"(no new messages for {agent} in '{args.channel}'; cursor at #{start})\n")


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
        print(
            f"(timeout after {args.timeout}s: no new messages for {agent} in '{args.channel}')",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.json:
        dump({"messages": delivered, "cursor": cursor, "more": False})
    return 0


def cmd_peek(client: Client, args: argparse.Namespace) -> None:
    path = chan(args) + "messages/"
    if args.n <= 0:
        client.request("GET", path, params={"limit": 1})  # the channel must exist
        return dump({"messages": []}) if args.json else None
    if args.n <= PEEK_LIMIT:
        messages: Iterable[dict[str, Any]] = client.request("GET", path, params={"limit": args.n})[
            "messages"
        ]
    else:  # past one page: from the seq n before the last, a page at a time, printed as read
        last = client.request("GET", path, params={"limit": 1})["messages"]
        top = last[-1]["seq"] if last else 0
        pages = ops.peek_after(client, args.channel, max(0, top - args.n))
        messages = (m for m in pages if m["seq"] <= top)
    if args.json:
        return dump({"messages": list(messages)})
    shown = 0
    for message in messages:
        out(text.message_block(message))
        shown += 1
    if not shown:
        out(f"(channel '{args.channel}' is empty)\n")


def cmd_claim(client: Client, args: argparse.Namespace) -> None:
    marker = args.task
    if not MARKER.fullmatch(marker):
        raise ClientError(
            "INVALID_NAME", f"invalid task name (expected task-<id>.md marker): {marker!r}"
        )
    check_as(client, args.agent)
    answer = client.request("POST", chan(args) + f"claims/{seg(marker)}/", raw=args.json)
    if args.json:
        return out(answer + "\n")
    claimed = f"{PurePosixPath(marker).stem}.CLAIMED-{text.slug(answer['owner'])}.md"
    out(f"claimed {marker} -> {claimed}\n")


# --- tasks ----------------------------------------------------------------------------------


def _task_path(args: argparse.Namespace, action: str = "") -> str:
    return chan(args) + f"tasks/{seg(args.task_id)}/" + (f"{action}/" if action else "")


def _task_done(args: argparse.Namespace, verb: str, answer: Any) -> None:
    if args.json:
        out(answer + "\n")
    else:
        out(f"{verb} task {answer['id']} [{answer['status']}]\n")


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
    answer = client.request("POST", chan(args) + "tasks/", json=body, raw=args.json)
    if args.json:
        return out(answer + "\n")
    _task_done(args, "created", answer)


def cmd_task_list(client: Client, args: argparse.Namespace) -> None:
    params = {"status": args.status, "owner": args.owner}
    tasks = list(ops.pages(client, chan(args) + "tasks/", "tasks", params))
    if args.json:
        return dump({"tasks": tasks, "more": False})
    out(text.task_table(tasks))


def cmd_task_show(client: Client, args: argparse.Namespace) -> None:
    answer = client.request("GET", _task_path(args), raw=args.json)
    out(answer + "\n" if args.json else text.task_show(answer))


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
    answer = client.request("PATCH", _task_path(args), json=body, raw=args.json)
    _task_done(args, "updated", answer)


def _task_action(action: str, verb: str, *, lease: bool = False, reason: bool = False) -> Command:
    def run(client: Client, args: argparse.Namespace) -> None:
        check_as(client, args.actor)
        body: dict[str, Any] = {}
        if lease:
            body["lease_seconds"] = duration(args.lease_seconds)
        if reason:
            body["reason"] = args.reason
        answer = client.request("POST", _task_path(args, action), json=body, raw=args.json)
        _task_done(args, verb, answer)

    return run


def cmd_task_recover_pending(client: Client, args: argparse.Namespace) -> None:
    check_as(client, args.actor)
    client.request("POST", chan(args) + "tasks/recover-pending/", json={})
    out(f"recovered pending lease transaction in {args.channel}\n")  # never: nothing is pending


# --- path locks -----------------------------------------------------------------------------


def cmd_lock(client: Client, args: argparse.Namespace) -> None:
    check_as(client, args.owner)
    body = {"paths": args.paths, "lease_seconds": duration(args.lease_seconds)}
    answer = client.request("POST", chan(args) + "locks/", json=body, raw=args.json)
    if args.json:
        return out(answer + "\n")
    paths = ", ".join(entry["normalized_path"] for entry in answer["paths"])
    out(f"locked {answer['lock_id']} -> {args.channel}/{paths}\n")


def cmd_check(client: Client, args: argparse.Namespace) -> None:
    check_as(client, args.owner)
    answer = client.request(
        "POST", chan(args) + "locks/check/", json={"paths": args.paths}, raw=args.json
    )
    if args.json:
        return out(answer + "\n")
    if not answer["conflicts"]:
        return out("available\n")
    for record in answer["conflicts"]:
        out(f"locked {record['lock_id']} owner={record['owner']} expires={record['expires_at']}\n")


def _looks_like_lock_id(target: str) -> bool:
    return len(target) == LOCK_ID_LENGTH and all(ch in "0123456789abcdef" for ch in target)


def _simple_norm(path: str) -> str:
    return "/".join(part for part in path.split("/") if part not in ("", ".")) or "."


def _lock_of(client: Client, args: argparse.Namespace) -> str:
    """The lock id a target names: a lock id, else the one lock holding that exact path."""
    if _looks_like_lock_id(args.target):
        try:
            client.request("GET", chan(args) + f"locks/{args.target}/")
            return args.target
        except ClientError as error:
            if error.code != "PATH_LOCK_NOT_FOUND":
                raise
    wanted = _simple_norm(args.target)
    answer = client.request("POST", chan(args) + "locks/check/", json={"paths": [args.target]})
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
    return ids[0]


def cmd_unlock(client: Client, args: argparse.Namespace) -> None:
    check_as(client, args.owner)
    if _looks_like_lock_id(args.target):
        try:
            answer = client.request("DELETE", chan(args) + f"locks/{args.target}/", raw=True)
        except ClientError as error:
            if error.code != "PATH_LOCK_NOT_FOUND":
                raise
            answer = None
    else:
        answer = None
    if answer is None:
        answer = client.request(
            "DELETE", chan(args) + "locks/", params={"path": args.target}, raw=True
        )
    if args.json:
        return out(answer + "\n")
    out(f"unlocked {json.loads(answer)['lock_id']} from {args.channel}\n")


def cmd_recover(client: Client, args: argparse.Namespace) -> None:
    check_as(client, args.owner)
    lock_id = _lock_of(client, args)
    body = {"reason": args.reason, "lease_seconds": duration(args.lease_seconds)}
    answer = client.request(
        "POST", chan(args) + f"locks/{lock_id}/recover/", json=body, raw=args.json
    )
    if args.json:
        return out(answer + "\n")
    out(
        f"recovered {answer['lock_id']} for {answer['owner']} "
        f"previous_owner={answer['previous_owner']} reason={answer['recovery_reason']}\n"
    )


def cmd_recover_pending(client: Client, args: argparse.Namespace) -> None:
    # A server's lock mutations are single transactions: nothing is ever pending. The
    # reference says so in these words when its folder holds no transaction either.
    check_as(client, args.actor)
    client.request("GET", chan(args))
    out(f"recovered pending path-lock transaction in {args.channel}\n")


# --- state, compaction, events --------------------------------------------------------------


def _no_audit(args: argparse.Namespace) -> None:
    if args.no_audit:
        raise ClientError(
            "USAGE", "--no-audit: a server always posts the state.compacted audit message"
        )


def _compact(client: Client, args: argparse.Namespace) -> Any:
    _no_audit(args)
    check_as(client, args.actor)
    return client.request("POST", chan(args) + "compact/", json={"strict": args.strict}, raw=True)


def cmd_state(client: Client, args: argparse.Namespace) -> None:
    if args.write:
        answer = _compact(client, args)
        if args.json:
            return out(answer + "\n")
        return out(f"compacted state for {args.channel} -> {args.channel}/state.md\n")
    check_as(client, args.actor)
    params = {"strict": "true"} if args.strict else {}
    if args.json:
        return out(client.request("GET", chan(args) + "state/", params=params, raw=True) + "\n")
    params["format"] = "md"
    out(client.request("GET", chan(args) + "state/", params=params, accept="text/markdown"))


def cmd_compact(client: Client, args: argparse.Namespace) -> None:
    answer = _compact(client, args)
    if args.json:
        return out(answer + "\n")
    body = json.loads(answer)
    out(
        f"compacted state for {args.channel} -> {args.channel}/state.md "
        f"(open_tasks={body['open_tasks_count']}, locks={body['path_locks_count']}, "
        f"decisions={body['decisions_count']})\n"
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
    answer = client.request("POST", chan(args) + "events/", json=body, raw=args.json)
    if args.json:
        return out(answer + "\n")
    out(f"posted event {answer['event']['event']} -> {args.channel}\n")


def cmd_event_read(client: Client, args: argparse.Namespace) -> None:
    path = chan(args) + "events/"
    query: dict[str, Any] = {"type": args.event_type, "limit": 1000}
    events: list[dict[str, Any]] = []
    while True:
        body = client.request("GET", path, params=query)
        for item in body["events"]:
            if args.json:
                events.append(item)
            else:
                out(text.event_line(item["event"]))
        if not body.get("more") or not body["events"]:
            break
        query["after"] = body["events"][-1]["seq"]
    if args.json:
        dump({"events": events, "more": False})


# --- the parser -----------------------------------------------------------------------------


class _TaskParser(argparse.ArgumentParser):
    """Inside ``task``, argument errors are TASK_INVALID_COMMAND / TASK_INVALID_ARGUMENT (exit
    2), as in the reference."""

    def error(self, message: str) -> NoReturn:
        lower = message.lower()
        unknown = ("invalid choice", "unknown subcommand", "unrecognized arguments")
        code = (
            "TASK_INVALID_COMMAND" if any(k in lower for k in unknown) else "TASK_INVALID_ARGUMENT"
        )
        raise ClientError(code, f"cli error: {message}")


def _json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the REST body")


def _lease_flag(parser: argparse.ArgumentParser, what: str = "lease") -> None:
    parser.add_argument(
        "--lease-seconds",
        "--lease",
        "--ttl",
        dest="lease_seconds",
        type=float,
        default=300.0,
        help=f"duration of the {what} in seconds (default 300)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentchat",
        description="AgentChat client: the reference agent-chat CLI's commands, on a server",
    )
    parser.add_argument("--url", help="server root (default: $AGENT_CHAT_URL, config, :8000)")
    parser.add_argument("--token", help="agent token (default: $AGENT_CHAT_TOKEN, config)")
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    def command(name: str, func: Command, help_text: str, **kw: Any) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, **kw)
        p.set_defaults(func=func)
        _json_flag(p)
        return p

    def channel_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("channel", help="channel name")

    p = command("init", cmd_init, "create a channel")
    channel_arg(p)
    p.add_argument("--members", help="comma-separated agent names")
    p.add_argument("--topic", help="initial topic")
    p.add_argument("--visibility", choices=("open", "members"), help="default open")

    command("channels", cmd_channels, "list channels")

    p = command("roster", cmd_roster, "show a channel's members")
    channel_arg(p)

    p = command("post", cmd_post, "post a message (body: --body, --body-file, or stdin)")
    channel_arg(p)
    p.add_argument("--from", dest="sender", help="sender (default: the token's agent)")
    p.add_argument("--to", help="recipient(s), comma-separated, or 'all' (default all)")
    p.add_argument("--title", required=True, help="message title")
    p.add_argument("--reply", type=int, help="seq this replies to")
    p.add_argument("--status", default="discussion", help="message status (default discussion)")
    p.add_argument("--body", help="literal message body")
    p.add_argument("--body-file", help="read the body from a file ('-': stdin)")

    p = command("read", cmd_read, "print new messages for an agent (advances the cursor)")
    channel_arg(p)
    p.add_argument("--as", dest="agent", help="agent (default: the token's)")
    p.add_argument("--all", action="store_true", help="whole thread, ignoring relevance")
    p.add_argument("--peek", action="store_true", help="do not move the cursor")

    p = command("wait", cmd_wait, "block until a relevant message arrives (no polling)")
    channel_arg(p)
    p.add_argument("--as", dest="agent", help="agent (default: the token's)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds (default 900)")
    p.add_argument("--interval", type=float, default=5.0, help="accepted and ignored")

    p = command("peek", cmd_peek, "show the last N messages (cursor untouched)")
    channel_arg(p)
    p.add_argument("-n", type=int, default=3, help="number of messages (default 3)")

    p = command("claim", cmd_claim, "claim a task-<id>.md marker (lost: exit 3)")
    channel_arg(p)
    p.add_argument("task", help="marker name, e.g. task-12.md")
    p.add_argument("--as", dest="agent", help="agent (default: the token's)")

    as_names = ("--as", "--from", "--owner")
    p = command("lock", cmd_lock, "lock workspace-relative paths")
    channel_arg(p)
    p.add_argument("paths", nargs="+", help="paths or globs")
    p.add_argument(*as_names, dest="owner", help="agent (default: the token's)")
    _lease_flag(p)

    p = command("check", cmd_check, "check paths for lock conflicts (exit 0 either way)")
    channel_arg(p)
    p.add_argument("paths", nargs="+")
    p.add_argument(*as_names, dest="owner", help="agent (checked only)")

    p = command("unlock", cmd_unlock, "release a lock you own")
    channel_arg(p)
    p.add_argument("target", help="lock id or exact normalized path")
    p.add_argument(*as_names, dest="owner", help="agent (default: the token's)")

    p = command("recover", cmd_recover, "recover an expired path lock")
    channel_arg(p)
    p.add_argument("target", help="lock id or exact normalized path")
    p.add_argument(*as_names, dest="owner", help="agent (default: the token's)")
    p.add_argument("--reason", required=True)
    _lease_flag(p, "new lock")

    p = command("recover-pending", cmd_recover_pending, "nothing is ever pending on a server")
    channel_arg(p)
    p.add_argument(*as_names, dest="actor")
    p.add_argument("--resolve-publication", choices=("rollback", "published"))

    for name, func, help_text in (
        ("state", cmd_state, "print the channel's state summary"),
        ("compact", cmd_compact, "store the state summary and audit it"),
    ):
        p = command(name, func, help_text)
        channel_arg(p)
        p.add_argument("--as", "--from", "--actor", dest="actor")
        p.add_argument("--strict", action="store_true", help="fail on a malformed source")
        p.add_argument("--no-audit", action="store_true", help="refused: a server always audits")
        if name == "state":
            p.add_argument("--write", "--save", action="store_true", help="compact")

    event = sub.add_parser("event", help="post/read capability and status events")
    event_sub = event.add_subparsers(dest="event_cmd", required=True, metavar="COMMAND")
    p = event_sub.add_parser("post", help="post a capability or status event")
    p.set_defaults(func=cmd_event_post)
    _json_flag(p)
    channel_arg(p)
    p.add_argument("--from", dest="sender", help="agent (default: the token's)")
    p.add_argument("--type", dest="event_type", choices=EVENT_TYPES, required=True)
    p.add_argument("--harness", required=True)
    p.add_argument("--status", choices=EVENT_STATUSES)
    p.add_argument("--detail")
    p.add_argument("--primitives", action="append", help="repeatable, comma-separated")
    p = event_sub.add_parser("read", help="print the channel's events, one JSON per line")
    p.set_defaults(func=cmd_event_read)
    _json_flag(p)
    channel_arg(p)
    p.add_argument("--type", dest="event_type", choices=EVENT_TYPES)

    _task_parsers(sub)
    # mcp, hook and guard: their own modules, loaded only when they run (options.run).
    extra_commands.register(sub)
    return parser


def _task_parsers(sub: Any) -> None:
    task = sub.add_parser("task", help="structured tasks under leases")
    task.error = _TaskParser.error.__get__(task)  # type: ignore[method-assign]
    tsub = task.add_subparsers(
        dest="task_cmd", required=True, metavar="COMMAND", parser_class=_TaskParser
    )

    def command(name: str, func: Command, help_text: str) -> argparse.ArgumentParser:
        p = tsub.add_parser(name, help=help_text)
        p.set_defaults(func=func)
        _json_flag(p)
        p.add_argument("channel", help="channel name")
        if name not in ("list", "recover-pending"):
            p.add_argument("task_id", help="task id")
        return p

    def actor(p: argparse.ArgumentParser) -> None:
        p.add_argument("--as", "--from", dest="actor", help="agent (default: the token's)")

    p = command("create", cmd_task_create, "create an open task")
    p.add_argument("--from", "--created-by", dest="creator", help="default: the token's agent")
    p.add_argument("--title", required=True)
    p.add_argument("--owner", help="the agent the task is assigned to")
    for flag in ("--depends-on", "--files-hint", "--acceptance"):
        p.add_argument(flag, action="append", default=[], help="repeatable, comma-separated")
    p.add_argument("--branch")

    p = command("list", cmd_task_list, "list tasks")
    p.add_argument("--status", help="only this status")
    p.add_argument("--owner", help="only this owner")

    command("show", cmd_task_show, "show one task")

    p = command("update", cmd_task_update, "update task fields")
    actor(p)
    p.add_argument("--title", default=argparse.SUPPRESS)
    p.add_argument("--owner", default=argparse.SUPPRESS)
    p.add_argument("--clear-owner", action="store_true")
    for flag in ("--depends-on", "--files-hint", "--acceptance"):
        p.add_argument(flag, action="append", default=argparse.SUPPRESS, help="replaces the list")
    p.add_argument("--branch", default=argparse.SUPPRESS)
    p.add_argument("--clear-branch", action="store_true")
    p.add_argument("--status", default=argparse.SUPPRESS)

    for name, verb, lease, reason in (
        ("claim", "claimed", True, False),
        ("renew", "renewed", True, False),
        ("done", "done", False, False),
        ("block", "blocked", False, False),
        ("release", "released", False, False),
        ("recover", "recovered", True, True),
    ):
        p = command(name, _task_action(name, verb, lease=lease, reason=reason), f"{name} a task")
        actor(p)
        if lease:
            _lease_flag(p)
        if reason:
            p.add_argument("--reason", required=True)

    p = command("recover-pending", cmd_task_recover_pending, "nothing is ever pending")
    actor(p)
    p.add_argument("--resolve-publication", choices=("rollback", "published"))


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit status (the console script exits with it)."""
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:  # argparse printed the usage and its error
            return exc.code if isinstance(exc.code, int) else EXIT_USAGE
        if hasattr(args, "run"):  # mcp, hook, guard: they read their configuration themselves
            return args.run(args)
        config = config_load(url=args.url, token=args.token)
        with Client.from_config(config) as client:
            return args.func(client, args) or 0
    except ClientError as error:
        sys.stdout.flush()
        print(error.line(), file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print(file=sys.stderr)
        print("agentchat: cancelled by user", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 1


if __name__ == "__main__":
    sys.exit(main())
