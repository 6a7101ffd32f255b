"""The API lane serves /api/ over real HTTP with the same contract as the views' own tests."""

from __future__ import annotations

import contextlib
import json
import socket

import httpx
import pytest

from channels_app.models import Message
from tests.conftest import auth
from tests.errors import error_code as code


@pytest.fixture
def alice(live, make_agent):
    _, token = make_agent("alice")
    r = httpx.post(f"{live.url}/api/v1/channels/", json={"name": "lane"}, headers=auth(token))
    assert r.status_code == 201
    return token


def post_raw(live, token, payload: bytes, content_type="application/json"):
    return httpx.post(
        f"{live.url}/api/v1/channels/lane/messages/",
        content=payload,
        headers={**auth(token), "Content-Type": content_type},
    )


@pytest.mark.parametrize(
    ("payload", "status", "error"),
    [
        (b"{", 400, "INVALID_JSON"),
        (b"[]", 400, "INVALID_JSON"),
        (b'{"title": "x", "color": 1}', 400, "UNKNOWN_FIELD"),
        (b'{"title": 5}', 400, "INVALID_TYPE"),
        (json.dumps({"title": "x", "body": "a" * (768 * 1024)}).encode(), 413, "REQUEST_TOO_LARGE"),
    ],
)
def test_bad_bodies_get_their_code_and_write_nothing(live, alice, payload, status, error):
    r = post_raw(live, alice, payload)
    assert (r.status_code, code(r)) == (status, error)
    assert not Message.objects.exists()


@pytest.mark.parametrize(
    ("payload", "content_type"),
    [
        (b"title=x", "application/x-www-form-urlencoded"),
        (
            b'--b\r\nContent-Disposition: form-data; name="title"\r\n\r\nx\r\n--b--\r\n',
            "multipart/form-data; boundary=b",
        ),
    ],
)
def test_non_json_is_415(live, alice, payload, content_type):
    r = post_raw(live, alice, payload, content_type)
    assert (r.status_code, code(r)) == (415, "UNSUPPORTED_MEDIA_TYPE")
    assert not Message.objects.exists()


def test_the_server_does_not_parse_form_bodies_before_the_api(live, alice):
    # serve.py turns Twisted's form parsing off (CPU and a second copy of the body). A 415
    # for a well-formed form proves nothing: the API answers it either way. A body that is not
    # multipart at all does: Twisted, parsing it, would answer 400 with its own HTML page
    # before the application saw the request.
    r = post_raw(live, alice, b"this is no multipart body", "multipart/form-data; boundary=b")
    assert r.headers["content-type"] == "application/json"
    assert (r.status_code, code(r)) == (415, "UNSUPPORTED_MEDIA_TYPE")
    assert not Message.objects.exists()


def test_auth_failures_are_401_with_a_challenge(live, alice):
    r = httpx.get(f"{live.url}/api/v1/channels/")
    assert (r.status_code, code(r)) == (401, "AUTH_REQUIRED")
    assert r.headers["WWW-Authenticate"].startswith("Bearer")
    r = httpx.get(f"{live.url}/api/v1/channels/", headers=auth("ac_nope"))
    assert (r.status_code, code(r)) == (401, "AUTH_INVALID")


def test_unknown_route_and_method(live, alice):
    r = httpx.get(f"{live.url}/api/v1/channels/lane/nothing/", headers=auth(alice))
    assert (r.status_code, code(r)) == (404, "NOT_FOUND")
    r = httpx.get(f"{live.url}/api/v1/channels", headers=auth(alice))
    assert (r.status_code, code(r)) == (404, "NOT_FOUND")
    assert "end with a slash" in r.json()["error"]["message"]
    r = httpx.delete(f"{live.url}/api/v1/channels/lane/messages/", headers=auth(alice))
    assert (r.status_code, code(r)) == (405, "METHOD_NOT_ALLOWED")


def test_success_carries_security_headers(live, alice):
    r = httpx.post(
        f"{live.url}/api/v1/channels/lane/messages/", json={"title": "x"}, headers=auth(alice)
    )
    assert r.status_code == 201
    assert r.headers["content-type"] == "application/json"
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.headers["X-Frame-Options"] == "DENY"
    # The length is declared, so the body is not sent chunked.
    assert int(r.headers["Content-Length"]) == len(r.content)
    assert "Transfer-Encoding" not in r.headers


def test_a_foreign_host_header_is_refused(live, alice):
    r = httpx.get(f"{live.url}/api/v1/channels/", headers={**auth(alice), "Host": "evil.example"})
    assert (r.status_code, code(r)) == (400, "INVALID_HOST")


def test_an_oversized_body_is_refused_and_the_server_stays_up(live, alice):
    # The server refuses a declared length over 768 KiB before reading the body (413), closes
    # that connection (tests/core/http/test_body_bounds.py), and goes on serving.
    size = 8 * 1024 * 1024
    with socket.create_connection(("127.0.0.1", live.port), timeout=30) as sock:
        head = (
            f"POST /api/v1/channels/lane/messages/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {alice}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {size}\r\n\r\n"
        )
        with contextlib.suppress(OSError):  # closed while the body was still on its way
            sock.sendall(head.encode() + b"a" * size)
        answer = sock.recv(65536).decode(errors="replace")
    assert answer.startswith("HTTP/1.1 413")
    assert "REQUEST_TOO_LARGE" in answer
    ok = httpx.post(
        f"{live.url}/api/v1/channels/lane/messages/", json={"title": "x"}, headers=auth(alice)
    )
    assert ok.status_code == 201


def test_docs_and_schema_are_served(live):
    assert httpx.get(f"{live.url}/api/v1/docs/").status_code == 200
    r = httpx.get(
        f"{live.url}/api/v1/schema/", headers={"Accept": "application/vnd.oai.openapi+json"}
    )
    assert r.status_code == 200
    assert "/api/v1/channels/{name}/wait/" in r.json()["paths"]
