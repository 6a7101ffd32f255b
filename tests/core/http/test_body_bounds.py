"""What reaches the application at all (the hostile run). Request bodies are bounded while
they arrive, before any application code: Twisted used to read a whole body, spilling it to a
temporary file, before the application's limit or token check ran — 300 MB without a token
filled /tmp, and a declared length of 1 GB held a connection waiting for the rest. A target
that is not a path (absolute-form) is a JSON 400, not Django's HTML 404."""

from __future__ import annotations

import json
import socket

import pytest
from django.conf import settings


def exchange(port: int, head: bytes, body_chunks: list[bytes] = ()) -> tuple[bytes, int]:
    """Send ``head``, then the chunks until the server stops taking them; return what it
    answered (up to its close) and how many body bytes it took."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head)
        try:
            for chunk in body_chunks:
                sock.sendall(chunk)
                sent += len(chunk)
        except OSError:  # refused and closed while we were still sending: expected
            pass
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except OSError:
            pass
    return answer, sent


def refusal(answer: bytes) -> dict:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b"Connection: close" in head
    return json.loads(body)


HEAD = (
    "POST /api/v1/channels/x/messages/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    "Content-Type: application/json\r\n{extra}\r\n"
)


@pytest.mark.parametrize("expect", ["", "Expect: 100-continue\r\n"])
def test_a_declared_length_over_the_limit_is_refused_before_the_body(live, expect):
    head = HEAD.format(extra=f"Content-Length: {2**30}\r\n{expect}").encode()
    answer, _ = exchange(live.port, head)  # no body at all: the answer comes anyway
    error = refusal(answer)["error"]
    assert error["code"] == "REQUEST_TOO_LARGE"
    assert error["detail"] == {"limit": settings.AGENTCHAT_MAX_REQUEST_BYTES}
    assert b"100 Continue" not in answer


def test_a_chunked_body_is_refused_once_it_grows_past_the_limit(live):
    head = HEAD.format(extra="Transfer-Encoding: chunked\r\n").encode()
    piece = b"10000\r\n" + b"y" * 0x10000 + b"\r\n"  # 64 KiB chunks, without end
    # 1.5 MiB, past the limit but within what the lingering close drops: the client reads
    # the 413 whole, then the server's close.
    answer, _ = exchange(live.port, head, [piece] * 24)
    assert refusal(answer)["error"]["code"] == "REQUEST_TOO_LARGE"


def test_a_client_that_keeps_sending_after_the_413_is_cut_off(live):
    from agentchat.core.http.webrequest import LINGER_BYTES

    head = HEAD.format(extra="Transfer-Encoding: chunked\r\n").encode()
    piece = b"10000\r\n" + b"y" * 0x10000 + b"\r\n"
    offered = 4 * (LINGER_BYTES + settings.AGENTCHAT_MAX_REQUEST_BYTES) // len(piece)
    _, sent = exchange(live.port, head, [piece] * offered)
    assert sent < offered * len(piece)  # the server stopped taking them


def test_a_body_within_the_limit_reaches_the_application(live):
    body = b'{"title": "' + b"z" * (settings.AGENTCHAT_MAX_REQUEST_BYTES - 100) + b'"}'
    head = HEAD.format(extra=f"Content-Length: {len(body)}\r\nConnection: close\r\n").encode()
    answer, _ = exchange(live.port, head, [body])
    assert answer.startswith(b"HTTP/1.1 401 "), answer[:200]  # no token: the app answered


@pytest.mark.parametrize("path", ["/api/v1/channels/", "/admin/login/", "/"])
def test_an_absolute_form_target_is_a_json_400(live, path):
    head = f"GET http://evil.example{path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    answer, _ = exchange(live.port, head.encode())
    status, _, body = answer.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 400 "), answer[:300]  # before: Django's HTML 404
    assert json.loads(body)["error"]["code"] == "INVALID_VALUE"
