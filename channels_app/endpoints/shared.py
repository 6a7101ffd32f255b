"""What the live endpoints share: close codes, parameter checks, the websocket
handshake, the pump of a stream's frames, the budget of client frames.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Collection
from typing import Any, ClassVar, NamedTuple, Self

from django.conf import settings

from agentchat.core.db.transactions import run_db
from agentchat.core.http.asgi_http import Receive, Send, request_check
from agentchat.core.http.query import names_check, query_check
from agentchat.core.http.scope import scope_query, websocket_principal
from agentchat.core.identity.revocation import Credential
from agentchat.core.live.follows import follow_slots
from agentchat.core.live.transport import SendWindow
from agentchat.core.rules.errors import AppError, error_body
from channels_app.live import MessageStream, tasks_end

logger = logging.getLogger(__name__)


# Close codes. Daphne's websocket library lets an application close only with 1000 or a code
# of 3000-4999, so the policy closes (RFC 6455's 1008) and the server error (1011) are spelled
# in the private range, after the HTTP status they stand for.
REVOKED_CLOSE_CODE = 4401  # the token was revoked: reconnecting with it is refused

# The subscriber may no longer see the channel (members or visibility changed): an error frame
# saying CHANNEL_NOT_FOUND comes first.
ACCESS_LOST_CLOSE_CODE = 4404

TOO_SLOW_CLOSE_CODE = 4408  # the connection stayed full: reconnect with ?since=<last seq seen>

ERROR_CLOSE_CODE = 4500  # the server failed; reconnect with ?since=

# The client kept sending frames beyond its budget (a flood): closed rather than read on. Also
# the close of a connection past its agent's AGENTCHAT_WS_MAX_PER_AGENT, after an error frame
# STREAM_TOO_MANY_CONNECTIONS.
FLOODING_CLOSE_CODE = 4429


def frame_fields_check(frame: dict[str, Any], allowed: Collection[str]) -> None:
    """UNKNOWN_FIELD for a client frame's field not in ``allowed`` (the query rule's check)."""
    names_check(frame, allowed, what="frame field")


class Handshake(NamedTuple):
    principal: str
    credential: Credential | None  # a token or the browser's session
    key: bytes  # at the heavy gate and in the count of connections (websocket_principal)


async def _handshake(
    scope: dict[str, Any], receive: Receive, send: Send, parameters: set[str]
) -> Handshake | None:
    """The checks every websocket passes before it is accepted: the connect, the shared
    ``request_check``, no parameter but ``parameters``, a principal. Returns the principal,
    the credential it authenticated with and its key, or None once the handshake is
    refused."""
    if (await receive())["type"] != "websocket.connect":
        return None
    try:
        request_check(scope)
        query_check(scope_query(scope), parameters)
        principal, token_id, gate_key = await run_db(websocket_principal, scope)
    except Exception as exc:
        await _refuse_handshake(send, exc)
        return None
    if token_id is not None:
        return Handshake(principal, Credential(token_id=token_id), gate_key)
    # A signed-in browser: signing out (the session row gone) ends the connection.
    session = scope.get("session")
    key = getattr(session, "session_key", None) if session is not None else None
    return Handshake(principal, Credential(session_key=key) if key else None, gate_key)


class WebsocketEndpoint:
    """A websocket ASGI app: the handshake every websocket passes (``_handshake``, with the
    class's query ``parameters``), then the subclass's ``session`` for an accepted one."""

    parameters: ClassVar[set[str]]

    @classmethod
    def as_asgi(cls) -> Self:
        return cls()

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        handshake = await _handshake(scope, receive, send, self.parameters)
        if handshake is not None:
            await self.session(scope, receive, send, handshake)

    async def session(
        self, scope: dict[str, Any], receive: Receive, send: Send, handshake: Handshake
    ) -> None:
        raise NotImplementedError


def _too_many_connections(limit: int) -> AppError:
    return AppError(
        "STREAM_TOO_MANY_CONNECTIONS",
        f"{limit} websockets of this agent are open already: close one first",
        detail={"limit": limit},
    )


@contextlib.asynccontextmanager
async def connection_slot(send: Send, key: bytes) -> AsyncIterator[bool]:
    """Hold one of ``key``'s AGENTCHAT_WS_MAX_PER_AGENT places (across the processes, with
    Redis) for the block: True. With all of them held: the connection is accepted, told
    STREAM_TOO_MANY_CONNECTIONS in an error frame and closed 4429 (a refused handshake could
    say no code), and the block gets False."""
    slots = follow_slots()
    try:
        place = await slots.take(
            "ws", key, settings.AGENTCHAT_WS_MAX_PER_AGENT, _too_many_connections
        )
    except AppError as exc:
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": _error_frame(exc)})
        await send({"type": "websocket.close", "code": FLOODING_CLOSE_CODE})
        yield False
        return
    try:
        yield True
    finally:
        await asyncio.shield(slots.give(place))


async def _refuse_handshake(send: Send, error: Exception) -> None:
    """Close before the accept: the handshake is refused (403), never daphne's 500."""
    if not isinstance(error, AppError):
        logger.error("websocket handshake failed", exc_info=error)
    await send({"type": "websocket.close"})


# A client frame of the multiplexed stream: at most this many characters, and at most
# CLIENT_FRAME_BURST of them at once, refilled at CLIENT_FRAMES_PER_SECOND (a subscribe costs a
# few reads of the database and the layer; a frame beyond the budget costs nothing but its
# error frame, sent only while the connection has room).
CLIENT_FRAME_MAX_CHARS = 4096

CLIENT_FRAME_BURST = 128

CLIENT_FRAMES_PER_SECOND = 16.0


class _FrameBudget:
    """A token bucket of client frames: ``take()`` is False once the client sent more than
    ``burst`` frames faster than ``rate`` a second. ``flooding`` once more than ``burst``
    frames in a row were over the budget: the connection is then closed (4429), so a flood
    costs the server one cheap check per frame, ``burst`` times, and no more."""

    def __init__(self, burst: int, rate: float) -> None:
        self.burst = burst
        self.rate = rate
        self.tokens = float(burst)
        self.at = asyncio.get_running_loop().time()
        self.over = 0  # frames over the budget since the last one taken

    @property
    def flooding(self) -> bool:
        return self.over > self.burst

    def take(self) -> bool:
        now = asyncio.get_running_loop().time()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens < 1:
            self.over += 1
            return False
        self.tokens -= 1
        self.over = 0
        return True


_TOO_MANY_FRAMES = AppError(
    "STREAM_TOO_MANY_FRAMES",
    f"at most {CLIENT_FRAME_BURST} frames at once and {CLIENT_FRAMES_PER_SECOND:g} a second: "
    "this one was dropped",
    detail={"burst": CLIENT_FRAME_BURST, "per_second": CLIENT_FRAMES_PER_SECOND},
)


async def _stream_run(
    stream: MessageStream,
    window: SendWindow,
    send: Send,
    *,
    channel: str | None = None,
    until: asyncio.Future[Any] | None = None,
    gate: asyncio.Lock | None = None,
) -> BaseException | None:
    """Send ``stream`` (``_pump``) until it ends, returning what ended it, or until ``until``
    is done (None). ``stream.ended`` stops it at once, even while the pump waits for room.
    ``gate``: the connection's, when several streams share it."""
    pump = asyncio.ensure_future(
        _pump(stream, window, send, channel=channel, gate=gate or asyncio.Lock())
    )
    ended = asyncio.ensure_future(stream.ended.wait())
    try:
        awaited = [pump, ended] if until is None else [pump, ended, until]
        await asyncio.wait(awaited, return_when=asyncio.FIRST_COMPLETED)
        if until is not None and until.done():
            return None
        return stream.error if ended.done() else pump.exception()
    finally:
        await tasks_end([pump, ended])


async def _close_for(error: BaseException | None, send: Send, *, what: str) -> None:
    """Close a stream that ended with ``error``, with the code that tells the client what to
    do next (``what`` names the stream in the log)."""
    if isinstance(error, _TooSlow):
        await send({"type": "websocket.close", "code": TOO_SLOW_CLOSE_CODE})
    elif isinstance(error, _Flooding):
        await send({"type": "websocket.close", "code": FLOODING_CLOSE_CODE})
    elif isinstance(error, AppError) and error.code == "AUTH_INVALID":
        await send({"type": "websocket.close", "code": REVOKED_CLOSE_CODE})
    elif isinstance(error, AppError):  # CHANNEL_NOT_FOUND: it lost sight of the channel
        await send({"type": "websocket.send", "text": _error_frame(error)})
        await send({"type": "websocket.close", "code": ACCESS_LOST_CLOSE_CODE})
    else:
        logger.error("%s failed", what, exc_info=error)
        await send({"type": "websocket.close", "code": ERROR_CLOSE_CODE})


async def _pump(
    stream: MessageStream,
    window: SendWindow,
    send: Send,
    *,
    gate: asyncio.Lock,
    channel: str | None = None,
) -> None:
    """Send what ``stream`` yields at the pace the client reads (``channel``: the name a
    multiplexed stream's frames carry), one frame at a time through ``gate``: a frame is sent
    and, when it filled the connection, the gate held until there is room again. Raises
    _TooSlow once the connection stayed full for AGENTCHAT_STREAM_STALL_SECONDS, and whatever
    ends the stream."""
    stall = settings.AGENTCHAT_STREAM_STALL_SECONDS
    async for message in stream:
        async with gate:
            if window.full and not await window.room(stall):
                raise _TooSlow  # another stream of the connection filled it
            await send({"type": "websocket.send", "text": _frame(message, channel=channel)})
            if window.full and not await window.room(stall):
                raise _TooSlow


_NO_CLIENT_FRAMES = AppError("INVALID_VALUE", "this stream takes no messages from the client")


async def _client_frames(receive: Receive) -> AsyncGenerator[dict[str, Any] | None, None]:
    """The client's frames until it disconnects: each one within its budget, or None for one
    over it (to drop). Raises _Flooding once more than a burst of them in a row were over it."""
    budget = _FrameBudget(CLIENT_FRAME_BURST, CLIENT_FRAMES_PER_SECOND)
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        if message["type"] != "websocket.receive":
            continue
        if budget.take():
            yield message
        elif budget.flooding:
            raise _Flooding
        else:
            yield None


async def _client(receive: Receive, window: SendWindow, send: Send) -> None:
    """Until the client disconnects: every frame it sends (the stream takes none) gets an error
    frame, unless its connection is full anyway or the frame is over the client's budget.
    Raises _Flooding (the connection is then closed, 4429) for a flood of frames."""
    frame = _error_frame(_NO_CLIENT_FRAMES)
    async with contextlib.aclosing(_client_frames(receive)) as frames:
        async for message in frames:
            if message is not None and not window.full:
                await send({"type": "websocket.send", "text": frame})


class _TooSlow(Exception):
    pass


class _Flooding(Exception):
    pass


def _frame(message: dict[str, Any], *, channel: str | None = None) -> str:
    # ASCII escapes: a frame is text, and stays valid whatever the message holds.
    named = {} if channel is None else {"channel": channel}
    return json.dumps({"type": "message", **named, "message": message})


def _error_frame(error: AppError, *, channel: str | None = None) -> str:
    named = {} if channel is None else {"channel": channel}
    return json.dumps({"type": "error", **named, **error_body(error)})
