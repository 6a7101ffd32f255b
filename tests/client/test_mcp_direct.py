"""``agentchat mcp``'s direct messages (HTTP v1), driven by the official MCP SDK client over stdio
against a live server: send_direct, read_inbox, send_receipt, and agentchat://inbox pushed
(``notifications/resources/updated``) within a second of an envelope's arrival."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client as McpClient

from agentchat.client.api import Client
from tests.client.test_mcp import (
    UNREAD,
    CountingProxy,
    Notified,
    error_text,
    http,
    server_params,
    subscribe_legacy,
)

INBOX = "agentchat://inbox"


@pytest.fixture
def world(live: Any, make_agent: Any, tmp_path: Path) -> dict[str, Any]:
    tokens = {name: make_agent(name)[1] for name in ("alice", "bob", "carol")}
    with Client(live.url, tokens["alice"]) as alice:
        alice.request("POST", "channels/", json={"name": "review"})
    return {"url": live.url, "tokens": tokens, "home": tmp_path}


def body(result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error is not True, result.content
    return result.structured_content


async def test_send_read_inbox_and_receipt(world: dict[str, Any]) -> None:
    send = {
        "to": "bob",
        "text": "Please inspect this result",
        "data": {"priority": 2},
        "conversation_id": "task-42",
        "metadata": {"trace_id": "abc123"},
        "id": "msg-mcp-1",
    }
    async with McpClient(server_params(world, "alice")) as alice:
        sent = body(await alice.call_tool("send_direct", send))
        assert sent["schema"] == "agent-chat/envelope.v1"
        assert (sent["id"], sent["from"], sent["to"]) == ("msg-mcp-1", "alice", "bob")
        again = body(await alice.call_tool("send_direct", send))
        assert again == sent  # a retry: the stored envelope
        async with McpClient(server_params(world, "bob")) as bob:
            page = body(await bob.call_tool("read_inbox", {}))
            assert [d["envelope"] for d in page["deliveries"]] == [sent]
            assert (page["next_cursor"], page["tail"]) == (1, 1)
            empty = body(await bob.call_tool("read_inbox", {"cursor": 1, "limit": 10}))
            assert empty == {"deliveries": [], "next_cursor": 1, "tail": 1}
            receipt = body(
                await bob.call_tool(
                    "send_receipt", {"message_id": "msg-mcp-1", "status": "read", "detail": "ok"}
                )
            )
            assert receipt["kind"] == "receipt" and receipt["to"] == "alice"
            beyond = await bob.call_tool("read_inbox", {"cursor": 5})
            assert error_text(beyond).startswith("INVALID_CURSOR: ")
            bad = await bob.call_tool("send_receipt", {"message_id": "msg-mcp-1", "status": "ok"})
            assert error_text(bad).startswith("USAGE: send_receipt: ")
            never = await bob.call_tool("send_receipt", {"message_id": "nope", "status": "read"})
            assert error_text(never).startswith("MESSAGE_NOT_FOUND: ")
        mine = body(await alice.call_tool("read_inbox", {"cursor": 0}))
        [delivery] = mine["deliveries"]
        assert delivery["envelope"]["message"]["data"] == {
            "message_id": "msg-mcp-1",
            "status": "read",
            "detail": "ok",
        }
        unknown = await alice.call_tool("send_direct", {"to": "nobody", "text": "x"})
        assert error_text(unknown).startswith("AGENT_NOT_FOUND: ")
        assert unknown.structured_content["error"]["code"] == "AGENT_NOT_FOUND"


async def test_the_inbox_resource_is_listed_and_read(world: dict[str, Any]) -> None:
    for n in range(25):
        await http(
            world, "bob", "POST", "/v1/agents/bob/messages", json={"to": "alice", "text": f"m{n}"}
        )
    async with McpClient(server_params(world, "alice")) as client:
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert INBOX in uris
        [content] = (await client.read_resource(INBOX)).contents
        shown = json.loads(content.text)
    assert shown["agent"] == "alice" and shown["tail"] == 25
    assert [d["seq_num"] for d in shown["deliveries"]] == list(range(5, 25))
    assert shown["deliveries"][-1]["envelope"]["message"]["text"] == "m24"


async def test_the_inbox_resource_is_pushed_within_a_second(world: dict[str, Any]) -> None:
    updated = anyio.Event()
    seen: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            seen.append(str(message.params.uri))
            updated.set()

    async with McpClient(
        server_params(world, "alice"), mode="legacy", message_handler=on_message
    ) as client:
        await subscribe_legacy(client, INBOX)
        # alice's own send (to bob's inbox) does not touch hers.
        await client.call_tool("send_direct", {"to": "bob", "text": "mine"})
        await http(
            world, "bob", "POST", "/v1/agents/bob/messages", json={"to": "alice", "text": "hi"}
        )
        arrived = time.monotonic()
        with anyio.fail_after(10):
            await updated.wait()
        elapsed = time.monotonic() - arrived
        assert seen == [INBOX]
        [content] = (await client.read_resource(INBOX)).contents
        assert [
            d["envelope"]["message"]["text"] for d in json.loads(content.text)["deliveries"]
        ] == ["hi"]
        # A second envelope: a second update.
        updated = anyio.Event()
        await http(
            world, "carol", "POST", "/v1/agents/carol/messages", json={"to": "alice", "text": "c"}
        )
        with anyio.fail_after(10):
            await updated.wait()
        assert seen == [INBOX, INBOX]
    assert elapsed < 1.0, elapsed


async def test_the_inbox_resource_is_pushed_to_a_listen_stream(world: dict[str, Any]) -> None:
    async with (
        McpClient(server_params(world, "alice")) as client,
        client.listen(resource_subscriptions=[INBOX]) as subscription,
    ):
        await http(
            world, "bob", "POST", "/v1/agents/bob/messages", json={"to": "alice", "text": "hi"}
        )
        arrived = time.monotonic()
        with anyio.fail_after(10):
            async for event in subscription:
                assert event.uri == INBOX
                break
        elapsed = time.monotonic() - arrived
    assert elapsed < 1.0, elapsed


async def test_an_envelope_sent_while_the_websocket_is_down_is_notified_once_back(
    world: dict[str, Any],
) -> None:
    proxy = CountingProxy(int(world["url"].rsplit(":", 1)[1]))
    on_message = Notified()
    params = server_params({**world, "url": await proxy.start()}, "alice")
    send = {"json": {"to": "alice", "text": "x"}}
    try:
        async with McpClient(params, mode="legacy", message_handler=on_message) as client:
            await subscribe_legacy(client, INBOX, UNREAD)  # a channel beside it, one websocket
            await http(world, "bob", "POST", "/v1/agents/bob/messages", **send)
            await on_message.until(INBOX, 1)
            assert (proxy.opened, proxy.most_open) == (1, 1)
            proxy.cut()
            await http(world, "bob", "POST", "/v1/agents/bob/messages", **send)
            await http(world, "carol", "POST", "/v1/agents/carol/messages", **send)
            proxy.released.set()
            await on_message.until(INBOX, 2)  # the two made while down: one update
            # A later one: a duplicate of the reconnect's would have come before it.
            await http(world, "bob", "POST", "/v1/agents/bob/messages", **send)
            await on_message.until(INBOX, 3)
            [content] = (await client.read_resource(INBOX)).contents
            assert json.loads(content.text)["tail"] == 4
    finally:
        await proxy.close()
    assert on_message.seen.count(INBOX) == 3
    assert proxy.opened == 2 and proxy.most_open == 1
