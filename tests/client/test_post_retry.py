"""``agentchat post`` sends an id of its own with each post and sends it again after a
connection error, a proxy's 502/504 or a 503 (docs/cli.md): a server process stopped in a
deploy roll (docs/deployment.md) loses no post and stores none twice, as the server answers
the same id with the first message."""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from channels_app.models import Message
from tests.client.cli_run import Agentchat
from tests.client.fake_server import fake_server

POST = ("POST", "channels/review/messages/")
STORED = {
    "seq": 1,
    "id": "x",
    "channel": "review",
    "from": "alice",
    "to": [],
    "title": "t",
    "ts": "2026-01-01T00:00:00Z",
}
GATEWAY = (502, b"<html>502 Bad Gateway</html>")  # nginx's page: no AgentChat body
DOWN = (503, {"error": {"code": "DATABASE_UNAVAILABLE", "message": "down", "detail": {}}})


def test_post_is_retried_with_one_id_after_a_drop_a_502_and_a_503(tmp_path):
    with fake_server({POST: [None, GATEWAY, DOWN, (201, STORED)]}) as fake:
        result = Agentchat(fake.url, "t", tmp_path)("post", "review", "--title", "t", "--body", "b")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("posted #1 -> review/")
    sent = [json.loads(body) for body in fake.bodies]
    assert len(sent) == 4
    ids = {body["id"] for body in sent}
    assert len(ids) == 1 and re.fullmatch(r"msg_[0-9a-f]{32}", ids.pop())


def test_a_refused_post_is_not_retried(tmp_path):
    refused = (400, {"error": {"code": "MISSING_FIELD", "message": "no", "detail": {}}})
    with fake_server({POST: [refused, (201, STORED)]}) as fake:
        result = Agentchat(fake.url, "t", tmp_path)("post", "review", "--title", "t", "--body", "b")
    assert result.returncode != 0
    assert len(fake.bodies) == 1


def test_two_posts_send_two_ids(tmp_path):
    with fake_server({POST: (201, STORED)}) as fake:
        run = Agentchat(fake.url, "t", tmp_path)
        for _ in range(2):
            assert run("post", "review", "--title", "t", "--body", "b").returncode == 0
    assert len({json.loads(body)["id"] for body in fake.bodies}) == 2


@contextmanager
def answer_lost_once(target: int) -> Iterator[int]:
    """A TCP relay to 127.0.0.1:``target`` on a port of its own (yielded): the first
    connection's request reaches the server, whose answer is dropped (the connection closes
    once the answer began: the post is stored, the client is not told); every later
    connection is relayed both ways."""
    listener = socket.create_server(("127.0.0.1", 0))
    first = threading.Event()

    def pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def serve() -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", target))
            if not first.is_set():
                first.set()
                threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
                upstream.recv(1)  # the server has answered: its answer is lost
                for s in (client, upstream):
                    s.shutdown(socket.SHUT_RDWR)  # wakes the relay's recv, sends the FIN
                    s.close()
                continue
            threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
            threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


def test_a_post_whose_answer_was_lost_is_stored_once(live, make_agent, tmp_path):
    _, token = make_agent("alice")
    assert Agentchat(live.url, token, tmp_path)("init", "review").returncode == 0
    # The first contact of the CLI is the post itself: its answer is the one lost.
    port = live.url.rsplit(":", 1)[1]
    with answer_lost_once(int(port)) as relay:
        run = Agentchat(f"http://127.0.0.1:{relay}", token, tmp_path)
        result = run("post", "review", "--title", "once", "--body", "b")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("posted #1 -> review/")
    assert list(Message.objects.filter(title="once").values_list("seq", flat=True)) == [1]


def test_the_mcp_post_tool_sends_one_id_again_after_a_drop_and_a_503():
    from agentchat.client import mcp_tools
    from agentchat.client.api import Client

    with fake_server({POST: [None, DOWN, (201, STORED)]}) as fake:
        answer = mcp_tools.post(Client(fake.url, "t"), {"channel": "review", "title": "t"})
    assert answer["seq"] == 1
    ids = {json.loads(body)["id"] for body in fake.bodies}
    assert len(fake.bodies) == 3 and len(ids) == 1
    assert re.fullmatch(r"msg_[0-9a-f]{32}", ids.pop())
