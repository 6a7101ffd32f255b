"""Odd bytes in a request's head get the error table's JSON, never daphne's HTML page or
Twisted's bare status line (the hostile run: ``AgentChat-As`` holding U+0085, sent as UTF-8,
got daphne's HTML 400). A live server, raw sockets: what daphne refuses (a header name that is
no token, a value with VT, FF, FS/GS/RS or NEL) is 400 ``INVALID_HEADER``, what Twisted cannot
parse (a header line without a colon, NUL in a value, a bad Content-Length) too, a request
line or chunks it cannot parse 400 ``MALFORMED_REQUEST``, on plain requests and on a
websocket's upgrade alike; and other bytes of 0x80-0xFF reach the application, which answers
with its own codes."""

from __future__ import annotations

import pytest

from tests.core.http.test_body_bounds import answered, exchange


def still_serving(port: int) -> None:
    head = GET + b"Connection: close\r\n\r\n"
    answer, _ = exchange(port, head)
    assert answer.startswith(b"HTTP/1.1 401 "), answer[:200]  # the application's answer


GET = b"GET /api/v1/channels/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
UPGRADE = (
    b"GET /ws/channels/ HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
    b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    b"Sec-WebSocket-Version: 13\r\n"
)


@pytest.mark.parametrize("start", [GET, UPGRADE], ids=["http", "websocket"])
@pytest.mark.parametrize(
    "line",
    [
        b"AgentChat-As: alice.\xc2\x85x",  # U+0085 as UTF-8: the hostile run's
        b"AgentChat-As: alice\x85",
        b"X-Any: a\x0bb",
        b"X-Any: a\x0cb",
        b"X-Any: a\x1cb",
        b"X-Any: a\x1eb",
        b"X-Any: a\x00b",  # Twisted's own refusal
        b"X-\x80Name: v",  # a name that is no token
        b"X-\x9fName: v",
        b"X Name: v",
        b"X-(Name): v",
        b"no colon at all",
        b"Content-Length: ten",
    ],
)
def test_a_header_http_refuses_is_a_json_400_invalid_header(live, start, line):
    error = answered(exchange(live.port, start + line + b"\r\n\r\n")[0], b"400")
    assert error["code"] == "INVALID_HEADER"
    still_serving(live.port)


@pytest.mark.parametrize(
    "head",
    [
        b"GET /api/v1/\xc3\xa9/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        b"GET /api/v1/channels/?q=\x85 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        b"GET /api/v1/a b/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        b"G(T /api/v1/channels/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        b"GET /api/v1/channels/ HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n",
        b"POST /api/v1/channels/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
    ],
)
def test_a_request_line_or_chunk_http_refuses_is_a_json_400_malformed_request(live, head):
    error = answered(exchange(live.port, head)[0], b"400")
    assert error["code"] == "MALFORMED_REQUEST"
    still_serving(live.port)


def test_other_high_bytes_reach_the_application_and_get_its_codes(live, make_agent):
    _, token = make_agent("alice")
    for byte in (0x80, 0x9F, 0xA0, 0xFF):
        head = GET + b"Authorization: Bearer %s\r\nAgentChat-As: alice.x%cy\r\n" % (
            token.encode(),
            byte,
        )
        answer, _ = exchange(live.port, head + b"Connection: close\r\n\r\n")
        status, _, rest = answer.partition(b"\r\n")
        assert status == b"HTTP/1.1 400 Bad Request", answer[:200]
        assert b"application/json" in rest and b'"code":"INVALID_NAME"' in rest
