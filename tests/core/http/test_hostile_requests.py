"""Hostile requests found by review: each once answered a 500, logged a traceback or stalled
the server; each now gets a clean answer."""

from __future__ import annotations

import pytest
from django.db import connection

from agentchat.core.http.scope import origin_allowed, origin_is_site
from agentchat.core.identity.sessions import SessionStore
from agentchat.core.rules.validation import _JSON_STRING, json_loads_strict

NUL_NAME = "a%00b"


def test_an_unterminated_string_is_matched_once_to_the_end():
    # What keeps the depth pre-check linear: without it the engine retried from every quote of
    # a body of escaped quotes that never closes (a 32 KB post held the GIL for 6.8 s).
    body = '"' + '\\"' * 1000
    match = _JSON_STRING.match(body)
    assert match is not None
    assert match.end() == len(body)


def test_a_deep_body_of_unterminated_escapes_is_refused():
    body = ("{" * 65 + '"' + '\\"' * 300_000).encode()
    with pytest.raises(Exception) as info:
        json_loads_strict(body)
    assert info.value.code == "JSON_TOO_DEEP"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    [
        f"/api/v1/channels/{NUL_NAME}/",
        f"/api/v1/channels/{NUL_NAME}/messages/",
        f"/api/v1/channels/{NUL_NAME}/tasks/",
        f"/api/v1/channels/{NUL_NAME}/locks/",
        f"/api/v1/channels/{NUL_NAME}/wait/?timeout=0",
        "/api/v1/channels/review%0A/messages/",
    ],
)
def test_a_channel_name_that_cannot_exist_is_not_found_without_a_query(api_for, path):
    # On PostgreSQL the NUL reached the query and answered 500 (DataError).
    r = api_for("alice").get(path)
    assert r.status_code == 404, r.content
    assert r.json()["error"]["code"] == "CHANNEL_NOT_FOUND"


@pytest.mark.parametrize("key", ["aaaaaaaa\x00b", "a" * 41, "abcdefgh-ijk", "ab\u00e9cdefgh", ""])
def test_a_session_key_not_of_djangos_shape_is_no_session(key):
    assert SessionStore(key).session_key is None


def test_a_session_key_of_djangos_shape_is_kept():
    store = SessionStore("abcdefgh0123456789abcdefgh012345")
    assert store.session_key == "abcdefgh0123456789abcdefgh012345"


@pytest.mark.django_db
def test_a_hostile_session_cookie_on_an_admin_page_is_no_session(client):
    # PostgreSQL refuses NUL in text: the lookup raised DataError (a 500) before.
    client.cookies["sessionid"] = "aaaaaaaaaaaa\x00b"
    r = client.get("/admin/")
    assert r.status_code == 302
    assert r["Location"].startswith("/admin/login/")
    assert connection.vendor in {"sqlite", "postgresql"}


@pytest.mark.django_db(transaction=True)
async def test_a_hostile_session_cookie_on_a_websocket_is_refused_cleanly():
    from channels.testing import WebsocketCommunicator

    from agentchat.asgi import application

    communicator = WebsocketCommunicator(
        application,
        "/ws/channels/review/",
        headers=[
            (b"host", b"127.0.0.1"),
            (b"origin", b"http://127.0.0.1"),
            (b"cookie", b"sessionid=aaaaaaaaaaaa\x00b"),
        ],
    )
    connected, _ = await communicator.connect()
    assert not connected
    await communicator.disconnect()


@pytest.mark.parametrize("origin", ["http://[::1", "http://[zz]:80", "http://a:99999999", "\x00"])
def test_a_malformed_origin_is_refused_not_a_traceback(origin):
    assert origin_allowed(origin) is False


def test_a_session_origin_behind_a_tls_proxy_is_the_site_when_trusted(settings):
    scope = {"type": "websocket", "scheme": "ws", "headers": [(b"host", b"chat.example.com")]}
    settings.ALLOWED_HOSTS = ["chat.example.com"]
    assert not origin_is_site(scope, "https://chat.example.com")
    settings.CSRF_TRUSTED_ORIGINS = ["https://chat.example.com"]
    assert origin_is_site(scope, "https://chat.example.com")
    assert not origin_is_site(scope, "https://chat.example.com:8443")
    assert not origin_is_site(scope, "https://evil.example.com")
