"""A client written from the HTTP v1 document alone (``doc_client.py``: the standard library,
nothing of this project) runs a conversation with receipts, a contact handoff, replay and resume
through a real server, and the admin monitor follows it all."""

from __future__ import annotations

import ast
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.channels_app.v1 import doc_client
from tests.channels_app.v1.doc_client import AgentChat, ProtocolError
from tests.conftest import server_of_its_own

ADMIN_TOKEN = "admin-" + "k" * 40
CARD = {
    "id": "carol",
    "display_name": "Carol",
    "endpoint": "https://agents.example.net",
    "capabilities": ["research"],
    "public_key": "did:key:...",
    "labels": {"team": "discovery"},
}


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker):
    with server_of_its_own(django_db_blocker, {"AGENT_CHAT_ADMIN_TOKEN": ADMIN_TOKEN}) as process:
        yield process


@pytest.fixture
def clients(server, transactional_db, make_agent):
    tokens = {name: make_agent(name)[1] for name in ("alice", "bob", "carol")}
    agents = {name: AgentChat(server.url, token, name) for name, token in tokens.items()}
    return agents, AgentChat(server.url, ADMIN_TOKEN)


def test_a_conversation_with_receipts_a_contact_handoff_and_replay(clients):
    agents, admin = clients
    alice, bob = agents["alice"], agents["bob"]

    # the document's example message
    sent = alice.send(
        "bob",
        conversation_id="task-42",
        correlation_id="request-7",
        text="Please inspect this result",
        data={"artifact": "s2://agent-chat/artifacts/result-7", "priority": 2},
        content_type="application/vnd.example.handoff+json",
        metadata={"trace_id": "abc123"},
        id="handoff-1",
    )
    assert (sent["schema"], sent["kind"], sent["from"], sent["to"]) == (
        "agent-chat/envelope.v1",
        "message",
        "alice",
        "bob",
    )
    # a retry after an ambiguous failure: the same envelope, no second one
    assert (
        alice.send(
            "bob",
            conversation_id="task-42",
            correlation_id="request-7",
            text="Please inspect this result",
            data={"artifact": "s2://agent-chat/artifacts/result-7", "priority": 2},
            content_type="application/vnd.example.handoff+json",
            metadata={"trace_id": "abc123"},
            id="handoff-1",
        )
        == sent
    )

    # bob replays from 0 and answers with a receipt
    received, bob_cursor = bob.replay(0)
    assert [d["envelope"] for d in received] == [sent]
    assert (received[0]["seq_num"], bob_cursor) == (0, 1)
    receipt = bob.receipt(
        "alice", sent["id"], "processed", detail="Result attached", conversation_id="task-42"
    )
    assert receipt["kind"] == "receipt"
    assert receipt["message"]["data"] == {
        "message_id": sent["id"],
        "status": "processed",
        "detail": "Result attached",
    }

    # alice sees the receipt; the original in bob's inbox never changed
    alice_deliveries, alice_cursor = alice.replay(0)
    assert [d["envelope"] for d in alice_deliveries] == [receipt]
    assert bob.inbox(0)["deliveries"] == received

    # the contact handoff
    alice.save_contact(CARD)
    share = alice.share_contact("bob", "carol", conversation_id="task-42")
    assert share["kind"] == "contact.share"
    assert share["message"]["data"]["contact"] == CARD
    # bob resumes from where he stopped: only what is new
    new, bob_cursor = bob.replay(bob_cursor)
    assert [d["envelope"] for d in new] == [share]
    assert [d["seq_num"] for d in new] == [1]
    bob.accept_share(share["id"])
    assert bob.inbox(1)["deliveries"] == new  # acceptance changes no envelope

    # bob introduces himself to carol, whose card he now holds
    hello = bob.send("carol", text="alice sent me your card", conversation_id="task-42")
    carols, _ = agents["carol"].replay(0)
    assert [d["envelope"] for d in carols] == [hello]

    # an empty page at the tail keeps the cursor
    assert bob.inbox(bob_cursor) == {"deliveries": [], "next_cursor": 2, "tail": 2}
    assert alice.inbox(alice_cursor)["deliveries"] == []

    # the admin monitor: every inbox fanned in, resumed by its opaque cursor
    page = admin.monitor()
    assert [(d["inbox"], d["seq_num"]) for d in page["deliveries"]] == [
        ("bob", 0),
        ("alice", 0),
        ("bob", 1),
        ("carol", 0),
    ]
    assert page["tails"] == {"alice": 1, "bob": 2, "carol": 1}
    assert [d["envelope"] for d in page["deliveries"]] == [sent, receipt, share, hello]
    resumed = admin.monitor(page["next_cursor"])
    assert resumed["deliveries"] == []
    late = alice.send("carol", text="welcome")
    resumed = admin.monitor(resumed["next_cursor"])
    assert [(d["inbox"], d["envelope"]) for d in resumed["deliveries"]] == [("carol", late)]
    # each delivery's cursor resumes right after it
    after_share = admin.monitor(page["deliveries"][2]["cursor"])
    assert [d["envelope"] for d in after_share["deliveries"]] == [hello, late]


def monitor_page_all(admin, done, total, limit):
    """Page the monitor from the start as the document says (next_cursor back unchanged) until
    ``total`` deliveries came, or a page came empty once ``done`` is set."""
    seen, cursor = [], None
    while len(seen) < total:
        page = admin.monitor(cursor, limit=limit)
        assert len(page["deliveries"]) <= limit
        seen += page["deliveries"]
        if page["deliveries"]:
            assert page["next_cursor"] == page["deliveries"][-1]["cursor"]
        cursor = page["next_cursor"]
        if not page["deliveries"] and done.is_set():
            break
    return seen


def test_monitor_readers_see_every_delivery_once_while_senders_race(clients):
    # Three senders post at once, each to the two others (so three inboxes fill concurrently);
    # a reader pages the monitor meanwhile, seven at a time, and a follower takes the stream.
    # On PostgreSQL a delivery can commit after one begun later: the monitor numbers each
    # after its commit, in commit order, so neither reader passes one that committed late.
    agents, admin = clients
    per_sender = 12
    total = per_sender * len(agents)
    done = threading.Event()
    stream = admin.follow_monitor(timeout=60)

    def send_all(name):
        others = [other for other in agents if other != name]
        return [
            agents[name].send(others[n % 2], text=f"{name} {n}")["id"] for n in range(per_sender)
        ]

    def follow():
        events = []
        while len(events) < total:
            event = stream.next_event()
            assert event is not None, "the server ended a healthy stream"
            if event.event == "envelope":
                events.append(event)
        return events

    with ThreadPoolExecutor(len(agents) + 2) as pool:
        paged = pool.submit(monitor_page_all, admin, done, total, 7)
        followed = pool.submit(follow)
        sent = [i for ids in pool.map(send_all, agents) for i in ids]
        done.set()
        seen = paged.result(timeout=120)
        events = followed.result(timeout=120)
    stream.close()
    for deliveries in (seen, [event.json() for event in events]):
        ids = [d["envelope"]["id"] for d in deliveries]
        assert len(ids) == len(set(ids)) == total and set(ids) == set(sent)
        for inbox in agents:  # each inbox's in seq_num order, none skipped
            numbers = [d["seq_num"] for d in deliveries if d["inbox"] == inbox]
            assert numbers == list(range(len(numbers)))
    assert [event.id for event in events] == [event.json()["cursor"] for event in events]
    # the follower and the pager saw the one order, and a page from any delivery's cursor
    # goes on right after it
    assert [event.json() for event in events] == seen
    middle = seen[total // 2]["cursor"]
    assert admin.monitor(middle, limit=total)["deliveries"] == seen[total // 2 + 1 :]
    # a follow resumed by Last-Event-ID goes on there too
    resumed = admin.follow_monitor(last_event_id=middle, timeout=60)
    first = next(event for event in resumed.events() if event.event == "envelope")
    assert first.json() == seen[total // 2 + 1]
    resumed.close()


def test_the_tokens_are_kept_apart_both_ways(clients):
    agents, admin = clients
    alice = agents["alice"]
    with pytest.raises(ProtocolError) as refused:
        AgentChat(admin.base_url, alice.token).monitor()
    assert (refused.value.status, refused.value.body["error"]["code"]) == (
        403,
        "ADMIN_TOKEN_REQUIRED",
    )
    with pytest.raises(ProtocolError) as refused:
        AgentChat(admin.base_url, ADMIN_TOKEN, "alice").inbox()
    assert (refused.value.status, refused.value.body["error"]["code"]) == (
        403,
        "ADMIN_TOKEN_NOT_ALLOWED",
    )
    with pytest.raises(ProtocolError) as refused:
        AgentChat(admin.base_url, alice.token, "bob").inbox()
    assert refused.value.status == 403
    with pytest.raises(ProtocolError) as refused:
        alice.send("bob", text="x", attachment="unknown field")
    assert (refused.value.status, refused.value.body["error"]["code"]) == (400, "UNKNOWN_FIELD")


def test_the_client_imports_nothing_but_the_standard_library():
    tree = ast.parse(Path(doc_client.__file__).read_text())
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
