"""The websocket stream's handshake and frames: everything is validated
before the stream joins its group, so a refused handshake leaves nothing subscribed; frames
from the client get an error frame, never a 1011; unknown paths are refused, never a 500."""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from websockets.exceptions import InvalidStatus

from agentchat.asgi import application
from agentchat.core.live.layer import channels_held
from channels_app.services import channel_create, channel_group, message_post
from tests.conftest import in_thread
from tests.signals import layer_kind, subscribers, until  # noqa: F401  (fixture)
from tests.wire import ws_handshake_status

HOST = [(b"host", b"testserver")]


def communicator(path: str, headers=HOST) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, path, headers=headers)


@pytest.fixture
def stream_channel(make_agent):
    make_agent("alice")
    _, token = make_agent("bob")
    return channel_create(name="ws", created_by="alice"), token


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("layer_kind")
@pytest.mark.parametrize(
    "query",
    [
        "since=\u00b2",
        "since=" + "9" * 5000,
        "since=-1",
        "since=1.5",
        "since=%00",
        "since=1&color=red",
        "token=nope",
        "",  # no token at all
    ],
)
def test_a_refused_handshake_leaves_nothing_subscribed(stream_channel, query):
    channel, token = stream_channel
    path = f"/ws/channels/ws/?{query}"
    if "token=" not in query and query:
        path += f"&token={token}"

    async def scenario():
        layer = get_channel_layer()
        before = channels_held(layer)
        client = communicator(path)
        connected, _ = await client.connect()
        await client.wait()
        return connected, subscribers(channel_group(channel.pk)), before, channels_held(layer)

    connected, subscribed, before, after = asyncio.run(scenario())
    assert connected is False
    assert subscribed == 0
    assert after == before


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("layer_kind")
def test_client_frames_get_an_error_frame_and_the_stream_goes_on(stream_channel):
    channel, token = stream_channel

    async def scenario():
        client = communicator(f"/ws/channels/ws/?token={token}")
        connected, _ = await client.connect()
        assert connected
        group = channel_group(channel.pk)
        subscribed = subscribers(group)
        answers = []
        for frame in (
            {"text_data": "not json {"},
            {"bytes_data": b"\x00\xff"},
            {"text_data": "{}"},
        ):
            await client.send_to(**frame)
            answers.append(await client.receive_json_from(timeout=5))
        await in_thread(lambda: message_post(channel=channel, sender="alice", title="after"))
        message = await client.receive_json_from(timeout=5)
        await client.disconnect()
        await until(lambda: subscribers(group) == 0, what="the stream left its group")
        return subscribed, answers, message

    subscribed, answers, message = asyncio.run(scenario())
    assert subscribed == 1
    assert [a["type"] for a in answers] == ["error"] * 3
    assert {a["error"]["code"] for a in answers} == {"INVALID_VALUE"}
    assert message["message"]["title"] == "after"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["/ws/nothing/", "/ws/channels/ws", "/ws/channels/ws/extra/"])
def test_unknown_websocket_paths_are_refused_in_process(stream_channel, path):
    _, token = stream_channel

    async def scenario():
        client = communicator(f"{path}?token={token}")
        connected, _ = await client.connect()
        return connected

    assert asyncio.run(scenario()) is False


@pytest.mark.parametrize("path", ["/ws/nothing/", "/ws/channels/x", "/ws/", "/ws/channels/x/y/"])
def test_unknown_websocket_paths_are_403_never_500(live, make_agent, path):
    logged = len(live.output())
    _, token = make_agent("bob")
    headers = [("Host", "127.0.0.1"), ("Authorization", f"Bearer {token}")]
    assert ws_handshake_status(live.port, path, headers) == 403
    assert "Traceback" not in live.output()[logged:]


def test_bad_frames_over_a_real_connection_get_error_frames(live, make_agent):
    logged = len(live.output())
    _, token = make_agent("bob")
    _, alice = make_agent("alice")
    import httpx

    from tests.conftest import auth

    r = httpx.post(f"{live.url}/api/v1/channels/", json={"name": "frames"}, headers=auth(alice))
    assert r.status_code == 201

    async def scenario():
        url = f"{live.ws_url}/ws/channels/frames/?token={token}"
        async with websockets.connect(url) as ws:
            answers = []
            for frame in ("nope", b"\x00\x01", "[1, 2]"):
                await ws.send(frame)
                answers.append(json.loads(await asyncio.wait_for(ws.recv(), 5)))
            r = httpx.post(
                f"{live.url}/api/v1/channels/frames/messages/",
                json={"title": "still here"},
                headers=auth(alice),
            )
            assert r.status_code == 201
            message = json.loads(await asyncio.wait_for(ws.recv(), 5))
        return answers, message

    answers, message = asyncio.run(scenario())
    assert [a["error"]["code"] for a in answers] == ["INVALID_VALUE"] * 3
    assert message["message"]["title"] == "still here"
    assert "Traceback" not in live.output()[logged:]


def test_a_huge_since_is_refused_over_a_real_connection(live, make_agent):
    logged = len(live.output())
    _, token = make_agent("bob")

    async def scenario():
        with pytest.raises(InvalidStatus) as info:
            async with websockets.connect(
                f"{live.ws_url}/ws/channels/any/?since={'9' * 5000}&token={token}"
            ):
                pass
        return info.value.response.status_code

    assert asyncio.run(scenario()) == 403
    assert "Traceback" not in live.output()[logged:]
