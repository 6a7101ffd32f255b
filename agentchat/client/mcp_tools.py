"""The MCP server's tools: each one REST operation (or a short run of them), its JSON Schema.

A tool is a name, a description, an input schema and a function ``(client, args) -> body``
that makes the REST calls and returns the server's JSON body unchanged (the MCP result's
structured content). Errors are the client's ``ClientError`` with the server's stable code.
The functions block (they are the CLI's synchronous client); the server runs them in threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from agentchat.client import ops, shapes
from agentchat.client.api import Client, message_id, seg
from agentchat.client.errors import ClientError
from agentchat.client.mcp_direct import DIRECT_TOOLS
from agentchat.client.mcp_ep import EP_TOOLS
from agentchat.client.mcp_schema import Tool
from agentchat.client.mcp_schema import object_schema as _obj
from agentchat.client.mcp_schema import string_schema as _str
from agentchat.client.mcp_schema import strings_schema as _strs

# A wait answers at most this many messages (the rest: `more: true`, still unread).
WAIT_MAX_MESSAGES = 100
WAIT_DEFAULT_SECONDS = 60.0
WAIT_MAX_SECONDS = 900.0
# A read follows the server's pages up to this many before it answers `more: true`.
READ_MAX_PAGES = 10
LIST_MAX_PAGES = 10


CHANNEL = _str("the channel's name", minLength=1, maxLength=64)
TASK_ID = _str("the task's id", minLength=1, maxLength=128)
LEASE = {
    "type": "number",
    "exclusiveMinimum": 0,
    "description": "lease length in seconds (default 300; at most the server's maximum)",
}
PATHS = {
    "type": "array",
    "items": {"type": "string"},
    "minItems": 1,
    "description": "workspace-relative paths or globs, with `/` (a trailing `/` = a directory)",
}
ADVISORY = (
    "Path locks are advisory: they stop nobody from writing, they tell the other agents (and "
    "`agentchat guard`, a git pre-commit hook) who works where."
)


def _pick(args: dict[str, Any], *names: str) -> dict[str, Any]:
    return {name: args[name] for name in names if args.get(name) is not None}


def _ch(args: dict[str, Any], rest: str = "") -> str:
    return f"channels/{seg(args['channel'])}/{rest}"


def _task(args: dict[str, Any], action: str = "") -> str:
    return _ch(args, f"tasks/{seg(args['id'])}/{action}")


def _pages(
    client: Client, path: str, key: str, expect: Any, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The ``key`` items of a paged list, LIST_MAX_PAGES pages at the most: ``more`` (and
    ``next``, where to go on) say the list was cut."""
    found: list[Any] = []
    after = None
    for _ in range(LIST_MAX_PAGES):
        page = client.request("GET", path, params={**(params or {}), "after": after}, expect=expect)
        found.extend(page[key])
        if not page.get("more"):
            return {key: found, "more": False}
        after = page.get("next")
    return {key: found, "more": True, "next": after}


def channels(client: Client, args: dict[str, Any]) -> Any:
    return _pages(client, "channels/", "channels", shapes.CHANNELS)


def post(client: Client, args: dict[str, Any]) -> Any:
    body = {"id": message_id(), **_pick(args, "title", "body", "to", "reply_to", "status")}
    # Sent again after a dropped connection or a 502/503 (a deploy roll): stored once.
    return client.request("POST", _ch(args, "messages/"), json=body, retry=True)


def read(client: Client, args: dict[str, Any]) -> Any:
    """Every unread relevant message, following the server's pages (the cursor moves past
    each page as it is answered, so a later call goes on where this one stopped). A page
    after the first that fails does not lose the pages read before it (the cursor is past
    them): they are answered with ``more: true`` and a ``note`` saying why it stopped."""
    messages: list[Any] = []
    page: dict[str, Any] = {}
    for number in range(READ_MAX_PAGES):
        try:
            page = client.request("POST", _ch(args, "read/"), expect=shapes.READ)
        except ClientError as exc:
            if number == 0:
                raise
            return {
                "messages": messages,
                "cursor": page.get("cursor"),
                "more": True,
                "note": f"stopped after {number} pages: {exc.code}: {exc.message}; "
                "read again for the rest",
            }
        messages.extend(page["messages"])
        if not page.get("more"):
            break
    return {"messages": messages, "cursor": page.get("cursor"), "more": bool(page.get("more"))}


def peek(client: Client, args: dict[str, Any]) -> Any:
    params = {"limit": args.get("n", 10), "after": args.get("after")}
    return client.request("GET", _ch(args, "messages/"), params=params)


def wait(client: Client, args: dict[str, Any], cancelled: threading.Event | None = None) -> Any:
    """The CLI's wait (``ops.wait_found``): it moves no cursor while it waits, and acks what
    it answers only once it has it, never after the call was cancelled (``cancelled`` set by
    the MCP server), so a message arriving after the host gave up stays unread. The answer
    has the server's read shape (``timed_out: true`` with no message at the end); at most
    ``WAIT_MAX_MESSAGES`` messages, ``more: true`` when relevant ones remain."""
    timeout = float(args.get("timeout", WAIT_DEFAULT_SECONDS))
    agent = ops.me(client)
    stop = cancelled.is_set if cancelled is not None else None
    try:
        found, seen, more = ops.wait_found(
            client, args["channel"], agent, timeout=timeout, stop=stop, most=WAIT_MAX_MESSAGES
        )
    except ops.WaitTimeout:
        cursor = client.request(
            "GET", _ch(args, "messages/"), params={"limit": 1}, expect=shapes.PEEK
        )["cursor"]
        return {"messages": [], "cursor": cursor, "more": False, "timed_out": True}
    if stop is not None and stop():
        raise ops.WaitCancelled
    ops.ack(client, args["channel"], seen)
    return {"messages": found, "cursor": seen, "more": more}


def claim(client: Client, args: dict[str, Any]) -> Any:
    return client.request("POST", _ch(args, f"claims/{seg(args['marker'])}/"), json={})


def task_create(client: Client, args: dict[str, Any]) -> Any:
    body = _pick(args, "id", "title", "owner", "depends_on", "files_hint", "acceptance", "branch")
    return client.request("POST", _ch(args, "tasks/"), json=body)


def task_list(client: Client, args: dict[str, Any]) -> Any:
    return _pages(
        client, _ch(args, "tasks/"), "tasks", shapes.TASKS, _pick(args, "status", "owner")
    )


def task_show(client: Client, args: dict[str, Any]) -> Any:
    return client.request("GET", _task(args))


UPDATE_FIELDS = (
    "title",
    "status",
    "owner",
    "clear_owner",
    "depends_on",
    "files_hint",
    "acceptance",
    "branch",
    "clear_branch",
)


def task_update(client: Client, args: dict[str, Any]) -> Any:
    return client.request("PATCH", _task(args), json=_pick(args, *UPDATE_FIELDS))


def _lease_action(action: str, *fields: str) -> Callable[[Client, dict[str, Any]], Any]:
    def call(client: Client, args: dict[str, Any]) -> Any:
        return client.request("POST", _task(args, f"{action}/"), json=_pick(args, *fields))

    call.__name__ = f"task_{action}"
    return call


def lock(client: Client, args: dict[str, Any]) -> Any:
    body = _pick(args, "paths", "lease_seconds")
    record = client.request("POST", _ch(args, "locks/"), json=body, expect=dict)
    return {**record, "advisory": ADVISORY}


def check(client: Client, args: dict[str, Any]) -> Any:
    answer = client.request(
        "POST", _ch(args, "locks/check/"), json={"paths": args["paths"]}, expect=dict
    )
    return {**answer, "advisory": ADVISORY}


def unlock(client: Client, args: dict[str, Any]) -> Any:
    """``target`` is a lock id or the exact normalized path of a lock, as in the reference:
    an id first when it can be one, then the path."""
    record = ops.lock_target(
        args["target"],
        lambda lock_id: client.request("DELETE", _ch(args, f"locks/{lock_id}/"), expect=dict),
        lambda path: client.request(
            "DELETE", _ch(args, "locks/"), params={"path": path}, expect=dict
        ),
    )
    return {**record, "advisory": ADVISORY}


def state(client: Client, args: dict[str, Any]) -> Any:
    return client.request("GET", _ch(args, "state/"), params=_pick(args, "strict"))


def event_post(client: Client, args: dict[str, Any]) -> Any:
    body = _pick(args, "type", "harness", "primitives", "status", "detail")
    return client.request("POST", _ch(args, "events/"), json=body)


def event_read(client: Client, args: dict[str, Any]) -> Any:
    params = _pick(args, "type", "after", "limit")
    return client.request("GET", _ch(args, "events/"), params=params)


TO = {
    "description": "recipients: an agent name, a comma list, or a list; omitted, `all`, `*` "
    "or [] = everyone",
    "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
}
FENCE = {
    "type": "integer",
    "minimum": 0,
    "description": "the fence you were given; refused (STALE_FENCE) when no longer current",
}
TASK_FIELDS: dict[str, dict[str, Any]] = {
    "owner": _str("an agent name"),
    "depends_on": _strs("ids of tasks this one needs done first"),
    "files_hint": _strs("workspace paths the task will touch"),
    "acceptance": _strs("acceptance criteria, one line each"),
    "branch": _str("a git branch, one line"),
}
STATUSES = ["open", "in_progress", "blocked", "done", "cancelled"]

TOOLS: list[Tool] = [
    Tool(
        "channels",
        "List the channels you can see, with topic, members, last seq, your cursor and your "
        "unread count.",
        _obj([]),
        channels,
        read_only=True,
    ),
    Tool(
        "post",
        "Post a markdown message to a channel (you are the sender). Returns the message, "
        "with its seq.",
        _obj(
            ["channel", "title"],
            channel=CHANNEL,
            title=_str("one line", minLength=1, maxLength=1000),
            body=_str("markdown body"),
            to=TO,
            reply_to={
                "type": "integer",
                "minimum": 1,
                "description": "the seq of the message of this channel this answers",
            },
            status=_str("a label such as discussion (default), decision, blocker, done"),
        ),
        post,
    ),
    Tool(
        "read",
        "Read your unread relevant messages in a channel (broadcasts and those addressed to "
        "you, not your own) and move your cursor past them.",
        _obj(["channel"], channel=CHANNEL),
        read,
        moves_cursor=True,
    ),
    Tool(
        "peek",
        "Show recent messages of a channel without moving your cursor: the last `n`, or the "
        "first `n` after seq `after`.",
        _obj(
            ["channel"],
            channel=CHANNEL,
            n={"type": "integer", "minimum": 1, "maximum": 1000, "description": "default 10"},
            after={"type": "integer", "minimum": 0, "description": "a seq"},
        ),
        peek,
        read_only=True,
    ),
    Tool(
        "wait",
        "Block until a relevant message arrives in a channel (then read it, moving your "
        "cursor) or `timeout` seconds pass (`timed_out: true`). Costs nothing while waiting; "
        "a cancelled wait moves nothing.",
        _obj(
            ["channel"],
            channel=CHANNEL,
            timeout={
                "type": "number",
                "minimum": 0,
                "maximum": WAIT_MAX_SECONDS,
                "description": f"seconds, default {WAIT_DEFAULT_SECONDS:g}",
            },
        ),
        wait,
        moves_cursor=True,
        cancellable=True,
    ),
    Tool(
        "claim",
        "Claim a marker in a channel (a legacy one-owner claim): the first claimant wins, "
        "every later one gets MARKER_ALREADY_CLAIMED.",
        _obj(["channel", "marker"], channel=CHANNEL, marker=_str("the marker's name")),
        claim,
    ),
    Tool(
        "task_create",
        "Create a task (status open). Its audit message is posted to the channel.",
        _obj(
            ["channel", "id", "title"],
            channel=CHANNEL,
            id=TASK_ID,
            title=_str("one line"),
            **TASK_FIELDS,
        ),
        task_create,
    ),
    Tool(
        "task_list",
        "List a channel's tasks (optionally by status or owner), with readiness and blockers.",
        _obj(
            ["channel"],
            channel=CHANNEL,
            status={"type": "string", "enum": STATUSES},
            owner=_str("an agent name"),
        ),
        task_list,
        read_only=True,
    ),
    Tool(
        "task_show",
        "Show one task with its lease.",
        _obj(["channel", "id"], channel=CHANNEL, id=TASK_ID),
        task_show,
        read_only=True,
    ),
    Tool(
        "task_update",
        "Update a task's fields or status (lists replace; clear_owner / clear_branch set them "
        "to null). A leased task's owner and status change only through the lease tools.",
        _obj(
            ["channel", "id"],
            channel=CHANNEL,
            id=TASK_ID,
            title=_str("one line"),
            status={"type": "string", "enum": STATUSES},
            clear_owner={"type": "boolean"},
            clear_branch={"type": "boolean"},
            **TASK_FIELDS,
        ),
        task_update,
    ),
    Tool(
        "task_claim",
        "Claim a ready task under a lease: it becomes in_progress with you as owner; the "
        "answer's `fence` is your fencing token (send it with renew/done/release). An "
        "expired lease is never claimed over (LEASE_RECOVERY_REQUIRED: use task_recover).",
        _obj(["channel", "id"], channel=CHANNEL, id=TASK_ID, lease_seconds=LEASE),
        _lease_action("claim", "lease_seconds"),
    ),
    Tool(
        "task_renew",
        "Renew your unexpired lease on a task (its fence stays the same).",
        _obj(["channel", "id"], channel=CHANNEL, id=TASK_ID, lease_seconds=LEASE, fence=FENCE),
        _lease_action("renew", "lease_seconds", "fence"),
    ),
    Tool(
        "task_done",
        "Complete a task you hold (or move an unleased in_progress task to done).",
        _obj(["channel", "id"], channel=CHANNEL, id=TASK_ID, fence=FENCE),
        _lease_action("done", "fence"),
    ),
    Tool(
        "task_block",
        "Mark a task blocked.",
        _obj(["channel", "id"], channel=CHANNEL, id=TASK_ID),
        _lease_action("block"),
    ),
    Tool(
        "task_release",
        "Release your lease on a task: it goes back to open.",
        _obj(["channel", "id"], channel=CHANNEL, id=TASK_ID, fence=FENCE),
        _lease_action("release", "fence"),
    ),
    Tool(
        "task_recover",
        "Take over a task whose lease expired, with a reason (recorded with the previous "
        "owner and expiry). Refused while the lease is still valid (LEASE_NOT_EXPIRED).",
        _obj(
            ["channel", "id", "reason"],
            channel=CHANNEL,
            id=TASK_ID,
            reason=_str("why, one line", minLength=1),
            lease_seconds=LEASE,
        ),
        _lease_action("recover", "reason", "lease_seconds"),
    ),
    Tool(
        "lock",
        "Lock workspace paths (all or none) for a lease; the answer's `fence` is the lock's "
        "fencing token. " + ADVISORY,
        _obj(["channel", "paths"], channel=CHANNEL, paths=PATHS, lease_seconds=LEASE),
        lock,
    ),
    Tool(
        "check",
        "List the locks (active and expired) overlapping these paths. " + ADVISORY,
        _obj(["channel", "paths"], channel=CHANNEL, paths=PATHS),
        check,
        read_only=True,
    ),
    Tool(
        "unlock",
        "Release your lock, named by its lock id or one of its exact normalized paths.",
        _obj(["channel", "target"], channel=CHANNEL, target=_str("a lock id or a path")),
        unlock,
    ),
    Tool(
        "state",
        "The channel's derived state summary: goal and topic, decisions, open tasks, "
        "blockers, owners and leases, path locks, verification evidence.",
        _obj(["channel"], channel=CHANNEL, strict={"type": "boolean"}),
        state,
        read_only=True,
    ),
    Tool(
        "event_post",
        "Post a capability event (type capability: harness, primitives?) or a status event "
        "(type status: harness, status, detail?).",
        _obj(
            ["channel", "type", "harness"],
            channel=CHANNEL,
            type={"type": "string", "enum": ["capability", "status"]},
            harness=_str("your harness, e.g. claude-code"),
            primitives=_strs("for capability: the primitives you use (default all)"),
            status={"type": "string", "enum": ["ready", "busy", "idle", "blocked", "stopped"]},
            detail=_str("for status: one line"),
        ),
        event_post,
    ),
    Tool(
        "event_read",
        "Read a channel's capability and status events.",
        _obj(
            ["channel"],
            channel=CHANNEL,
            type={"type": "string", "enum": ["capability", "status"]},
            after={"type": "integer", "minimum": 0},
            limit={"type": "integer", "minimum": 1, "maximum": 1000},
        ),
        event_read,
        read_only=True,
    ),
]


TOOLS.extend(DIRECT_TOOLS)  # HTTP v1 direct messages
TOOLS.extend(EP_TOOLS)  # EP-0118
TOOLS_BY_NAME = {tool.name: tool for tool in TOOLS}
