"""HTTP v1's live follow: ``GET /v1/agents/<id>/inbox`` and ``GET /v1/monitor`` as Server-Sent
Events (``Accept: text/event-stream`` or ``follow=true``), plain ASGI apps before the API lane.

``FollowRouter`` sends a follow request to its endpoint and anything else (the JSON replay, any
other method) to the lane, so the replay and the stream share one path. Each endpoint checks the
request as the JSON view does (the lane's ``request_check``, the same token rules, cursors and
limits, every error JSON with its status) before it answers a byte of the stream; then the
order of every live read here holds:

1. subscribe to the doorbell group (the inbox's, or the monitor's) first;
2. read the page from the cursor (``inbox.inbox_page`` / ``monitor.monitor_page``), send it;
3. on each ring, read again from the last cursor sent.

An event's ``id:`` is the cursor after it, so a reconnect with ``Last-Event-ID`` (or
``cursor=``) resumes exactly after the last event the client saw: nothing lost, nothing twice.
A ring is only a doorbell; a sweep every AGENTCHAT_STREAM_SWEEP_SECONDS reads once more in case
one was lost. While idle a stream holds no thread and no database connection: it awaits its
layer inbox, its client and its timers; ``: heartbeat`` goes out after
AGENTCHAT_SSE_HEARTBEAT_SECONDS without a write. The send buffer is bounded by the transport
(``SendWindow``): a reader whose connection stays full for AGENTCHAT_STREAM_STALL_SECONDS is
ended and resumes by cursor. A revoked token (``credential_watch``, and a check in the very
read of each page) ends the stream with an ``event: error`` (AUTH_INVALID); the server ends no
healthy stream.

Every page a stream reads (the catch-up from the cursor, and each read after a ring) runs like
a peek (``agentchat.core.db.heavy``): on the heavy pool, through the heavy gate keyed by the
agent (the monitor's by one key of its own), ``bounded`` (its limit and FOLLOW_BATCH_BYTES bound
it), within the work budget (``agentchat.core.live.follows.heavy_read``, the websockets' replay
too). One agent's follows read one at a time, behind its other heavy requests, and never hold
the threads that posts need. At most AGENTCHAT_SSE_MAX_PER_AGENT follows of one agent
(AGENTCHAT_SSE_MAX_MONITOR of the monitor) are open at once, across the server's processes
with Redis (``follow_slots``); one more is answered 429 SSE_TOO_MANY_FOLLOWS, as JSON, before
its stream starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

from channels.layers import get_channel_layer
from django.conf import settings
from django.http.request import MediaType

from agentchat.core.db.faults import fault_or_internal
from agentchat.core.db.transactions import run_db
from agentchat.core.http.asgi_http import (
    SECURITY_HEADERS,
    Receive,
    Send,
    body_read,
    disconnected,
    error_send,
    failure_send,
    request_check,
    scope_headers,
)
from agentchat.core.http.pages import limit_parse
from agentchat.core.http.query import query_check
from agentchat.core.http.scope import scope_acting, scope_query, scope_token
from agentchat.core.identity.revocation import Credential, credential_watch, credentials_gone
from agentchat.core.identity.services import admin_token_authenticate, token_authenticate
from agentchat.core.live.follows import follow_slots, heavy_read
from agentchat.core.live.layer import group_join, inbox_close, inbox_open
from agentchat.core.live.push import EVENT_TYPE
from agentchat.core.live.transport import SendWindow
from agentchat.core.models import Agent
from agentchat.core.rules.errors import AppError, error_body, internal_error
from channels_app import envelopes
from channels_app.envelopes import MonitorCursor
from channels_app.inbox import inbox_page
from channels_app.live import _sweep_interval, tasks_end
from channels_app.monitor import legacy_refuse, monitor_page
from channels_app.services import MONITOR_GROUP, inbox_group

logger = logging.getLogger(__name__)

FOLLOW_PARAMETERS = {"cursor", "limit", "follow"}
# One read of a follow sends at most this many bytes of deliveries (at least one): what a
# stream holds while its client reads.
FOLLOW_BATCH_BYTES = 256 * 1024
_ACCEPT_MAX = 4096
MONITOR_KEY = b"monitor"  # the heavy gate's and the follow count's key of the monitor


def _too_many_follows(limit: int) -> AppError:
    return AppError(
        "SSE_TOO_MANY_FOLLOWS",
        f"{limit} live follows are open already: close one first",
        detail={"limit": limit},
    )


def _accept_types(scope: dict[str, Any]) -> list[MediaType] | None:
    """The media types the Accept headers name (quality above 0); None when there are none."""
    values = [value for value in scope_headers(scope, b"accept") if value.strip()]
    if not values:
        return None
    raw = ",".join(values)
    if len(raw) > _ACCEPT_MAX:
        return []
    types = [MediaType(part) for part in raw.split(",") if part.strip()]
    return [media for media in types if media.quality > 0]


def asks_event_stream(scope: dict[str, Any]) -> bool:
    """Whether an Accept header names ``text/event-stream`` itself."""
    types = _accept_types(scope) or []
    return any((m.main_type, m.sub_type) == ("text", "event-stream") for m in types)


def accepts_event_stream(scope: dict[str, Any]) -> bool:
    types = _accept_types(scope)
    if types is None:
        return True
    return any(
        (m.main_type, m.sub_type) in {("*", "*"), ("text", "*"), ("text", "event-stream")}
        for m in types
    )


def follow_wanted(scope: dict[str, Any]) -> bool:
    """Whether a GET asks for the live follow: ``follow=true``, or an Accept naming
    ``text/event-stream`` (``follow=false`` asks for the replay). Raises INVALID_VALUE for a
    ``follow`` that is neither."""
    if scope.get("method") != "GET":
        return False
    follow = scope_query(scope).get("follow")
    if follow is None or follow == "":
        return asks_event_stream(scope)
    if follow not in ("true", "false"):
        raise AppError("INVALID_VALUE", "follow must be true or false", detail={"field": "follow"})
    return follow == "true"


def _without_follow(scope: dict[str, Any]) -> dict[str, Any]:
    """The scope without ``follow=false``: the JSON view takes no ``follow``."""
    pairs = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
    if not any(key == "follow" for key, _ in pairs):
        return scope
    kept = [(key, value) for key, value in pairs if key != "follow"]
    return {**scope, "query_string": urlencode(kept, encoding="latin-1").encode("latin-1")}


App = Callable[[dict[str, Any], Receive, Send], Awaitable[None]]


class FollowRouter:
    """A follow request to ``stream``, anything else to ``fallback`` (the API lane)."""

    def __init__(self, stream: App, fallback: App) -> None:
        self.stream = stream
        self.fallback = fallback

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        try:
            follow = follow_wanted(scope)
        except AppError as exc:
            await error_send(send, exc)
            return
        if follow:
            await self.stream(scope, receive, send)
        else:
            await self.fallback(_without_follow(scope), receive, send)


# --- what a stream reads -------------------------------------------------------------------


@dataclass(frozen=True)
class Batch:
    events: list[tuple[str, bytes]]  # (id: the cursor after it, data)
    more: bool  # more is there beyond this batch: read again at once


class _Source:
    """One stream's reads: its group, whether a ring concerns it, the read from its position."""

    group: str

    def concerns(self, event: dict[str, Any]) -> bool:
        raise NotImplementedError

    async def read(self) -> Batch:
        raise NotImplementedError


def _limit(query: dict[str, str]) -> int:
    return limit_parse(
        query.get("limit"), maximum=envelopes.INBOX_LIMIT_MAX, default=envelopes.INBOX_LIMIT_DEFAULT
    )


def _cursor_text(scope: dict[str, Any]) -> tuple[str | None, str]:
    """``cursor=`` wins over ``Last-Event-ID`` (an empty one counts as none), as in the replay."""
    raw = scope_query(scope).get("cursor")
    if raw:
        return raw, "cursor"
    header = scope_headers(scope, b"last-event-id")
    return (header[0] if header and header[0] else None), "Last-Event-ID"


def _revoked() -> AppError:
    return AppError("AUTH_INVALID", "the token was revoked")


def _inbox_read(
    *, agent: Agent, cursor: int, limit: int, credential: Credential | None
) -> tuple[list[tuple[str, bytes]], int, int]:
    """A page of ``agent``'s inbox from ``cursor``; then, in the same database turn, whether the
    token still authenticates (nothing delivered after a revocation reaches it). Sync."""
    page = inbox_page(agent=agent, cursor=cursor, limit=limit, max_bytes=FOLLOW_BATCH_BYTES)
    if credential is not None and credentials_gone([credential]):
        raise _revoked()
    events = [(str(item.next_cursor), item.json) for item in page.items]
    return events, page.next_cursor, page.tail


class _InboxSource(_Source):
    def __init__(self, *, agent: Agent, cursor: int, limit: int, credential: Credential) -> None:
        self.agent, self.cursor, self.limit, self.credential = agent, cursor, limit, credential
        self.group = inbox_group(agent.pk)
        self.key = b"a%d" % agent.pk  # the lane's heavy_gate_key of the agent's requests

    def concerns(self, event: dict[str, Any]) -> bool:
        seq = event.get("seq")
        return not isinstance(seq, int) or seq >= self.cursor

    async def read(self) -> Batch:
        events, self.cursor, tail = await heavy_read(
            self.key,
            _inbox_read,
            agent=self.agent,
            cursor=self.cursor,
            limit=self.limit,
            credential=self.credential,
        )
        return Batch(events, more=self.cursor < tail)


def _monitor_read(
    *, cursor: MonitorCursor | None, limit: int
) -> tuple[list[tuple[str, bytes]], MonitorCursor, bool]:
    page = monitor_page(cursor=cursor, limit=limit, max_bytes=FOLLOW_BATCH_BYTES)
    after = envelopes.monitor_cursor_decode(page.next_cursor)
    return [(item.cursor, item.json) for item in page.items], after, page.more


class _MonitorSource(_Source):
    group = MONITOR_GROUP

    def __init__(self, *, cursor: MonitorCursor | None, limit: int) -> None:
        self.cursor, self.limit = cursor, limit

    def concerns(self, event: dict[str, Any]) -> bool:
        return True  # every ring is a delivery the cursor has not passed (numbered after it)

    async def read(self) -> Batch:
        events, self.cursor, more = await heavy_read(
            MONITOR_KEY, _monitor_read, cursor=self.cursor, limit=self.limit
        )
        return Batch(events, more=more)


# --- the endpoints ---------------------------------------------------------------------------


async def _request_prepare(scope: dict[str, Any], receive: Receive) -> bool:
    """The checks of every follow request before its own: the lane's ``request_check``, an
    Accept that takes an event stream, the parameters; the (ignored) body read to the end, so
    the next receive is the disconnect. False when the client went away."""
    request_check(scope, methods={"GET"})
    if not accepts_event_stream(scope):
        raise AppError("NOT_ACCEPTABLE", "a live follow answers text/event-stream only")
    query_check(scope_query(scope), FOLLOW_PARAMETERS)
    return await body_read(receive, limit=settings.AGENTCHAT_MAX_REQUEST_BYTES) is not None


class InboxFollowEndpoint:
    """``GET /v1/agents/<id>/inbox`` with ``follow=true`` or ``Accept: text/event-stream``:
    the owner's deliveries from the cursor, then each one as it commits."""

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        try:
            if not await _request_prepare(scope, receive):
                return
            query = scope_query(scope)
            limit = _limit(query)
            raw, field = _cursor_text(scope)
            cursor = envelopes.inbox_cursor_parse(raw, field=field)
            agent, token = await run_db(
                token_authenticate,
                scope_token(scope, allow_query=False),
                acting=scope_acting(scope),
            )
            agent_id = scope["url_route"]["kwargs"]["agent_id"]
            if agent_id != agent.name:
                raise AppError(
                    "FORBIDDEN",
                    f"this token is {agent.name}'s: /v1/agents/{agent_id[:64]}/ is another agent's",
                    detail={"agent": agent.name},
                )
        except AppError as exc:
            await error_send(send, exc)
            return
        credential = Credential(token_id=token.pk)
        source = _InboxSource(agent=agent, cursor=cursor or 0, limit=limit, credential=credential)
        await _capped(
            scope,
            receive,
            send,
            source=source,
            credential=credential,
            key=source.key,
            limit=settings.AGENTCHAT_SSE_MAX_PER_AGENT,
        )


class MonitorFollowEndpoint:
    """``GET /v1/monitor`` with ``follow=true`` or ``Accept: text/event-stream``: every inbox's
    deliveries from the monitor cursor, then each one as it commits (the admin token only)."""

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        try:
            if not settings.AGENTCHAT_ADMIN_TOKEN:
                admin_token_authenticate(None)  # MONITOR_DISABLED, whatever was sent
            if not await _request_prepare(scope, receive):
                return
            limit = _limit(scope_query(scope))
            raw, field = _cursor_text(scope)
            cursor = None if raw is None else envelopes.monitor_cursor_decode(raw, field=field)
            admin_token_authenticate(scope_token(scope, allow_query=False))
            await run_db(legacy_refuse, cursor)  # before the stream: the replay's JSON error
        except AppError as exc:
            await error_send(send, exc)
            return
        source = _MonitorSource(cursor=cursor, limit=limit)
        await _capped(
            scope,
            receive,
            send,
            source=source,
            credential=None,
            key=MONITOR_KEY,
            limit=settings.AGENTCHAT_SSE_MAX_MONITOR,
        )


async def _capped(
    scope: dict[str, Any],
    receive: Receive,
    send: Send,
    *,
    source: _Source,
    credential: Credential | None,
    key: bytes,
    limit: int,
) -> None:
    """``follow_serve`` holding one of ``key``'s ``limit`` places (across the processes, with
    Redis); with all held, 429 SSE_TOO_MANY_FOLLOWS as JSON."""
    slots = follow_slots()
    try:
        place = await slots.take("sse", key, limit, _too_many_follows)
    except AppError as exc:
        await error_send(send, exc)
        return
    try:
        await follow_serve(scope, receive, send, source=source, credential=credential)
    finally:
        await asyncio.shield(slots.give(place))


# --- the stream ------------------------------------------------------------------------------

_START_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # a proxy that buffers (nginx) passes each event at once
    *((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in SECURITY_HEADERS.items()),
]
HEARTBEAT = b": heartbeat\n\n"


def _events(batch: Batch) -> bytes:
    return b"".join(
        b"event: envelope\nid: %s\ndata: %s\n\n" % (event_id.encode("ascii"), data)
        for event_id, data in batch.events
    )


def _error_event(exc: AppError) -> bytes:
    return b"event: error\ndata: %s\n\n" % json.dumps(error_body(exc)).encode("ascii")


class _TooSlow(Exception):
    pass


class _Stream:
    """The response of one follow: writes at the pace the client reads."""

    def __init__(self, scope: dict[str, Any], send: Send) -> None:
        self.send = send
        self.window = SendWindow(scope)
        self.stall = settings.AGENTCHAT_STREAM_STALL_SECONDS
        self.last_write = 0.0

    async def write(self, chunk: bytes) -> None:
        """Raises _TooSlow once the connection stayed full for AGENTCHAT_STREAM_STALL_SECONDS."""
        if self.window.full and not await self.window.room(self.stall):
            raise _TooSlow
        await self.send({"type": "http.response.body", "body": chunk, "more_body": True})
        self.last_write = asyncio.get_running_loop().time()
        if self.window.full and not await self.window.room(self.stall):
            raise _TooSlow

    async def end(self, chunk: bytes = b"") -> None:
        await self.send({"type": "http.response.body", "body": chunk, "more_body": False})


async def _ring_feed(layer: Any, inbox: str, source: _Source, wake: asyncio.Event) -> None:
    """Every ring of the group that may concern the stream wakes it. A failure of the layer is
    raised (the stream ends; its client resumes by cursor)."""
    while True:
        ring = await layer.receive(inbox)
        if ring.get("type") == EVENT_TYPE and source.concerns(ring.get("event") or {}):
            wake.set()


async def follow_serve(
    scope: dict[str, Any],
    receive: Receive,
    send: Send,
    *,
    source: _Source,
    credential: Credential | None,
) -> None:
    """Subscribe, read from the cursor, answer 200 with the first batch, then stream (see the
    module). An error of the first read (INVALID_CURSOR, AUTH_INVALID) is a JSON answer."""
    layer = get_channel_layer()
    inbox = await inbox_open(layer)  # None: the layer is down (Redis), the sweeps find it all
    tasks: list[asyncio.Future[Any]] = []
    try:
        async with credential_watch(credential) as revoked:
            if inbox is not None and not await group_join(layer, source.group, inbox):
                inbox_rung = None
            else:
                inbox_rung = inbox
            try:
                first = await source.read()
            except Exception as exc:
                await failure_send(
                    send, exc, log=logger, what="live follow failed before it started"
                )
                return
            wake = asyncio.Event()
            rings = (
                asyncio.ensure_future(_ring_feed(layer, inbox_rung, source, wake))
                if inbox_rung is not None
                else asyncio.get_running_loop().create_future()  # no doorbell: sweeps only
            )
            gone = asyncio.ensure_future(disconnected(receive))
            ended = asyncio.ensure_future(revoked.wait())
            tasks.extend([rings, gone, ended])
            await send({"type": "http.response.start", "status": 200, "headers": _START_HEADERS})
            stream = _Stream(scope, send)
            writing = asyncio.ensure_future(
                _follow(stream, source, first, wake=wake, rings=rings, revoked=ended)
            )
            tasks.insert(0, writing)  # ended first: it writes nothing once its client left
            await asyncio.wait([writing, gone], return_when=asyncio.FIRST_COMPLETED)
            if gone.done():
                return  # the client went away: nobody to write to
            await _ended(stream, writing)
    finally:
        try:
            await tasks_end(tasks)
        finally:
            await asyncio.shield(inbox_close(layer, inbox, [source.group]))


async def _ended(stream: _Stream, writing: asyncio.Future[Any]) -> None:
    """End the response the way ``writing`` ended: an error event for an error the client can
    act on (AUTH_INVALID: the token was revoked), nothing more for a reader too slow."""
    error = writing.exception()
    if isinstance(error, AppError):
        await stream.end(_error_event(error))
    elif isinstance(error, _TooSlow):
        await stream.end()
    else:
        ending = internal_error() if error is None else fault_or_internal(error)
        if ending.code == "INTERNAL_ERROR":
            logger.error("live follow failed", exc_info=error)
        await stream.end(_error_event(ending))


async def _follow(
    stream: _Stream,
    source: _Source,
    batch: Batch,
    *,
    wake: asyncio.Event,
    rings: asyncio.Future[Any],
    revoked: asyncio.Future[Any],
) -> None:
    """Send ``batch``, then every batch a ring (or a sweep) finds, until an error ends it."""
    loop = asyncio.get_running_loop()
    heartbeat = settings.AGENTCHAT_SSE_HEARTBEAT_SECONDS
    await stream.write(b": ready\n\n" + _events(batch))
    sweep_at = loop.time() + _sweep_interval()
    while True:
        if not batch.more:
            while not wake.is_set():
                if revoked.done():
                    raise _revoked()
                if rings.done():
                    raise rings.exception() or internal_error()
                now = loop.time()
                if now >= sweep_at:
                    break
                if now >= stream.last_write + heartbeat:
                    await stream.write(HEARTBEAT)
                    continue
                timeout = min(sweep_at, stream.last_write + heartbeat) - now
                waiting = asyncio.ensure_future(wake.wait())
                try:
                    await asyncio.wait(
                        [waiting, rings, revoked],
                        timeout=timeout,
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                finally:
                    waiting.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await waiting
            if revoked.done():
                raise _revoked()
            sweep_at = loop.time() + _sweep_interval()
        wake.clear()  # rings from now on are after this read began: they wake the next one
        batch = await source.read()
        if batch.events:
            await stream.write(_events(batch))
