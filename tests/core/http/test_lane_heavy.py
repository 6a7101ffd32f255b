"""The heavy gate (agentchat.core.db.heavy) against a real server with real clients: an
agent's tokens share one place in it, another agent's peek is not held up by a long request,
and a queued request whose client hangs up never runs.

A compaction is held by a lock the test takes on the channel (an UPDATE: the row on
PostgreSQL, the database's write lock on SQLite), so that it runs, and holds the agent's
place, for as long as the test needs. The server has a queue of one per agent and a long work
budget (the held compaction must not run out of it). What the server has seen is known by a
short request sent after it and answered (the server handles a connection's bytes, and its
hang-up, in the order they arrive): no sleeps.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.db import transaction

from agentchat.core.identity.services import token_create
from agentchat.models import StateSnapshot
from channels_app.models import Channel
from tests.conftest import ServerProcess, auth, server_of_its_own
from tests.errors import error_code as code


@pytest.fixture(scope="module")
def server(django_db_setup: Any, django_db_blocker: Any) -> Iterator[ServerProcess]:
    env = {"AGENTCHAT_HEAVY_QUEUE_PER_AGENT": "1", "AGENTCHAT_HEAVY_BUDGET_SECONDS": "600"}
    with server_of_its_own(django_db_blocker, env) as process:
        yield process


def raw_request(server: ServerProcess, method: str, path: str, token: str) -> socket.socket:
    """A request sent on a connection of its own, its answer not read yet."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    sock.sendall(
        f"{method} /api/v1/{path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}"
        "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()
    )
    return sock


def status_of(sock: socket.socket) -> int:
    with sock:
        head = b""
        while b"\r\n" not in head:
            chunk = sock.recv(4096)
            assert chunk, "the server closed the connection without an answer"
            head += chunk
    return int(head.split(b" ", 2)[1])


def test_an_agents_tokens_share_its_place_and_a_request_whose_client_left_never_runs(
    server, transactional_db, make_agent
):
    alice, first = make_agent("alice")
    second, third = token_create(agent=alice), token_create(agent=alice)
    _, bobs = make_agent("bob")
    clients = {
        token: httpx.Client(base_url=f"{server.url}/api/v1/", headers=auth(token), timeout=60)
        for token in (first, second, third, bobs)
    }
    try:
        assert clients[first].post("channels/", json={"name": "gate"}).status_code == 201
        # Each token authenticated once: its once-a-minute touch (a write) is behind it.
        for client in clients.values():
            assert client.get("channels/gate/").status_code == 200

        def seen() -> None:
            """A short request sent after what came before, and answered."""
            assert clients[bobs].get("channels/gate/").status_code == 200

        peek = "channels/gate/messages/?limit=5"
        later: dict[str, httpx.Response] = {}
        with transaction.atomic():
            Channel.objects.filter(name="gate").update(topic="held by the test")
            held = raw_request(server, "POST", "channels/gate/compact/", first)
            seen()  # alice's compaction runs, and waits for the test's lock
            queued = raw_request(server, "POST", "channels/gate/compact/", second)
            seen()  # alice's second compaction waits for her first
            # A third token of alice's finds her queue full, as the first two did.
            r = clients[third].get(peek)
            assert (r.status_code, code(r)) == (429, "HEAVY_REQUEST_BUSY")
            # bob's peek is not held up: not by alice, nor by her long request.
            assert clients[bobs].get(peek).status_code == 200
            queued.close()  # the second compaction's client hangs up
            seen()
            # Its place is free: alice's peek waits for her first compaction, not refused.
            waiter = threading.Thread(target=lambda: later.update(peek=clients[third].get(peek)))
            waiter.start()
        assert status_of(held) == 201
        waiter.join(60)
        assert later["peek"].status_code == 200
        # Once alice's next request is answered, her queue has passed the abandoned one.
        assert clients[first].get("channels/gate/state/").status_code == 200
        assert StateSnapshot.objects.filter(channel__name="gate").count() == 1
    finally:
        for client in clients.values():
            client.close()
