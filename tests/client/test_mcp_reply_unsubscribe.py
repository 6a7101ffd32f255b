"""``agentchat mcp`` through the SDK's own client over stdio: a reply through the ``post``
tool, and ``resources/unsubscribe`` stopping the notifications (subscribing again: once)."""

from __future__ import annotations

import warnings
from typing import Any

from mcp import Client as McpClient
from mcp.shared.exceptions import MCPDeprecationWarning

from tests.client.test_mcp import UNREAD, Notified, error_text, http, server_params, world

__all__ = ["world"]  # the fixture, used by name

DESIGN = "agentchat://channels/design"


async def test_post_replies_to_a_seq(world: dict[str, Any]) -> None:
    async with McpClient(server_params(world, "alice")) as client:
        first = await client.call_tool("post", {"channel": "review", "title": "question"})
        seq = first.structured_content["seq"]
        reply = await client.call_tool(
            "post", {"channel": "review", "title": "answer", "reply_to": seq}
        )
        assert reply.is_error is not True, reply.content
        assert reply.structured_content["reply_to"] == seq
        # A message id is no seq: refused by the schema, nothing posted.
        refused = await client.call_tool(
            "post", {"channel": "review", "title": "x", "reply_to": first.structured_content["id"]}
        )
        assert error_text(refused).startswith("USAGE: post: reply_to: ")
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert tools["post"].input_schema["properties"]["reply_to"]["type"] == "integer"
    page = await http(world, "alice", "GET", "channels/review/messages/")
    assert [m["title"] for m in page["messages"]] == ["question", "answer"]


async def test_unsubscribe_stops_the_notifications_and_a_new_subscription_is_one(
    world: dict[str, Any],
) -> None:
    await http(world, "alice", "POST", "channels/", json={"name": "design"})
    on_message = Notified(timeout=10)
    seen, until = on_message.seen, on_message.until

    async def bob_posts(channel: str) -> None:
        await http(world, "bob", "POST", f"channels/{channel}/messages/", json={"title": "p"})

    async with McpClient(
        server_params(world, "alice"), mode="legacy", message_handler=on_message
    ) as client:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            # design stays followed throughout: the stream stays open, and its notification
            # after review's post shows whether review's came (one stream, in order).
            await client.subscribe_resource(DESIGN)
            await client.subscribe_resource(UNREAD)
            await bob_posts("review")
            await until(UNREAD, 1)

            await client.unsubscribe_resource(UNREAD)
            await bob_posts("review")
            await bob_posts("design")
            await until(DESIGN, 1)
            assert seen.count(UNREAD) == 1  # nothing after the unsubscribe

            await client.subscribe_resource(UNREAD)
            await bob_posts("review")
            await bob_posts("design")
            await until(DESIGN, 2)
            await until(UNREAD, 2)
    assert seen.count(UNREAD) == 2, seen  # subscribed again: told once, not twice
