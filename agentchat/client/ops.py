"""Operations over several requests, shared by the CLI and the MCP server: who the token is,
paged lists, read following its pages, a lock named by id or path, and a wait that never loses
a message.

The wait never moves the cursor until what it found is printed: it peeks after the cursor,
and when nothing relevant is there it holds the channel's websocket (``?since=`` the last seq
it looked at, so nothing posted meanwhile is missed) until a relevant message arrives or its
deadline passes; then it peeks again from where it was, hands the messages over, and only then
acks the highest seq it looked at. A dropped connection or a restarting server is retried with
capped backoff until the deadline; a message is at worst shown twice (the ack did not reach
the server), never skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from agentchat.client import safe, shapes
from agentchat.client.api import Client, seg
from agentchat.client.backoff import Backoff
from agentchat.client.errors import ClientError
from agentchat.relevance import is_relevant

TRACE = "AGENT_CHAT_TRACE"  # set to 1: the wait says on stderr when it subscribes and retries
PEEK_PAGE = 200
ACK_GRACE = 30.0  # how long an ack is retried after the messages were handed over
# The largest frame the wait reads: one message's (at most the server's 768 KiB request, up to
# about 6x that JSON-escaped) with room to spare. A larger one fails the connection at its
# header, unread, and the wait mends it as any dropped connection: it subscribes again.
WS_MAX_FRAME = 16 * 1024 * 1024


# A lock target that may be a lock id: the server's record id rule. ``check`` and ``recover``
# name operations on a channel's locks, so the API cannot address a lock by those ids.
LOCK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
LOCK_OPERATIONS = frozenset({"check", "fence", "recover"})
T = TypeVar("T")


def lock_target(target: str, by_id: Callable[[str], T], by_path: Callable[[str], T]) -> T:
    """Act on the lock ``target`` names, as the reference resolves an unlock or recover
    target: the lock of that id when the target can be one and such a lock exists, else the
    record holding that exact normalized path, looked up by the server (``by_path``: its
    unlock or recover by path). Only PATH_LOCK_NOT_FOUND from ``by_id`` moves on to the path;
    any other refusal of it (a bad reason, a lock of someone else) is the answer."""
    if LOCK_ID.fullmatch(target) and target not in LOCK_OPERATIONS:
        try:
            return by_id(seg(target))
        except ClientError as exc:
            if exc.code != "PATH_LOCK_NOT_FOUND":
                raise
    return by_path(target)


def me(client: Client) -> str:
    """The token's agent name (``GET /api/v1/me/``)."""
    name: str = client.request("GET", "me/", expect=shapes.ME)["name"]
    return name


def identity(client: Client, claimed: str | None) -> str:
    """The acting agent: ``claimed`` when it is the token's agent; ``SENDER_MISMATCH`` (exit
    1, nothing done) when it names another; the token's agent when None."""
    name = me(client)
    if claimed is not None and claimed != name:
        raise ClientError(
            "SENDER_MISMATCH",
            f"the token belongs to {name!r}, not {claimed!r}",
            {"as": claimed, "agent": name},
        )
    return name


def relevant(message: dict[str, Any], agent: str | None) -> bool:
    """The server's relevance rule (docs/api.md, "Relevance";
    ``agentchat.relevance``): a broadcast or addressed to ``agent`` or one of its
    sub-agents, and not sent by it. Unknown identity (None): every message counts."""
    if agent is None:
        return True
    to = message.get("to") or []
    if not isinstance(to, list):
        to = []  # an odd record: told, so that a read shows it
    # A sender or recipient that is no string (an odd record) is no agent's name.
    names = [name if isinstance(name, str) else "" for name in to]
    return is_relevant(sender=str(message.get("from")), to=names, name=agent)


def pages(
    client: Client,
    path: str,
    key: str,
    params: dict[str, Any] | None = None,
    *,
    shape: Any = None,
) -> Iterator[Any]:
    """Every item of a paged list (``{key: [...], "more", "next"}``), page after page; each
    page of ``shape`` (by default: a list under ``key``), else ``BAD_RESPONSE``."""
    query = dict(params or {})
    expect = shape if shape is not None else {key: [object]}
    while True:
        body = client.request("GET", path, params=query, expect=expect)
        yield from body[key]
        if not body.get("more"):
            return
        if body.get("next") is None or body["next"] == query.get("after"):
            raise stalled(path)
        query["after"] = body["next"]


def stalled(path: str) -> ClientError:
    """A paged answer that says there is more but does not move on (a server that would be
    followed for ever)."""
    return ClientError(
        "BAD_RESPONSE", f"the server's pages of {path} say there is more but do not move on"
    )


def peek_after(client: Client, channel: str, after: int) -> Iterator[dict[str, Any]]:
    """Every message after ``after``, in seq order, a page at a time (moves no cursor). A page
    may be shorter than asked (the server stops at a byte budget): only its ``more`` says
    whether later messages remain."""
    path = f"channels/{seg(channel)}/messages/"
    while True:
        batch = client.request(
            "GET", path, params={"after": after, "limit": PEEK_PAGE}, expect=shapes.PEEK
        )
        yield from batch["messages"]
        if not batch["more"]:
            return
        if not batch["messages"] or batch["messages"][-1]["seq"] <= after:
            raise stalled(path)
        after = batch["messages"][-1]["seq"]


class WaitTimeout(Exception):
    """The deadline passed without a relevant message."""


class WaitCancelled(Exception):
    """The waiter said stop (``stop()`` true): nothing was handed over, nothing acked."""


STOP_POLL = 0.5  # how often a wait with a ``stop`` looks at it while it holds the websocket


def wait_relevant(
    client: Client,
    channel: str,
    agent: str,
    *,
    timeout: float,
    deliver: Callable[[list[dict[str, Any]]], None],
) -> int:
    """Wait until ``agent`` has relevant messages after its cursor (at most ``timeout``
    seconds), hand them to ``deliver`` in seq order, then ack the highest seq looked at and
    return it. Raises ``WaitTimeout``, or ``ClientError`` for what retrying cannot mend
    (a bad token, a channel out of sight) and for a server unreachable at the deadline."""
    found, seen, _ = wait_found(client, channel, agent, timeout=timeout)
    deliver(found)
    ack(client, channel, seen)
    return seen


def wait_found(
    client: Client,
    channel: str,
    agent: str,
    *,
    timeout: float,
    stop: Callable[[], bool] | None = None,
    most: int | None = None,
) -> tuple[list[dict[str, Any]], int, bool]:
    """Wait as ``wait_relevant`` does but move no cursor: (the relevant messages after the
    cursor, the seq to ack once they are handed over, whether more relevant ones remain past
    ``most``). The caller acks (``ack``) only when it has handed them over, so a waiter that
    goes away loses nothing. Raises ``WaitTimeout``; ``WaitCancelled`` once ``stop()`` says
    so (looked at every ``STOP_POLL`` seconds); ``ClientError`` as ``wait_relevant``."""
    deadline = time.monotonic() + max(timeout, 0.0)
    path = f"channels/{seg(channel)}/messages/"
    # The first contact must succeed: a wrong URL or token fails at once, not at the deadline.
    seen = client.request("GET", path, params={"limit": 1}, expect=shapes.PEEK)["cursor"]
    backoff = Backoff(deadline)
    socket: ClientConnection | None = None
    try:
        while True:
            if stop is not None and stop():
                raise WaitCancelled
            try:
                found, seen, more = _scan(client, channel, agent, seen, most)
                if found:
                    return found, seen, more
                if time.monotonic() >= deadline:
                    raise WaitTimeout
                if socket is None:
                    socket = _subscribe(client, channel, seen, deadline)
                    trace(f"subscribed since={seen}")
                backoff.reset()
                seen = _ring(socket, agent, seen, deadline, stop)
            except ClientError as error:
                if not error.transient:
                    raise
                trace(f"retry after {error.code}")
                _close(socket)
                socket = None
                if not backoff.sleep():
                    raise
            except (ConnectionClosed, InvalidHandshake, OSError, TimeoutError) as error:
                trace(f"retry after {type(error).__name__}")
                _close(socket)
                socket = None
                if not backoff.sleep():
                    raise WaitTimeout from None
    finally:
        _close(socket)


def trace(line: str) -> None:
    if os.environ.get(TRACE) == "1":
        print(safe.line(f"agentchat: trace: {line}"), file=sys.stderr, flush=True)


def _scan(
    client: Client, channel: str, agent: str, after: int, most: int | None = None
) -> tuple[list[dict[str, Any]], int, bool]:
    """(the relevant messages after ``after``, at most ``most``; the seq looked at up to,
    which stops before a relevant message left out; whether one was left out)."""
    found: list[dict[str, Any]] = []
    seen = after
    for message in peek_after(client, channel, after):
        if relevant(message, agent):
            if most is not None and len(found) >= most:
                return found, seen, True
            found.append(message)
        seen = max(seen, message["seq"])
    return found, seen, False


WS_CLOSE_TIMEOUT = 1.0


def _subscribe(client: Client, channel: str, since: int, deadline: float) -> ClientConnection:
    url = client.ws_url(f"/ws/channels/{seg(channel)}/?since={since}")
    headers = {"Authorization": f"Bearer {client.token}"} if client.token else {}
    headers.update(client.identity_headers())
    try:
        return connect(
            url,
            additional_headers=headers,
            open_timeout=max(0.5, min(10.0, deadline - time.monotonic())),
            max_size=WS_MAX_FRAME,
            user_agent_header="agentchat-cli",
            # Closing waits for the server's close frame at most this long (the library's 10 s
            # made a Ctrl-C of a wait take up to 10 s on a busy server before exiting 130).
            close_timeout=WS_CLOSE_TIMEOUT,
        )
    except InvalidStatus:
        # A refused handshake says nothing of why: ask the REST API, which names the code
        # (a channel out of sight, a revoked token); otherwise it is retried.
        client.request("GET", f"channels/{seg(channel)}/")
        raise


def _ring(
    socket: ClientConnection,
    agent: str,
    seen: int,
    deadline: float,
    stop: Callable[[], bool] | None = None,
) -> int:
    """Read frames until one brings a relevant message after ``seen`` (return the seq before
    it, so the next scan starts there) or the deadline passes (return ``seen``). Raises
    ``WaitCancelled`` when ``stop()`` says so."""
    while True:
        if stop is not None and stop():
            raise WaitCancelled
        left = deadline - time.monotonic()
        if left <= 0:
            return seen
        try:
            raw = socket.recv(timeout=left if stop is None else min(left, STOP_POLL))
        except TimeoutError:
            continue
        frame = _frame(raw)
        if frame.get("type") == "error":
            error = shapes.check(frame, shapes.FRAME_ERROR, "the live stream")["error"]
            raise ClientError(error["code"], error["message"])
        if frame.get("type") != "message":
            continue
        message = shapes.check(frame, shapes.FRAME_MESSAGE, "the live stream")["message"]
        if message["seq"] <= seen:
            continue
        if relevant(message, agent):
            return seen
        seen = message["seq"]


def _frame(raw: str | bytes) -> dict[str, Any]:
    try:
        frame = json.loads(raw)
    except ValueError as exc:
        raise ClientError("BAD_RESPONSE", "the live stream sent a frame that is not JSON") from exc
    checked: dict[str, Any] = shapes.check(frame, shapes.FRAME, "the live stream")
    return checked


def ack(client: Client, channel: str, seq: int) -> None:
    """Move the cursor to ``seq`` (never back), retrying a transient failure a while."""
    backoff = Backoff(time.monotonic() + ACK_GRACE)
    while True:
        try:
            client.request(
                "POST", f"channels/{seg(channel)}/ack/", json={"seq": seq}, expect=shapes.CURSOR
            )
            return
        except ClientError as error:
            if not error.transient or not backoff.sleep():
                raise


def _close(socket: ClientConnection | None) -> None:
    if socket is not None:
        with contextlib.suppress(Exception):  # a broken connection may fail to close
            socket.close()
    return None
