"""``/ws/channels/``: many channels' streams on one websocket."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from django.conf import settings

from agentchat.core.db.transactions import run_db
from agentchat.core.http.asgi_http import Receive, Send
from agentchat.core.identity.revocation import Credential, credential_watch
from agentchat.core.live.transport import SendWindow
from agentchat.core.rules.errors import AppError, error_body
from agentchat.core.rules.validation import json_loads_strict
from channels_app.endpoints.shared import (
    _TOO_MANY_FRAMES,
    CLIENT_FRAME_MAX_CHARS,
    ERROR_CLOSE_CODE,
    Handshake,
    WebsocketEndpoint,
    _client_frames,
    _close_for,
    _error_frame,
    _Flooding,
    _stream_run,
    _TooSlow,
    connection_slot,
    frame_fields_check,
)
from channels_app.live import message_stream, tasks_end
from channels_app.live_inbox import inbox_bell
from channels_app.selectors import channel_get

logger = logging.getLogger(__name__)


MUX_PARAMETERS = {"token"}


class MultiplexEndpoint(WebsocketEndpoint):
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
    A frame with ``"kind": "inbox"`` follows the principal's own HTTP v1 inbox instead: its
    tail as a doorbell (``_inbox_command``).

    One ``SendWindow`` for the connection: the channels' frames go out one at a time through
    one gate, each only while there is room, and no client frame is taken while it is full;
    stalled, it closes with 4408; a flood of frames over the budget, with 4429; the token
    revoked, with 4401; a server failure, with 4500 (reconnect and resubscribe with
    ``since``).
    """

    parameters = MUX_PARAMETERS

    async def session(
        self, scope: dict[str, Any], receive: Receive, send: Send, handshake: Handshake
    ) -> None:
        principal, credential, key = handshake
        async with connection_slot(send, key) as placed:
            if placed:
                connection = _Multiplexed(scope, send, viewer=principal, key=key)
                await connection.run(receive, credential=credential)


SEQ_MAX = 2**63 - 1

_COMMAND_FIELDS = {"subscribe": {"op", "channel", "since"}, "unsubscribe": {"op", "channel"}}


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
    if "kind" in command:
        raise _InboxFrame(command)
    op = _op_checked(command, _COMMAND_FIELDS)
    if "channel" not in command:
        raise AppError("MISSING_FIELD", "channel is required", detail={"field": "channel"})
    channel = command["channel"]
    if not isinstance(channel, str):
        raise AppError("INVALID_TYPE", "channel must be a string", detail={"field": "channel"})
    return op, channel, _since_checked(command, code="INVALID_SEQ", what="an integer")


class _Multiplexed:
    """One multiplexed connection: its subscriptions (a task each, by channel name as the
    client spelled it), its send window and what ends it."""

    def __init__(self, scope: dict[str, Any], send: Send, *, viewer: str, key: bytes) -> None:
        self.credential: Credential | None = None  # set by run()
        self.key = key  # the viewer's at the heavy gate
        self.window = SendWindow(scope)
        self.send = send
        self.viewer = viewer
        self.subscriptions: dict[str, asyncio.Future[None]] = {}
        self.inbox: asyncio.Future[None] | None = None  # the `inbox` subscription's task
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
                    inbox = [self.inbox] if self.inbox is not None else []
                    await tasks_end([*self.subscriptions.values(), *inbox])
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
        except _InboxFrame as frame:
            await _inbox_command(self, frame.command)
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
                gate_key=self.key,
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


# --- the `inbox` subscription: the HTTP v1 inbox's doorbell -----------------------------------


class _InboxFrame(Exception):
    """A client frame with ``kind``: of the inbox subscription (``_inbox_command``)."""

    def __init__(self, command: dict[str, Any]) -> None:
        super().__init__("an inbox frame")
        self.command = command


_INBOX_FIELDS = {"subscribe": {"op", "kind", "since"}, "unsubscribe": {"op", "kind"}}


def _inbox_command_parse(command: dict[str, Any]) -> tuple[str, int | None]:
    """(op, since) of a frame ``{"op": "subscribe", "kind": "inbox", "since": N}`` or
    ``{"op": "unsubscribe", "kind": "inbox"}``. Raises INVALID_VALUE (another kind or op),
    MISSING_FIELD, UNKNOWN_FIELD, INVALID_CURSOR (a since that is no tail)."""
    if command.get("kind") != "inbox":
        raise AppError(
            "INVALID_VALUE", "kind must be inbox", detail={"field": "kind", "allowed": ["inbox"]}
        )
    op = _op_checked(command, _INBOX_FIELDS)
    return op, _since_checked(command, code="INVALID_CURSOR", what="an inbox tail")


def _since_checked(command: dict[str, Any], *, code: str, what: str) -> int | None:
    """A frame's ``since``: null (or absent), or ``what``, an integer from 0 to SEQ_MAX (a
    bool is no integer here). Raises ``code``."""
    since = command.get("since")
    if since is not None and (type(since) is not int or not 0 <= since <= SEQ_MAX):
        raise AppError(
            code, f"since must be null or {what} from 0 to {SEQ_MAX}", detail={"field": "since"}
        )
    return since


async def _inbox_command(conn: _Multiplexed, command: dict[str, Any]) -> None:
    """Do one frame of the inbox kind: the connection's principal's own HTTP v1 inbox.

    ``subscribe`` (``since``: the tail the client knows; null or absent: from now on) is
    answered ``{"type": "subscribed", "kind": "inbox", "since", "tail"}`` (``tail`` above
    ``since``: deliveries the client has not read yet), then ``{"type": "inbox", "tail": t}``
    each time the tail moves past the last one told (many deliveries at once: one frame, the
    latest tail). The frames are doorbells: the client reads the deliveries by cursor
    (``GET /v1/agents/<me>/inbox``). ``unsubscribe`` is answered ``{"type": "unsubscribed",
    "kind": "inbox"}``. Errors are ``{"type": "error", "kind": "inbox", "error"}`` (following
    already: INVALID_VALUE; no agent of that name: AGENT_NOT_FOUND)."""
    try:
        op, since = _inbox_command_parse(command)
    except AppError as exc:
        await conn._text({"type": "error", "kind": "inbox", **error_body(exc)})
        return
    if op == "unsubscribe":
        task, conn.inbox = conn.inbox, None
        if task is not None:
            await tasks_end([task])
        await conn._text({"type": "unsubscribed", "kind": "inbox"})
        return
    if conn.inbox is not None and not conn.inbox.done():
        error = AppError(
            "INVALID_VALUE",
            "this connection follows the inbox already: unsubscribe first",
            detail={"field": "kind"},
        )
        await conn._text({"type": "error", "kind": "inbox", **error_body(error)})
        return
    answered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    conn.inbox = asyncio.ensure_future(_inbox_follow(conn, since, answered))
    await answered


async def _inbox_follow(
    conn: _Multiplexed, since: int | None, answered: asyncio.Future[None]
) -> None:
    """The inbox subscription: answer it, then ring until unsubscribed (cancelled); an error
    on entry is its error frame. Each frame goes through the connection's gate, only while it
    has room (stalled: the connection is closed as too slow, 4408)."""
    stall = settings.AGENTCHAT_STREAM_STALL_SECONDS
    try:
        async with inbox_bell(name=conn.viewer, since=since) as bell:
            told = bell.known  # the answer tells this tail (rings may raise it meanwhile)
            await conn._text(
                {"type": "subscribed", "kind": "inbox", "since": bell.told, "tail": told}
            )
            answered.set_result(None)
            bell.told = max(bell.told, told)
            async for tail in bell:
                async with conn.gate:
                    if conn.window.full and not await conn.window.room(stall):
                        conn._fail(_TooSlow())
                        return
                    await conn._text({"type": "inbox", "tail": tail})
    except AppError as exc:
        if not answered.done():
            await conn._text({"type": "error", "kind": "inbox", **error_body(exc)})
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the connection failed: it ends
        conn._fail(exc)
    finally:
        if not answered.done():
            answered.set_result(None)


def _op_checked(command: dict[str, Any], fields: dict[str, Any]) -> str:
    """The frame's ``op``, one of ``fields``' keys, with the frame holding only that op's
    fields. Raises MISSING_FIELD, INVALID_VALUE, and what ``frame_fields_check`` raises."""
    if "op" not in command:
        raise AppError("MISSING_FIELD", "op is required", detail={"field": "op"})
    op = command["op"]
    if not isinstance(op, str) or op not in fields:
        raise AppError(
            "INVALID_VALUE",
            "op must be subscribe or unsubscribe",
            detail={"field": "op", "allowed": sorted(fields)},
        )
    frame_fields_check(command, fields[op])
    return op
