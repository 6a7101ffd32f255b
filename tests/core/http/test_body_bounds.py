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


# --- the request line and headers (issue 17: a request line over 16 KB was dropped unanswered)


def answered(answer: bytes, status: bytes) -> dict:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 " + status + b" "), answer[:200]
    assert b"Connection: close" in head and b"Content-Type: application/json" in head
    return json.loads(body)["error"]


def still_serving(port: int) -> None:
    answer, _ = exchange(port, b"GET /api/v1/channels/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]
    assert not answer.startswith((b"HTTP/1.1 414", b"HTTP/1.1 431", b"HTTP/1.1 5"))


@pytest.mark.parametrize("length", [16_400, 100_000, 3_000_000])
def test_a_request_line_too_long_is_answered_414(live, length):
    target = "/api/v1/search/?q=" + "a" * length
    head = f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    error = answered(exchange(live.port, head)[0], b"414")
    assert error["code"] == "REQUEST_LINE_TOO_LONG"
    assert error["detail"] == {"limit": 16384}
    still_serving(live.port)


def test_a_request_line_that_never_ends_is_answered_then_cut_off(live):
    from agentchat.core.http.webrequest import LINGER_BYTES

    piece = b"a" * 0x10000
    offered = 4 * LINGER_BYTES // len(piece)
    answer, sent = exchange(live.port, b"GET /?q=", [piece] * offered)
    assert answered(answer, b"414")["code"] == "REQUEST_LINE_TOO_LONG"
    assert sent < offered * len(piece)  # the server stopped taking them
    still_serving(live.port)


@pytest.mark.parametrize(
    "headers",
    [
        "X-Big: " + "b" * 17_000 + "\r\n",  # one line too long
        "".join(f"X-H{i}: {'c' * 100}\r\n" for i in range(200)),  # all of them together
    ],
    ids=["one-line", "together"],
)
def test_headers_too_large_are_answered_431(live, headers):
    head = f"GET /api/v1/channels/ HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}\r\n".encode()
    error = answered(exchange(live.port, head)[0], b"431")
    assert error["code"] == "HEADERS_TOO_LARGE"
    still_serving(live.port)


def test_a_request_line_within_the_limit_reaches_the_application(live):
    head = f"GET /api/v1/channels/?{'p' * 15_000} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    answer, _ = exchange(live.port, head)
    assert not answer.startswith((b"HTTP/1.1 414", b"HTTP/1.1 431")), answer[:200]
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]
