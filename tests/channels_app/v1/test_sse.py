"""HTTP v1's live follow over Server-Sent Events, through a real server: the inbox and the
monitor stream what commits, resume by ``Last-Event-ID`` or ``cursor`` with nothing lost or
repeated, keep their tokens apart, send heartbeats, end when the token is revoked, and cost no
thread while idle. The client is the one written from the document alone (``doc_client``)."""

from __future__ import annotations

import json
import selectors
import socket
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection, connections

from agentchat.core.identity.services import token_revoke
from agentchat.core.models import ApiToken
from channels_app.services import envelope_send
from channels_app.services import envelopes as envelope_services
from tests.channels_app.v1.doc_client import AgentChat, ProtocolError
from tests.conftest import server_of_its_own
from tests.signals import waits_behind_us

ADMIN_TOKEN = "admin-" + "s" * 40
HEARTBEAT = 0.3


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker):
    env = {
        "AGENT_CHAT_ADMIN_TOKEN": ADMIN_TOKEN,
        "AGENTCHAT_SSE_HEARTBEAT_SECONDS": str(HEARTBEAT),
        "AGENTCHAT_REVOCATION_CHECK_SECONDS": "0.5",
        # Two hundred follows of bob's below (the cap: test_sse_bounds.py).
        "AGENTCHAT_SSE_MAX_PER_AGENT": "256",
    }
    with server_of_its_own(django_db_blocker, env) as process:
        yield process


@pytest.fixture
def agents(server, transactional_db, make_agent):
    made = {name: make_agent(name) for name in ("alice", "bob", "carol")}
    return {name: AgentChat(server.url, raw, name) for name, (_, raw) in made.items()}


def texts(events):
    return [event.json()["envelope"]["message"]["text"] for event in events]


def take(stream, count):
    events = []
    while len(events) < count:
        event = stream.next_event()
        assert event is not None, "the server ended a healthy stream"
        if event.event == "envelope":
            events.append(event)
    return events


def test_a_follower_resumes_by_last_event_id_after_a_drop_losing_and_repeating_nothing(agents):
    alice, bob = agents["alice"], agents["bob"]
    for n in range(3):
        alice.send("bob", text=f"m{n}")
    stream = bob.follow_inbox()
    assert stream.content_type == "text/event-stream"
    first = take(stream, 3)
    assert texts(first) == ["m0", "m1", "m2"]
    assert [(e.event, e.id, e.json()["seq_num"]) for e in first] == [
        ("envelope", "1", 0),
        ("envelope", "2", 1),
        ("envelope", "3", 2),
    ]
    alice.send("bob", text="live")
    assert texts(take(stream, 1)) == ["live"]
    last = stream.last_event_id
    stream.close()  # the connection drops; meanwhile more arrives
    for n in range(3):
        alice.send("bob", text=f"gap{n}")
    resumed = bob.follow_inbox(last_event_id=last)
    again = take(resumed, 3)
    assert texts(again) == ["gap0", "gap1", "gap2"]
    assert [e.json()["seq_num"] for e in again] == [4, 5, 6]
    # cursor= wins over Last-Event-ID
    resumed.close()
    both = bob.follow_inbox(cursor=6, last_event_id="0")
    assert texts(take(both, 1)) == ["gap2"]
    both.close()


def test_the_monitor_follows_every_inbox_and_resumes_by_its_vector_cursor(agents):
    alice, bob = agents["alice"], agents["bob"]
    admin = AgentChat(alice.base_url, ADMIN_TOKEN)
    alice.send("bob", text="to bob")
    stream = admin.follow_monitor()
    (event,) = take(stream, 1)
    delivery = event.json()
    assert (delivery["inbox"], delivery["seq_num"], event.id) == ("bob", 0, delivery["cursor"])
    bob.send("alice", text="to alice")
    (event,) = take(stream, 1)
    assert (event.json()["inbox"], texts([event])) == ("alice", ["to alice"])
    stream.close()
    bob.send("carol", text="to carol")
    resumed = admin.follow_monitor(last_event_id=event.id)
    (event,) = take(resumed, 1)
    assert (event.json()["inbox"], texts([event])) == ("carol", ["to carol"])
    resumed.close()
    assert admin.monitor(event.id)["deliveries"] == []


def test_an_idle_stream_gets_heartbeats(agents):
    stream = agents["bob"].follow_inbox(timeout=10)
    started = time.monotonic()
    lines = []
    while lines.count(b": heartbeat\n") < 2:
        lines.append(stream.response.readline())  # a comment dispatches no event
    assert time.monotonic() - started < 10  # every AGENTCHAT_SSE_HEARTBEAT_SECONDS (0.3 here)
    assert lines[0] == b": ready\n"
    stream.close()


@pytest.mark.parametrize(
    ("who", "path", "query", "status", "code"),
    [
        ("bob", "/v1/agents/alice/inbox", "follow=true", 403, "FORBIDDEN"),
        ("admin", "/v1/agents/alice/inbox", "follow=true", 403, "ADMIN_TOKEN_NOT_ALLOWED"),
        ("alice", "/v1/monitor", "follow=true", 403, "ADMIN_TOKEN_REQUIRED"),
        (None, "/v1/agents/alice/inbox", "follow=true", 401, "AUTH_REQUIRED"),
        ("alice", "/v1/agents/alice/inbox", "follow=true&cursor=5", 400, "INVALID_CURSOR"),
        ("alice", "/v1/agents/alice/inbox", "follow=yes", 400, "INVALID_VALUE"),
        ("alice", "/v1/agents/alice/inbox", "follow=true&since=1", 400, "UNKNOWN_FIELD"),
        ("admin", "/v1/monitor", "follow=true&cursor=bad!", 400, "INVALID_CURSOR"),
    ],
)
def test_errors_before_the_stream_starts_are_json(agents, who, path, query, status, code):
    token = ADMIN_TOKEN if who == "admin" else None if who is None else agents[who].token
    request = urllib.request.Request(f"{agents['alice'].base_url}{path}?{query}")
    request.add_header("Accept", "text/event-stream")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == status
    assert refused.value.headers["Content-Type"] == "application/json"
    assert json.loads(refused.value.read())["error"]["code"] == code


def test_follow_false_and_json_accept_are_the_replay(agents):
    alice = agents["alice"]
    agents["bob"].send("alice", text="x")
    request = urllib.request.Request(f"{alice.base_url}/v1/agents/alice/inbox?follow=false")
    request.add_header("Authorization", f"Bearer {alice.token}")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert json.loads(response.read())["tail"] == 1
    request = urllib.request.Request(f"{alice.base_url}/v1/agents/alice/inbox?follow=true")
    request.add_header("Authorization", f"Bearer {alice.token}")
    request.add_header("Accept", "application/json")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 406


def test_a_revoked_token_ends_its_stream_within_seconds(agents):
    bob = agents["bob"]
    stream = bob.follow_inbox(timeout=10)
    token = ApiToken.objects.get(agent__name="bob")
    token_revoke(token=token)
    started = time.monotonic()
    event = stream.next_event()
    while event is not None and event.event != "error":
        event = stream.next_event()
    assert event is not None and event.json()["error"]["code"] == "AUTH_INVALID"
    assert stream.next_event() is None  # and then the stream ends
    assert time.monotonic() - started < 5
    with pytest.raises(ProtocolError) as refused:
        bob.follow_inbox()
    assert refused.value.status == 401


def _open_followers(server, token, count):
    """``count`` raw connections following bob's inbox, each once its stream has started."""
    request = (
        "GET /v1/agents/bob/inbox HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()
    selector = selectors.DefaultSelector()
    sockets = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(request)
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, bytearray())
        sockets.append(sock)
    started = 0
    deadline = time.monotonic() + 60
    while started < count:
        assert time.monotonic() < deadline, f"only {started} of {count} streams started"
        for key, _ in selector.select(timeout=1):
            key.data.extend(key.fileobj.recv(65536))
            if b": ready" in key.data:
                selector.unregister(key.fileobj)
                started += 1
    return sockets


def test_two_hundred_idle_followers_cost_a_bounded_number_of_threads(server, agents):
    # One follower first: the pools and the revocation watcher are started by then.
    warm = agents["bob"].follow_inbox()
    take_threads = server.threads()
    sockets = _open_followers(server, agents["bob"].token, 200)
    try:
        assert server.threads() <= take_threads + 2
        agents["alice"].send("bob", text="to all")
        assert texts(take(warm, 1)) == ["to all"]
        for sock in sockets[:5]:
            sock.setblocking(True)
            received = b""
            while b"to all" not in received:
                received += sock.recv(65536)
    finally:
        for sock in sockets:
            sock.close()
        warm.close()


def test_a_delivery_that_commits_late_reaches_a_follower(server, agents, monkeypatch):
    # PostgreSQL: the first delivery to bob takes its seq_num and holds its transaction open
    # (in this process); a second one, posted through the server, waits for it. The follower
    # (whose stream has started at 0) is sent neither until both have committed, then both,
    # in order: the second was not numbered ahead of the first.
    if connection.vendor != "postgresql":
        pytest.skip("the commit order across processes is PostgreSQL's (SQLite: one writer)")
    carol, bob = agents["carol"], agents["bob"]
    stream = bob.follow_inbox(timeout=30)
    first_holds, release, second_started = (threading.Event() for _ in range(3))
    real_take = envelope_services.inbox_seq_take

    def hold(agent_id, now):
        taken = real_take(agent_id, now)
        first_holds.set()
        assert release.wait(timeout=30)
        return taken

    monkeypatch.setattr(envelope_services, "inbox_seq_take", hold)

    def first():
        try:
            from agentchat.core.models import Agent

            return envelope_send(sender=Agent.objects.get(name="alice"), to="bob", text="first")
        finally:
            connections.close_all()

    def second():
        second_started.set()
        return carol.send("bob", text="second")

    with ThreadPoolExecutor(2) as pool:
        held = pool.submit(first)
        assert first_holds.wait(timeout=30)
        posted = pool.submit(second)
        deadline = time.monotonic() + 30
        while not (posted.done() or waits_behind_us(second_started)):
            assert time.monotonic() < deadline, "the second delivery neither finished nor waits"
            time.sleep(0.05)
        assert not posted.done()  # numbered only after the first commits
        release.set()
        held.result(timeout=30)
        posted.result(timeout=30)
    events = take(stream, 2)
    assert [(e.json()["seq_num"], e.id) for e in events] == [(0, "1"), (1, "2")]
    assert texts(events) == ["first", "second"]
    stream.close()
