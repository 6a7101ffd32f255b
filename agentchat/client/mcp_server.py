"""``agentchat mcp``: an MCP server on stdio (the official ``mcp`` SDK, 2.x lowlevel API).

Tools are the REST operations (``agentchat.client.mcp_tools``; HTTP v1's in ``mcp_direct``,
EP-0118's in ``mcp_ep``): results carry the REST body as structured content (and as JSON
text), errors are tool errors whose text is ``CODE: message``. The subscriptions and the one
websocket behind them are ``mcp_hub.Hub``.

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

The agent's HTTP v1 inbox is ``agentchat://inbox`` (its last deliveries); subscribed, the same
websocket follows the inbox (``{"op": "subscribe", "kind": "inbox", "since": <tail>}``) and each
new tail the server rings sends its update (``Hub.inbox_*``).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
import anyio.abc
import mcp_types as types
from jsonschema import Draft202012Validator
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from agentchat.client import shapes
from agentchat.client.api import Client, seg
from agentchat.client.config import config_load
from agentchat.client.errors import ClientError
from agentchat.client.mcp_hub import (
    INBOX_URI,
    SIGNALS_PREFIX,
    URI_PREFIX,
    Hub,
    channel_uris,
    inbox_body,
    resource_error,
    signals_body,
    signals_uri_parse,
    uri_parse,
)
from agentchat.client.mcp_schema import Tool
from agentchat.client.mcp_tools import TOOLS, TOOLS_BY_NAME
from agentchat.client.ops import relevant
from agentchat.client.safe import line, sendable, terminal

log = logging.getLogger("agentchat.mcp")

SERVER_NAME = "agentchat"
PEEK_IN_RESOURCE = 20  # the channel resource shows this many last messages
UNREAD_SCAN = 200  # the unread resource looks at most this many messages after the cursor
INSTRUCTIONS = (
    "AgentChat: channels of markdown messages shared with other agents, tasks under leases, "
    "advisory path locks. `read` moves your cursor, `peek` does not; `wait` blocks until a "
    "relevant message arrives. Subscribe to agentchat://channels/<name>/unread to be told "
    "when one does. Direct messages: `send_direct`, `read_inbox`, `send_receipt`; subscribe "
    "to agentchat://inbox to be told when one arrives."
)


def json_text(body: Any) -> str:
    """``body`` as the JSON text an agent reads: the same JSON, with every character a
    terminal or a reader would act on or not see (C0/C1 controls, bidirectional controls,
    invisible format characters, lone surrogates) written as its ``\\uXXXX`` escape."""
    return terminal(json.dumps(body, ensure_ascii=False, indent=1), as_json=True)


def tool_result(body: Any) -> types.CallToolResult:
    structured = sendable(body if isinstance(body, dict) else {"result": body})
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json_text(body))],
        structured_content=cast(dict[str, Any], structured),
    )


def tool_error(
    code: str, message: str, detail: dict[str, Any] | None = None
) -> types.CallToolResult:
    error = sendable({"code": code, "message": message, "detail": detail or {}})
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{line(code)}: {line(message)}")],
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
            raise resource_error(exc) from exc
        resources = [
            types.Resource(
                uri=INBOX_URI,
                name="inbox",
                description="your direct messages (HTTP v1 inbox): the last deliveries",
                mime_type="application/json",
            )
        ]
        for channel in listing["channels"]:
            name = channel["name"]
            whole, unread = channel_uris(name)
            resources.append(
                types.Resource(
                    uri=whole,
                    name=line(name),
                    description=line(f"channel {name}: {channel.get('topic') or ''}".strip()),
                    mime_type="application/json",
                )
            )
            resources.append(
                types.Resource(
                    uri=unread,
                    name=line(f"{name} unread"),
                    description=line(
                        f"your unread messages in {name} ({channel.get('unread', 0)})"
                    ),
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
        hub = hub_of(ctx)
        try:
            if uri == INBOX_URI:  # HTTP v1
                body = await anyio.to_thread.run_sync(inbox_body, hub.client)
            elif (inbox := signals_uri_parse(uri)) is not None:  # EP-0118
                body = await signals_body(hub, *inbox)
            else:
                channel, unread = uri_parse(uri)
                body = await resource_body(hub, channel, unread=bool(unread))
        except ClientError as exc:
            raise resource_error(exc) from exc
        text = json_text(body)
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
