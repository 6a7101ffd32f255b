"""``agentchat mcp``: an MCP server on stdio (the official ``mcp`` SDK, 2.x lowlevel API).

Tools are the REST operations (``agentchat.client.mcp_tools``): results carry the REST body
as structured content (and as JSON text), errors are tool errors whose text is
``CODE: message``.

Resources: each channel the agent can see is ``agentchat://channels/<name>`` (the channel
and its last messages) and ``agentchat://channels/<name>/unread`` (the agent's unread
relevant messages, read without moving the cursor). Both can be subscribed to, through
``resources/subscribe`` (protocol versions up to 2025-11-25) or a ``subscriptions/listen``
stream (2026-07-28). While anything is subscribed, the server holds ONE websocket to the
AgentChat server (the multiplexed ``/ws/channels/``) and subscribes each channel with a
subscriber on it, from the channel's last seq at subscription time, so a message posted after
the subscription is never missed; a dropped connection is reconnected with capped backoff and
every channel subscribed again from the last seq seen (nothing lost, nothing notified twice),
and so is one whose error frame cannot be tied to one subscription (a frame the server dropped).
Each message sends ``notifications/resources/updated`` for the channel's resource, and for its
unread resource when the message is relevant (``ops.relevant``, the server's rule: a broadcast or
addressed to the agent or one of its sub-agents, not its own); a read or wait through the tools
also updates the unread resource.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import re
import sys
import threading
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
import websockets
from jsonschema import Draft202012Validator
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp.shared.exceptions import MCPError

from agentchat.client import iasp, shapes
from agentchat.client.api import Client, seg
from agentchat.client.config import config_load
from agentchat.client.errors import ClientError
from agentchat.client.mcp_tools import TOOLS, TOOLS_BY_NAME, Tool
from agentchat.client.ops import relevant

log = logging.getLogger("agentchat.mcp")

SERVER_NAME = "agentchat"
URI_PREFIX = "agentchat://channels/"
URI = re.compile(r"agentchat://channels/([A-Za-z0-9][A-Za-z0-9._-]{0,63})(/unread)?")
RESOURCE_NOT_FOUND = -32002  # the MCP spec's code for an unknown resource
PEEK_IN_RESOURCE = 20  # the channel resource shows this many last messages
UNREAD_SCAN = 200  # the unread resource looks at most this many messages after the cursor
WS_MAX_FRAME = 4 * 1024 * 1024
RECONNECT_FIRST = 0.5
RECONNECT_MAX = 10.0
# Close codes after which reconnecting cannot help (docs/live.md).
WS_FINAL_CLOSES = {4401, 4404}
STREAM_PATH = "/ws/channels/"  # the multiplexed stream
INSTRUCTIONS = (
    "AgentChat: channels of markdown messages shared with other agents, tasks under leases, "
    "advisory path locks. `read` moves your cursor, `peek` does not; `wait` blocks until a "
    "relevant message arrives. Subscribe to agentchat://channels/<name>/unread to be told "
    "when one does."
)


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


def tool_result(body: Any) -> types.CallToolResult:
    text = json.dumps(body, ensure_ascii=False, indent=1)
    structured = body if isinstance(body, dict) else {"result": body}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=structured
    )


def tool_error(
    code: str, message: str, detail: dict[str, Any] | None = None
) -> types.CallToolResult:
    error = {"code": code, "message": message, "detail": detail or {}}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{code}: {message}")],
        structured_content={"error": error},
        is_error=True,
    )


def args_check(tool: Tool, args: dict[str, Any]) -> str | None:
    """The first violation of the tool's input schema, as one line, or None."""
    errors = sorted(Draft202012Validator(tool.schema).iter_errors(args), key=lambda e: e.path)
    if not errors:
        return None
    error = errors[0]
    where = "/".join(str(part) for part in error.absolute_path) or "arguments"
    return f"{where}: {error.message}"[:500]


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
        channel = uri_channel(uri)
        inbox = signals_uri_parse(uri)
        if inbox is not None:  # EP-0118: the agent must be one the token may act as
            try:
                await signals_body(self, *inbox)
            except ClientError as exc:
                code = RESOURCE_NOT_FOUND if exc.status == 404 else -32603
                raise MCPError(code, f"{exc.code}: {exc.message}") from exc
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
            code = RESOURCE_NOT_FOUND if exc.status == 404 else -32603
            raise MCPError(code, f"{exc.code}: {exc.message}") from exc
        except (TypeError, KeyError) as exc:
            raise MCPError(-32603, f"BAD_RESPONSE: the channel's record: {exc}") from exc
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
        channel = uri_channel(uri)
        async with self.lock:
            if session is None:
                self.listens[uri] = max(0, self.listens[uri] - 1)
            else:
                self.sessions[uri].pop(peer(session), None)
            if not self.watched(channel) and self.positions.pop(channel, None) is not None:
                await self._send({"op": "unsubscribe", "channel": channel})
                if not self.positions and self.runner is not None:
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
                                self._stop(scope)
                            for channel in followed:
                                await self.changed(channel, unread=True)  # a read tells why
                                await self.signals_changed(channel, None)
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
        if self.positions:
            return False
        async with self.lock:
            if self.positions:
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
    return f"{str(error.get('code'))[:64]}: {str(error.get('message'))[:300]}"


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


def build_server(client: Client) -> Server[Hub]:
    """The MCP server over ``client``: its hub lives as long as the server runs."""

    @asynccontextmanager
    async def lifespan(_: Server[Hub]) -> AsyncIterator[Hub]:
        async with anyio.create_task_group() as tasks:
            hub = Hub(client, tasks)
            yield hub
            tasks.cancel_scope.cancel()

    def hub_of(ctx: Any) -> Hub:
        hub: Hub = ctx.lifespan_context
        return hub

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=tool.name,
                    description=tool.description,
                    input_schema=tool.schema,
                    annotations=types.ToolAnnotations(read_only_hint=tool.read_only),
                )
                for tool in TOOLS
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = TOOLS_BY_NAME.get(params.name)
        if tool is None:
            return tool_error("USAGE", f"no tool named {params.name[:100]!r}")
        args = dict(params.arguments or {})
        problem = args_check(tool, args)
        if problem is not None:
            return tool_error("USAGE", f"{tool.name}: {problem}")
        hub = hub_of(ctx)
        cancelled = threading.Event()

        def run() -> Any:
            if tool.cancellable:
                return tool.call(hub.client, args, cancelled)
            return tool.call(hub.client, args)

        try:
            # A cancelled call abandons its thread, which cannot be stopped: a cancellable
            # tool (wait) sees ``cancelled`` and moves nothing after it.
            body = await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise
        except ClientError as exc:
            return tool_error(exc.code, exc.message, exc.detail)
        if tool.moves_cursor:
            await hub.changed(args["channel"], unread=True)
        return tool_result(body)

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        hub = hub_of(ctx)
        try:
            listing = await anyio.to_thread.run_sync(
                lambda: TOOLS_BY_NAME["channels"].call(hub.client, {})
            )
        except ClientError as exc:
            raise MCPError(-32603, f"{exc.code}: {exc.message}") from exc
        resources = []
        for channel in listing["channels"]:
            name = channel["name"]
            whole, unread = channel_uris(name)
            resources.append(
                types.Resource(
                    uri=whole,
                    name=f"{name}",
                    description=f"channel {name}: {channel.get('topic') or ''}".strip(),
                    mime_type="application/json",
                )
            )
            resources.append(
                types.Resource(
                    uri=unread,
                    name=f"{name} unread",
                    description=f"your unread messages in {name} ({channel.get('unread', 0)})",
                    mime_type="application/json",
                )
            )
        return types.ListResourcesResult(resources=resources)

    async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=URI_PREFIX + "{name}",
                    name="channel",
                    description="a channel and its last messages",
                    mime_type="application/json",
                ),
                types.ResourceTemplate(
                    uri_template=URI_PREFIX + "{name}/unread",
                    name="unread",
                    description="your unread relevant messages in a channel (cursor unmoved)",
                    mime_type="application/json",
                ),
                types.ResourceTemplate(  # EP-0118's inbox
                    uri_template=SIGNALS_PREFIX + "{session_id}/{agent_id}",
                    name="signals",
                    description="an agent's unread signals in a session (EP-0118's inbox), "
                    "pushed on each new signal relevant to it",
                    mime_type="application/json",
                ),
            ]
        )

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> Any:
        uri = str(params.uri)
        inbox = signals_uri_parse(uri)  # EP-0118
        channel, unread = inbox if inbox is not None else uri_parse(uri)
        hub = hub_of(ctx)
        try:
            if inbox is not None:
                body = await signals_body(hub, *inbox)
            else:
                body = await resource_body(hub, channel, unread=bool(unread))
        except ClientError as exc:
            code = RESOURCE_NOT_FOUND if exc.status == 404 else -32603
            raise MCPError(code, f"{exc.code}: {exc.message}") from exc
        text = json.dumps(body, ensure_ascii=False, indent=1)
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=text)]
        )

    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        await hub_of(ctx).subscribe(str(params.uri), ctx.session)
        return types.EmptyResult()

    async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        await hub_of(ctx).unsubscribe(str(params.uri), ctx.session)
        return types.EmptyResult()

    async def listen(
        ctx: Any, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        return await hub_of(ctx).listen(ctx, params)

    return Server(
        SERVER_NAME,
        version="1",
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_subscriptions_listen=listen,
    )


async def resource_body(hub: Hub, channel: str, *, unread: bool) -> dict[str, Any]:
    """A channel resource's JSON: the channel and its last messages, or the agent's unread
    relevant messages after its cursor (bounded; ``more`` says there are more to see)."""
    detail = await hub.call("GET", f"channels/{seg(channel)}/", expect=shapes.CHANNEL)
    if not unread:
        page = await hub.call(
            "GET",
            f"channels/{seg(channel)}/messages/",
            params={"limit": PEEK_IN_RESOURCE},
            expect=shapes.PEEK,
        )
        return {"channel": detail, "messages": page["messages"]}
    me = await hub.identity()
    cursor = int(detail.get("cursor") or 0)
    page = await hub.call(
        "GET",
        f"channels/{seg(channel)}/messages/",
        params={"after": cursor, "limit": UNREAD_SCAN},
        expect=shapes.PEEK,
    )
    messages = [m for m in page["messages"] if relevant(m, me)]
    return {
        "channel": channel,
        "cursor": cursor,
        "last_seq": detail.get("last_seq"),
        "unread": detail.get("unread"),
        "messages": messages,
        "more": page["more"],  # the page may stop short of UNREAD_SCAN (a byte budget)
    }


async def serve(client: Client) -> None:
    server = build_server(client)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main(argv: Sequence[str] | None = None) -> int:
    """``agentchat mcp [--url URL] [--token TOKEN]``: serve MCP on stdin/stdout."""
    parser = argparse.ArgumentParser(prog="agentchat mcp", description=main.__doc__)
    parser.add_argument("--url", help="the server's root (default: $AGENT_CHAT_URL, config)")
    parser.add_argument("--token", help="the agent's token (default: $AGENT_CHAT_TOKEN, config)")
    options = parser.parse_args(argv)
    return run(url=options.url, token=options.token)


def run(
    *, url: str | None = None, token: str | None = None, call_timeout: float | None = None
) -> int:
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="agentchat mcp: %(message)s"
    )
    try:
        config = config_load(url=url, token=token, call_timeout=call_timeout)
    except ClientError as exc:
        print(exc.line(), file=sys.stderr)
        return exc.exit_code
    with Client.from_config(config) as client:
        try:
            anyio.run(serve, client)
        except KeyboardInterrupt:
            return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
