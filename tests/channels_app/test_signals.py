"""EP-0118 signals over REST: a signal is a message with a type; ``read_signals`` is a pure
query; ``ack_signals`` marks exactly the ids given, for the caller only."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from channels_app.models import Cursor, Message, SignalRead
from tests.errors import error_code

pytestmark = pytest.mark.django_db

BASE = "/api/v1/channels/session"


@pytest.fixture
def session(alice, bob, carol):
    r = alice.post("/api/v1/channels/", {"name": "session"}, format="json")
    assert r.status_code == 201, r.content
    return alice, bob, carol


def send(client, to, content="hello", status=201, **body):
    r = client.post(f"{BASE}/signals/", {"to": to, "content": content, **body}, format="json")
    assert r.status_code == status, r.content
    return r.json()


def signals(client, **params):
    r = client.get(f"{BASE}/signals/", params)
    assert r.status_code == 200, r.content
    return r.json()


def ack(client, *ids, status=200):
    r = client.post(f"{BASE}/signals/ack/", {"ids": list(ids)}, format="json")
    assert r.status_code == status, r.content
    return r


def writes(queries) -> list[str]:
    """The statements that write, but the identity's bookkeeping (a token's last use, which
    authentication touches at most once a minute: tables of the ``core`` app)."""
    return [
        q["sql"]
        for q in queries
        if q["sql"].lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE", "REPLACE"))
        and not re.search(r'\b(?:INTO|UPDATE|FROM)\s+"?core_', q["sql"], re.IGNORECASE)
    ]


def test_a_signal_is_a_message_with_a_type(session):
    alice, _bob, _ = session
    sent = send(alice, "bob", "Can you review T-1?\nDetails below.", type="query")
    assert sent == {
        "id": sent["id"],
        "seq": 1,
        "channel": "session",
        "ts": sent["ts"],
        "from": "alice",
        "sender_kind": "agent",
        "to": "bob",
        "type": "query",
        "content": "Can you review T-1?\nDetails below.",
        "reply_to": None,
        "read_at": None,
    }
    [message] = alice.get(f"{BASE}/messages/").json()["messages"]
    assert message["id"] == sent["id"]
    assert message["type"] == "query"
    assert message["status"] == "query"
    assert message["title"] == "Can you review T-1?"
    assert message["to"] == ["bob"]
    # An ordinary message's record has no type.
    alice.post(f"{BASE}/messages/", {"title": "plain"}, format="json")
    assert "type" not in alice.get(f"{BASE}/messages/").json()["messages"][1]


def test_every_type_of_the_ep_and_a_broadcast(session):
    alice, bob, _ = session
    for kind in ("inform", "query", "delegate", "ack", "warn", "sleep_event", "sleep_request"):
        assert send(alice, "*", kind, type=kind)["type"] == kind
    assert send(alice, "all", "x")["to"] == "*"
    assert send(alice, "bob")["type"] == "inform"  # the default
    listed = signals(bob)["signals"]
    assert [s["to"] for s in listed] == ["*"] * 8 + ["bob"]


def test_read_signals_is_a_pure_query(session):
    alice, bob, _ = session
    send(alice, "bob", "one")
    send(alice, "*", "two")
    signals(bob)  # the first request as bob may touch the token's last use
    with CaptureQueriesContext(connection) as captured:
        first = signals(bob)
        second = signals(bob)
        everything = signals(bob, unread_only="false")
    assert writes(captured.captured_queries) == []
    assert first == second
    assert [s["content"] for s in first["signals"]] == ["one", "two"]
    assert everything == first
    assert not SignalRead.objects.exists()
    assert not Cursor.objects.exists()


def test_ack_marks_exactly_those_ids(session):
    alice, bob, _ = session
    one, two, three = (send(alice, "bob", text)["id"] for text in ("one", "two", "three"))
    r = ack(bob, two)
    assert r.json() == {"acked": [two], "already_read": []}
    assert [s["id"] for s in signals(bob)["signals"]] == [one, three]
    listed = signals(bob, unread_only="false")["signals"]
    assert [(s["id"], s["read_at"] is not None) for s in listed] == [
        (one, False),
        (two, True),
        (three, False),
    ]
    # The cursor is another thing: a read still returns all three, and moves no marker.
    assert len(bob.post(f"{BASE}/read/").json()["messages"]) == 3
    assert SignalRead.objects.count() == 1


def test_acks_are_idempotent(session):
    alice, bob, _ = session
    one, two = send(alice, "bob")["id"], send(alice, "bob")["id"]
    ack(bob, one)
    assert ack(bob, one, two, one).json() == {"acked": [two], "already_read": [one]}
    assert ack(bob, one, two).json() == {"acked": [], "already_read": [one, two]}
    assert SignalRead.objects.count() == 2
    assert signals(bob)["signals"] == []


def test_a_broadcast_acked_by_one_stays_unread_for_the_others(session):
    alice, bob, carol = session
    broadcast = send(alice, "*", "everyone")["id"]
    ack(bob, broadcast)
    assert signals(bob)["signals"] == []
    assert [s["id"] for s in signals(carol)["signals"]] == [broadcast]
    ack(carol, broadcast)
    assert signals(carol)["signals"] == []
    assert signals(alice)["signals"] == []  # never its own


def test_unknown_ids_mark_nothing(session):
    alice, bob, _ = session
    good = send(alice, "bob")["id"]
    r = ack(bob, good, "msg_nope", status=404)
    assert error_code(r) == "SIGNAL_NOT_FOUND"
    assert r.json()["error"]["detail"] == {"ids": ["msg_nope"], "count": 1}
    assert not SignalRead.objects.exists()
    plain = alice.post(f"{BASE}/messages/", {"title": "not a signal", "to": "bob"}, format="json")
    assert error_code(ack(bob, plain.json()["id"], status=404)) == "SIGNAL_NOT_FOUND"
    # A signal of another channel is no signal of this one.
    alice.post("/api/v1/channels/", {"name": "other"}, format="json")
    elsewhere = alice.post(
        "/api/v1/channels/other/signals/", {"to": "bob", "content": "x"}, format="json"
    ).json()["id"]
    assert error_code(ack(bob, elsewhere, status=404)) == "SIGNAL_NOT_FOUND"
    assert not SignalRead.objects.exists()


def test_foreign_and_own_signals_are_refused(session):
    alice, bob, carol = session
    for_carol = send(alice, "carol")["id"]
    mine = send(bob, "*")["id"]
    for_bob = send(alice, "bob")["id"]
    r = ack(bob, for_bob, for_carol, status=403)
    assert error_code(r) == "SIGNAL_NOT_ADDRESSED"
    assert r.json()["error"]["detail"]["ids"] == [for_carol]
    assert error_code(ack(bob, mine, status=403)) == "SIGNAL_NOT_ADDRESSED"
    assert not SignalRead.objects.exists()
    assert [s["id"] for s in signals(carol)["signals"]] == [for_carol, mine]


def test_paging(session):
    alice, bob, _ = session
    ids = [send(alice, "bob", f"s{n}")["id"] for n in range(5)]
    page = signals(bob, limit=2)
    assert [s["id"] for s in page["signals"]] == ids[:2]
    assert (page["more"], page["next"]) == (True, 2)
    page = signals(bob, limit=2, after=page["next"])
    assert [s["id"] for s in page["signals"]] == ids[2:4]
    page = signals(bob, limit=2, after=page["next"])
    assert ([s["id"] for s in page["signals"]], page["more"], page["next"]) == (
        [ids[4]],
        False,
        None,
    )


def test_a_retry_with_the_same_id_is_the_same_signal(session):
    alice, _bob, _ = session
    first = send(alice, "bob", "once", id="sig-1")
    assert send(alice, "bob", "once", id="sig-1", status=200) == first
    assert Message.objects.count() == 1
    alice.post(f"{BASE}/messages/", {"title": "plain", "id": "plain-1"}, format="json")
    r = alice.post(
        f"{BASE}/signals/", {"to": "bob", "content": "x", "id": "plain-1"}, format="json"
    )
    assert error_code(r) == "ID_CONFLICT"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"to": "bob", "content": "x", "type": "shout"}, "SIGNAL_INVALID_TYPE"),
        ({"to": "bob", "content": "x", "type": 3}, "INVALID_TYPE"),
        ({"to": "Bob", "content": "x"}, "INVALID_NAME"),
        ({"to": "bob,carol", "content": "x"}, "INVALID_NAME"),
        ({"to": "bob.", "content": "x"}, "INVALID_NAME"),
        ({"to": ["bob"], "content": "x"}, "INVALID_TYPE"),
        ({"to": "bob", "content": "  \n "}, "INVALID_VALUE"),
        ({"to": "bob", "content": "a\x00b"}, "INVALID_TEXT"),
        ({"to": "bob"}, "MISSING_FIELD"),
        ({"content": "x"}, "MISSING_FIELD"),
        ({"to": "bob", "content": "x", "title": "t"}, "UNKNOWN_FIELD"),
        ({"to": "bob", "content": "x", "from": "carol"}, "SENDER_MISMATCH"),
        ({"to": "bob", "content": "x", "reply_to": 99}, "REPLY_TO_NOT_FOUND"),
        ({"to": "bob", "content": "x" * (600 * 1024)}, "FIELD_TOO_LARGE"),
    ],
)
def test_hostile_signals_are_refused(session, body, code):
    alice, _, _ = session
    r = alice.post(f"{BASE}/signals/", body, format="json")
    assert error_code(r) == code
    assert not Message.objects.exists()


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"ids": []}, "INVALID_VALUE"),
        ({"ids": "msg_1"}, "INVALID_TYPE"),
        ({"ids": [1]}, "INVALID_TYPE"),
        ({"ids": ["../x"]}, "INVALID_VALUE"),
        ({"ids": ["x" * 129]}, "INVALID_VALUE"),
        ({"ids": [f"m{n}" for n in range(1001)]}, "INVALID_VALUE"),
        ({}, "MISSING_FIELD"),
        ({"ids": ["a"], "agent_id": "bob"}, "UNKNOWN_FIELD"),
    ],
)
def test_hostile_acks_are_refused(session, body, code):
    _, bob, _ = session
    assert error_code(bob.post(f"{BASE}/signals/ack/", body, format="json")) == code


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"unread_only": "maybe"}, "INVALID_VALUE"),
        ({"after": "-1"}, "INVALID_SEQ"),
        ({"limit": "0"}, "INVALID_VALUE"),
        ({"limit": "1001"}, "INVALID_VALUE"),
        ({"agent_id": "bob"}, "UNKNOWN_FIELD"),
    ],
)
def test_hostile_reads_are_refused(session, params, code):
    _, bob, _ = session
    assert error_code(bob.get(f"{BASE}/signals/", params)) == code


def test_a_members_only_channel_hides_its_signals(alice, bob, carol):
    alice.post(
        "/api/v1/channels/",
        {"name": "private", "members": ["alice", "bob"], "visibility": "members"},
        format="json",
    )
    sent = alice.post(
        "/api/v1/channels/private/signals/", {"to": "*", "content": "x"}, format="json"
    ).json()
    for r in (
        carol.get("/api/v1/channels/private/signals/"),
        carol.post("/api/v1/channels/private/signals/", {"to": "*", "content": "x"}, format="json"),
        carol.post("/api/v1/channels/private/signals/ack/", {"ids": [sent["id"]]}, format="json"),
    ):
        assert error_code(r) == "CHANNEL_NOT_FOUND"
    assert bob.get("/api/v1/channels/private/signals/").json()["signals"][0]["id"] == sent["id"]


def test_the_paths_without_their_trailing_slash(session):
    alice, bob, _ = session
    r = alice.post(f"{BASE}/signals", {"to": "bob", "content": "x"}, format="json")
    assert r.status_code == 201, r.content
    assert [s["id"] for s in bob.get(f"{BASE}/signals").json()["signals"]] == [r.json()["id"]]
    assert bob.post(f"{BASE}/signals/ack", {"ids": [r.json()["id"]]}, format="json").json() == {
        "acked": [r.json()["id"]],
        "already_read": [],
    }


def test_the_title_is_the_first_line_cut_and_clean(session):
    alice, _, _ = session
    send(alice, "bob", "\n\n  \u202eevil\u200d  " + "y" * 200 + "\nrest")
    send(alice, "bob", "\u200b\n\u200d")
    titles = [m["title"] for m in alice.get(f"{BASE}/messages/").json()["messages"]]
    assert titles[0] == ("evil  " + "y" * 200)[:99] + "…"
    assert titles[1] == "inform"
