"""Websocket origins: a browser session is served only to a page of the site
itself (the Origin's scheme, host and port equal the request's); a token needs no Origin."""

from __future__ import annotations

import asyncio

import pytest
import websockets
from websockets.exceptions import InvalidStatus

from agentchat.core.http.scope import origin_is_site


def ws_scope(host: str, scheme: str = "ws") -> dict:
    return {"type": "websocket", "scheme": scheme, "headers": [(b"host", host.encode())]}


@pytest.mark.parametrize(
    ("host", "scheme", "origin", "same"),
    [
        ("127.0.0.1:8000", "ws", "http://127.0.0.1:8000", True),
        ("127.0.0.1:8000", "ws", "http://127.0.0.1:8000/", True),
        ("localhost", "ws", "http://localhost", True),
        ("localhost", "ws", "http://localhost:80", True),
        ("localhost:443", "wss", "https://localhost", True),
        ("LocalHost:8000", "ws", "http://localhost:8000", True),
        ("[::1]:8000", "ws", "http://[::1]:8000", True),
        ("127.0.0.1:8000", "ws", "http://127.0.0.1:3000", False),  # a local dev server
        ("127.0.0.1:8000", "ws", "http://127.0.0.1", False),
        ("127.0.0.1:8000", "ws", "https://127.0.0.1:8000", False),
        ("127.0.0.1:8000", "wss", "http://127.0.0.1:8000", False),
        ("127.0.0.1:8000", "ws", "http://localhost:8000", False),
        ("127.0.0.1:8000", "ws", "null", False),
        ("127.0.0.1:8000", "ws", "http://127.0.0.1:8000/page", False),
        ("127.0.0.1:8000", "ws", "http://127.0.0.1:99999", False),
        ("127.0.0.1:8000", "ws", "http://127.0.0.1:8000@evil.example", False),
        ("127.0.0.1:8000", "ws", "file://127.0.0.1:8000", False),
    ],
)
def test_origin_is_site(host, scheme, origin, same):
    assert origin_is_site(ws_scope(host, scheme), origin) is same


@pytest.fixture
def session_cookie(live, django_user_model):
    from django.conf import settings
    from django.test import Client

    user = django_user_model.objects.create_user("ops", password="pw-123456", is_staff=True)
    browser = Client()
    browser.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={browser.cookies[settings.SESSION_COOKIE_NAME].value}"


def handshake(live, path, headers) -> int:
    async def scenario():
        try:
            async with websockets.connect(f"{live.ws_url}{path}", additional_headers=headers):
                return 101
        except InvalidStatus as exc:
            return exc.response.status_code

    return asyncio.run(scenario())


def test_a_session_needs_the_sites_own_origin(live, make_agent, session_cookie):
    import httpx

    from tests.conftest import auth

    _, alice = make_agent("alice")
    r = httpx.post(f"{live.url}/api/v1/channels/", json={"name": "o"}, headers=auth(alice))
    assert r.status_code == 201
    cookie = {"Cookie": session_cookie}
    assert handshake(live, "/ws/channels/o/", {**cookie, "Origin": live.url}) == 101
    for origin in (
        "http://127.0.0.1:3000",  # ALLOWED_HOSTS has 127.0.0.1: only the port differs
        f"https://127.0.0.1:{live.port}",
        f"http://localhost:{live.port}",  # an allowed host, but not the one asked for
    ):
        assert handshake(live, "/ws/channels/o/", {**cookie, "Origin": origin}) == 403, origin
    assert handshake(live, "/ws/channels/o/", cookie) == 403  # no Origin: not a browser page


def test_a_token_needs_no_origin_and_an_allowed_one_if_any(live, make_agent):
    import httpx

    from tests.conftest import auth

    _, alice = make_agent("alice")
    r = httpx.post(f"{live.url}/api/v1/channels/", json={"name": "o"}, headers=auth(alice))
    assert r.status_code == 201
    assert handshake(live, "/ws/channels/o/", auth(alice)) == 101
    assert (
        handshake(live, "/ws/channels/o/", {**auth(alice), "Origin": "http://localhost:3000"})
        == 101
    )
    assert (
        handshake(live, "/ws/channels/o/", {**auth(alice), "Origin": "http://evil.example"}) == 403
    )
