"""Revoking a token ends its live sessions: a parked wait answers 401 and
moves nothing, an open websocket is closed with 4401 — by the revocation's ring (at once, and
through Redis in every process) or by each process's look at its sessions' tokens (a command
run elsewhere, a lost ring). A revoked token never moves a cursor, whatever a session has
learnt so far."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import redis
import websockets
from channels.testing import WebsocketCommunicator
from django.core.management import call_command
from websockets.exceptions import ConnectionClosed

from agentchat.asgi import application
from agentchat.core.identity import services as core_services
from agentchat.core.identity.services import token_revoke
from agentchat.core.models import ApiToken
from agentchat.core.rules.errors import AppError
from channels_app import live
from channels_app.models import Cursor
from channels_app.selectors import cursor_get
from channels_app.services import channel_create, channel_group, message_post
from tests.channels_app.test_processes import redis_group_channel
from tests.conftest import (
    ServerProcess,
    auth,
    in_thread,
    redis_reachable,
    redis_url_for_tests,
    require_service,
)
from tests.signals import (  # noqa: F401  (fixture)
    layer_kind,
    redis_channel_layers,
    until,
    wait_until,
)

HOST = [(b"host", b"testserver")]


@pytest.fixture
def rings_lost(monkeypatch):
    """Revocations ring nobody: only the sessions' look at their tokens can end them."""
    monkeypatch.setattr(core_services, "push_on_commit", lambda group, event: None)


@pytest.fixture
def bob_waits(make_agent, counted_reads):
    """(channel, bob, bob's token row, parked): ``await parked()`` once bob's wait has read."""
    make_agent("alice")
    bob, _ = make_agent("bob")
    channel = channel_create(name="rv", created_by="alice")
    token = ApiToken.objects.get(agent=bob)
    parked = counted_reads.parked
    return channel, bob, token, parked


def wait_for_bob(channel, bob, token, timeout=30):
    return asyncio.create_task(
        live.message_wait(channel=channel, agent=bob, timeout=timeout, token_id=token.pk)
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("layer_kind")
def test_a_revocation_rings_a_parked_wait_which_ends_with_401(bob_waits, settings):
    settings.AGENTCHAT_REVOCATION_CHECK_SECONDS = 3600  # only the ring can end it here
    channel, bob, token, parked = bob_waits

    async def scenario():
        waiting = wait_for_bob(channel, bob, token)
        await parked()
        await in_thread(lambda: token_revoke(token=token))
        with pytest.raises(AppError) as info:
            await asyncio.wait_for(waiting, 10)  # long before the wait's 30 s
        return info.value

    error = asyncio.run(scenario())
    assert (error.code, error.status) == ("AUTH_INVALID", 401)
    assert cursor_get(agent=bob, channel=channel) == 0


@pytest.mark.django_db(transaction=True)
def test_without_a_ring_the_token_look_ends_a_parked_wait(bob_waits, rings_lost, settings):
    settings.AGENTCHAT_REVOCATION_CHECK_SECONDS = 0.2
    channel, bob, token, parked = bob_waits

    async def scenario():
        waiting = wait_for_bob(channel, bob, token)
        await parked()
        await in_thread(lambda: token_revoke(token=token))
        with pytest.raises(AppError) as info:
            await asyncio.wait_for(waiting, 10)
        return info.value.code

    assert asyncio.run(scenario()) == "AUTH_INVALID"


@pytest.mark.django_db(transaction=True)
def test_a_revoked_token_moves_no_cursor_even_before_its_wait_learns_of_it(
    bob_waits, rings_lost, settings
):
    # The wait has not heard of the revocation (no ring, no look) when a message for bob comes
    # in: the compare-and-set of its ring, then the read it falls back to, both refuse it.
    settings.AGENTCHAT_REVOCATION_CHECK_SECONDS = 3600
    channel, bob, token, parked = bob_waits

    async def scenario():
        waiting = wait_for_bob(channel, bob, token)
        await parked()
        await in_thread(lambda: token_revoke(token=token))
        await in_thread(lambda: message_post(channel=channel, sender="alice", title="hi", to="bob"))
        with pytest.raises(AppError) as info:
            await asyncio.wait_for(waiting, 10)
        return info.value.code

    assert asyncio.run(scenario()) == "AUTH_INVALID"
    assert not Cursor.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("layer_kind")
@pytest.mark.parametrize("path", ["ring", "look"])
def test_a_revocation_closes_the_tokens_websockets(make_agent, settings, monkeypatch, path):
    if path == "look":
        monkeypatch.setattr(core_services, "push_on_commit", lambda group, event: None)
    settings.AGENTCHAT_REVOCATION_CHECK_SECONDS = 0.2 if path == "look" else 3600
    make_agent("alice")
    bob, raw = make_agent("bob")
    _, other_raw = make_agent("bob")  # a second token of bob's, not revoked
    channel = channel_create(name="rv", created_by="alice")
    token = ApiToken.objects.filter(agent=bob).order_by("pk").first()

    async def scenario():
        revoked = WebsocketCommunicator(application, f"/ws/channels/rv/?token={raw}", headers=HOST)
        kept = WebsocketCommunicator(
            application, f"/ws/channels/rv/?token={other_raw}", headers=HOST
        )
        assert (await revoked.connect())[0] and (await kept.connect())[0]
        await in_thread(lambda: token_revoke(token=token))
        closed = await revoked.receive_output(timeout=10)
        await in_thread(lambda: message_post(channel=channel, sender="alice", title="after"))
        frame = await kept.receive_json_from(timeout=10)
        await kept.disconnect()
        return closed, frame

    closed, frame = asyncio.run(scenario())
    assert closed == {"type": "websocket.close", "code": 4401}
    assert frame["message"]["title"] == "after"


def test_a_token_revoked_by_another_process_ends_its_sessions(live, make_agent):
    # The revocation is made in another process (the test's, by `manage.py
    # revoke_agent_tokens`). On the default in-memory layer no ring can reach the server: its
    # look at its sessions' tokens ends them within seconds (with REDIS_URL the ring does).
    _, alice = make_agent("alice")
    bob, bob_token = make_agent("bob")
    row = ApiToken.objects.get(agent=bob)
    http = httpx.Client(base_url=f"{live.url}/api/v1/channels/", timeout=60)
    assert http.post("", json={"name": "rv"}, headers=auth(alice)).status_code == 201

    async def scenario():
        async with websockets.connect(f"{live.ws_url}/ws/channels/rv/?token={bob_token}") as ws:
            waiting = asyncio.ensure_future(
                asyncio.to_thread(
                    http.get, "rv/wait/", params={"timeout": 60}, headers=auth(bob_token)
                )
            )
            # The wait has authenticated (a fresh token's first use is recorded) and the
            # websocket is live (it got a frame): both opened before the revocation. Whether the
            # wait had parked by then cannot be seen from here: parked or not, it must answer
            # 401 and move nothing (that the token look ends a parked wait is shown, with a
            # probe of its read, by test_without_a_ring_the_token_look_ends_a_parked_wait).
            used = ApiToken.objects.filter(pk=row.pk, last_used_at__isnull=False).exists
            await in_thread(lambda: wait_until(used, what="the wait authenticated"))
            posted = await asyncio.to_thread(
                http.post,
                "rv/messages/",
                json={"title": "first", "to": "carol"},
                headers=auth(alice),
            )
            assert posted.status_code == 201
            assert json.loads(await asyncio.wait_for(ws.recv(), 10))["message"]["seq"] == 1
            await in_thread(lambda: call_command("revoke_agent_tokens", "bob"))  # closes its db
            await asyncio.to_thread(
                http.post,
                "rv/messages/",
                json={"title": "for bob", "to": "bob"},
                headers=auth(alice),
            )
            waited = await asyncio.wait_for(waiting, 20)
            # Posted after the revocation committed: never delivered, whether the server's look
            # or the delivery's own check of the token comes first.
            with pytest.raises(ConnectionClosed) as info:
                frame = await asyncio.wait_for(ws.recv(), 20)
                pytest.fail(f"delivered after the revocation: {frame}")
            return waited, info.value.rcvd

    waited, close = asyncio.run(scenario())
    http.close()
    assert (waited.status_code, waited.json()["error"]["code"]) == (401, "AUTH_INVALID")
    assert waited.headers["WWW-Authenticate"].startswith("Bearer")
    assert close is not None and close.code == 4401
    assert not Cursor.objects.filter(agent=bob).exists()


def test_through_redis_a_revocation_rings_every_process(transactional_db, make_agent, settings):
    url = redis_url_for_tests()
    require_service("Redis", redis_reachable(url), f"no Redis at {url}")
    settings.CHANNEL_LAYERS = redis_channel_layers(url)  # this process rings through Redis too
    _, alice = make_agent("alice")
    bob, bob_token = make_agent("bob")
    row = ApiToken.objects.get(agent=bob)
    # No looks at the tokens: only the ring, through Redis, can end the sessions.
    env = {"REDIS_URL": url, "AGENTCHAT_REVOCATION_CHECK_SECONDS": "3600"}
    a, b = ServerProcess(env=env), ServerProcess(env=env)
    probe = redis.Redis.from_url(url)
    try:
        r = httpx.post(f"{a.url}/api/v1/channels/", json={"name": "rv"}, headers=auth(alice))
        assert r.status_code == 201
        group = redis_group_channel(url, channel_group(_channel_pk("rv")))

        async def scenario():
            async with (
                httpx.AsyncClient(timeout=60) as http,
                websockets.connect(f"{a.ws_url}/ws/channels/rv/?token={bob_token}") as ws,
            ):
                waiting = asyncio.ensure_future(
                    http.get(
                        f"{b.url}/api/v1/channels/rv/wait/",
                        params={"timeout": 60},
                        headers=auth(bob_token),
                    )
                )
                # Both processes subscribed to the channel's group: the websocket on A, the
                # wait on B (each joined the revocations group before that).
                await until(lambda: probe.pubsub_numsub(group)[0][1] == 2, what="subscribed")
                await in_thread(lambda: token_revoke(token=row))
                waited = await asyncio.wait_for(waiting, 20)
                with pytest.raises(ConnectionClosed) as info:
                    await asyncio.wait_for(ws.recv(), 20)
                return waited, info.value.rcvd

        waited, close = asyncio.run(scenario())
        assert (waited.status_code, waited.json()["error"]["code"]) == (401, "AUTH_INVALID")
        assert close is not None and close.code == 4401
    finally:
        probe.close()
        a.stop()
        b.stop()


def _channel_pk(name: str) -> int:
    from channels_app.models import Channel

    return Channel.objects.get(name=name).pk


@pytest.mark.django_db
def test_the_admin_action_and_the_command_revoke_through_the_service(
    admin_client, make_agent, django_capture_on_commit_callbacks
):
    bob, _ = make_agent("bob")
    make_agent("bob")
    first, second = ApiToken.objects.filter(agent=bob).order_by("pk")
    with django_capture_on_commit_callbacks() as admin_pushes:
        r = admin_client.post(
            "/admin/core/apitoken/",
            {"action": "revoke_tokens", "_selected_action": [first.pk]},
        )
    assert r.status_code == 302
    with django_capture_on_commit_callbacks() as command_pushes:
        call_command("revoke_agent_tokens", "bob")
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.revoked_at is not None and second.revoked_at is not None
    # Each revocation rang the live sessions (token_revoke's push), once per token.
    assert (len(admin_pushes), len(command_pushes)) == (1, 1)
