"""The wait endpoint through the ASGI application, in process, so that each step waits for a
signal: a post is made only once the wait has done its first read (after subscribing), so it
can reach the wait only by a ring."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from agentchat.asgi import application
from channels_app.services import channel_create
from tests.signals import layer_kind, until  # noqa: F401  (fixture)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("layer_kind")]


@pytest.fixture
def reads(counted_reads):
    return counted_reads.names


@pytest.fixture
def trio(make_agent):
    tokens = {name: make_agent(name)[1] for name in ("alice", "bob", "carol")}
    channel_create(name="waits", created_by="alice")
    return tokens


def client(token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application),
        base_url="http://testserver/api/v1/channels/waits/",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )


async def post(token: str, **body) -> None:
    async with client(token) as http:
        r = await http.post("messages/", json=body)
        assert r.status_code == 201, r.text


async def parked(reads, count: int = 1) -> None:
    await until(lambda: len(reads) >= count, what="the wait's first read")


@pytest.mark.parametrize("to", ["bob", None])
def test_wait_is_woken_by_a_relevant_post(trio, reads, to):
    async def scenario():
        async with client(trio["bob"]) as http:
            waiter = asyncio.create_task(http.get("wait/", params={"timeout": 20}))
            await parked(reads)
            body = {"title": "for you"} if to is None else {"title": "for you", "to": to}
            await post(trio["alice"], **body)
            return await asyncio.wait_for(waiter, 10)

    r = asyncio.run(scenario())
    assert r.status_code == 200
    assert r.json() == {"messages": r.json()["messages"], "cursor": 1, "more": False}
    assert [m["title"] for m in r.json()["messages"]] == ["for you"]
    assert reads == ["bob"]  # woken by the ring: no second read


def test_wait_ignores_others_mail_and_own_posts_then_times_out(trio, reads):
    async def scenario():
        async with client(trio["bob"]) as http:
            waiter = asyncio.create_task(http.get("wait/", params={"timeout": 1.5}))
            await parked(reads)
            await post(trio["alice"], title="for carol", to="carol")
            await post(trio["bob"], title="bob's own")
            r = await waiter
            return r, await http.post("read/")

    r, after = asyncio.run(scenario())
    assert (r.status_code, r.json()) == (
        200,
        {"messages": [], "cursor": 0, "more": False, "timed_out": True},
    )
    assert reads == ["bob", "bob"]  # parking and the last look: the rings cost no read
    # the cursor is unchanged by the timed-out wait
    assert after.json() == {"messages": [], "cursor": 2, "more": False}


def test_wait_then_irrelevant_then_relevant_returns_only_relevant(trio, reads):
    async def scenario():
        async with client(trio["bob"]) as http:
            waiter = asyncio.create_task(http.get("wait/", params={"timeout": 20}))
            await parked(reads)
            await post(trio["alice"], title="for carol", to="carol")
            await post(trio["carol"], title="for bob", to=["bob"])
            return await asyncio.wait_for(waiter, 10)

    r = asyncio.run(scenario())
    assert r.status_code == 200
    assert [m["title"] for m in r.json()["messages"]] == ["for bob"]
    assert r.json()["cursor"] == 2


def test_a_client_that_goes_away_ends_its_wait_and_moves_nothing(trio, reads):
    from channels.layers import get_channel_layer

    from agentchat.core.identity.revocation import REVOCATIONS_GROUP
    from agentchat.core.live.layer import channels_held, group_channels
    from channels_app.models import Channel, Cursor
    from channels_app.services import channel_group

    group = channel_group(Channel.objects.get(name="waits").pk)

    def held() -> set[str]:
        # What the layer holds besides the process's one revocation watcher.
        layer = get_channel_layer()
        return channels_held(layer) - group_channels(layer, REVOCATIONS_GROUP)

    async def scenario():
        before = held()
        incoming: asyncio.Queue = asyncio.Queue()
        sent = []

        async def send(message):
            sent.append(message)

        await incoming.put({"type": "http.request", "body": b""})
        scope = {
            "type": "http",
            "method": "GET",
            "path": "/api/v1/channels/waits/wait/",
            "query_string": b"timeout=20",
            "headers": [
                (b"host", b"testserver"),
                (b"authorization", f"Bearer {trio['bob']}".encode()),
            ],
            "server": ("testserver", 80),
        }
        app = asyncio.create_task(application(scope, incoming.get, send))
        await parked(reads)
        await incoming.put({"type": "http.disconnect"})  # the client goes away
        await asyncio.wait_for(app, 10)
        await until(lambda: held() == before, what="the wait freed its inbox")
        await post(trio["alice"], title="later", to="bob")
        return sent, group_channels(get_channel_layer(), group)

    sent, left = asyncio.run(scenario())
    assert sent == []  # nobody to answer
    assert left == set()
    assert not Cursor.objects.exists()
