"""``/ws/channels/<name>/``: one channel's message stream on a websocket."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from agentchat.core.db.transactions import run_db
from agentchat.core.http.asgi_http import Receive, Send
from agentchat.core.http.scope import scope_query
from agentchat.core.identity.revocation import Credential
from agentchat.core.live.transport import SendWindow
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.validation import int_parse
from channels_app.endpoints.shared import (
    ERROR_CLOSE_CODE,
    Handshake,
    WebsocketEndpoint,
    _client,
    _close_for,
    _Flooding,
    _refuse_handshake,
    _stream_run,
    connection_slot,
)
from channels_app.live import message_stream, tasks_end
from channels_app.selectors import channel_get

logger = logging.getLogger(__name__)


STREAM_PARAMETERS = {"since", "token"}


class MessageStreamEndpoint(WebsocketEndpoint):
    """``/ws/channels/<name>/[?since=N]``: every message of the channel as a JSON frame
    ``{"type": "message", "message": {...}}``, in seq order, each seq once per connection; with
    ``since`` every message after that seq first, so a reconnect loses nothing. Never moves a
    cursor, takes no frames from the client (each is answered with an error frame).

    Its replay reads (``MessageStream``) take the agent's turn at the heavy gate
    (``agentchat.core.live.follows.heavy_read``); an agent holds at most
    AGENTCHAT_WS_MAX_PER_AGENT websockets open (``connection_slot``).

    Flow control: the stream is sent only as fast as the client reads (``SendWindow``); a
    client whose connection stays full for AGENTCHAT_STREAM_STALL_SECONDS is closed with 4408, and
    the session of a token that gets revoked with 4401. A subscriber that may no longer see the
    channel (members or visibility changed) gets an error frame (CHANNEL_NOT_FOUND) and 4404.
    """

    parameters = STREAM_PARAMETERS

    async def session(
        self, scope: dict[str, Any], receive: Receive, send: Send, handshake: Handshake
    ) -> None:
        principal, credential, key = handshake
        try:
            since = int_parse(scope_query(scope).get("since"), field="since", code="INVALID_SEQ")
            channel = await run_db(
                channel_get, scope["url_route"]["kwargs"]["name"], viewer=principal
            )
        except Exception as exc:
            await _refuse_handshake(send, exc)
            return
        async with connection_slot(send, key) as placed:
            if placed:
                await _stream_session(
                    scope,
                    receive,
                    send,
                    channel=channel,
                    viewer=principal,
                    since=since,
                    credential=credential,
                    key=key,
                )


async def _stream_session(
    scope: dict[str, Any],
    receive: Receive,
    send: Send,
    *,
    channel: Any,
    viewer: str,
    since: int | None,
    credential: Credential | None,
    key: bytes,
) -> None:
    window = SendWindow(scope)
    tasks: list[asyncio.Future[Any]] = []
    accepted = False
    try:
        async with message_stream(
            channel=channel, viewer=viewer, since=since, credential=credential, gate_key=key
        ) as stream:
            # Subscribed and positioned before the handshake completes: whatever is posted
            # once the client sees the connection open is streamed to it.
            await send({"type": "websocket.accept"})
            accepted = True
            client = asyncio.ensure_future(_client(receive, window, send))
            tasks = [client]
            error = await _stream_run(stream, window, send, until=client)
            if client.done():
                flood = None if client.cancelled() else client.exception()
                if isinstance(flood, _Flooding):
                    await _close_for(flood, send, what=f"stream of channel {channel.pk}")
                return  # the client closed the connection
            await _close_for(error, send, what=f"stream of channel {channel.pk}")
    except Exception as exc:
        # CHANNEL_NOT_FOUND on entry: it lost sight of the channel during the handshake.
        if not isinstance(exc, AppError):
            logger.exception("stream of channel %s failed", channel.pk)
        # Before the accept a close refuses the handshake (403), never daphne's 500.
        refusal = {"type": "websocket.close"}
        await send({**refusal, "code": ERROR_CLOSE_CODE} if accepted else refusal)
    finally:
        try:
            await tasks_end(tasks)
        finally:
            window.close()
