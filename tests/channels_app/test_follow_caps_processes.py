"""The caps of one agent's live connections hold across the server's processes (Redis): an SSE
follow or a websocket opened through one process counts in the other, and the places of a
process that was killed are free again once their time to live has passed (its renewals
stopped), while the living process's places, renewed, outlast it. Two real server processes."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
import redis
import websockets

from agentchat.core.live.follows import RedisFollowSlots
from tests.channels_app.v1.doc_client import AgentChat, ProtocolError
from tests.conftest import ServerProcess, redis_reachable, redis_url_for_tests, require_service

CAP = 2
TTL = "1"  # seconds: a killed process's places are free after this long


@pytest.fixture
def two_processes(transactional_db):
    url = redis_url_for_tests()
    require_service("Redis", redis_reachable(url), f"no Redis at {url}")
    client = redis.Redis.from_url(url)
    for key in client.scan_iter(f"{RedisFollowSlots.PREFIX}*"):  # an earlier run's, expiring
        client.delete(key)
    client.close()
    env = {
        "REDIS_URL": url,
        "AGENTCHAT_SSE_MAX_PER_AGENT": str(CAP),
        "AGENTCHAT_WS_MAX_PER_AGENT": str(CAP),
        "AGENTCHAT_FOLLOW_SLOT_SECONDS": TTL,
    }
    a, b = ServerProcess(env=env), ServerProcess(env=env)
    yield a, b
    a.kill()
    b.stop()


def _refused(follow) -> str:
    with pytest.raises(ProtocolError) as refused:
        follow()
    assert refused.value.status == 429
    body = refused.value.body
    return (json.loads(body) if isinstance(body, (bytes, str)) else body)["error"]["code"]


def _opens_once_freed(follow, deadline_s: float = 30):
    """The follow, once the places of the killed process have expired (a deadline, not a
    sleep: it is tried until the server frees them)."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return follow()
        except ProtocolError as refused:
            assert refused.status == 429 and time.monotonic() < deadline, refused


def test_sse_follows_count_across_processes_and_a_killed_ones_places_expire(
    two_processes, make_agent
):
    a, b = two_processes
    _, token = make_agent("bob")
    on_a, on_b = AgentChat(a.url, token, "bob"), AgentChat(b.url, token, "bob")
    held = [on_a.follow_inbox(), on_b.follow_inbox()]  # one through each process
    assert _refused(on_a.follow_inbox) == "SSE_TOO_MANY_FOLLOWS"
    assert _refused(on_b.follow_inbox) == "SSE_TOO_MANY_FOLLOWS"
    a.kill()  # its follow's place is never given back: it expires
    held[0].close()
    again = _opens_once_freed(on_b.follow_inbox)
    # b's first follow, renewed past its time to live, still holds its place.
    assert _refused(on_b.follow_inbox) == "SSE_TOO_MANY_FOLLOWS"
    for stream in (held[1], again):
        stream.close()


def test_websockets_count_across_processes(two_processes, make_agent):
    a, b = two_processes
    _, token = make_agent("bob")

    async def scenario():
        first = await websockets.connect(f"{a.ws_url}/ws/channels/?token={token}")
        second = await websockets.connect(f"{b.ws_url}/ws/channels/?token={token}")
        third = await websockets.connect(f"{a.ws_url}/ws/channels/?token={token}")
        told = json.loads(await asyncio.wait_for(third.recv(), 10))
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(third.recv(), 10)
        for ws in (first, second):
            await ws.close()
        return told, closed.value.rcvd.code

    told, code = asyncio.run(scenario())
    assert told["error"]["code"] == "STREAM_TOO_MANY_CONNECTIONS"
    assert code == 4429
