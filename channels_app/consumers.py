"""The live endpoints, served before Django (DESIGN §6): thin ASGI applications that
authenticate, parse, call ``channels_app.live`` and render.

- ``ChannelWaitConsumer``: ``GET /api/v1/channels/<name>/wait/?timeout=S&limit=N``.
- ``ChannelStreamConsumer``: ``/ws/channels/<name>/[?since=N]``.
- ``ChannelsStreamConsumer``: ``/ws/channels/``, many channels on one connection (subscribe and
  unsubscribe frames), each a ``message_stream`` as the single channel's.

Both pass the shared ``request_check`` first (the REST lane's Host, Authorization, method and
Accept rules) and validate everything before they subscribe to anything, so a refused request
leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import AsyncGenerator
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
from agentchat.core.query import query_check
from agentchat.core.revocation import Credential, credential_watch
from agentchat.core.scope import scope_query, scope_token, websocket_principal
from agentchat.core.services import token_authenticate
from agentchat.core.transport import SendWindow
from agentchat.core.validation import int_parse, json_loads_strict, number_parse
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
MUX_PARAMETERS = {"token"}
# Close codes. Daphne's websocket library lets an application close only with 1000 or a code
# of 3000-4999, so the policy closes (RFC 6455's 1008) and the server error (1011) are spelled
# in the private range, after the HTTP status they stand for.
REVOKED_CLOSE_CODE = 4401  # the token was revoked: reconnecting with it is refused
# The subscriber may no longer see the channel (members or visibility changed): an error frame
# saying CHANNEL_NOT_FOUND comes first.
ACCESS_LOST_CLOSE_CODE = 4404
TOO_SLOW_CLOSE_CODE = 4408  # the connection stayed full: reconnect with ?since=<last seq seen>
ERROR_CLOSE_CODE = 4500  # the server failed; reconnect with ?since=
# The client kept sending frames beyond its budget (a flood): closed rather than read on.
FLOODING_CLOSE_CODE = 4429


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
            query_check(query, WAIT_PARAMETERS)
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
        handshake = await _handshake(scope, receive, send, STREAM_PARAMETERS)
        if handshake is None:
            return
        principal, credential = handshake
        try:
            since = int_parse(scope_query(scope).get("since"), field="since", code="INVALID_SEQ")
            channel = await run_db(
                channel_get, scope["url_route"]["kwargs"]["name"], viewer=principal
            )
        except Exception as exc:
            await _refuse_handshake(send, exc)
            return
        await _stream_session(
            scope,
            receive,
            send,
            channel=channel,
            viewer=principal,
            since=since,
            credential=credential,
        )


async def _handshake(
    scope: dict[str, Any], receive: Receive, send: Send, parameters: set[str]
) -> tuple[str, Credential | None] | None:
    """The checks every websocket passes before it is accepted: the connect, the shared
    ``request_check``, no parameter but ``parameters``, a principal. Returns (principal, the
    credential it authenticated with: a token or the browser's session), or None once the
    handshake is refused."""
    if (await receive())["type"] != "websocket.connect":
        return None
    try:
        request_check(scope)
        query_check(scope_query(scope), parameters)
        principal, token_id = await run_db(websocket_principal, scope)
    except Exception as exc:
        await _refuse_handshake(send, exc)
        return None
    if token_id is not None:
        return principal, Credential(token_id=token_id)
    # A signed-in browser: signing out (the session row gone) ends the connection.
    session = scope.get("session")
    key = getattr(session, "session_key", None) if session is not None else None
    return principal, Credential(session_key=key) if key else None


async def _refuse_handshake(send: Send, error: Exception) -> None:
    """Close before the accept: the handshake is refused (403), never daphne's 500."""
    if not isinstance(error, AppError):
        logger.error("websocket handshake failed", exc_info=error)
    await send({"type": "websocket.close"})


class ChannelsStreamConsumer:
    """``/ws/channels/``: many channels on one connection (an MCP server or an agent following
    several channels holds one websocket, not one per channel).

    The client sends JSON text frames ``{"op": "subscribe", "channel": name, "since": N}``
    (``since`` optional: null or absent is from now on) and ``{"op": "unsubscribe", "channel":
    name}``. A subscribe is answered ``{"type": "subscribed", "channel", "since", "last_seq"}``,
    then ``{"type": "message", "channel", "message"}`` frames follow with the single channel
    stream's guarantees (each subscription is a ``message_stream``); an unsubscribe is answered
    ``{"type": "unsubscribed", "channel"}`` once nothing more of it is sent. A frame that
    cannot be done gets ``{"type": "error", ["channel",] "error": {...}}`` and the connection
    goes on: a channel that cannot be seen, one lost from sight (that subscription ends), a
    subscribe to a channel already followed (INVALID_VALUE), one beyond
    AGENTCHAT_STREAM_MAX_CHANNELS, a malformed frame, a frame beyond the connection's budget.

    One ``SendWindow`` for the connection: the channels' frames go out one at a time through
    one gate, each only while there is room, and no client frame is taken while it is full;
    stalled, it closes with 4408; a flood of frames over the budget, with 4429; the token
    revoked, with 4401; a server failure, with 4500 (reconnect and resubscribe with
    ``since``).
    """

    @classmethod
    def as_asgi(cls) -> ChannelsStreamConsumer:
        return cls()

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        handshake = await _handshake(scope, receive, send, MUX_PARAMETERS)
        if handshake is not None:
            principal, credential = handshake
            await _Multiplexed(scope, send, viewer=principal).run(receive, credential=credential)


# A client frame of the multiplexed stream: at most this many characters, and at most
# CLIENT_FRAME_BURST of them at once, refilled at CLIENT_FRAMES_PER_SECOND (a subscribe costs a
# few reads of the database and the layer; a frame beyond the budget costs nothing but its
# error frame, sent only while the connection has room).
CLIENT_FRAME_MAX_CHARS = 4096
CLIENT_FRAME_BURST = 128
CLIENT_FRAMES_PER_SECOND = 16.0
SEQ_MAX = 2**63 - 1
_COMMAND_FIELDS = {"subscribe": {"op", "channel", "since"}, "unsubscribe": {"op", "channel"}}


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


def _command_parse(message: dict[str, Any]) -> tuple[str, str, int | None]:
    """(op, channel, since) of a client frame. Raises INVALID_VALUE (binary, too big, an
    unknown op), INVALID_TEXT, INVALID_JSON (not JSON, not an object), JSON_TOO_DEEP,
    MISSING_FIELD, UNKNOWN_FIELD, INVALID_TYPE (a channel that is no string), INVALID_SEQ."""
    text = message.get("text")
    if not isinstance(text, str):
        raise AppError("INVALID_VALUE", "this stream takes JSON text frames, not binary ones")
    if len(text) > CLIENT_FRAME_MAX_CHARS:
        raise AppError(
            "INVALID_VALUE",
            f"a frame is at most {CLIENT_FRAME_MAX_CHARS} characters",
            detail={"limit": CLIENT_FRAME_MAX_CHARS},
        )
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        raise AppError("INVALID_TEXT", "the frame is not valid Unicode text") from None
    command = json_loads_strict(raw)
    if not isinstance(command, dict):
        raise AppError("INVALID_JSON", "a frame is a JSON object")
    if "op" not in command:
        raise AppError("MISSING_FIELD", "op is required", detail={"field": "op"})
    op = command["op"]
    if not isinstance(op, str) or op not in _COMMAND_FIELDS:
        raise AppError(
            "INVALID_VALUE",
            "op must be subscribe or unsubscribe",
            detail={"field": "op", "allowed": sorted(_COMMAND_FIELDS)},
        )
    _unknown_parameters(command, _COMMAND_FIELDS[op])
    if "channel" not in command:
        raise AppError("MISSING_FIELD", "channel is required", detail={"field": "channel"})
    channel = command["channel"]
    if not isinstance(channel, str):
        raise AppError("INVALID_TYPE", "channel must be a string", detail={"field": "channel"})
    since = command.get("since")
    if since is not None and (type(since) is not int or not 0 <= since <= SEQ_MAX):
        raise AppError(
            "INVALID_SEQ",
            f"since must be null or an integer from 0 to {SEQ_MAX}",
            detail={"field": "since"},
        )
    return op, channel, since


class _Multiplexed:
    """One multiplexed connection: its subscriptions (a task each, by channel name as the
    client spelled it), its send window and what ends it."""

    def __init__(self, scope: dict[str, Any], send: Send, *, viewer: str) -> None:
        self.credential: Credential | None = None  # set by run()
        self.window = SendWindow(scope)
        self.send = send
        self.viewer = viewer
        self.subscriptions: dict[str, asyncio.Future[None]] = {}
        # One message frame at a time for the whole connection, each sent only while it has
        # room (``_pump``): however many channels it follows, the connection holds at most one
        # frame beyond its buffer.
        self.gate = asyncio.Lock()
        # Set by a subscription (or the client's loop) that must end the connection: too slow,
        # a server failure.
        self.fatal: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()

    async def run(self, receive: Receive, *, credential: Credential | None) -> None:
        self.credential = credential
        tasks: list[asyncio.Future[Any]] = []
        accepted = False
        try:
            async with credential_watch(credential) as revoked:
                await self.send({"type": "websocket.accept"})
                accepted = True
                client = asyncio.ensure_future(self._client(receive))
                revocation = asyncio.ensure_future(revoked.wait())
                tasks = [client, revocation]
                racers: list[asyncio.Future[Any]] = [client, revocation, self.fatal]
                await asyncio.wait(racers, return_when=asyncio.FIRST_COMPLETED)
                if revocation.done():
                    error: BaseException | None = AppError("AUTH_INVALID", "the token was revoked")
                elif self.fatal.done():
                    error = self.fatal.result()
                else:
                    error = client.exception()
                    if error is None:
                        return  # the client closed the connection
                await _close_for(error, self.send, what="multiplexed stream")
        except Exception:
            logger.exception("multiplexed stream failed")
            refusal = {"type": "websocket.close"}  # before the accept: the handshake is refused
            await self.send({**refusal, "code": ERROR_CLOSE_CODE} if accepted else refusal)
        finally:
            try:
                await tasks_end(tasks)  # the client first: it starts no subscription after this
            finally:
                try:
                    await tasks_end(list(self.subscriptions.values()))
                finally:
                    self.window.close()

    async def _text(self, frame: dict[str, Any]) -> None:
        await self.send({"type": "websocket.send", "text": json.dumps(frame)})

    async def _refuse(self, error: AppError, channel: str | None = None) -> None:
        # An answer to a frame the client should not have sent (malformed, over its budget)
        # waits for nobody: dropped while the client is not reading anyway.
        if not self.window.full:
            await self.send(
                {"type": "websocket.send", "text": _error_frame(error, channel=channel)}
            )

    def _fail(self, error: BaseException) -> None:
        if not self.fatal.done():
            self.fatal.set_result(error)

    async def _client(self, receive: Receive) -> None:
        """Until the client disconnects: do its frames one at a time, within its budget. While
        the connection is full no frame is taken (the client's own sends back up); full for
        AGENTCHAT_STREAM_STALL_SECONDS, the connection is closed as too slow (4408)."""
        stall = settings.AGENTCHAT_STREAM_STALL_SECONDS

        async def room() -> bool:  # before each frame is taken
            if self.window.full and not await self.window.room(stall):
                self._fail(_TooSlow())
                return False
            return True

        try:
            async with contextlib.aclosing(_client_frames(receive)) as frames:
                if not await room():
                    return
                async for message in frames:
                    await self._command(message)
                    if not await room():
                        return
        except _Flooding as exc:
            self._fail(exc)

    async def _command(self, message: dict[str, Any] | None) -> None:
        """Do one client frame (None: one over the budget, dropped)."""
        if message is None:
            await self._refuse(_TOO_MANY_FRAMES)
            return
        try:
            op, channel, since = _command_parse(message)
        except AppError as exc:
            await self._refuse(exc)
            return
        try:
            if op == "subscribe":
                await self._subscribe(channel, since)
            else:
                await self._unsubscribe(channel)
        except AppError as exc:
            # The answer to a request (never dropped: the loop takes no frame while full).
            await self._text({"type": "error", "channel": channel, **error_body(exc)})

    async def _subscribe(self, name: str, since: int | None) -> None:
        """Raises INVALID_VALUE (followed already), STREAM_TOO_MANY_CHANNELS,
        CHANNEL_NOT_FOUND. Returns once the subscription is answered."""
        if name in self.subscriptions:
            raise AppError(
                "INVALID_VALUE",
                "this connection follows the channel already: unsubscribe first",
                detail={"field": "channel"},
            )
        limit = settings.AGENTCHAT_STREAM_MAX_CHANNELS
        if len(self.subscriptions) >= limit:
            raise AppError(
                "STREAM_TOO_MANY_CHANNELS",
                f"a connection follows at most {limit} channels",
                detail={"limit": limit},
            )
        channel = await run_db(channel_get, name, viewer=self.viewer)
        answered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.subscriptions[name] = asyncio.ensure_future(
            self._follow(name, channel, since, answered)
        )
        await answered

    async def _unsubscribe(self, name: str) -> None:
        """Ends the subscription (none: nothing to end), then answers."""
        task = self.subscriptions.pop(name, None)
        if task is not None:
            await tasks_end([task])
        await self._text({"type": "unsubscribed", "channel": name})

    async def _follow(
        self, name: str, channel: Any, since: int | None, answered: asyncio.Future[None]
    ) -> None:
        """One subscription: answer it, then stream the channel until it is unsubscribed
        (cancelled), lost from sight (an error frame) or failing the connection (``fatal``)."""
        try:
            try:
                error = await self._stream(name, channel, since, answered)
            finally:
                if self.subscriptions.get(name) is asyncio.current_task():
                    del self.subscriptions[name]
            if isinstance(error, AppError) and error.code != "AUTH_INVALID":
                try:
                    await self._text({"type": "error", "channel": name, **error_body(error)})
                except Exception as exc:  # the connection failed: it ends
                    self._fail(exc)
            elif error is not None:
                self._fail(error)
        finally:
            # After the error frame: the client's next frame is answered after this one.
            if not answered.done():
                answered.set_result(None)

    async def _stream(
        self, name: str, channel: Any, since: int | None, answered: asyncio.Future[None]
    ) -> BaseException | None:
        """Subscribe, answer, stream; returns what ended the stream."""
        try:
            # The revocation is the connection's watch, not each stream's; each stream still
            # checks the credential before it sends.
            async with message_stream(
                channel=channel,
                viewer=self.viewer,
                since=since,
                credential=self.credential,
                watch=False,
            ) as stream:
                await self._text(
                    {
                        "type": "subscribed",
                        "channel": name,
                        "since": stream.position,
                        "last_seq": stream.known_last,
                    }
                )
                answered.set_result(None)
                return await _stream_run(
                    stream, self.window, self.send, channel=name, gate=self.gate
                )
        except Exception as exc:  # CHANNEL_NOT_FOUND on entry: it lost sight meanwhile
            return exc


_TOO_MANY_FRAMES = AppError(
    "STREAM_TOO_MANY_FRAMES",
    f"at most {CLIENT_FRAME_BURST} frames at once and {CLIENT_FRAMES_PER_SECOND:g} a second: "
    "this one was dropped",
    detail={"burst": CLIENT_FRAME_BURST, "per_second": CLIENT_FRAMES_PER_SECOND},
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
) -> None:
    window = SendWindow(scope)
    tasks: list[asyncio.Future[Any]] = []
    accepted = False
    try:
        async with message_stream(
            channel=channel, viewer=viewer, since=since, credential=credential
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
