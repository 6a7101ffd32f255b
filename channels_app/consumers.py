"""Live delivery, served before Django (DESIGN §6): the wait long-poll and the websocket stream.

Both follow the same order: subscribe to the channel's group, then read the database, then
await a ring. The ring is only a doorbell; what is delivered is always read back by seq, so a
lost or late ring delays nothing that a later ring or the timeout does not recover.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import random
import weakref
from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import get_channel_layer
from django.conf import settings

from agentchat.core.db import db_call
from agentchat.core.errors import AppError, error_body
from agentchat.core.push import EVENT_TYPE
from agentchat.core.scope import scope_agent, scope_query, websocket_principal
from channels_app.selectors import (
    channel_get,
    channel_last_seq,
    message_to_dict,
    messages_after_visible,
)
from channels_app.services import channel_group, cursors_compare_and_set, messages_read

REPLAY_PAGE = 500
# A subscriber that may no longer see its channel (members or visibility changed) is closed
# with this code after an error frame saying CHANNEL_NOT_FOUND. An application code like an
# HTTP status: daphne (autobahn) sends no close code but 1000 and 3000-4999.
ACCESS_LOST_CLOSE_CODE = 4404
logger = logging.getLogger(__name__)


def parse_timeout(raw: str | None) -> float:
    if raw is None or raw == "":
        return settings.AGENTCHAT_WAIT_DEFAULT_TIMEOUT
    maximum = settings.AGENTCHAT_WAIT_MAX_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value <= maximum):
        raise AppError(
            "INVALID_TIMEOUT",
            f"timeout must be a number of seconds from 0 to {maximum:g}",
            detail={"timeout": raw, "max": maximum},
        )
    return value


def ring_may_concern(event: dict[str, Any], name: str) -> bool:
    """False only when a ring certainly carries nothing relevant to ``name``."""
    if event.get("kind") != "message" or event.get("access"):
        return True  # a change of members or visibility concerns every waiter: re-check
    sender, to = event.get("from"), event.get("to")
    return not (sender == name or (to and name not in to))


async def _send_json(send: Any, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


class ChannelWaitConsumer:
    """``GET /api/v1/channels/<name>/wait/?timeout=S``: a long-poll as a plain ASGI app.

    While parked it holds no thread and no database connection: it awaits its own layer
    channel. A client that disconnects ends the wait at once.
    """

    @classmethod
    def as_asgi(cls) -> ChannelWaitConsumer:
        return cls()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        # Read the (ignored) request body to the end, so the next receive() is the disconnect.
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            if not message.get("more_body"):
                break
        try:
            if scope["method"] != "GET":
                raise AppError("METHOD_NOT_ALLOWED", f"method {scope['method']} not allowed")
            timeout = parse_timeout(scope_query(scope).get("timeout"))
            unknown = sorted(set(scope_query(scope)) - {"timeout"})
            if unknown:
                raise AppError("UNKNOWN_FIELD", f"unknown parameter(s): {', '.join(unknown)}")
            agent = await db_call(scope_agent)(scope)
            channel = await db_call(channel_get)(
                scope["url_route"]["kwargs"]["name"], viewer=agent.name
            )
        except AppError as exc:
            await _send_json(send, exc.status, error_body(exc))
            return
        waiting = asyncio.ensure_future(self.wait(channel, agent, timeout))
        disconnected = asyncio.ensure_future(self._disconnect(receive))
        try:
            done, _ = await asyncio.wait(
                {waiting, disconnected}, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for task in (waiting, disconnected):
                task.cancel()
        if waiting in done:
            try:
                result = waiting.result()
            except AppError as exc:  # the waiter may no longer see the channel
                await _send_json(send, exc.status, error_body(exc))
                return
            await _send_json(send, 200, result)

    @staticmethod
    async def _disconnect(receive: Any) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    @staticmethod
    async def wait(channel: Any, agent: Any, timeout: float) -> dict[str, Any]:
        layer = get_channel_layer()
        inbox = await layer.new_channel()
        group = channel_group(channel.pk)
        await layer.group_add(group, inbox)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        read = db_call(messages_read)
        try:
            while True:
                messages, cursor, known = await read(
                    channel=channel, agent=agent, advance_if_empty=False
                )
                if messages:
                    return {"messages": [message_to_dict(m) for m in messages], "cursor": cursor}
                # Park. `known`: every message up to it is known to be irrelevant to us.
                while True:
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        # One last look: a ring is at most once, the database is the record.
                        messages, cursor, _ = await read(
                            channel=channel, agent=agent, advance_if_empty=False
                        )
                        result = {"messages": [message_to_dict(m) for m in messages]}
                        result["cursor"] = cursor
                        return result if messages else {**result, "timed_out": True}
                    try:
                        ring = await asyncio.wait_for(layer.receive(inbox), remaining)
                    except TimeoutError:
                        continue
                    if ring.get("type") != EVENT_TYPE:
                        continue
                    event = ring["event"]
                    if not ring_may_concern(event, agent.name):
                        if event.get("seq") == known + 1:
                            known += 1
                        continue
                    # The ring carries the next message and it is ours: move the cursor onto it
                    # (compare-and-set, batched with the other waiters it woke).
                    if (
                        event.get("seq") == known + 1
                        and "message" in event
                        and await cursor_move(agent.pk, channel.pk, cursor, event["seq"])
                    ):
                        return {"messages": [event["message"]], "cursor": event["seq"]}
                    break  # a gap, a big message or a moved cursor: read the database
        finally:
            await asyncio.shield(_close_inbox(layer, group, inbox))


async def _close_inbox(layer: Any, group: str, inbox: str) -> None:
    """Leave the group and free the inbox. Channels has no call that deletes a channel: the
    in-memory layer keeps rings that arrived after the wait had its answer for a minute (and
    scans them on every send), and the Redis pub/sub layer stays subscribed to the inbox for
    good. Both free a channel when a receive on it is cancelled, so: drain, then cancel one."""
    await layer.group_discard(group, inbox)
    held = getattr(layer, "channels", None)  # the channels the layer holds in this process
    if not isinstance(held, dict):
        return
    for _ in range(_INBOX_DRAIN_MAX):
        if inbox not in held:
            return  # never subscribed again just to be freed
        receiving = asyncio.ensure_future(layer.receive(inbox))
        await asyncio.sleep(0)  # a queued ring is taken at once; an empty inbox parks
        if not receiving.done():
            receiving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await receiving
            return
        if receiving.exception() is not None:
            return


_INBOX_DRAIN_MAX = 1000  # more stale rings than this are left to the layer's expiry


class CursorMoves:
    """Collects the cursor moves of the waiters that one ring woke and writes them in one
    transaction (``cursors_compare_and_set``) instead of one transaction each."""

    def __init__(self) -> None:
        self.pending: list[tuple[tuple[int, int, int, int], asyncio.Future[bool]]] = []

    async def move(self, agent_id: int, channel_id: int, expected: int, new: int) -> bool:
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        if not self.pending:
            asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self.flush()))
        self.pending.append(((agent_id, channel_id, expected, new), future))
        return await future

    async def flush(self) -> None:
        batch, self.pending = self.pending, []
        try:
            results = await db_call(cursors_compare_and_set)(moves=[move for move, _ in batch])
        except Exception as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), moved in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(moved)


_cursor_moves: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, CursorMoves] = (
    weakref.WeakKeyDictionary()
)


async def cursor_move(agent_id: int, channel_id: int, expected: int, new: int) -> bool:
    loop = asyncio.get_running_loop()
    moves = _cursor_moves.get(loop)
    if moves is None:
        moves = _cursor_moves[loop] = CursorMoves()
    return await moves.move(agent_id, channel_id, expected, new)


class ChannelStreamConsumer(AsyncJsonWebsocketConsumer):
    """``/ws/channels/<name>/[?since=N]``: every message of the channel as a JSON frame.

    With ``since`` it first replays every message after that seq, so a reconnect loses nothing;
    frames are in seq order and each seq is sent once per connection. Never moves a cursor.
    Rings can be lost (the layer delivers at most once, e.g. across a Redis reconnect): a gap is
    filled from the database at the next ring, and a slow sweep (AGENTCHAT_STREAM_SWEEP_SECONDS)
    finds a lost last message even when no ring follows it.
    """

    async def connect(self) -> None:
        self.group = None
        self.sweeper: asyncio.Future[None] | None = None
        self.sending = asyncio.Lock()  # frames go out in seq order, each once
        self.ended = False
        try:
            self.principal = await db_call(websocket_principal)(self.scope)
            self.channel_row = await db_call(channel_get)(
                self.scope["url_route"]["kwargs"]["name"], viewer=self.principal
            )
            since = scope_query(self.scope).get("since")
            if since is not None and not since.isdigit():
                raise AppError("INVALID_SEQ", "since must be a non-negative integer")
        except AppError:
            await self.close()  # before accept: the handshake is refused (HTTP 403)
            return
        self.group = channel_group(self.channel_row.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        # Fixed before the handshake completes: whatever is posted once the client sees the
        # connection open is streamed to it.
        if since is None:
            self.last_sent = await db_call(channel_last_seq)(self.channel_row.pk)
        else:
            self.last_sent = int(since)
        await self.accept()
        if since is not None:
            async with self.sending:
                await self.catch_up()
        self.sweeper = asyncio.ensure_future(self.sweep())

    async def disconnect(self, code: int) -> None:
        if self.sweeper is not None:
            self.sweeper.cancel()
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        error = AppError("INVALID_VALUE", "this stream takes no messages from the client")
        await self.send_json({"type": "error", **error_body(error)})

    async def catch_up(self) -> None:
        """Send every message after ``last_sent``; the caller holds ``sending``.

        Every message after the one that recorded a change of members or visibility comes
        through here (that one is never inlined in its ring), and this read checks access
        after reading: a subscriber that may no longer see the channel gets no further frame
        but an error, and is closed."""
        fetch = db_call(messages_after_visible)
        while not self.ended:
            try:
                messages = await fetch(
                    channel=self.channel_row,
                    viewer=self.principal,
                    after=self.last_sent,
                    limit=REPLAY_PAGE,
                )
            except AppError as exc:
                self.ended = True
                await self.send_json({"type": "error", **error_body(exc)})
                await self.close(code=ACCESS_LOST_CLOSE_CODE)
                return
            for message in messages:
                await self.send_json({"type": "message", "message": message_to_dict(message)})
                self.last_sent = message.seq
            if len(messages) < REPLAY_PAGE:
                return

    async def sweep(self) -> None:
        interval = settings.AGENTCHAT_STREAM_SWEEP_SECONDS
        while True:
            await asyncio.sleep(interval * random.uniform(0.8, 1.2))  # spread the subscribers
            try:
                last_seq = await db_call(channel_last_seq)(self.channel_row.pk)
                if last_seq > self.last_sent:
                    async with self.sending:
                        await self.catch_up()
            except Exception:  # keep sweeping; the next ring or sweep retries
                logger.exception("stream sweep of channel %s failed", self.channel_row.pk)

    async def agentchat_event(self, ring: dict[str, Any]) -> None:
        event = ring["event"]
        if event.get("kind") != "message":
            return
        async with self.sending:
            if self.ended or event["seq"] <= self.last_sent:
                return
            if event["seq"] == self.last_sent + 1 and "message" in event:
                await self.send_json({"type": "message", "message": event["message"]})
                self.last_sent = event["seq"]
            else:
                await self.catch_up()  # a gap (a lost ring) or a big message: read back by seq
