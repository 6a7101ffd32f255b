"""Once a revocation (or a sign-out) has committed, nothing more is delivered to that token (or
session): the stream checks its credential before it sends, not only at the watcher's periodic
look. Here the look and the sweep are an hour away and the revocation's ring is lost, so only
the delivery's own check can stop a message posted after it."""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.contrib.sessions.models import Session
from django.test import Client

from agentchat.asgi import application
from agentchat.core.identity import services as core_services
from agentchat.core.identity.services import token_revoke
from agentchat.core.models import ApiToken
from channels_app.services import channel_create, message_post
from tests.conftest import PagesClient, in_thread

HOST = (b"host", b"testserver")

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def no_timers(settings):
    # Neither the watcher's look nor the stream's sweep comes within the test.
    settings.AGENTCHAT_REVOCATION_CHECK_SECONDS = 3600
    settings.AGENTCHAT_STREAM_SWEEP_SECONDS = 3600


@pytest.fixture
def rings_lost(monkeypatch):
    """A revocation rings nobody (as one made in another process on the in-memory layer)."""
    monkeypatch.setattr(core_services, "push_on_commit", lambda group, event: None)


def post(channel, title: str) -> None:
    message_post(channel=channel, sender="alice", title=title, body="x")


async def connect_and_see_one(ws: WebsocketCommunicator, channel, *, mux: bool) -> None:
    """Connected (subscribed, for the multiplexed stream) and streaming: a first message came."""
    assert (await ws.connect())[0]
    if mux:
        await ws.send_json_to({"op": "subscribe", "channel": channel.name})
        assert (await ws.receive_json_from(timeout=10))["type"] == "subscribed"
    await in_thread(lambda: post(channel, "before"))
    frame = await ws.receive_json_from(timeout=10)
    assert frame["message"]["title"] == "before"


async def closed_without_a_message(ws: WebsocketCommunicator) -> dict:
    output = await ws.receive_output(timeout=10)
    if output["type"] == "websocket.send":
        pytest.fail(f"delivered after the revocation: {json.loads(output['text'])}")
    return output


@pytest.mark.usefixtures("no_timers", "rings_lost")
@pytest.mark.parametrize("path", ["/ws/channels/rv/", "/ws/channels/"])
def test_a_message_posted_after_a_committed_revocation_is_never_delivered(make_agent, path):
    make_agent("alice")
    bob, raw = make_agent("bob")
    channel = channel_create(name="rv", created_by="alice")
    token = ApiToken.objects.get(agent=bob)

    async def scenario():
        ws = WebsocketCommunicator(application, f"{path}?token={raw}", headers=[HOST])
        await connect_and_see_one(ws, channel, mux=path == "/ws/channels/")
        await in_thread(lambda: token_revoke(token=token))  # committed; its ring is lost
        await in_thread(lambda: post(channel, "after"))
        return await closed_without_a_message(ws)

    assert asyncio.run(scenario()) == {"type": "websocket.close", "code": 4401}


@pytest.mark.usefixtures("no_timers", "rings_lost")
def test_a_message_read_from_the_database_is_not_delivered_after_a_revocation(
    make_agent, monkeypatch
):
    # A message too big to ride on its ring is read from the database: that read checks too.
    from channels_app import services

    monkeypatch.setattr(services, "PUSH_INLINE_LIMIT", 0)
    monkeypatch.setattr(services.limits, "PUSH_INLINE_LIMIT", 0)
    monkeypatch.setattr(services.messages, "PUSH_INLINE_LIMIT", 0)  # every message is "too big"
    make_agent("alice")
    bob, raw = make_agent("bob")
    channel = channel_create(name="rv", created_by="alice")
    token = ApiToken.objects.get(agent=bob)

    async def scenario():
        ws = WebsocketCommunicator(application, f"/ws/channels/rv/?token={raw}", headers=[HOST])
        await connect_and_see_one(ws, channel, mux=False)
        await in_thread(lambda: token_revoke(token=token))
        await in_thread(lambda: post(channel, "after"))
        return await closed_without_a_message(ws)

    assert asyncio.run(scenario()) == {"type": "websocket.close", "code": 4401}


def browser_session(django_user_model) -> tuple[Client, list[tuple[bytes, bytes]]]:
    return browser_session_of(django_user_model, "ops")


def browser_session_of(
    django_user_model, username: str
) -> tuple[Client, list[tuple[bytes, bytes]]]:
    user = django_user_model.objects.create_user(username, password="pw-123456", is_staff=True)
    browser = PagesClient()
    browser.force_login(user)
    cookie = browser.cookies[django_settings.SESSION_COOKIE_NAME].value
    headers = [
        HOST,
        (b"origin", b"http://testserver"),
        (b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={cookie}".encode()),
    ]
    return browser, headers


@pytest.mark.usefixtures("no_timers")
@pytest.mark.parametrize("path", ["/ws/channels/rv/", "/ws/channels/"])
def test_signing_out_closes_the_dashboard_stream_and_delivers_nothing_after(
    make_agent, django_user_model, path
):
    make_agent("alice")
    channel = channel_create(name="rv", created_by="alice")
    browser, headers = browser_session(django_user_model)

    async def scenario():
        ws = WebsocketCommunicator(application, path, headers=headers)
        await connect_and_see_one(ws, channel, mux=path == "/ws/channels/")
        signed_out = await in_thread(lambda: browser.post("/signout/"))
        assert signed_out.status_code == 302
        await in_thread(lambda: post(channel, "after"))
        return await closed_without_a_message(ws)

    assert asyncio.run(scenario()) == {"type": "websocket.close", "code": 4401}
    assert not Session.objects.exists()


@pytest.mark.usefixtures("no_timers", "rings_lost")
def test_a_session_gone_without_a_ring_delivers_nothing_after(make_agent, django_user_model):
    # The sign-out's ring is lost (or the session was deleted elsewhere): the delivery's check
    # finds the session row gone.
    make_agent("alice")
    channel = channel_create(name="rv", created_by="alice")
    _, headers = browser_session(django_user_model)

    async def scenario():
        ws = WebsocketCommunicator(application, "/ws/channels/rv/", headers=headers)
        await connect_and_see_one(ws, channel, mux=False)
        await in_thread(lambda: Session.objects.all().delete())
        await in_thread(lambda: post(channel, "after"))
        return await closed_without_a_message(ws)

    assert asyncio.run(scenario()) == {"type": "websocket.close", "code": 4401}


@pytest.mark.usefixtures("no_timers")
def test_signing_out_rings_the_sessions_streams_closed_at_once(make_agent, django_user_model):
    make_agent("alice")
    channel = channel_create(name="rv", created_by="alice")
    browser, headers = browser_session(django_user_model)
    _, other_headers = browser_session_of(django_user_model, "ops2")

    async def scenario():
        ws = WebsocketCommunicator(application, "/ws/channels/rv/", headers=headers)
        kept = WebsocketCommunicator(application, "/ws/channels/rv/", headers=other_headers)
        assert (await ws.connect())[0] and (await kept.connect())[0]
        await in_thread(lambda: browser.post("/signout/"))
        closed = await ws.receive_output(timeout=10)  # nothing posted: the ring closed it
        await in_thread(lambda: post(channel, "still here"))
        frame = await kept.receive_json_from(timeout=10)  # another session goes on
        await kept.disconnect()
        return closed, frame["message"]["title"]

    assert asyncio.run(scenario()) == ({"type": "websocket.close", "code": 4401}, "still here")
