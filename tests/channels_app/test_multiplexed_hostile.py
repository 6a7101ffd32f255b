"""Hostile clients of the multiplexed websocket ``/ws/channels/`` against a real server
process (daphne, so the ``SendWindow`` sees the transport): what one client sends must not
grow the server without bound nor delay what other clients get."""

from __future__ import annotations

import asyncio
import json
import socket
import struct

import websockets

from channels_app.endpoints.shared import CLIENT_FRAME_BURST
from tests.conftest import ServerProcess

BURST = CLIENT_FRAME_BURST - 8  # frames sent at once, within the budget's burst


async def _connect(url: str, token: str, *, rcvbuf: int | None = None):
    """A websocket to ``url``; with ``rcvbuf`` a small kernel receive buffer, so a client that
    does not read fills the server's side quickly."""
    sock = None
    if rcvbuf is not None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        host, port = url.removeprefix("ws://").split(":")
        sock.connect((host, int(port)))
    return await websockets.connect(
        f"{url}/ws/channels/",
        additional_headers={"Authorization": f"Bearer {token}"},
        max_queue=1,
        max_size=None,
        sock=sock,
    )


def _tcp_state(sock: socket.socket) -> int:
    # struct tcp_info starts with the state byte (Linux): 1 is ESTABLISHED.
    return struct.unpack("B", sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1))[0]


def test_a_client_that_never_reads_is_closed_not_buffered(transactional_db, make_agent):
    """A client that stops reading but keeps sending frames (each within the frame budget)
    whose answers echo what it sent: an unsubscribe of a channel it never followed is answered
    with its name, ensure_ascii-escaped (4,000 characters in, 24,000 out). Found by a hostile
    run: the answers were sent whether or not the connection had room (only a subscription's
    pump looked at the window), so they queued in the server without bound (10 such clients:
    RSS 119 -> 202 MB in 30 s) and 4408 never came. Now no frame is taken while the connection
    is full, and a connection full for AGENTCHAT_STREAM_STALL_SECONDS is closed with 4408: the
    client, still not reading, sees its connection end (the server gives up on the close
    handshake nobody answers), however long it would go on sending."""
    _, token = make_agent("mallory")
    server = ServerProcess(env={"AGENTCHAT_STREAM_STALL_SECONDS": "1"})
    frame = json.dumps({"op": "unsubscribe", "channel": "é" * 4000}, ensure_ascii=False)
    assert len(frame) <= 4096  # within CLIENT_FRAME_MAX_CHARS

    async def scenario() -> tuple[int, bool]:
        ws = await _connect(server.ws_url, token, rcvbuf=4096)
        sock = ws.transport.get_extra_info("socket")
        ws.transport.pause_reading()  # the client never reads
        sent = 0
        try:
            # A bound for a server that never ends it (the bug), not a sync point.
            while sent < BURST + 15 * 60:
                if _tcp_state(sock) != 1:
                    break  # the server ended the connection
                await ws.send(frame)
                sent += 1
                if sent > BURST:  # then 15 a second: under the budget's 16
                    await asyncio.sleep(1 / 15)
        except websockets.ConnectionClosed:
            pass
        ended = _tcp_state(sock) != 1 or ws.state is websockets.State.CLOSED
        ws.transport.abort()
        return sent, ended

    try:
        sent, ended = asyncio.run(scenario())
        assert ended, f"the server kept a client that did not read for {sent} frames"
        assert "Traceback" not in server.output()
    finally:
        server.stop()
