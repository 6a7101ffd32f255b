"""What the CLI prints, from the API's JSON: the reference CLI's layouts (REFERENCE-CLI §2).

A message prints as the reference prints a message file: a line of 70 ``=``, the file's text
with its trailing whitespace stripped, an empty line. The file text is the one the folder sync
writes for the message (``agentchat.folder.render.message_text``, which imports the server's
models and so cannot be used here); a server-side test keeps the two equal. The keys an
imported file carried beyond ours are not in the API's message, so they are not printed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from agentchat.client.safe import line, terminal

RULE = "=" * 70
_SLUG_RUN = re.compile(r"[^a-z0-9]+")
_LINE_BREAKS = re.compile(r"[\r\n]+")
_SERVER_ID = re.compile(r"msg_[0-9a-f]{32}")


def slug(text: str) -> str:
    """The reference's slug (the synced folder's file and cursor names)."""
    return _SLUG_RUN.sub("-", text.lower()).strip("-")[:40].rstrip("-") or "msg"


def message_file_name(message: Mapping[str, Any]) -> str:
    return f"{message['seq']:04d}-{slug(message['from'])}-{slug(message['title'])}.md"


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def message_file_text(message: Mapping[str, Any]) -> str:
    """The message's file text, frontmatter and body, from the API's message record."""
    pairs = [
        ("seq", str(message["seq"])),
        ("from", message["from"]),
        ("to", ",".join(message["to"]) if message["to"] else "all"),
    ]
    if message.get("reply_to") is not None:
        pairs.append(("reply_to", str(message["reply_to"])))
    pairs += [
        ("channel", message["channel"]),
        ("ts", message["ts"]),
        ("status", message.get("status") or "discussion"),
        ("title", message["title"]),
    ]
    if not _SERVER_ID.fullmatch(message["id"]):
        pairs.append(("id", message["id"]))
    if (kind := message.get("sender_kind") or "agent") != "agent":
        pairs.append(("sender_kind", kind))
    for key in ("conversation_id", "correlation_id", "content_type"):
        if value := message.get(key):
            pairs.append((key, value))
    if message.get("data") is not None:
        pairs.append(("data", _compact(message["data"])))
    if message.get("metadata"):
        pairs.append(("metadata", _compact(message["metadata"])))
    lines = [f"{key}: {_LINE_BREAKS.sub(' ', value)}" for key, value in pairs]
    return "---\n" + "\n".join(lines) + "\n---\n" + (message.get("body") or "").rstrip() + "\n"


def message_block(message: Mapping[str, Any]) -> str:
    """The message as read, wait and peek print it (ends with the empty line); its fields'
    line breaks are spaces already (the file's frontmatter), the body keeps its own."""
    return f"{RULE}\n{terminal(message_file_text(message).rstrip())}\n\n"


def cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def channels_table(rows: Iterable[tuple[Mapping[str, Any], Mapping[str, Any] | None]]) -> str:
    """``channels``: each channel with its message count and its last message (or ``-``)."""
    lines: list[tuple[str, str, int, str]] = []
    for channel, last in rows:
        members = cut(line(", ".join(channel.get("members") or []) or "(open)"), 40)
        tail = "-"
        if last is not None:
            tail = f"#{last['seq']} {line(last['from'])}: {cut(line(last['title']), 40)}"
        lines.append((line(channel["name"]), members, int(channel.get("last_seq") or 0), tail))
    width = max([len("CHANNEL"), *(len(row[0]) for row in lines)])
    out = [f"{'CHANNEL'.ljust(width)}  MSGS  MEMBERS / LAST"]
    for name, members, count, tail in lines:
        out.append(f"{name.ljust(width)}  {str(count).rjust(4)}  {members}")
        out.append(f"{' '.ljust(width)}        last: {tail}")
    return "\n".join(out) + "\n"


def task_table(tasks: list[Mapping[str, Any]]) -> str:
    """``task list``: columns padded to the widest value, long cells cut at 60."""
    header = ("ID", "STATUS", "OWNER", "DEPENDS_ON")
    if not tasks:
        return "  ".join(header) + "  TITLE\n(no tasks)\n"
    rows = [
        (
            line(task["id"]),
            line(task["status"]),
            cut(line(task.get("owner") or "-"), 60),
            cut(line(", ".join(task.get("depends_on") or []) or "-"), 60),
            cut(line(task.get("title") or ""), 60),
        )
        for task in tasks
    ]
    widths = [max(len(header[i]), *(len(row[i]) for row in rows)) for i in range(4)]

    def row_of(cells: tuple[str, ...]) -> str:
        return "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(cells[:4])) + (
            f"  {cells[4]}"
        )

    return "\n".join([row_of((*header, "TITLE")), *(row_of(row) for row in rows)]) + "\n"


def task_show(task: Mapping[str, Any]) -> str:
    """``task show``: ``key: value`` lines in the reference's order."""
    blocked = task.get("blocked_by") or []
    if not task.get("depends_on") or task.get("ready") or not blocked:
        dependencies = "ready"
    else:
        dependencies = "blocked (" + ", ".join(f"{b['id']}={b['status']}" for b in blocked) + ")"
    pairs = [
        ("id", task["id"]),
        ("channel", task["channel"]),
        ("title", task.get("title") or ""),
        ("status", task["status"]),
        ("owner", task.get("owner") or "-"),
        ("created_by", task.get("created_by") or ""),
        ("depends_on", ", ".join(task.get("depends_on") or []) or "-"),
        ("dependencies", dependencies),
        ("files_hint", ", ".join(task.get("files_hint") or []) or "-"),
        ("acceptance", "; ".join(task.get("acceptance") or []) or "-"),
        ("lease_expires_at", task.get("lease_expires_at") or "-"),
        ("branch", task.get("branch") or "-"),
        ("updated_at", task.get("updated_at") or ""),
    ]
    return "".join(f"{key}: {line(value)}\n" for key, value in pairs)


def event_line(event: Mapping[str, Any]) -> str:
    """``event read``: one event per line, keys sorted, non-ASCII kept (but for what a
    terminal would act on, JSON-escaped)."""
    return terminal(json.dumps(event, ensure_ascii=False, sort_keys=True), as_json=True) + "\n"
