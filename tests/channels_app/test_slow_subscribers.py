"""Websocket subscribers that stop reading: the stream is sent only as fast
as the connection drains, so a subscriber that stops reading holds a bounded amount of the
server's memory, and one that stays full is closed (4408, a policy close); reconnecting with
``since`` loses nothing."""

from __future__ import annotations

import asyncio
import json
import socket
import struct

import pytest
import websockets
from channels.testing import WebsocketCommunicator

from agentchat.asgi import application
from channels_app import endpoints, live
from channels_app.models import Channel
from channels_app.services import channel_create, message_post
from tests.conftest import ServerProcess
from tests.signals import wait_until
from tests.ws import frames_until_close

HOST = [(b"host", b"testserver")]


class StuckWindow:
    """A SendWindow whose connection is full after ``room_for`` frames and never drains."""

    instances: list[StuckWindow] = []

    def __init__(self, scope, room_for: int = 3) -> None:
        self.sent = 0
        self.room_for = room_for
        self.closed = False
        StuckWindow.instances.append(self)

    @property
    def full(self) -> bool:
        return self.sent >= self.room_for

    async def room(self, timeout: float) -> bool:
        await asyncio.sleep(timeout)  # the controlled stall: it never drains
        return False

    def close(self) -> None:
        self.closed = True


def stuck_windows(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Connections get a StuckWindow that counts the message frames sent; returns the list
    that records the size of every batch the streams read."""
    StuckWindow.instances.clear()
    monkeypatch.setattr(endpoints.multiplex, "SendWindow", StuckWindow)
    monkeypatch.setattr(endpoints.shared, "SendWindow", StuckWindow)
    monkeypatch.setattr(endpoints.stream, "SendWindow", StuckWindow)
    fetched: list[int] = []
    real_after = live.messages_after_visible

    def counting_after(**kwargs):
        rows = real_after(**kwargs)
        fetched.append(len(rows))
        return rows

    monkeypatch.setattr(live, "messages_after_visible", counting_after)
    real_frame = endpoints.shared._frame

    def frame(message, **named):
        StuckWindow.instances[-1].sent += 1
        return real_frame(message, **named)

    monkeypatch.setattr(endpoints.shared, "_frame", frame)
    return fetched


@pytest.mark.django_db(transaction=True)
def test_a_stream_stops_reading_the_backlog_while_the_client_is_full_then_closes_it(
    make_agent, monkeypatch, settings
):
    settings.AGENTCHAT_STREAM_STALL_SECONDS = 0.2
    make_agent("alice")
    _, token = make_agent("bob")
    channel = channel_create(name="slow", created_by="alice")
    for i in range(200):
        message_post(channel=channel, sender="alice", title=f"m{i}")
    fetched = stuck_windows(monkeypatch)

    async def scenario():
        client = WebsocketCommunicator(
            application, f"/ws/channels/slow/?since=0&token={token}", headers=HOST
        )
        connected, _ = await client.connect()
        assert connected
        return await frames_until_close(client)

    frames, close = asyncio.run(scenario())
    assert close == {"type": "websocket.close", "code": endpoints.shared.TOO_SLOW_CLOSE_CODE}
    assert [f["message"]["seq"] for f in frames] == [1, 2, 3]
    assert sum(fetched) <= live.STREAM_BATCH  # one batch read, not the 200-message backlog
    assert StuckWindow.instances[-1].closed


def _tcp_state(sock: socket.socket) -> int:
    # struct tcp_info starts with the state byte (Linux): 1 is ESTABLISHED.
    return struct.unpack("B", sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1))[0]


def test_a_real_subscriber_that_stops_reading_is_closed_and_loses_nothing_after(
    transactional_db, make_agent
):
    make_agent("alice")
    _, token = make_agent("bob")
    channel = channel_create(name="big", created_by="alice")
    for i in range(40):  # 20 MB of backlog
        message_post(channel=channel, sender="alice", title=f"m{i}", body=f"{i:04d}" * 125_000)
    server = ServerProcess(env={"AGENTCHAT_STREAM_STALL_SECONDS": "1"})
    try:
        idle = socket.socket()
        idle.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        idle.connect(("127.0.0.1", server.port))
        idle.sendall(
            (
                f"GET /ws/channels/big/?since=0&token={token} HTTP/1.1\r\n"
                "Host: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        assert idle.recv(12) == b"HTTP/1.1 101"
        # It never reads again. The server stops sending once its buffer is full, and after
        # the stall period it closes the connection.
        wait_until(lambda: _tcp_state(idle) != 1, timeout=30, what="the server closed it")
        idle.close()

        async def reconnect():
            url = f"{server.ws_url}/ws/channels/big/?since=0&token={token}"
            async with websockets.connect(url, max_size=None) as ws:
                return [json.loads(await asyncio.wait_for(ws.recv(), 30)) for _ in range(40)]

        frames = asyncio.run(reconnect())
        assert [f["message"]["seq"] for f in frames] == list(range(1, 41))
        assert all(f["message"]["body"][:4] == f"{i:04d}" for i, f in enumerate(frames))
        assert Channel.objects.get(name="big").last_seq == 40
        assert "Traceback" not in server.output()
    finally:
        server.stop()
