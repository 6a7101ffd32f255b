"""``agentchat mcp`` driven by the MCP SDK's own client over stdio, against a live server."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
import websockets
from mcp import Client as McpClient
from mcp import StdioServerParameters
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from agentchat.client import mcp_tools
from agentchat.client.api import Client
from agentchat.client.errors import ClientError
from agentchat.client.mcp_tools import TOOLS

ROOT = Path(__file__).resolve().parents[2]
EXPECTED_TOOLS = {
    "channels",
    "post",
    "read",
    "peek",
    "wait",
    "claim",
    "task_create",
    "task_list",
    "task_show",
    "task_update",
    "task_claim",
    "task_renew",
    "task_done",
    "task_block",
    "task_release",
    "task_recover",
    "lock",
    "check",
    "unlock",
    "state",
    "event_post",
    "event_read",
    # HTTP v1 direct messages (tests/client/test_mcp_direct.py)
    "send_direct",
    "read_inbox",
    "send_receipt",
}
# EP-0118's tools (tests/client/test_ep_surfaces.py drives them).
EXPECTED_TOOLS |= {
    "start_session",
    "signal",
    "read_signals",
    "ack_signals",
    "list_agents",
    "write_whiteboard",
    "read_whiteboard",
    "tired",
    "read_notes",
}
UNREAD = "agentchat://channels/review/unread"


@pytest.fixture
def world(live: Any, make_agent: Any, tmp_path: Path) -> dict[str, Any]:
    tokens = {name: make_agent(name)[1] for name in ("alice", "bob", "carol")}
    with Client(live.url, tokens["alice"]) as alice:
        alice.request("POST", "channels/", json={"name": "review", "topic": "the review"})
    return {"url": live.url, "tokens": tokens, "home": tmp_path}


def server_params(world: dict[str, Any], agent: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "agentchat.client.mcp_server"],
        env={
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(world["home"]),
            "AGENT_CHAT_URL": world["url"],
            "AGENT_CHAT_TOKEN": world["tokens"][agent],
            "PYTHONPATH": str(ROOT),
        },
        cwd=str(ROOT),
    )


async def http(world: dict[str, Any], agent: str, method: str, path: str, **kw: Any) -> Any:
    def call() -> Any:
        with Client(world["url"], world["tokens"][agent]) as client:
            return client.request(method, path, **kw)

    return await anyio.to_thread.run_sync(call)


async def subscribe_legacy(client: McpClient, *uris: str) -> None:
    """``resources/subscribe`` each of ``uris`` (the SDK's legacy mode, which it warns about)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        for uri in uris:
            await client.subscribe_resource(uri)


def error_text(result: types.CallToolResult) -> str:
    assert result.is_error is True
    [content] = result.content
    assert isinstance(content, types.TextContent)
    return content.text


async def test_tools_listed_with_schemas(world: dict[str, Any]) -> None:
    async with McpClient(server_params(world, "alice")) as client:
        listed = (await client.list_tools()).tools
    assert {tool.name for tool in listed} == EXPECTED_TOOLS == {tool.name for tool in TOOLS}
    for tool in listed:
        assert tool.input_schema["type"] == "object"
        assert tool.input_schema["additionalProperties"] is False
        assert tool.description
    post = next(tool for tool in listed if tool.name == "post")
    assert post.input_schema["required"] == ["channel", "title"]


async def test_post_read_wait_and_a_task_claim(world: dict[str, Any]) -> None:
    async with McpClient(server_params(world, "alice")) as client:
        posted = await client.call_tool(
            "post", {"channel": "review", "title": "hello", "body": "hi *bob*", "to": "bob"}
        )
        assert posted.is_error is not True
        assert posted.structured_content["seq"] == 1
        assert posted.structured_content["from"] == "alice"
        assert posted.structured_content["to"] == ["bob"]

        await http(world, "bob", "POST", "channels/review/messages/", json={"title": "yo"})
        read = await client.call_tool("read", {"channel": "review"})
        assert [m["title"] for m in read.structured_content["messages"]] == ["yo"]
        assert read.structured_content["more"] is False
        again = await client.call_tool("read", {"channel": "review"})
        assert again.structured_content["messages"] == []

        peek = await client.call_tool("peek", {"channel": "review", "n": 5})
        assert [m["seq"] for m in peek.structured_content["messages"]] == [1, 2]

        timed_out = await client.call_tool("wait", {"channel": "review", "timeout": 0.2})
        assert timed_out.structured_content["timed_out"] is True

        async with anyio.create_task_group() as tasks:
            got: dict[str, Any] = {}

            async def waiting() -> None:
                got["wait"] = await client.call_tool("wait", {"channel": "review", "timeout": 30})

            tasks.start_soon(waiting)
            await http(world, "carol", "POST", "channels/review/messages/", json={"title": "c"})
        assert [m["title"] for m in got["wait"].structured_content["messages"]] == ["c"]

        created = await client.call_tool(
            "task_create", {"channel": "review", "id": "t-1", "title": "review it"}
        )
        assert created.structured_content["status"] == "open"
        claimed = await client.call_tool(
            "task_claim", {"channel": "review", "id": "t-1", "lease_seconds": 60}
        )
        assert claimed.structured_content["status"] == "in_progress"
        assert claimed.structured_content["owner"] == "alice"
        assert claimed.structured_content["lease"]["owner"] == "alice"


async def test_errors_are_tool_errors_with_the_code(world: dict[str, Any]) -> None:
    async with McpClient(server_params(world, "bob")) as client:
        missing = await client.call_tool("task_claim", {"channel": "review", "id": "nope"})
        assert error_text(missing).startswith("TASK_NOT_FOUND: ")
        assert missing.structured_content["error"]["code"] == "TASK_NOT_FOUND"

        unknown = await client.call_tool("read", {"channel": "nowhere"})
        assert error_text(unknown).startswith("CHANNEL_NOT_FOUND: ")

        await client.call_tool("claim", {"channel": "review", "marker": "m1"})
        lost = await client.call_tool("claim", {"channel": "review", "marker": "m1"})
        assert error_text(lost).startswith("MARKER_ALREADY_CLAIMED: ")

        bad = await client.call_tool("post", {"channel": "review"})
        assert error_text(bad).startswith("USAGE: post: ")
        assert "'title' is a required property" in error_text(bad)
        extra = await client.call_tool("peek", {"channel": "review", "x": 1})
        assert error_text(extra).startswith("USAGE: ")
    # Nothing was posted by the refused calls (the marker claim posts nothing either).
    peek = await http(world, "alice", "GET", "channels/review/messages/")
    assert peek["messages"] == []


async def test_lock_results_say_locks_are_advisory(world: dict[str, Any]) -> None:
    async with McpClient(server_params(world, "alice")) as client:
        locked = await client.call_tool("lock", {"channel": "review", "paths": ["src/a.py"]})
        assert locked.structured_content["owner"] == "alice"
        assert "advisory" in locked.structured_content["advisory"]
        checked = await client.call_tool("check", {"channel": "review", "paths": ["src"]})
        assert [c["owner"] for c in checked.structured_content["conflicts"]] == ["alice"]
        unlocked = await client.call_tool("unlock", {"channel": "review", "target": "src/a.py"})
        assert unlocked.structured_content["lock_id"] == locked.structured_content["lock_id"]
        # A path spelled like the API's operations is a path (no lock can have that id).
        locked = await client.call_tool("lock", {"channel": "review", "paths": ["check"]})
        unlocked = await client.call_tool("unlock", {"channel": "review", "target": "check"})
        assert unlocked.structured_content["lock_id"] == locked.structured_content["lock_id"]
        gone = await client.call_tool("unlock", {"channel": "review", "target": "check"})
        assert error_text(gone).startswith("PATH_LOCK_NOT_FOUND: ")


async def test_resources_list_and_read_without_moving_the_cursor(world: dict[str, Any]) -> None:
    await http(world, "bob", "POST", "channels/review/messages/", json={"title": "for all"})
    await http(
        world, "bob", "POST", "channels/review/messages/", json={"title": "c", "to": "carol"}
    )
    async with McpClient(server_params(world, "alice")) as client:
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert {"agentchat://channels/review", UNREAD} <= uris
        for _ in range(2):  # reading twice: the cursor did not move
            result = await client.read_resource(UNREAD)
            [content] = result.contents
            assert '"for all"' in content.text
            assert '"title": "c"' not in content.text  # addressed to carol
        with pytest.raises(MCPError, match="CHANNEL_NOT_FOUND"):
            await client.read_resource("agentchat://channels/nowhere/unread")
    channel = await http(world, "alice", "GET", "channels/review/")
    assert channel["cursor"] == 0


async def test_legacy_subscription_is_notified_within_a_second(world: dict[str, Any]) -> None:
    updated = anyio.Event()
    seen: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            seen.append(str(message.params.uri))
            if str(message.params.uri) == UNREAD:
                updated.set()

    async with McpClient(
        server_params(world, "alice"), mode="legacy", message_handler=on_message
    ) as client:
        await subscribe_legacy(client, UNREAD)
        # Not relevant to alice: no update of her unread view.
        await http(
            world, "bob", "POST", "channels/review/messages/", json={"title": "x", "to": "carol"}
        )
        await http(world, "alice", "POST", "channels/review/messages/", json={"title": "own"})
        started = time.monotonic()
        await http(world, "bob", "POST", "channels/review/messages/", json={"title": "ping"})
        with anyio.fail_after(5):
            await updated.wait()
        elapsed = time.monotonic() - started
        # The update came for the relevant post only.
        assert seen == [UNREAD]
    assert elapsed < 2.0, elapsed


async def test_listen_subscription_is_notified_within_a_second(world: dict[str, Any]) -> None:
    async with McpClient(server_params(world, "alice")) as client:
        assert client.protocol_version == "2026-07-28"
        async with client.listen(resource_subscriptions=[UNREAD]) as subscription:
            started = time.monotonic()
            await http(world, "bob", "POST", "channels/review/messages/", json={"title": "ping"})
            with anyio.fail_after(5):
                async for event in subscription:
                    assert event.uri == UNREAD
                    break
            elapsed = time.monotonic() - started
    assert elapsed < 2.0, elapsed


class CountingProxy:
    """A TCP proxy in front of the live server: counts the websocket handshakes through it
    (the MCP server's REST calls pass too, uncounted), can cut the open websockets and hold
    new ones until released; with ``ws_target`` the websockets go to another server (a fake
    stream) and the REST calls to the live one."""

    def __init__(self, target: int, ws_target: int | None = None) -> None:
        self.target = target
        self.ws_target = ws_target  # where the websockets go, when not to the live server
        self.opened = 0
        self.open: set[asyncio.StreamWriter] = set()
        self.most_open = 0
        self.released = asyncio.Event()
        self.released.set()
        self.held = 0
        # A REST request line starting so waits for rest_released (the first request of a
        # connection only: the requests after it on a kept-alive connection pass).
        self.hold_rest: bytes | None = None
        self.rest_released = asyncio.Event()
        self.rest_holding = asyncio.Event()

    async def start(self) -> str:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = b""
        while b"\r\n" not in head and len(head) < 65536:  # the request line
            chunk = await reader.read(65536)
            if not chunk:
                writer.close()
                return
            head += chunk
        websocket = head.startswith(b"GET /ws/")
        if self.hold_rest is not None and head.startswith(self.hold_rest):
            self.rest_holding.set()
            await self.rest_released.wait()
        if websocket:
            self.held += 1
            await self.released.wait()
            self.held -= 1
            self.opened += 1
            self.open.add(writer)
            self.most_open = max(self.most_open, len(self.open))
        port = self.ws_target if websocket and self.ws_target else self.target
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
        up_writer.write(head)

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while chunk := await source.read(65536):
                    sink.write(chunk)
                    await sink.drain()
            except OSError:
                pass
            finally:
                sink.close()

        try:
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        finally:
            self.open.discard(writer)

    def cut(self) -> None:
        """Drop the open websockets; new ones wait for ``release``."""
        self.released.clear()
        for writer in list(self.open):
            writer.transport.abort()

    async def close(self) -> None:
        self.server.close()
        for writer in list(self.open):
            writer.transport.abort()


async def test_two_channels_are_followed_over_one_websocket(world: dict[str, Any]) -> None:
    await http(world, "alice", "POST", "channels/", json={"name": "design"})
    proxy = CountingProxy(int(world["url"].rsplit(":", 1)[1]))
    design = "agentchat://channels/design"
    on_message = Notified()
    seen = on_message.seen

    async def notified(uri: str, count: int) -> float:
        """Seconds until ``uri`` has been notified ``count`` times."""
        started = time.monotonic()
        await on_message.until(uri, count)
        return time.monotonic() - started

    params = server_params({**world, "url": await proxy.start()}, "alice")
    try:
        async with McpClient(params, mode="legacy", message_handler=on_message) as client:
            await subscribe_legacy(client, UNREAD, design)
            post = {"json": {"title": "ping"}}
            await http(world, "bob", "POST", "channels/review/messages/", **post)
            review_took = await notified(UNREAD, 1)
            await http(world, "bob", "POST", "channels/design/messages/", **post)
            design_took = await notified(design, 1)
            assert (proxy.opened, proxy.most_open) == (1, 1)

            # The connection drops; what is posted meanwhile is notified once it is back.
            proxy.cut()
            await http(world, "bob", "POST", "channels/review/messages/", **post)
            await http(world, "bob", "POST", "channels/design/messages/", **post)
            proxy.released.set()
            await notified(UNREAD, 2)
            await notified(design, 2)
            # A later post on each: a replayed duplicate would have come before it.
            await http(world, "bob", "POST", "channels/review/messages/", **post)
            await http(world, "bob", "POST", "channels/design/messages/", **post)
            await notified(UNREAD, 3)
            await notified(design, 3)
    finally:
        await proxy.close()
    assert seen.count(UNREAD) == 3 and seen.count(design) == 3
    assert proxy.opened == 2 and proxy.most_open == 1  # one reconnect, never two at once
    assert review_took < 1.0 and design_took < 1.0, (review_took, design_took)


async def test_a_cancelled_wait_leaves_a_later_message_unread(world: dict[str, Any]) -> None:
    async with McpClient(server_params(world, "alice")) as client:
        with anyio.move_on_after(1) as scope:  # the host gives up on the call
            await client.call_tool("wait", {"channel": "review", "timeout": 30})
        assert scope.cancelled_caught
        # A round trip after the cancellation: the server has taken it by now.
        assert (await client.call_tool("peek", {"channel": "review"})).is_error is not True
        await http(world, "bob", "POST", "channels/review/messages/", json={"title": "late"})
        read = await client.call_tool("read", {"channel": "review"})
        assert [m["title"] for m in read.structured_content["messages"]] == ["late"]
    channel = await http(world, "alice", "GET", "channels/review/")
    assert channel["cursor"] == 1


async def test_a_wait_answers_what_is_unread_and_moves_the_cursor_past_it(
    world: dict[str, Any],
) -> None:
    for title in ("one", "two"):
        await http(world, "bob", "POST", "channels/review/messages/", json={"title": title})
    await http(
        world, "bob", "POST", "channels/review/messages/", json={"title": "c", "to": "carol"}
    )
    async with McpClient(server_params(world, "alice")) as client:
        got = await client.call_tool("wait", {"channel": "review", "timeout": 5})
        assert [m["title"] for m in got.structured_content["messages"]] == ["one", "two"]
        assert (got.structured_content["cursor"], got.structured_content["more"]) == (3, False)
        timed_out = await client.call_tool("wait", {"channel": "review", "timeout": 0.2})
        assert timed_out.structured_content == {
            "messages": [],
            "cursor": 3,
            "more": False,
            "timed_out": True,
        }
    channel = await http(world, "alice", "GET", "channels/review/")
    assert channel["cursor"] == 3


class PagedReads:
    """A client whose read answers ``pages`` one after the other, then fails."""

    def __init__(self, *pages: dict[str, Any]) -> None:
        self.pages = list(pages)
        self.calls = 0

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        assert (method, path) == ("POST", "channels/review/read/")
        self.calls += 1
        if not self.pages:
            raise ClientError("SERVER_UNREACHABLE", "gone", transient=True)
        return self.pages.pop(0)


def test_a_read_whose_later_page_fails_answers_the_pages_read() -> None:
    first = {"messages": [{"seq": 1}, {"seq": 2}], "cursor": 2, "more": True}
    second = {"messages": [{"seq": 3}], "cursor": 3, "more": True}
    client = PagedReads(first, second)
    got = mcp_tools.read(client, {"channel": "review"})  # type: ignore[arg-type]
    assert client.calls == 3
    assert (got["messages"], got["cursor"], got["more"]) == (
        [{"seq": 1}, {"seq": 2}, {"seq": 3}],
        3,
        True,
    )
    assert got["note"] == (
        "stopped after 2 pages: SERVER_UNREACHABLE: gone; read again for the rest"
    )


def test_a_read_whose_first_page_fails_is_the_error() -> None:
    with pytest.raises(ClientError) as caught:
        mcp_tools.read(PagedReads(), {"channel": "review"})  # type: ignore[arg-type]
    assert caught.value.code == "SERVER_UNREACHABLE"


Script = Callable[["FakeStream", Any, int], Awaitable[None]]


class FakeStream:
    """A stand-in for the server's multiplexed ``/ws/channels/``: connection ``n`` is handed
    to ``script(self, ws, n)``; what arrives and when is recorded, and ``until`` waits for a
    condition on it."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.opened_at: list[float] = []
        self.received: list[tuple[int, dict[str, Any]]] = []
        self.closed = 0
        self.resubscribe = False  # a test's signal to its script
        self.changed = asyncio.Condition()

    async def start(self) -> int:
        self.server = await websockets.serve(self.handle, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def poke(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    async def handle(self, ws: Any) -> None:
        number = len(self.opened_at)
        self.opened_at.append(time.monotonic())
        await self.poke()
        try:
            await self.script(self, ws, number)
        except websockets.ConnectionClosed:
            pass
        finally:
            self.closed += 1
            await self.poke()

    async def recv(self, ws: Any, number: int) -> dict[str, Any]:
        frame = json.loads(await ws.recv())
        self.received.append((number, frame))
        await self.poke()
        return frame

    async def until(self, condition: Callable[[], bool], seconds: float = 5) -> None:
        with anyio.fail_after(seconds):
            async with self.changed:
                await self.changed.wait_for(condition)

    async def close(self) -> None:
        self.server.close()
        await self.server.wait_closed()


def message_frame(seq: int, title: str = "x") -> str:
    message = {"seq": seq, "from": "bob", "to": [], "title": title}
    return json.dumps({"type": "message", "channel": "review", "message": message})


def subscribed_frame(since: int) -> str:
    return json.dumps({"type": "subscribed", "channel": "review", "since": since, "last_seq": 0})


class Notified:
    """The resource URIs an MCP client was told of, and a wait for the ``count``th of one."""

    def __init__(self, timeout: float = 5) -> None:
        self.seen: list[str] = []
        self.arrived = anyio.Event()
        self.timeout = timeout

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.seen.append(str(message.params.uri))
            self.arrived.set()

    async def until(self, uri: str, count: int) -> None:
        with anyio.fail_after(self.timeout):
            while self.seen.count(uri) < count:
                self.arrived = anyio.Event()
                await self.arrived.wait()


async def with_fake_stream(
    world: dict[str, Any], script: Script, test: Callable[[Any, FakeStream, Notified], Any]
) -> FakeStream:
    """Run ``test(mcp client, fake, notified)`` with alice's MCP server subscribed to the
    review unread resource, its websocket going to a fake stream playing ``script``."""
    fake = FakeStream(script)
    proxy = CountingProxy(int(world["url"].rsplit(":", 1)[1]), ws_target=await fake.start())
    notified = Notified()
    params = server_params({**world, "url": await proxy.start()}, "alice")
    try:
        async with McpClient(params, mode="legacy", message_handler=notified) as client:
            await subscribe_legacy(client, UNREAD)
            await test(client, fake, notified)
    finally:
        await proxy.close()
        await fake.close()
    return fake


async def test_a_frame_the_server_dropped_makes_the_hub_resubscribe(world: dict[str, Any]) -> None:
    async def script(fake: FakeStream, ws: Any, number: int) -> None:
        frame = await fake.recv(ws, number)
        if number == 0:  # the subscribe is dropped: the server says so without a channel
            error = {"code": "STREAM_TOO_MANY_FRAMES", "message": "dropped", "detail": {}}
            await ws.send(json.dumps({"type": "error", "error": error}))
        else:
            await ws.send(subscribed_frame(frame["since"]))
            await ws.send(message_frame(1))
        await ws.wait_closed()

    async def test(client: Any, fake: FakeStream, notified: Notified) -> None:
        await notified.until(UNREAD, 1)
        assert len(fake.opened_at) == 2

    fake = await with_fake_stream(world, script, test)
    subscribe = {"op": "subscribe", "channel": "review", "since": 0}
    assert fake.received == [(0, subscribe), (1, subscribe)]


async def test_followed_already_keeps_the_channel_followed(world: dict[str, Any]) -> None:
    async def script(fake: FakeStream, ws: Any, number: int) -> None:
        frame = await fake.recv(ws, number)
        await ws.send(subscribed_frame(frame["since"]))
        error = {
            "code": "INVALID_VALUE",
            "message": "this connection follows the channel already: unsubscribe first",
            "detail": {"field": "channel"},
        }
        if number == 0:
            await ws.send(json.dumps({"type": "error", "channel": "review", "error": error}))
            await ws.send(message_frame(1))
            await fake.until(lambda: fake.resubscribe)
            await ws.close()  # the reconnect shows what the hub follows, and from where
        await ws.wait_closed()

    async def test(client: Any, fake: FakeStream, notified: Notified) -> None:
        await notified.until(UNREAD, 1)
        fake.resubscribe = True
        await fake.poke()
        await fake.until(lambda: len(fake.received) == 2)

    fake = await with_fake_stream(world, script, test)
    subscribe = {"op": "subscribe", "channel": "review"}
    # Still followed, from the message that came after the error.
    assert fake.received == [(0, {**subscribe, "since": 0}), (1, {**subscribe, "since": 1})]


async def test_a_stream_that_closes_at_once_is_retried_with_growing_delays(
    world: dict[str, Any],
) -> None:
    async def script(fake: FakeStream, ws: Any, number: int) -> None:
        await fake.recv(ws, number)
        await ws.close()

    async def test(client: Any, fake: FakeStream, notified: Notified) -> None:
        await fake.until(lambda: len(fake.opened_at) >= 4, seconds=10)

    fake = await with_fake_stream(world, script, test)
    at = fake.opened_at
    gaps = [later - earlier for earlier, later in itertools.pairwise(at)]
    # 0.5 s, 1 s, 2 s: no reset after a connection that served nothing.
    assert gaps[0] >= 0.4 and gaps[1] >= 0.9 and gaps[2] >= 1.9, gaps


async def test_malformed_frames_never_end_the_mcp_server(world: dict[str, Any]) -> None:
    odd = [
        "not json",
        "[1, 2]",
        json.dumps({"type": "message", "channel": "review", "message": "x"}),
        json.dumps({"type": "message", "channel": "review", "message": {"seq": True}}),
        json.dumps({"type": "message", "channel": 7, "message": {"seq": 5}}),
        json.dumps({"type": "message", "channel": "review", "message": {"seq": 1, "to": 5}}),
    ]

    async def script(fake: FakeStream, ws: Any, number: int) -> None:
        frame = await fake.recv(ws, number)
        await ws.send(subscribed_frame(frame["since"]))
        if number == 0:
            for raw in odd:
                await ws.send(raw)
            await ws.send(message_frame(2))
            # An error field that is no object: of no subscription, so the hub reconnects.
            await ws.send(json.dumps({"type": "error", "channel": "review", "error": "boom"}))
        else:
            await ws.send(message_frame(3))
        await ws.wait_closed()

    async def test(client: Any, fake: FakeStream, notified: Notified) -> None:
        await notified.until(UNREAD, 3)  # seq 1 (the odd `to`), 2, then 3 after the reconnect
        peek = await client.call_tool("peek", {"channel": "review"})
        assert peek.is_error is not True
        assert peek.structured_content["messages"] == []

    fake = await with_fake_stream(world, script, test)
    assert len(fake.opened_at) == 2
    # The reconnect subscribed from the last seq seen.
    assert fake.received[1] == (1, {"op": "subscribe", "channel": "review", "since": 2})


async def test_when_errors_end_every_subscription_the_websocket_closes(
    world: dict[str, Any],
) -> None:
    async def script(fake: FakeStream, ws: Any, number: int) -> None:
        await fake.recv(ws, number)
        error = {"code": "CHANNEL_NOT_FOUND", "message": "no such channel", "detail": {}}
        await ws.send(json.dumps({"type": "error", "channel": "review", "error": error}))
        await ws.wait_closed()

    async def test(client: Any, fake: FakeStream, notified: Notified) -> None:
        await notified.until(UNREAD, 1)  # the subscription ended: a read tells why
        await fake.until(lambda: fake.closed == 1)  # the hub closed the idle websocket
        assert (await client.call_tool("peek", {"channel": "review"})).is_error is not True

    fake = await with_fake_stream(world, script, test)
    assert len(fake.opened_at) == 1


async def test_a_slow_channel_lookup_holds_up_no_other_subscription(world: dict[str, Any]) -> None:
    await http(world, "alice", "POST", "channels/", json={"name": "design"})
    proxy = CountingProxy(int(world["url"].rsplit(":", 1)[1]))
    proxy.hold_rest = b"GET /api/v1/channels/design/ "
    notified = Notified()
    params = server_params({**world, "url": await proxy.start()}, "alice")
    try:
        async with McpClient(params, mode="legacy", message_handler=notified) as client:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(client.subscribe_resource, "agentchat://channels/design")
                    # design's lookup hangs in the proxy; review's subscription goes through.
                    with anyio.fail_after(5):
                        await proxy.rest_holding.wait()
                        await client.subscribe_resource(UNREAD)
                    await http(
                        world, "bob", "POST", "channels/review/messages/", json={"title": "p"}
                    )
                    await notified.until(UNREAD, 1)
                    proxy.rest_released.set()
    finally:
        await proxy.close()
