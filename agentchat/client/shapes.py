"""The shapes of the server's answers, checked where they arrive (``Client.request(expect=)``).

Everything the client reads from an answer (a seq to compare, a name to print, a list to walk)
is declared here, so a server that answers JSON of another shape (a list for an object, a
missing key, a string for a number) is ``BAD_RESPONSE`` at the boundary, never a traceback in
the code that reads it. Only what the client reads is declared: other keys pass, and the JSON
printed with ``--json`` is the server's as it came.

A shape is a type (``str``, ``int`` — never a bool —, ``bool``, ``dict``, ``object``: any), a
tuple of alternatives (``None`` among them for null), a one-item list (a list of that shape),
or a dict of keys to shapes (an object holding them; ``Opt(shape)`` for a key that may be
missing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentchat.client.errors import ClientError
from agentchat.client.safe import line


@dataclass(frozen=True)
class Opt:
    """A key that may be missing (when present, it has ``shape``)."""

    shape: Any


def _name(shape: Any) -> str:
    if shape is None:
        return "null"
    if isinstance(shape, type):
        return {str: "a string", int: "an integer", bool: "a boolean", dict: "an object"}.get(
            shape, shape.__name__
        )
    if isinstance(shape, tuple):
        return " or ".join(_name(one) for one in shape)
    if isinstance(shape, list):
        return "a list"
    return "an object"


def _fits(value: Any, shape: Any) -> str | None:
    """Where ``value`` departs from ``shape`` (``"key: expected …"``), or None."""
    if shape is object:
        return None
    if shape is None:
        return None if value is None else "expected null"
    if isinstance(shape, tuple):
        for one in shape:
            if _fits(value, one) is None:
                return None
        return f"expected {_name(shape)}"
    if isinstance(shape, type):
        ok = isinstance(value, shape) and not (shape is int and isinstance(value, bool))
        return None if ok else f"expected {_name(shape)}"
    if isinstance(shape, list):
        if not isinstance(value, list):
            return "expected a list"
        for index, item in enumerate(value):
            if (problem := _fits(item, shape[0])) is not None:
                return f"[{index}]{'' if problem.startswith(('[', '.')) else ': '}{problem}"
        return None
    if not isinstance(value, dict):
        return "expected an object"
    for key, sub in shape.items():
        optional = isinstance(sub, Opt)
        if key not in value:
            if optional:
                continue
            return f".{key}: missing"
        if (problem := _fits(value[key], sub.shape if optional else sub)) is not None:
            return f".{key}{'' if problem.startswith(('[', '.')) else ': '}{problem}"
    return None


def check(value: Any, shape: Any, what: str) -> Any:
    """``value`` when it has ``shape``; else ``BAD_RESPONSE`` saying where it departs."""
    problem = _fits(value, shape)
    if problem is not None:
        raise ClientError(
            "BAD_RESPONSE",
            f"the server's answer to {line(what)[:200]} is not an AgentChat body: "
            f"answer{line(problem)[:200] if problem.startswith(('[', '.')) else ': ' + problem}",
        )
    return value


TEXT = (str, None)
NAMES = [str]
ME = {"name": str}
CHANNEL = {
    "name": str,
    "topic": Opt(TEXT),
    "members": Opt((NAMES, None)),
    "last_seq": Opt((int, None)),
    "cursor": Opt((int, None)),
    "unread": Opt((int, None)),
}
CHANNELS = {"channels": [CHANNEL], "more": Opt((bool, None)), "next": Opt(object)}
MESSAGE = {
    "seq": int,
    "id": str,
    "channel": str,
    "from": str,
    "to": NAMES,
    "title": str,
    "ts": str,
    "body": Opt(TEXT),
    "status": Opt(TEXT),
    "reply_to": Opt((int, None)),
    "sender_kind": Opt(TEXT),
    "conversation_id": Opt(TEXT),
    "correlation_id": Opt(TEXT),
    "content_type": Opt(TEXT),
    "data": Opt(object),
    "metadata": Opt(object),
}
MESSAGES = {"messages": [MESSAGE], "cursor": Opt(int), "more": Opt((bool, None))}
# A peek page also says the cursor, and whether messages were left out (later ones after
# ``after``, earlier ones without it): a page may be cut short by the server's byte budget.
PEEK = {"messages": [MESSAGE], "cursor": int, "more": bool}
READ = {"messages": [MESSAGE], "cursor": int, "more": Opt((bool, None))}
CURSOR = {"cursor": int}
CLAIM = {"owner": str}
TASK = {
    "id": str,
    "status": str,
    "channel": str,
    "title": Opt(TEXT),
    "owner": Opt(TEXT),
    "created_by": Opt(TEXT),
    "depends_on": Opt((NAMES, None)),
    "blocked_by": Opt(([{"id": str, "status": str}], None)),
    "ready": Opt((bool, None)),
    "files_hint": Opt((NAMES, None)),
    "acceptance": Opt((NAMES, None)),
    "lease_expires_at": Opt(TEXT),
    "branch": Opt(TEXT),
    "updated_at": Opt(TEXT),
    "fence": Opt(int),
}
TASKS = {"tasks": [TASK], "more": Opt((bool, None)), "next": Opt(object)}
LOCK_PATHS = [{"normalized_path": str, "display_path": Opt(TEXT)}]
LOCK = {
    "lock_id": str,
    "owner": str,
    "expires_at": str,
    "paths": LOCK_PATHS,
    "previous_owner": Opt(TEXT),
    "recovery_reason": Opt(TEXT),
    "fence": Opt(int),
}
# GET …/tasks/<id>/fence/ and …/locks/fence/ (docs/tasks.md, "Fencing tokens").
FENCE_CHECK = {
    "fence": (int, None),
    "checked": int,
    "state": str,
    "owner": Opt(TEXT),
    "expires_at": Opt(TEXT),
}
CONFLICT = {
    "lock_id": str,
    "owner": str,
    "expires_at": str,
    "expired": Opt((bool, None)),
    "paths": LOCK_PATHS,
}
CHECK = {"conflicts": [CONFLICT]}
COMPACT = {"open_tasks_count": int, "path_locks_count": int, "decisions_count": int}
EVENT_POSTED = {"event": {"event": str}}
EVENTS = {"events": [{"seq": int, "event": dict}], "more": Opt((bool, None))}
# The live stream's frames (the wait's websocket): only what the wait reads.
FRAME = {"type": Opt(object)}
FRAME_MESSAGE = {"message": {"seq": int, "from": str, "to": NAMES}}
FRAME_ERROR = {"error": {"code": str, "message": str}}

# --- HTTP v1 direct messages (/v1/, docs/http-v1.md) ---------------------------------------
ENVELOPE = {
    "id": str,
    "kind": str,
    "from": str,
    "to": str,
    "conversation_id": (str, None),
    "message": {"text": (str, None), "data": object},
}
DELIVERY = {"seq_num": int, "timestamp": str, "envelope": ENVELOPE}
INBOX = {"deliveries": [DELIVERY], "next_cursor": int, "tail": int}
CONTACT_CARD = {"id": str, "display_name": Opt(TEXT), "endpoint": Opt(TEXT)}
CONTACTS = {"contacts": [CONTACT_CARD], "more": Opt((bool, None)), "next": Opt(object)}
CONTACT_EVENT = {"seq_num": int, "type": str, "contact": CONTACT_CARD, "source": Opt(object)}
