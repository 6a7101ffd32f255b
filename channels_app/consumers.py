"""The live endpoints, served before Django (DESIGN §6): thin ASGI applications that
authenticate, parse, call ``channels_app.live`` and render.

- ``ChannelWaitConsumer``: ``GET /api/v1/channels/<name>/wait/?timeout=S&limit=N``.
- ``ChannelStreamConsumer``: ``/ws/channels/<name>/[?since=N]``.

Both pass the shared ``request_check`` first (the REST lane's Host, Authorization, method and
Accept rules) and validate everything before they subscribe to anything, so a refused request
leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from typing import Any

from django.conf import settings

from agentchat.core.asgi_http import (
    Receive,
    Send,
    body_read,
    disconnected,
    error_send,
    json_send,
    request_check,
)
from agentchat.core.db import run_db
from agentchat.core.errors import AppError, error_body, internal_error
from agentchat.core.scope import scope_query, scope_token, websocket_principal
from agentchat.core.services import token_authenticate
from agentchat.core.transport import SendWindow
from agentchat.core.validation import int_parse, number_parse
from channels_app.live import (
    MessageStream,
    WaitResult,
    message_stream,
    message_wait,
    tasks_end,
)
from channels_app.selectors import READ_LIMIT_MAX, channel_get

logger = logging.getLogger(__name__)

WAIT_PARAMETERS = {"timeout", "limit"}
STREAM_PARAMETERS = {"since", "token"}
# Close codes. Daphne's websocket library lets an application close only with 1000 or a code
# of 3000-4999, so the policy closes (RFC 6455's 1008) and the server error (1011) are spelled
# in the private range, after the HTTP status they stand for.
REVOKED_CLOSE_CODE = 4401  # the token was revoked: reconnecting with it is refused
# The subscriber may no longer see the channel (members or visibility changed): an error frame
# saying CHANNEL_NOT_FOUND comes first.
ACCESS_LOST_CLOSE_CODE = 4404
TOO_SLOW_CLOSE_CODE = 4408  # the connection stayed full: reconnect with ?since=<last seq seen>
ERROR_CLOSE_CODE = 4500  # the server failed; reconnect with ?since=


def parse_timeout(raw: str | None) -> float:
    timeout = number_parse(
        raw,
        field="timeout",
        code="INVALID_TIMEOUT",
        maximum=settings.AGENTCHAT_WAIT_MAX_TIMEOUT,
        default=settings.AGENTCHAT_WAIT_DEFAULT_TIMEOUT,
    )
    assert timeout is not None
    return timeout


def _unknown_parameters(query: dict[str, str], known: set[str]) -> None:
    unknown = sorted(set(query) - known)
    if unknown:
        raise AppError(
            "UNKNOWN_FIELD",
            f"unknown parameter(s): {', '.join(unknown)}",
            detail={"fields": unknown},
        )


class ChannelWaitConsumer:
    """``GET /api/v1/channels/<name>/wait/?timeout=S&limit=N``: a long-poll as a plain ASGI app.

    While parked it holds no thread and no database connection. A client that disconnects ends
    the wait at once and moves nothing, even when its page is being read on a database thread
    at that moment (``abandoned``).
    """

    @classmethod
    def as_asgi(cls) -> ChannelWaitConsumer:
        return cls()

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        try:
            request_check(scope, methods={"GET"}, json_only=True)
            # Read the (ignored) body to the end, so the next receive() is the disconnect.
            if await body_read(receive, limit=settings.AGENTCHAT_MAX_REQUEST_BYTES) is None:
                return
            query = scope_query(scope)
            _unknown_parameters(query, WAIT_PARAMETERS)
            timeout = parse_timeout(query.get("timeout"))
            limit = int_parse(
                query.get("limit"),
                field="limit",
                code="INVALID_VALUE",
                minimum=1,
                maximum=READ_LIMIT_MAX,
                default=READ_LIMIT_MAX,
            )
            agent, token = await run_db(token_authenticate, scope_token(scope, allow_query=False))
            channel = await run_db(
                channel_get, scope["url_route"]["kwargs"]["name"], viewer=agent.name
            )
        except AppError as exc:
            await error_send(send, exc)
            return
        except Exception:
            logger.exception("wait failed before parking")
            await error_send(send, internal_error())
            return
        abandoned = threading.Event()
        answered = asyncio.Event()

        async def deliver(result: WaitResult) -> None:
            # Before the wait leaves the layer: its cursor has moved, its answer goes out now.
            answered.set()
            await json_send(send, 200, result.body())

        waiting = asyncio.ensure_future(
            message_wait(
                channel=channel,
                agent=agent,
                timeout=timeout,
                limit=limit,
                token_id=token.pk,
                abandoned=abandoned,
                deliver=deliver,
            )
        )
        gone = asyncio.ensure_future(disconnected(receive))
        try:
            await asyncio.wait({waiting, gone}, return_when=asyncio.FIRST_COMPLETED)
            if answered.is_set() and not waiting.done():
                await asyncio.wait({waiting})  # sent: let it leave the layer
        finally:
            if not waiting.done():
                # First: a cursor move already on a database thread must not commit.
                abandoned.set()
            for task in (waiting, gone):
                task.cancel()
        if not waiting.done() or waiting.cancelled() or answered.is_set():
            return  # the client went away, or it has its answer
        error = waiting.exception()
        if error is None:
            await json_send(send, 200, waiting.result().body())
        elif isinstance(error, AppError):
            await error_send(send, error)
        else:
            logger.error("wait failed", exc_info=error)
            await error_send(send, internal_error())


class ChannelStreamConsumer:
    """``/ws/channels/<name>/[?since=N]``: every message of the channel as a JSON frame
    ``{"type": "message", "message": {...}}``, in seq order, each seq once per connection; with
    ``since`` every message after that seq first, so a reconnect loses nothing. Never moves a
    cursor, takes no frames from the client (each is answered with an error frame).

    Flow control: the stream is sent only as fast as the client reads (``SendWindow``); a
    client whose connection stays full for AGENTCHAT_STREAM_STALL_SECONDS is closed with 4408, and
    the session of a token that gets revoked with 4401. A subscriber that may no longer see the
    channel (members or visibility changed) gets an error frame (CHANNEL_NOT_FOUND) and 4404.
    """

    @classmethod
    def as_asgi(cls) -> ChannelStreamConsumer:
        return cls()

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if (await receive())["type"] != "websocket.connect":
            return
        try:
            request_check(scope)
            query = scope_query(scope)
            _unknown_parameters(query, STREAM_PARAMETERS)
            since = int_parse(query.get("since"), field="since", code="INVALID_SEQ")
            principal, token_id = await run_db(websocket_principal, scope)
            channel = await run_db(
                channel_get, scope["url_route"]["kwargs"]["name"], viewer=principal
            )
        except AppError:
            await send({"type": "websocket.close"})  # before accept: the handshake is refused
            return
        except Exception:
            logger.exception("websocket handshake failed")
            await send({"type": "websocket.close"})
            return
        await _stream_session(
            scope, receive, send, channel=channel, viewer=principal, since=since, token_id=token_id
        )


async def _stream_session(
    scope: dict[str, Any],
    receive: Receive,
    send: Send,
    *,
    channel: Any,
    viewer: str,
    since: int | None,
    token_id: int | None,
) -> None:
    window = SendWindow(scope)
    tasks: list[asyncio.Future[Any]] = []
    accepted = False
    try:
        async with message_stream(
            channel=channel, viewer=viewer, since=since, token_id=token_id
        ) as stream:
            # Subscribed and positioned before the handshake completes: whatever is posted
            # once the client sees the connection open is streamed to it.
            await send({"type": "websocket.accept"})
            accepted = True
            pump = asyncio.ensure_future(_pump(stream, window, send))
            client = asyncio.ensure_future(_client(receive, window, send))
            ended = asyncio.ensure_future(stream.ended.wait())
            tasks = [pump, client, ended]
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            if client.done():
                return  # the client closed the connection
            error = stream.error if ended.done() else pump.exception()
            await _close_for(error, send, channel=channel)
    except Exception as exc:
        # CHANNEL_NOT_FOUND on entry: it lost sight of the channel during the handshake.
        if not isinstance(exc, AppError):
            logger.exception("stream of channel %s failed", channel.pk)
        # Before the accept a close refuses the handshake (403), never daphne's 500.
        refusal = {"type": "websocket.close"}
        await send({**refusal, "code": ERROR_CLOSE_CODE} if accepted else refusal)
    finally:
        await tasks_end(tasks)
        window.close()


async def _close_for(error: BaseException | None, send: Send, *, channel: Any) -> None:
    """Close a stream that ended with ``error``, with the code that tells the client what to
    do next."""
    if isinstance(error, _TooSlow):
        await send({"type": "websocket.close", "code": TOO_SLOW_CLOSE_CODE})
    elif isinstance(error, AppError) and error.code == "AUTH_INVALID":
        await send({"type": "websocket.close", "code": REVOKED_CLOSE_CODE})
    elif isinstance(error, AppError):  # CHANNEL_NOT_FOUND: it lost sight of the channel
        await send({"type": "websocket.send", "text": _error_frame(error)})
        await send({"type": "websocket.close", "code": ACCESS_LOST_CLOSE_CODE})
    else:
        logger.error("stream of channel %s failed", channel.pk, exc_info=error)
        await send({"type": "websocket.close", "code": ERROR_CLOSE_CODE})


async def _pump(stream: MessageStream, window: SendWindow, send: Send) -> None:
    stall = settings.AGENTCHAT_STREAM_STALL_SECONDS
    async for message in stream:
        await send({"type": "websocket.send", "text": _frame(message)})
        if window.full and not await window.room(stall):
            raise _TooSlow


_NO_CLIENT_FRAMES = AppError("INVALID_VALUE", "this stream takes no messages from the client")


async def _client(receive: Receive, window: SendWindow, send: Send) -> None:
    """Until the client disconnects: every frame it sends (the stream takes none) gets an error
    frame, unless its connection is full anyway."""
    frame = _error_frame(_NO_CLIENT_FRAMES)
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        if message["type"] == "websocket.receive" and not window.full:
            await send({"type": "websocket.send", "text": frame})


class _TooSlow(Exception):
    pass


def _frame(message: dict[str, Any]) -> str:
    # ASCII escapes: a frame is text, and stays valid whatever the message holds.
    return json.dumps({"type": "message", "message": message})


def _error_frame(error: AppError) -> str:
    return json.dumps({"type": "error", **error_body(error)})
