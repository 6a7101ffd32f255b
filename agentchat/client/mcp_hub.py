"""The MCP server's subscriptions (``Hub``): the resources it can follow, channels, the
agent's HTTP v1 inbox and its EP-0118 signal inboxes, and the one websocket to the AgentChat
server that serves them all (``agentchat.client.mcp_server`` answers the MCP requests with
it)."""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections import defaultdict
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
import websockets
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp.shared.exceptions import MCPError

from agentchat.client import iasp, shapes
from agentchat.client.api import Client, seg
from agentchat.client.errors import ClientError
from agentchat.client.ops import relevant
from agentchat.client.safe import line

log = logging.getLogger("agentchat.mcp")

URI_PREFIX = "agentchat://channels/"
URI = re.compile(r"agentchat://channels/([A-Za-z0-9][A-Za-z0-9._-]{0,63})(/unread)?")
RESOURCE_NOT_FOUND = -32002  # the MCP spec's code for an unknown resource
WS_MAX_FRAME = 4 * 1024 * 1024
RECONNECT_FIRST = 0.5
RECONNECT_MAX = 10.0
# Close codes after which reconnecting cannot help (docs/live.md).
WS_FINAL_CLOSES = {4401, 4404}
STREAM_PATH = "/ws/channels/"  # the multiplexed stream
# The agent's HTTP v1 inbox (docs/http-v1.md): its last deliveries, pushed on each new one.
INBOX_URI = "agentchat://inbox"
INBOX_IN_RESOURCE = 20  # the inbox resource shows this many last deliveries


def resource_error(exc: ClientError) -> MCPError:
    """A failed call as the MCP error of a resource request; the message escaped (``line``):
    it is the server's text, which an agent's client shows."""
    code = RESOURCE_NOT_FOUND if exc.status == 404 else -32603
    return MCPError(code, line(f"{exc.code}: {exc.message}"))


def channel_uris(name: str) -> tuple[str, str]:
    return f"{URI_PREFIX}{name}", f"{URI_PREFIX}{name}/unread"


def uri_parse(uri: str) -> tuple[str, bool]:
    """(channel, is the unread view); MCPError RESOURCE_NOT_FOUND for any other URI."""
    match = URI.fullmatch(uri)
    if match is None:
        raise MCPError(RESOURCE_NOT_FOUND, f"no such resource: {uri[:200]!r}")
    return match.group(1), match.group(2) is not None


# --- EP-0118: the agent's signal inbox as a resource (the EP's §7) ----------------------------
# agentchat://signals/<session>/<agent_id>: the agent's unread signals in the session's channel
# (read_signals as that agent, the token's own or a sub-agent's through AgentChat-As). Pushed
# (notifications/resources/updated) on each new signal relevant to the agent, by the relevance
# rule of agentchat/relevance.py: to it, to one of its sub-agents, or to *; never its own.
SIGNALS_PREFIX = "agentchat://signals/"
SIGNALS_URI = re.compile(
    r"agentchat://signals/([A-Za-z0-9][A-Za-z0-9._-]{0,63})/([a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?)"
)


def signals_uri_parse(uri: str) -> tuple[str, str] | None:
    """(channel, agent) of an inbox URI; None for any other URI."""
    match = SIGNALS_URI.fullmatch(uri)
    return None if match is None else (match.group(1), match.group(2))


def uri_channel(uri: str) -> str:
    """The channel a resource URI follows (an inbox's or a channel's); else RESOURCE_NOT_FOUND."""
    inbox = signals_uri_parse(uri)
    return inbox[0] if inbox is not None else uri_parse(uri)[0]


async def signals_body(hub: Hub, channel: str, agent: str) -> dict[str, Any]:
    """The inbox resource's JSON: the agent's unread signals (read_signals, a pure query)."""

    def read() -> dict[str, Any]:
        client = iasp.acting(hub.client, agent)
        try:
            return iasp.signals_read(client, channel, unread_only=True)
        finally:
            if client is not hub.client:
                client.close()

    listing = await anyio.to_thread.run_sync(read, abandon_on_cancel=True)
    return {"session": channel, "agent": agent, **listing}


# --- end of EP-0118 ---------------------------------------------------------------------------


class Hub:
    """The subscriptions of this MCP server's client and the one websocket that serves them.

    ``positions`` holds the channels followed and the last seq seen of each; ``_run`` keeps
    the connection to the multiplexed stream while it is not empty, (re)subscribing each from
    its position whenever it connects.
    """

    def __init__(self, client: Client, tasks: anyio.abc.TaskGroup) -> None:
        self.client = client
        self.tasks = tasks
        self.bus = InMemorySubscriptionBus()
        self.me: str | None = None
        self._me_known = False
        # uri -> the legacy subscribers (resources/subscribe), each connection's latest session
        # by its connection (``peer``); uri -> listen streams count.
        self.sessions: dict[str, dict[object, ServerSession]] = defaultdict(dict)
        self.listens: dict[str, int] = defaultdict(int)
        self.positions: dict[str, int] = {}
        # The inbox's tail last known while agentchat://inbox is followed; None: not followed.
        self.inbox_tail: int | None = None
        self.ws: Any = None  # the open connection, once its subscriptions are sent
        self.runner: anyio.CancelScope | None = None
        self.lock = anyio.Lock()
        self.listen = Listen(self)

    async def call(self, method: str, path: str, **kwargs: Any) -> Any:
        return await anyio.to_thread.run_sync(
            lambda: self.client.request(method, path, **kwargs), abandon_on_cancel=True
        )

    async def identity(self) -> str | None:
        if not self._me_known:
            try:
                self.me = (await self.call("GET", "me/", expect=shapes.ME))["name"]
                self._me_known = True
            except (ClientError, TypeError, KeyError) as exc:
                log.warning("cannot learn the token's agent (%s); every message counts", exc)
        return self.me

    def watched(self, channel: str) -> bool:
        uris = [*channel_uris(channel), *self.inboxes(channel)]
        return any(self.sessions.get(uri) or self.listens.get(uri, 0) > 0 for uri in uris)

    def inboxes(self, channel: str) -> list[str]:  # EP-0118
        """The signal inbox URIs of ``channel`` that have subscribers, with their agent."""
        found = []
        for uri in {*self.sessions, *self.listens}:
            inbox = signals_uri_parse(uri)
            served = self.sessions.get(uri) or self.listens.get(uri, 0) > 0
            if inbox is not None and inbox[0] == channel and served:
                found.append(uri)
        return found

    async def signals_changed(self, channel: str, message: dict[str, Any] | None) -> None:
        """EP-0118: notify the inboxes of ``channel`` a new signal concerns (every one when
        ``message`` is None: the channel is no longer followed, and a read tells why)."""
        for uri in self.inboxes(channel):
            inbox = signals_uri_parse(uri)
            assert inbox is not None
            if message is None or (
                message.get("type") in iasp.SIGNAL_TYPES and relevant(message, inbox[1])
            ):
                await self.notify(uri)

    async def subscribe(self, uri: str, session: ServerSession | None) -> None:
        """Start serving ``uri`` (a legacy session's subscription, or a listen stream's when
        ``session`` is None). Raises MCPError naming the server's code when the channel
        cannot be seen. The HTTP calls (up to a minute each) are made outside the lock, so
        no other subscription nor the runner waits for them; the lock is taken again to
        record the channel, unless a subscription made meanwhile did."""
        if uri == INBOX_URI:
            return await self.inbox_subscribe(session)
        channel = uri_channel(uri)
        inbox = signals_uri_parse(uri)
        if inbox is not None:  # EP-0118: the agent must be one the token may act as
            try:
                await signals_body(self, *inbox)
            except ClientError as exc:
                raise resource_error(exc) from exc
        async with self.lock:
            if channel in self.positions:
                self._register(uri, session)
                return
        try:
            detail = await self.call("GET", f"channels/{seg(channel)}/")
            since = detail["last_seq"]
            if not isinstance(since, int) or isinstance(since, bool):
                raise TypeError("last_seq is not an integer")
        except ClientError as exc:
            raise resource_error(exc) from exc
        except (TypeError, KeyError) as exc:
            raise MCPError(-32603, line(f"BAD_RESPONSE: the channel's record: {exc}")) from exc
        await self.identity()
        async with self.lock:
            if channel not in self.positions:
                self.positions[channel] = since
                await self._send({"op": "subscribe", "channel": channel, "since": since})
                if self.runner is None:
                    self.runner = anyio.CancelScope()
                    self.tasks.start_soon(self._run, self.runner)
            self._register(uri, session)

    def _register(self, uri: str, session: ServerSession | None) -> None:
        if session is None:
            self.listens[uri] += 1
        else:
            self.sessions[uri][peer(session)] = session

    async def unsubscribe(self, uri: str, session: ServerSession | None) -> None:
        if uri == INBOX_URI:
            return await self.inbox_unsubscribe(session)
        channel = uri_channel(uri)
        async with self.lock:
            if session is None:
                self.listens[uri] = max(0, self.listens[uri] - 1)
            else:
                self.sessions[uri].pop(peer(session), None)
            if not self.watched(channel) and self.positions.pop(channel, None) is not None:
                await self._send({"op": "unsubscribe", "channel": channel})
                if not self.following() and self.runner is not None:
                    self.runner.cancel()  # nothing to follow: close the connection
                    self.runner = None
                    self.ws = None  # a subscription made next waits for a runner of its own

    async def _send(self, frame: dict[str, Any]) -> None:
        """Send a frame on the open connection, if any (a connection that opens later
        subscribes what ``positions`` holds then)."""
        if self.ws is not None:
            # Closed: the runner reconnects, and subscribes from the positions.
            with contextlib.suppress(websockets.ConnectionClosed):
                await self.ws.send(json.dumps(frame))

    async def notify(self, uri: str) -> None:
        for key, session in list(self.sessions.get(uri, {}).items()):
            try:
                await session.send_resource_updated(uri)
            except Exception:  # a session that is gone: forget it, keep the others
                log.info("dropping a subscriber of %s that cannot be reached", uri)
                self.sessions[uri].pop(key, None)
        if self.listens.get(uri, 0) > 0:
            await self.bus.publish(ResourceUpdated(uri=uri))

    async def changed(self, channel: str, *, unread: bool) -> None:
        whole, unread_uri = channel_uris(channel)
        await self.notify(whole)
        if unread:
            await self.notify(unread_uri)

    async def _run(self, scope: anyio.CancelScope) -> None:
        """Hold the multiplexed stream until cancelled or nothing is left to follow,
        reconnecting with capped backoff; each connection subscribes every channel from its
        position. The backoff starts again only after a connection that served (a
        ``subscribed`` or ``message`` frame came, and no resync was needed), so a server that
        closes at once, or keeps dropping frames, is not hammered. Whatever goes wrong is
        logged and retried: it must never end the MCP server."""
        delay = RECONNECT_FIRST
        url = self.client.ws_url(STREAM_PATH)
        headers = {"Authorization": f"Bearer {self.client.token}"} if self.client.token else {}
        with scope:
            try:
                while True:
                    ws = None
                    served = False
                    try:
                        async with websockets.connect(
                            url, additional_headers=headers, max_size=WS_MAX_FRAME, open_timeout=10
                        ) as ws:
                            async with self.lock:
                                for channel, since in self.positions.items():
                                    frame = {"op": "subscribe", "channel": channel, "since": since}
                                    await ws.send(json.dumps(frame))
                                if self.inbox_tail is not None:
                                    await ws.send(json.dumps(self.inbox_frame()))
                                self.ws = ws
                            async for raw in ws:
                                if await self._frame(raw):
                                    served = True
                                if await self._idle(scope):
                                    return
                    except Resync as exc:
                        served = False
                        log.warning("the stream: %s; reconnecting in %.1fs", exc, delay)
                    except websockets.ConnectionClosed as exc:
                        if exc.rcvd is not None and exc.rcvd.code in WS_FINAL_CLOSES:
                            log.warning("the stream closed (%s): not following it", exc)
                            async with self.lock:
                                followed, self.positions = list(self.positions), {}
                                inbox, self.inbox_tail = self.inbox_tail, None
                                self._stop(scope)
                            for channel in followed:
                                await self.changed(channel, unread=True)  # a read tells why
                                await self.signals_changed(channel, None)
                            if inbox is not None:
                                await self.notify(INBOX_URI)
                            return
                        log.info("the stream closed (%s); reconnecting in %.1fs", exc, delay)
                    except (OSError, websockets.InvalidHandshake, TimeoutError) as exc:
                        log.info("the stream: %s; reconnecting in %.1fs", exc, delay)
                    except Exception:
                        log.exception("the stream failed; reconnecting in %.1fs", delay)
                    finally:
                        if self.ws is ws:  # (a runner started since may hold another)
                            self.ws = None
                    if await self._idle(scope):
                        return
                    if served:
                        delay = RECONNECT_FIRST
                    await anyio.sleep(delay)
                    delay = min(delay * 2, RECONNECT_MAX)
            finally:
                if self.runner is scope:
                    self.runner = None

    async def _idle(self, scope: anyio.CancelScope) -> bool:
        """True (and this runner is no longer the hub's) when nothing is left to follow: the
        error frames ended every subscription. Decided under the lock, so a subscription made
        meanwhile starts a runner of its own."""
        if self.following():
            return False
        async with self.lock:
            if self.following():
                return False
            self._stop(scope)
            return True

    def _stop(self, scope: anyio.CancelScope) -> None:
        if self.runner is scope:
            self.runner = None
            self.ws = None

    async def _frame(self, raw: str | bytes) -> bool:
        """Apply one frame of the stream; True when it shows the connection serving (a
        subscription answered, a message). Raises ``Resync`` for an error the hub cannot
        attribute to one subscription (a frame the server dropped, say a subscribe or an
        unsubscribe over its budget): the subscriptions may no longer be what ``positions``
        says, and a new connection subscribes them all again. Anything else odd is
        ignored."""
        try:
            frame = json.loads(raw)
        except ValueError:
            return False
        if not isinstance(frame, dict):
            return False
        if frame.get("kind") == "inbox" or frame.get("type") == "inbox":
            return await self.inbox_frame_apply(frame)
        kind = frame.get("type")
        channel = frame.get("channel")
        if kind == "error":
            error = frame.get("error")
            code = error.get("code") if isinstance(error, dict) else None
            if not isinstance(channel, str) or not isinstance(code, str):
                raise Resync(f"an error frame of no subscription ({_error_line(error)})")
            since = self.positions.get(channel)
            if since is None:
                return False  # unsubscribed meanwhile
            detail = error.get("detail") if isinstance(error, dict) else None
            if code == "INVALID_VALUE":
                if isinstance(detail, dict) and detail.get("field") == "channel":
                    return False  # followed already: the server goes on streaming it
                raise Resync(f"a subscription refused ({_error_line(error)})")
            # Out of sight (or beyond the server's limit of channels): not followed any more; a
            # new subscription checks the channel again.
            log.warning("stream of %s: %s", channel, _error_line(error))
            del self.positions[channel]
            await self.changed(channel, unread=True)  # a read now tells why
            await self.signals_changed(channel, None)
            return False
        if not isinstance(channel, str) or channel not in self.positions:
            return False  # unsubscribed meanwhile
        if kind == "subscribed":
            return True
        if kind != "message":
            return False
        message = frame.get("message")
        if not isinstance(message, dict):
            return False
        seq = message.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool):
            return False
        if seq > self.positions[channel]:
            self.positions[channel] = seq
            await self.changed(channel, unread=relevant(message, self.me))
            await self.signals_changed(channel, message)
        return True

    # --- the agent's HTTP v1 inbox: agentchat://inbox ------------------------------------

    def following(self) -> bool:
        """Whether anything is followed (a channel, the inbox): the websocket is held."""
        return bool(self.positions) or self.inbox_tail is not None

    def inbox_frame(self) -> dict[str, Any]:
        return {"op": "subscribe", "kind": "inbox", "since": self.inbox_tail}

    async def inbox_subscribe(self, session: ServerSession | None) -> None:
        """Follow the inbox: its tail now (``GET /v1/agents/<me>/inbox``, which also says the
        token may read it), then the stream's ``inbox`` subscription from that tail, so a
        delivery made after it is never missed."""
        async with self.lock:
            if self.inbox_tail is not None:
                self._register(INBOX_URI, session)
                return
        try:
            tail = (await anyio.to_thread.run_sync(inbox_head, self.client))["tail"]
        except ClientError as exc:
            raise resource_error(exc) from exc
        async with self.lock:
            if self.inbox_tail is None:
                self.inbox_tail = tail
                await self._send(self.inbox_frame())
                if self.runner is None:
                    self.runner = anyio.CancelScope()
                    self.tasks.start_soon(self._run, self.runner)
            self._register(INBOX_URI, session)

    async def inbox_unsubscribe(self, session: ServerSession | None) -> None:
        async with self.lock:
            if session is None:
                self.listens[INBOX_URI] = max(0, self.listens[INBOX_URI] - 1)
            else:
                self.sessions[INBOX_URI].pop(peer(session), None)
            watched = self.sessions.get(INBOX_URI) or self.listens.get(INBOX_URI, 0) > 0
            if not watched and self.inbox_tail is not None:
                self.inbox_tail = None
                await self._send({"op": "unsubscribe", "kind": "inbox"})
                if not self.following() and self.runner is not None:
                    self.runner.cancel()
                    self.runner = None
                    self.ws = None

    async def inbox_frame_apply(self, frame: dict[str, Any]) -> bool:
        """A frame of the stream's inbox subscription: a tail past the one known notifies
        agentchat://inbox; an error ends the following (the resource's read says why)."""
        if self.inbox_tail is None:
            return False  # unsubscribed meanwhile
        kind = frame.get("type")
        if kind == "error":
            log.warning("the inbox's stream: %s", _error_line(frame.get("error")))
            self.inbox_tail = None
            await self.notify(INBOX_URI)
            return False
        tail = frame.get("tail")
        if kind not in ("subscribed", "inbox") or type(tail) is not int:
            return False
        if tail > self.inbox_tail:
            self.inbox_tail = tail
            await self.notify(INBOX_URI)
        return True


def inbox_head(client: Client) -> dict[str, Any]:
    """The inbox's first page of one delivery (its ``tail``, and the token's right to it)."""
    head: dict[str, Any] = client.v1_inbox(cursor=0, limit=1)
    return head


def inbox_body(client: Client) -> dict[str, Any]:
    """The inbox resource's JSON: the agent, the inbox's ``tail`` and its last
    ``INBOX_IN_RESOURCE`` deliveries (``next_cursor``: where a ``read_inbox`` goes on). Two
    reads: the tail, then the page below it."""
    tail = inbox_head(client)["tail"]
    page = client.v1_inbox(cursor=max(0, tail - INBOX_IN_RESOURCE), limit=INBOX_IN_RESOURCE)
    return {
        "agent": client.v1_agent(),
        "deliveries": page["deliveries"],
        "next_cursor": page["next_cursor"],
        "tail": page["tail"],
    }


def peer(session: ServerSession) -> object:
    """Who subscribed: the session's connection. The SDK makes a new session object for each
    request, so the one a ``resources/unsubscribe`` brings is never the one its subscribe
    brought; the connection behind both is the same (the SDK names it only privately)."""
    return getattr(session, "_connection", None) or session


class Resync(Exception):
    """The stream's subscriptions cannot be trusted any more: reconnect and resubscribe."""


def _error_line(error: Any) -> str:
    if not isinstance(error, dict):
        return f"malformed error {str(error)[:100]!r}"
    return line(f"{str(error.get('code'))[:64]}: {str(error.get('message'))[:300]}")


class Listen:
    """``subscriptions/listen`` (2026-07-28): the SDK's handler, with the streams' resource
    URIs served by the hub while the stream is open."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.inner = ListenHandler(hub.bus)

    async def __call__(
        self, ctx: Any, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        uris = list(params.notifications.resource_subscriptions or ())
        served: list[str] = []
        try:
            for uri in uris:
                await self.hub.subscribe(uri, None)
                served.append(uri)
            return await self.inner(ctx, params)
        finally:
            with anyio.CancelScope(shield=True):
                for uri in served:
                    await self.hub.unsubscribe(uri, None)
