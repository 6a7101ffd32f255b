"""Hostile clients of the multiplexed websocket ``/ws/channels/`` against a real server
process (daphne, so the ``SendWindow`` sees the transport): what one client sends must not
grow the server without bound nor delay what other clients get."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import websockets

from tests.conftest import ServerProcess


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


def test_a_client_that_never_reads_is_closed_not_buffered(transactional_db, make_agent):
    """A client that stops reading but keeps sending frames (each within the frame budget)
    whose answers echo what it sent: an unsubscribe of a channel it never followed is answered
    with its name, ensure_ascii-escaped (4,000 characters in, 24,000 out). Found by a hostile
    run: the answers were sent whether or not the connection had room (only a subscription's
    pump looked at the window), so they queued in the server without bound (10 such clients:
    RSS 119 -> 202 MB in 30 s) and 4408 never came. Now no frame is taken while the connection
    is full, and a connection full for AGENTCHAT_STREAM_STALL_SECONDS is closed with 4408."""
    _, token = make_agent("mallory")
    server = ServerProcess(env={"AGENTCHAT_STREAM_STALL_SECONDS": "1"})
    frame = json.dumps({"op": "unsubscribe", "channel": "é" * 4000}, ensure_ascii=False)
    assert len(frame) <= 4096  # within CLIENT_FRAME_MAX_CHARS

    async def scenario() -> tuple[int, int, int | None]:
        ws = await _connect(server.ws_url, token, rcvbuf=4096)
        ws.transport.pause_reading()  # the client never reads
        sent = 0
        try:
            end = time.monotonic() + 12
            while time.monotonic() < end:
                await ws.send(frame)  # 15 a second: under the budget's 16
                sent += 1
                await asyncio.sleep(1 / 15)
        except websockets.ConnectionClosed:
            pass
        ws.transport.resume_reading()
        answers = 0
        try:
            while True:
                await asyncio.wait_for(ws.recv(), 10)
                answers += 1
        except websockets.ConnectionClosed:
            pass
        except TimeoutError:
            pass
        code = ws.close_code
        await ws.close()
        return sent, answers, code

    try:
        sent, answers, code = asyncio.run(scenario())
        # ~180 answers of ~24 KB (over 4 MB) went unread for 12 s with a 1 s stall limit:
        # closed with 4408, or at least the answers dropped while the connection was full.
        assert sent > 100
        assert code == 4408 or answers < sent // 2, (
            f"{answers} of {sent} answers buffered for a client that did not read, "
            f"close code {code}"
        )
        assert "Traceback" not in server.output()
    finally:
        server.stop()
