"""Members-only channels on the live surfaces: the wait and the websocket stream.

A non-member is answered as for a channel that does not exist; a change of members or
visibility takes effect on what is already open: a parked wait of an agent who may no longer
see the channel answers 404 CHANNEL_NOT_FOUND and moves nothing, an open websocket gets an
error frame and is closed (4404), and neither delivers anything posted from the change on.

Real clients against real daphne processes, plus in-process tests that pin down the path a
parked wait takes (they know when it is parked), with and without lost rings.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import websockets
import websockets.exceptions
from channels.testing import WebsocketCommunicator

from agentchat.asgi import application
from agentchat.core.rules.errors import AppError
from channels_app import endpoints, live, services
from channels_app.models import Channel, Cursor, Message
from channels_app.selectors import cursor_get
from channels_app.services import channel_create, channel_update, message_post
from tests.channels_app.test_processes import redis_group_channel, redis_subscribed
from tests.conftest import (
    ServerProcess,
    auth,
    in_thread,
    redis_reachable,
    redis_url_for_tests,
    require_service,
)
from tests.signals import until


def api(live: ServerProcess, token: str) -> httpx.Client:
    return httpx.Client(base_url=f"{live.url}/api/v1/channels/", headers=auth(token), timeout=30)


@pytest.fixture
def tokens(make_agent) -> dict[str, str]:
    return {name: make_agent(name)[1] for name in ("alice", "bob", "carol")}


def make_channel(live: ServerProcess, token: str, name: str, **body: Any) -> dict[str, Any]:
    with api(live, token) as http:
        r = http.post("", json={"name": name, **body})
    assert r.status_code == 201, r.text
    return r.json()


def patch(live: ServerProcess, token: str, name: str, **body: Any) -> dict[str, Any]:
    with api(live, token) as http:
        r = http.patch(f"{name}/", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def send(live: ServerProcess, token: str, name: str, title: str, **body: Any) -> int:
    with api(live, token) as http:
        r = http.post(f"{name}/messages/", json={"title": title, **body})
    assert r.status_code == 201, r.text
    return r.json()["seq"]


async def frames_until_closed(ws: Any, timeout: float = 10) -> tuple[list[dict], int | None]:
    frames = []
    try:
        while True:
            frames.append(json.loads(await asyncio.wait_for(ws.recv(), timeout)))
    except websockets.exceptions.ConnectionClosed as closed:
        return frames, closed.rcvd.code if closed.rcvd else None


# --- a non-member, on the live server ---------------------------------------------------------


def test_a_non_member_waits_and_subscribes_as_if_the_channel_did_not_exist(live, tokens):
    make_channel(live, tokens["alice"], "secret", members=["bob"], visibility="members")
    with api(live, tokens["carol"]) as http:
        hidden = http.get("secret/wait/", params={"timeout": 0})
        missing = http.get("ghost/wait/", params={"timeout": 0})
    assert hidden.status_code == 404
    assert hidden.json()["error"]["code"] == "CHANNEL_NOT_FOUND"
    assert hidden.content == missing.content.replace(b"ghost", b"secret")

    async def handshake(name: str, token: str) -> int:
        try:
            async with websockets.connect(f"{live.ws_url}/ws/channels/{name}/?token={token}"):
                return 101
        except websockets.exceptions.InvalidStatus as refused:
            return refused.response.status_code

    assert asyncio.run(handshake("secret", tokens["carol"])) == 403
    assert asyncio.run(handshake("ghost", tokens["carol"])) == 403
    assert asyncio.run(handshake("secret", tokens["bob"])) == 101  # members as before
    assert Cursor.objects.filter(agent__name="carol").count() == 0


def test_members_wait_and_stream_on_a_members_only_channel(live, tokens):
    make_channel(live, tokens["alice"], "secret", members=["bob"], visibility="members")

    async def scenario():
        url = f"{live.ws_url}/ws/channels/secret/?token={tokens['bob']}"
        async with websockets.connect(url) as ws, httpx.AsyncClient(timeout=30) as http:
            waiting = asyncio.create_task(
                http.get(
                    f"{live.url}/api/v1/channels/secret/wait/",
                    params={"timeout": 20},
                    headers=auth(tokens["bob"]),
                )
            )
            await in_thread(lambda: send(live, tokens["alice"], "secret", "hello bob"))
            frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
            return frame, await asyncio.wait_for(waiting, 10)

    frame, waited = asyncio.run(scenario())
    assert frame["message"]["title"] == "hello bob"
    assert waited.status_code == 200
    assert [m["title"] for m in waited.json()["messages"]] == ["hello bob"]


def test_open_websockets_of_those_who_lose_sight_are_closed_and_get_nothing_more(live, tokens):
    make_channel(live, tokens["alice"], "room", members=["alice", "bob"])
    url = f"{live.ws_url}/ws/channels/room/?token="

    async def scenario():
        async with (
            websockets.connect(url + tokens["carol"]) as carol_ws,
            websockets.connect(url + tokens["bob"]) as bob_ws,
        ):
            # Open (the handshake completed, so both are subscribed): everything is streamed.
            await in_thread(lambda: send(live, tokens["alice"], "room", "before"))
            await in_thread(lambda: patch(live, tokens["alice"], "room", visibility="members"))
            await in_thread(lambda: send(live, tokens["alice"], "room", "after"))
            carol = await frames_until_closed(carol_ws)
            bob = [json.loads(await asyncio.wait_for(bob_ws.recv(), 10)) for _ in range(3)]
            # and bob, removed later, is closed the same way
            await in_thread(lambda: patch(live, tokens["alice"], "room", members=["alice"]))
            await in_thread(lambda: send(live, tokens["alice"], "room", "without bob"))
            bob_after = await frames_until_closed(bob_ws)
            return carol, bob, bob_after

    (carol_frames, carol_code), bob, (bob_frames, bob_code) = asyncio.run(scenario())
    assert [f["message"]["title"] for f in carol_frames[:-1]] == ["before"]
    assert carol_frames[-1] == {
        "type": "error",
        "error": {
            "code": "CHANNEL_NOT_FOUND",
            "message": "channel 'room' not found",
            "detail": {"name": "room"},
        },
    }
    assert carol_code == endpoints.shared.ACCESS_LOST_CLOSE_CODE == 4404
    assert [f["message"]["title"] for f in bob] == ["before", "channel.updated room", "after"]
    assert bob_frames == [carol_frames[-1]]  # not even the audit of his own removal
    assert bob_code == 4404


def test_a_websocket_that_lost_sight_while_disconnected_cannot_resume(live, tokens):
    make_channel(live, tokens["alice"], "room", members=["alice", "bob"])
    send(live, tokens["alice"], "room", "old")
    patch(live, tokens["alice"], "room", visibility="members", members=["alice"])

    async def resume():
        url = f"{live.ws_url}/ws/channels/room/?since=0&token={tokens['bob']}"
        with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
            async with websockets.connect(url):
                pass
        return refused.value.response.status_code

    assert asyncio.run(resume()) == 403


# --- a wait in progress when the channel is hidden, on a live server with Redis ---------------


@pytest.fixture(scope="module")
def redis_server(django_db_setup: Any, django_db_blocker: Any) -> Iterator[ServerProcess]:
    url = redis_url_for_tests()
    require_service("Redis", redis_reachable(url), f"no Redis at {url}")
    with django_db_blocker.unblock():
        server = ServerProcess(env={"REDIS_URL": url})
    yield server
    server.stop()


def unique_channel(name: str, **fields: Any) -> Channel:
    # A pk no other test of this run uses: the probe of this channel's group sees only the
    # subscription of this test's wait.
    return Channel.objects.create(pk=random.randrange(10**12, 2**62), name=name, **fields)


def test_a_wait_parked_before_the_channel_is_hidden_answers_404_and_moves_nothing(
    redis_server, transactional_db, tokens
):
    channel = unique_channel("room", members=["alice", "bob"], created_by="alice")
    live, url, pk = redis_server, redis_url_for_tests(), channel.pk

    async def scenario():
        async with httpx.AsyncClient(timeout=30) as http:
            waiting = asyncio.create_task(
                http.get(
                    f"{live.url}/api/v1/channels/room/wait/",
                    params={"timeout": 30},
                    headers=auth(tokens["carol"]),
                )
            )
            # The server process subscribes to the channel's group when the wait joins it.
            await redis_subscribed(url, redis_group_channel(url, services.channel_group(pk)))
            assert not waiting.done()
            await in_thread(lambda: patch(live, tokens["alice"], "room", visibility="members"))
            await in_thread(lambda: send(live, tokens["alice"], "room", "after"))
            return await asyncio.wait_for(waiting, 10)

    waited = asyncio.run(scenario())
    assert waited.status_code == 404
    assert waited.json() == {
        "error": {
            "code": "CHANNEL_NOT_FOUND",
            "message": "channel 'room' not found",
            "detail": {"name": "room"},
        }
    }
    assert not Cursor.objects.filter(agent__name="carol").exists()


# --- in-process: the parked wait's ring path, and lost rings -----------------------------------

# Where the wait's algorithm lives, and how its answer reads: the only lines to change when it
# moves (channels_app.live).
WAIT_MODULE = live


def start_wait(channel: Channel, agent: Any, timeout: float) -> asyncio.Task:
    return asyncio.create_task(live.message_wait(channel=channel, agent=agent, timeout=timeout))


def wait_answer(result: Any) -> dict[str, Any]:
    return json.loads(result.body())


@pytest.fixture
def reads(monkeypatch) -> list[str]:
    """The names of the waits' completed database reads ("!" + name for a refused one)."""
    done: list[str] = []
    real = WAIT_MODULE.message_read

    def counting(**kwargs):
        try:
            result = real(**kwargs)
        except AppError:
            done.append("!" + kwargs["agent"].name)
            raise
        done.append(kwargs["agent"].name)
        return result

    monkeypatch.setattr(WAIT_MODULE, "message_read", counting)
    return done


@pytest.fixture
def pair(make_agent):
    agents = {name: make_agent(name)[0] for name in ("alice", "bob")}
    channel = channel_create(
        name="pair", created_by="alice", members=["alice", "bob"], visibility="members"
    )
    return agents, channel


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("change", ["leaves", "is_removed"])
def test_a_parked_wait_answers_not_found_when_its_agent_loses_sight(pair, reads, change):
    agents, channel = pair
    bob = agents["bob"]

    def hide() -> None:
        # Leaving, bob is the audit's sender: a ring that would not concern him but for the
        # change of access it records.
        actor = "bob" if change == "leaves" else "alice"
        channel_update(channel=channel, actor=actor, members=["alice"])
        message_post(channel=channel, sender="alice", title="after", to="bob")

    async def scenario():
        waiting = start_wait(channel, bob, 30)
        await until(lambda: reads == ["bob"], what="the wait to park")
        await in_thread(hide)
        with pytest.raises(AppError) as info:
            await asyncio.wait_for(waiting, 10)
        return info.value

    error = asyncio.run(scenario())
    assert (error.code, error.detail) == ("CHANNEL_NOT_FOUND", {"name": "pair"})
    assert reads[-1] == "!bob"  # woken by a ring, refused by the read's own access check
    assert cursor_get(agent=bob, channel=channel) == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("change", "read_back"),
    [({"topic": "new"}, False), ({"members": ["alice", "bob", "carol"]}, True)],
)
def test_a_parked_wait_gets_a_change_that_leaves_it_a_member(pair, reads, change, read_back):
    agents, channel = pair

    async def scenario():
        waiting = start_wait(channel, agents["bob"], 30)
        await until(lambda: reads == ["bob"], what="the wait to park")
        await in_thread(lambda: channel_update(channel=channel, actor="alice", **change))
        return await asyncio.wait_for(waiting, 10)

    result = wait_answer(asyncio.run(scenario()))
    assert [m["title"] for m in result["messages"]] == ["channel.updated pair"]
    assert result["cursor"] == 1
    # a topic's audit rides in its ring; a change of access is read back through the check
    assert reads == (["bob", "bob"] if read_back else ["bob"])


@pytest.fixture
def rings_lost(monkeypatch):
    monkeypatch.setattr(services.channels, "push_on_commit", lambda group, event: None)
    monkeypatch.setattr(services.claims, "push_on_commit", lambda group, event: None)
    monkeypatch.setattr(services.messages, "push_on_commit", lambda group, event: None)


@pytest.mark.django_db(transaction=True)
def test_with_the_rings_lost_the_waits_last_look_refuses_too(pair, reads, rings_lost):
    agents, channel = pair

    async def scenario():
        waiting = start_wait(channel, agents["bob"], 1.0)
        await until(lambda: reads == ["bob"], what="the wait to park")
        await in_thread(lambda: channel_update(channel=channel, actor="bob", members=["alice"]))
        await in_thread(lambda: message_post(channel=channel, sender="alice", title="x", to="bob"))
        with pytest.raises(AppError) as info:
            await asyncio.wait_for(waiting, 10)
        return info.value

    assert asyncio.run(scenario()).code == "CHANNEL_NOT_FOUND"
    assert reads == ["bob", "!bob"]  # the look at the deadline
    assert cursor_get(agent=agents["bob"], channel=channel) == 0


async def _stream(token: str) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(application, f"/ws/channels/pair/?token={token}")
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def _closed_with_error(communicator: WebsocketCommunicator) -> tuple[dict, dict]:
    frame = await communicator.receive_json_from(timeout=5)
    closing = await communicator.receive_output(timeout=5)
    return frame, closing


@pytest.mark.django_db(transaction=True)
def test_an_open_stream_is_closed_when_its_agent_leaves(make_agent, pair):
    _, token = make_agent("bob")
    _, channel = pair

    async def scenario():
        communicator = await _stream(token)
        try:
            await in_thread(lambda: channel_update(channel=channel, actor="bob", members=["alice"]))
            await in_thread(lambda: message_post(channel=channel, sender="alice", title="after"))
            return await _closed_with_error(communicator)
        finally:
            await communicator.disconnect()

    frame, closing = asyncio.run(scenario())
    assert frame["type"] == "error"
    assert frame["error"]["code"] == "CHANNEL_NOT_FOUND"
    assert closing == {"type": "websocket.close", "code": 4404}


@pytest.mark.django_db(transaction=True)
def test_with_the_rings_lost_the_streams_sweep_closes_it(make_agent, pair, rings_lost, settings):
    settings.AGENTCHAT_STREAM_SWEEP_SECONDS = 0.2
    _, token = make_agent("bob")
    _, channel = pair

    async def scenario():
        communicator = await _stream(token)
        try:
            await in_thread(
                lambda: channel_update(channel=channel, actor="alice", members=["alice"])
            )
            await in_thread(lambda: message_post(channel=channel, sender="alice", title="after"))
            return await _closed_with_error(communicator)
        finally:
            await communicator.disconnect()

    frame, closing = asyncio.run(scenario())
    assert frame["error"]["code"] == "CHANNEL_NOT_FOUND"
    assert closing == {"type": "websocket.close", "code": 4404}


@pytest.mark.django_db(transaction=True)
def test_a_staff_session_without_a_member_agent_cannot_subscribe(pair, django_user_model):
    from asgiref.sync import sync_to_async
    from django.conf import settings as django_settings
    from django.db import close_old_connections
    from django.test import Client

    from agentchat.core.models import Agent

    user = django_user_model.objects.create_user("ops", password="pw-123456", is_staff=True)
    browser = Client()
    browser.force_login(user)
    cookie = browser.cookies[django_settings.SESSION_COOKIE_NAME].value
    headers = [
        (b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={cookie}".encode()),
        (b"origin", b"http://testserver"),
        (b"host", b"testserver"),
    ]

    async def connects() -> bool:
        communicator = WebsocketCommunicator(application, "/ws/channels/pair/", headers=headers)
        connected, _ = await communicator.connect()
        await communicator.disconnect()
        # Channels' communicator mutes the connection closing of Channels' database thread,
        # where its auth middleware loaded the session: close it there, or it stays checked
        # out of PostgreSQL's pool and the test database cannot be dropped.
        await sync_to_async(close_old_connections)()
        return connected

    assert asyncio.run(connects()) is False  # user:ops is no member
    Agent.objects.filter(name="bob").update(user=user)
    assert asyncio.run(connects()) is True  # its linked agent is


# --- concurrent changes ---------------------------------------------------------------------


def test_concurrent_changes_are_serialized_and_each_audit_starts_where_the_last_ended(
    live, make_agent
):
    """Sixteen members change the topic and the roster at once: every change is audited, and the
    audits form one chain (each "before" is the previous "after"), so none read a stale row."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    names = [f"m{i}" for i in range(16)]
    tokens = {name: make_agent(name)[1] for name in names}
    make_channel(live, tokens["m0"], "busy", members=names, visibility="members", topic="t0")
    barrier = threading.Barrier(len(names))

    def change(name: str) -> int:
        body: dict[str, Any] = {"topic": f"by {name}"}
        if name in ("m1", "m2"):
            body["members"] = [n for n in names if n != ("m3" if name == "m1" else "m4")]
        with api(live, tokens[name]) as http:
            barrier.wait()
            return http.patch("busy/", json=body).status_code

    with ThreadPoolExecutor(len(names)) as pool:
        statuses = list(pool.map(change, names))
    # m3 or m4 may have been removed before its own change: then it found no channel
    assert sorted(set(statuses)) in ([200], [200, 404]), statuses
    assert statuses.count(200) >= len(names) - 2
    audits = [
        json.loads(m.body)
        for m in Message.objects.filter(channel__name="busy", status="channel.updated").order_by(
            "seq"
        )
    ]
    assert len(audits) == statuses.count(200)
    topic, members = "t0", names
    for audit in audits:
        assert audit["before"]["topic"] == topic
        topic = audit["after"]["topic"]
        if "members" in audit["changed_fields"]:
            assert audit["before"]["members"] == members
            members = audit["after"]["members"]
    channel = Channel.objects.get(name="busy")
    assert (channel.topic, channel.members) == (topic, members)
