"""One request-validation path (agentchat/core/http/asgi_http.py): the REST lane, the wait and the
websockets refuse the same requests with the same codes."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from agentchat.core.http.asgi_http import (
    accepts_json,
    body_read,
    error_send,
    request_check,
)
from agentchat.core.rules.errors import AppError, error_render
from tests.conftest import auth
from tests.errors import error_code as code
from tests.wire import ws_handshake_status


def scope(*headers: tuple[str, str], method: str = "GET") -> dict:
    raw = [(k.lower().encode(), v.encode("latin-1")) for k, v in headers]
    return {"type": "http", "method": method, "headers": raw, "server": ("127.0.0.1", 8000)}


def refused(s: dict, **kwargs) -> AppError:
    with pytest.raises(AppError) as info:
        request_check(s, **kwargs)
    return info.value


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:8000", "127.0.0.1.evil", "", "[::2]", "localhost\x00"]
)
def test_a_foreign_host_is_invalid_host(host):
    error = refused(scope(("Host", host)))
    assert (error.code, error.status) == ("INVALID_HOST", 400)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.1:8000", "localhost:1", "[::1]:80"])
def test_allowed_hosts_pass(host):
    request_check(scope(("Host", host)))


def test_without_a_host_header_the_server_address_is_the_host():
    request_check(scope())
    error = refused({**scope(), "server": ("10.9.9.9", 80)})
    assert error.code == "INVALID_HOST"
    # No host information at all: an in-process caller (daphne always sets the server).
    request_check({"type": "http", "method": "GET", "headers": []})


@pytest.mark.parametrize(
    "hosts", [("127.0.0.1", "evil.example"), ("evil.example", "127.0.0.1"), ("127.0.0.1",) * 2]
)
def test_several_host_headers_are_invalid_host_in_either_order(hosts):
    error = refused(scope(*(("Host", host) for host in hosts)))
    assert (error.code, error.status) == ("INVALID_HOST", 400)


@pytest.mark.parametrize("query", [b"limit=1&limit=2", b"a=&a=", b"since=1&token=x&since=1"])
def test_a_query_parameter_given_twice_is_refused(query):
    error = refused({**scope(("Host", "127.0.0.1")), "query_string": query})
    assert (error.code, error.status) == ("INVALID_VALUE", 400)


def test_distinct_query_parameters_pass():
    request_check({**scope(("Host", "127.0.0.1")), "query_string": b"after=1&limit=2&x"})


def test_duplicate_authorization_headers_are_401():
    s = scope(("Host", "127.0.0.1"), ("Authorization", "Bearer a"), ("Authorization", "Bearer b"))
    error = refused(s)
    assert (error.code, error.status) == ("AUTH_INVALID", 401)
    assert error_render(error).headers == {"WWW-Authenticate": 'Bearer realm="agentchat"'}


def test_a_method_not_allowed_is_405_with_allow():
    error = refused(scope(("Host", "127.0.0.1"), method="POST"), methods={"GET"})
    assert (error.code, error.status) == ("METHOD_NOT_ALLOWED", 405)
    assert error_render(error).headers == {"Allow": "GET"}


@pytest.mark.parametrize(
    ("accept", "ok"),
    [
        (None, True),
        ("", True),
        ("application/json", True),
        ("application/json; charset=utf-8", True),
        ("text/html, */*;q=0.8", True),
        ("application/*", True),
        ("application/xml", False),
        ("text/event-stream", False),
        ("application/json;q=0, text/html", False),
        ("application/json;q=abc", True),  # an unreadable quality counts as 1, as in Django
        ("\x00\ud800" * 3, False),
        ("application/json" + ", x/y" * 2000, False),  # too long to parse
    ],
)
def test_accept(accept, ok):
    headers = [("Host", "127.0.0.1")]
    if accept is not None:
        headers.append(("Accept", accept.encode("utf-8", "surrogatepass").decode("latin-1")))
    s = scope(*headers)
    assert accepts_json(s) is ok
    if ok:
        request_check(s, json_only=True)
    else:
        error = refused(s, json_only=True)
        assert (error.code, error.status) == ("NOT_ACCEPTABLE", 406)


def test_body_read_joins_chunks_caps_and_sees_disconnects():
    def receiver(*messages):
        queue = list(messages)

        async def receive():
            return queue.pop(0)

        return receive

    async def scenario():
        whole = await body_read(
            receiver(
                {"type": "http.request", "body": b"ab", "more_body": True},
                {"type": "http.request", "body": b"", "more_body": True},
                {"type": "http.request", "body": b"c"},
            ),
            limit=3,
        )
        gone = await body_read(
            receiver(
                {"type": "http.request", "body": b"a", "more_body": True},
                {"type": "http.disconnect"},
            ),
            limit=3,
        )
        with pytest.raises(AppError) as info:
            await body_read(
                receiver(
                    {"type": "http.request", "body": b"ab", "more_body": True},
                    {"type": "http.request", "body": b"cd"},
                ),
                limit=3,
            )
        return whole, gone, info.value

    whole, gone, too_large = asyncio.run(scenario())
    assert (whole, gone) == (b"abc", None)
    assert (too_large.code, too_large.status) == ("REQUEST_TOO_LARGE", 413)


def test_error_send_renders_status_headers_and_body():
    sent = []

    async def send(message):
        sent.append(message)

    asyncio.run(error_send(send, AppError("AUTH_REQUIRED", "no token")))
    start, body = sent
    headers = dict(start["headers"])
    assert start["status"] == 401
    assert headers[b"www-authenticate"] == b'Bearer realm="agentchat"'
    assert headers[b"content-type"] == b"application/json"
    assert int(headers[b"content-length"]) == len(body["body"])
    assert json.loads(body["body"]) == {
        "error": {"code": "AUTH_REQUIRED", "message": "no token", "detail": {}}
    }


# --- the same answers from every surface of a real server -----------------------------------


@pytest.fixture
def bob(live, make_agent):
    _, token = make_agent("bob")
    r = httpx.post(f"{live.url}/api/v1/channels/", json={"name": "same"}, headers=auth(token))
    assert r.status_code == 201
    return token


SURFACES = {
    "rest": ("GET", "/api/v1/channels/same/"),
    "wait": ("GET", "/api/v1/channels/same/wait/?timeout=0"),
}


@pytest.mark.parametrize("surface", SURFACES)
def test_a_foreign_host_is_400_everywhere(live, bob, surface):
    method, path = SURFACES[surface]
    r = httpx.request(method, live.url + path, headers={**auth(bob), "Host": "evil.example"})
    assert (r.status_code, code(r)) == (400, "INVALID_HOST")


@pytest.mark.parametrize("surface", SURFACES)
def test_duplicate_authorization_is_401_everywhere(live, bob, surface):
    method, path = SURFACES[surface]
    _, path = SURFACES[surface]
    headers = [("Authorization", f"Bearer {bob}"), ("Authorization", "Bearer ac_other")]
    r = httpx.request(method, live.url + path, headers=headers)
    assert (r.status_code, code(r)) == (401, "AUTH_INVALID")
    assert r.headers["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("surface", SURFACES)
def test_a_second_host_header_is_400_everywhere(live, bob, surface):
    method, path = SURFACES[surface]
    headers = [*auth(bob).items(), ("Host", "evil.example")]  # httpx adds its own Host first
    r = httpx.request(method, live.url + path, headers=headers)
    assert (r.status_code, code(r)) == (400, "INVALID_HOST")


@pytest.mark.parametrize("surface", SURFACES)
def test_a_repeated_query_parameter_is_400_everywhere(live, bob, surface):
    method, path = SURFACES[surface]
    joint = "&" if "?" in path else "?"
    r = httpx.request(method, f"{live.url}{path}{joint}limit=1&limit=2", headers=auth(bob))
    assert (r.status_code, code(r)) == (400, "INVALID_VALUE")


@pytest.mark.parametrize("surface", SURFACES)
def test_accept_xml_is_406_everywhere(live, bob, surface):
    method, path = SURFACES[surface]
    r = httpx.request(method, live.url + path, headers={**auth(bob), "Accept": "application/xml"})
    assert (r.status_code, code(r)) == (406, "NOT_ACCEPTABLE")


def test_a_wrong_method_is_405_with_allow_everywhere(live, bob):
    r = httpx.put(f"{live.url}/api/v1/channels/same/wait/", headers=auth(bob))
    assert (r.status_code, code(r), r.headers["Allow"]) == (405, "METHOD_NOT_ALLOWED", "GET")
    r = httpx.put(f"{live.url}/api/v1/channels/same/read/", headers=auth(bob))
    assert (r.status_code, code(r)) == (405, "METHOD_NOT_ALLOWED")
    assert "POST" in r.headers["Allow"]


def test_wait_401_carries_www_authenticate(live, bob):
    for headers in ({}, auth("ac_unknown")):
        r = httpx.get(f"{live.url}/api/v1/channels/same/wait/?timeout=0", headers=headers)
        assert r.status_code == 401
        assert r.headers["WWW-Authenticate"] == 'Bearer realm="agentchat"'


@pytest.mark.parametrize(
    "headers",
    [
        [("Host", "evil.example")],
        [("Host", "127.0.0.1"), ("Authorization", "Bearer ac_other")],  # a second one
    ],
)
def test_websocket_handshakes_refuse_the_same_requests(live, bob, headers):
    logged = len(live.output())
    ok = [("Host", "127.0.0.1"), ("Authorization", f"Bearer {bob}")]
    assert ws_handshake_status(live.port, "/ws/channels/same/", ok) == 101
    sent = [("Authorization", f"Bearer {bob}"), *headers]
    assert ws_handshake_status(live.port, "/ws/channels/same/", sent) == 403
    assert "Traceback" not in live.output()[logged:]
