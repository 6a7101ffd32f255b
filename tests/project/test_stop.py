"""SIGTERM drains a server process (agentchat/serve.py, docs/deployment.md "Rolling a
deploy"): a parked wait is answered 503 SERVICE_UNAVAILABLE with Retry-After and moves no
cursor, an open websocket is closed with 4503, an SSE stream ends, and the process exits by
itself once nothing is in flight: a client (or the proxy) sends the wait again to another
process and loses nothing."""

from __future__ import annotations

import json
import socket

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from channels_app.models import Cursor
from channels_app.services import channel_create, message_post
from tests.conftest import ServerProcess


@pytest.mark.django_db(transaction=True)
def test_sigterm_answers_a_parked_wait_503_and_closes_websockets_4503(make_agent):
    alice, token = make_agent("alice")
    channel = channel_create(name="roll", created_by="alice")
    message_post(channel=channel, sender="alice", title="before")
    # A long grace: the process exits before it only if every stream ended (the SSE below).
    server = ServerProcess(env={"AGENTCHAT_STOP_GRACE_SECONDS": "120"})
    try:
        headers = {"Authorization": f"Bearer {token}"}
        socket_ws = connect(
            f"{server.ws_url}/ws/channels/roll/?since=1", additional_headers=headers, legacy=True
        )
        # The wait, parked on a connection of its own: nothing new after the cursor.
        httpx.post(f"{server.url}/api/v1/channels/roll/ack/", json={"seq": 1}, headers=headers)
        wait = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        wait.sendall(
            b"GET /api/v1/channels/roll/wait/?timeout=60 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + f"Authorization: Bearer {token}\r\n\r\n".encode()
        )
        # An SSE follow of alice's inbox (HTTP v1), its headers received: the stream is open.
        sse = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        sse.sendall(
            b"GET /v1/agents/alice/inbox HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + b"Accept: text/event-stream\r\n"
            + f"Authorization: Bearer {token}\r\n\r\n".encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            head += sse.recv(65536)
        assert head.startswith(b"HTTP/1.1 200") and b"text/event-stream" in head, head
        # A later connection answered: the wait's (queued before it) was accepted too.
        assert httpx.get(f"{server.url}/api/v1/me/", headers=headers).status_code == 200
        took = server.stop(timeout=30)
        while sse.recv(65536):  # the stream ends
            pass
        answer = b""
        while chunk := wait.recv(65536):
            answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503"), answer
        assert b"Retry-After: 1" in head
        error = json.loads(body)["error"]
        assert error["code"] == "SERVICE_UNAVAILABLE" and error["detail"]["reason"] == "stopping"
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                socket_ws.recv(timeout=15)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4503
        assert took is not None  # it exited by itself: no stream held it for the grace
        assert Cursor.objects.get(channel=channel, agent=alice).seq == 1
    finally:
        server.kill()
