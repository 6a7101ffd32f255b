"""What one agent's live follows may cost the others: every page a follow reads takes the heavy
gate, keyed by its agent, on the heavy pool (so a flood of follows queues behind itself while
posts commit), and one agent holds at most AGENTCHAT_SSE_MAX_PER_AGENT follows open (the
monitor AGENTCHAT_SSE_MAX_MONITOR), one more refused 429 SSE_TOO_MANY_FOLLOWS as JSON before
its stream starts. Counted, not timed: the gate's queue, which pool read, the status codes."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request

import pytest

from agentchat.core.db.transactions import run_db
from agentchat.core.identity.revocation import Credential
from agentchat.core.live import follows
from agentchat.core.models import ApiToken
from channels_app.endpoints import sse
from channels_app.services import envelope_send
from tests.channels_app.v1.doc_client import AgentChat, ProtocolError
from tests.conftest import server_of_its_own
from tests.heavy_gate import heavy_calls, held
from tests.signals import until

ADMIN_TOKEN = "admin-" + "b" * 40
CAP = 2


@pytest.mark.django_db(transaction=True)  # the reads run on the pools: committed rows
def test_a_follows_read_waits_its_turn_at_the_gate_while_a_post_commits(make_agent, monkeypatch):
    alice, _ = make_agent("alice")
    bob, _ = make_agent("bob")
    envelope_send(sender=alice, to="bob", text="m0")
    credential = Credential(token_id=ApiToken.objects.get(agent=bob).pk)
    source = sse._InboxSource(agent=bob, cursor=0, limit=100, credential=credential)
    calls = heavy_calls(monkeypatch)

    async def main() -> tuple[bool, int, list[str], sse.Batch]:
        gate, release, holder = await held(source.key)  # another heavy request of bob's
        reading = asyncio.ensure_future(source.read())
        await until(lambda: gate.waiting(source.key) == 2)
        # Meanwhile a post commits (the short pool is not the follow's).
        await run_db(envelope_send, sender=alice, to="bob", text="m1")
        waited = not reading.done()
        read_before = list(calls)
        release.set()
        batch = await asyncio.wait_for(reading, 30)
        await holder
        return waited, gate.waiting(source.key), read_before, batch

    waited, left, read_before, batch = asyncio.run(main())
    assert waited and read_before == []  # the read did not start while bob's turn was taken
    assert calls == ["_inbox_read"]  # then it ran on the heavy pool
    assert left == 0
    assert [event_id for event_id, _ in batch.events] == ["1", "2"]
    assert [json.loads(data)["envelope"]["message"]["text"] for _, data in batch.events] == [
        "m0",
        "m1",
    ]


@pytest.mark.django_db(transaction=True)
def test_the_monitors_reads_take_the_gate_by_its_own_key(make_agent, monkeypatch):
    alice, _ = make_agent("alice")
    make_agent("bob")
    envelope_send(sender=alice, to="bob", text="x")
    keys: list[bytes] = []
    real_run = follows.heavy_gate

    def spying():
        gate = real_run()
        original = gate.run

        async def run(key, call, **kwargs):
            keys.append(key)
            return await original(key, call, **kwargs)

        gate.run = run  # type: ignore[method-assign]
        return gate

    monkeypatch.setattr(follows, "heavy_gate", spying)
    batch = asyncio.run(sse._MonitorSource(cursor=None, limit=10).read())
    assert keys == [sse.MONITOR_KEY]
    assert len(batch.events) == 1


@pytest.fixture(scope="module")
def capped(django_db_setup, django_db_blocker):
    env = {
        "AGENT_CHAT_ADMIN_TOKEN": ADMIN_TOKEN,
        "AGENTCHAT_SSE_MAX_PER_AGENT": str(CAP),
        "AGENTCHAT_SSE_MAX_MONITOR": "1",
    }
    with server_of_its_own(django_db_blocker, env) as process:
        yield process


def _refused(client: AgentChat, follow) -> dict:
    with pytest.raises(ProtocolError) as refused:
        follow(client)
    assert refused.value.status == 429
    return refused.value.body


def _code(body) -> str:
    body = json.loads(body) if isinstance(body, (bytes, str)) else body
    return body["error"]["code"]


def _reopens(follow, client: AgentChat):
    """A follow once the server has seen the closed one go (it learns of it asynchronously)."""
    deadline = time.monotonic() + 20
    while True:
        try:
            return follow(client)
        except ProtocolError as refused:
            assert refused.status == 429 and time.monotonic() < deadline, refused


@pytest.mark.django_db(transaction=True)
def test_one_follow_past_the_cap_is_refused_429_and_a_closed_one_frees_its_place(
    capped, make_agent
):
    clients = {name: AgentChat(capped.url, make_agent(name)[1], name) for name in ("bob", "carol")}
    bob = clients["bob"]
    inbox = AgentChat.follow_inbox
    open_ = [bob.follow_inbox() for _ in range(CAP)]
    # Each answered 200 (the doc client raises otherwise): their streams started.
    assert _code(_refused(bob, inbox)) == "SSE_TOO_MANY_FOLLOWS"
    # Raw: JSON, with its status, before any byte of a stream.
    request = urllib.request.Request(f"{capped.url}/v1/agents/bob/inbox?follow=true")
    request.add_header("Authorization", f"Bearer {bob.token}")
    request.add_header("Accept", "text/event-stream")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 429
    assert refused.value.headers["Content-Type"] == "application/json"
    error = json.loads(refused.value.read())["error"]
    assert (error["code"], error["detail"]) == ("SSE_TOO_MANY_FOLLOWS", {"limit": CAP})
    # Per agent: carol's follow is not bob's.
    carols = clients["carol"].follow_inbox()
    # The JSON replay (a peek) is no follow: still answered.
    request = urllib.request.Request(f"{capped.url}/v1/agents/bob/inbox")
    request.add_header("Authorization", f"Bearer {bob.token}")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
    open_.pop().close()
    open_.append(_reopens(inbox, bob))
    assert _code(_refused(bob, inbox)) == "SSE_TOO_MANY_FOLLOWS"
    for stream in [*open_, carols]:
        stream.close()


@pytest.mark.django_db(transaction=True)
def test_the_monitor_has_its_own_cap(capped, make_agent):
    make_agent("alice")
    admin = AgentChat(capped.url, ADMIN_TOKEN)
    monitor = AgentChat.follow_monitor
    first = admin.follow_monitor()
    assert _code(_refused(admin, monitor)) == "SSE_TOO_MANY_FOLLOWS"
    first.close()
    again = _reopens(monitor, admin)
    again.close()
