"""EP-0118's whiteboard: a channel's key/value store over REST, audited, bounded, seen by who
sees the channel, shown in the state summary's JSON (never its markdown)."""

from __future__ import annotations

import pytest

from channels_app.models import Message, WhiteboardEntry
from channels_app.whiteboard import BYTES_MAX, KEYS_MAX, VALUE_MAX_BYTES
from tests.errors import error_code

pytestmark = pytest.mark.django_db

BASE = "/api/v1/channels/session/whiteboard"


@pytest.fixture
def session(alice, bob, carol):
    r = alice.post("/api/v1/channels/", {"name": "session"}, format="json")
    assert r.status_code == 201, r.content
    return alice, bob, carol


def put(client, key, value, status=None):
    r = client.put(f"{BASE}/{key}/", {"value": value}, format="json")
    if status is not None:
        assert r.status_code == status, r.content
    return r


def test_write_read_replace_list_delete(session):
    alice, bob, _ = session
    created = put(alice, "goal", {"ship": "v0.2", "by": ["fri"]}, status=201).json()
    assert created == {
        "key": "goal",
        "value": {"ship": "v0.2", "by": ["fri"]},
        "updated_by": "alice",
        "updated_at": created["updated_at"],
        "audit_seq": 1,
    }
    assert bob.get(f"{BASE}/goal/").json() == created
    replaced = put(bob, "goal", "v0.3", status=200).json()
    assert (replaced["value"], replaced["updated_by"], replaced["audit_seq"]) == ("v0.3", "bob", 2)
    assert replaced["updated_at"] >= created["updated_at"]
    put(alice, "Goal", None, status=201)  # keys are case-sensitive; null is a value
    listed = bob.get(f"{BASE}/").json()
    assert listed["more"] is False
    assert {e["key"]: e["value"] for e in listed["entries"]} == {"goal": "v0.3", "Goal": None}
    r = bob.delete(f"{BASE}/goal/")
    assert r.status_code == 200, r.content
    assert r.json() == replaced
    assert error_code(bob.get(f"{BASE}/goal/")) == "KEY_NOT_FOUND"
    assert [e["key"] for e in bob.get(f"{BASE}/").json()["entries"]] == ["Goal"]


def test_every_write_is_audited_with_the_change(session):
    alice, bob, _ = session
    put(alice, "goal", {"b": 1, "a": 2})
    bob.delete(f"{BASE}/goal/")
    audits = [(m.status, m.sender, m.title, m.kind) for m in Message.objects.order_by("seq")]
    assert audits == [
        ("whiteboard.written", "alice", "whiteboard.written goal", "audit"),
        ("whiteboard.deleted", "bob", "whiteboard.deleted goal", "audit"),
    ]
    first = Message.objects.get(seq=1)
    assert '"value_json": "{\\"b\\":1,\\"a\\":2}"' in first.body  # the value as written
    # Deleting what is not there posts nothing.
    assert error_code(bob.delete(f"{BASE}/goal/")) == "KEY_NOT_FOUND"
    assert Message.objects.count() == 2
    # A client may not forge one.
    r = alice.post(
        "/api/v1/channels/session/messages/",
        {"title": "x", "status": "whiteboard.written"},
        format="json",
    )
    assert error_code(r) == "STATUS_RESERVED"


def test_the_value_keeps_its_keys_order(session):
    alice, _, _ = session
    put(alice, "k", {"z": 1, "a": {"y": 2, "b": 3}})
    assert list(alice.get(f"{BASE}/k/").json()["value"]) == ["z", "a"]
    assert list(alice.get(f"{BASE}/k/").json()["value"]["a"]) == ["y", "b"]


@pytest.mark.parametrize("key", ["-x", ".x", "_x", "a b", "ü", "x" * 129, "a:b", "a%5Cb", "%00"])
def test_bad_keys_are_refused(session, key):
    alice, _, _ = session
    for r in (
        put(alice, key, 1),
        alice.get(f"{BASE}/{key}/"),
        alice.delete(f"{BASE}/{key}/"),
        alice.get(f"{BASE}/", {"after": key}),
    ):
        assert error_code(r) == "INVALID_KEY"
    assert not WhiteboardEntry.objects.exists()
    assert not Message.objects.exists()


def test_value_size_is_bounded(session):
    alice, _, _ = session
    # "…" is three bytes in UTF-8: the limit counts bytes, not characters.
    fits = "…" * ((VALUE_MAX_BYTES - 2) // 3)
    put(alice, "big", fits, status=201)
    r = put(alice, "big", fits + "…")
    assert r.status_code == 413
    assert error_code(r) == "FIELD_TOO_LARGE"
    assert alice.get(f"{BASE}/big/").json()["value"] == fits


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({}, "MISSING_FIELD"),
        ({"value": 1, "updated_by": "bob"}, "UNKNOWN_FIELD"),
        (b'{"value": {"a\\ud800": 1}}', "INVALID_TEXT"),
        (b'{"value": "nul\\u0000"}', "INVALID_TEXT"),
        (b'{"value": 1, "value": 2}', "INVALID_JSON"),
        (b'{"value": NaN}', "INVALID_TYPE"),
        (b"[1]", "INVALID_JSON"),
    ],
)
def test_hostile_bodies_are_refused(session, body, code):
    alice, _, _ = session
    if isinstance(body, bytes):
        r = alice.generic("PUT", f"{BASE}/k/", body, content_type="application/json")
    else:
        r = alice.put(f"{BASE}/k/", body, format="json")
    assert error_code(r) == code
    assert not WhiteboardEntry.objects.exists()


def test_deep_values_are_refused(session):
    alice, _, _ = session
    deep = 1
    for _ in range(70):
        deep = [deep]
    assert error_code(alice.put(f"{BASE}/k/", {"value": deep}, format="json")) == "JSON_TOO_DEEP"


def test_a_channel_holds_at_most_so_many_keys(session):
    alice, _, _ = session
    for n in range(KEYS_MAX):
        put(alice, f"k{n}", n, status=201)
    r = put(alice, "one-more", 1)
    assert error_code(r) == "WHITEBOARD_FULL"
    put(alice, "k0", "replacing is fine", status=200)
    assert WhiteboardEntry.objects.count() == KEYS_MAX
    assert not Message.objects.filter(title="whiteboard.written one-more").exists()


def test_a_channel_holds_at_most_so_many_bytes(session):
    alice, _, _ = session
    value = "x" * (VALUE_MAX_BYTES - 2)  # the quotes make it the maximum
    count = BYTES_MAX // VALUE_MAX_BYTES
    for n in range(count):
        put(alice, f"k{n}", value, status=201)
    assert error_code(put(alice, "more", 1)) == "WHITEBOARD_FULL"
    put(alice, "k0", value, status=200)  # the same size again: within the total


def test_members_only_channels_hide_their_whiteboard(alice, bob, carol):
    alice.post(
        "/api/v1/channels/",
        {"name": "private", "members": ["alice", "bob"], "visibility": "members"},
        format="json",
    )
    base = "/api/v1/channels/private/whiteboard"
    assert alice.put(f"{base}/k/", {"value": 1}, format="json").status_code == 201
    for r in (
        carol.get(f"{base}/"),
        carol.get(f"{base}/k/"),
        carol.put(f"{base}/k/", {"value": 2}, format="json"),
        carol.delete(f"{base}/k/"),
        carol.get("/api/v1/channels/private/state/"),
    ):
        assert error_code(r) == "CHANNEL_NOT_FOUND"
    assert bob.get(f"{base}/k/").json()["value"] == 1


def test_paging_the_list(session):
    alice, _, _ = session
    for key in ("a", "b", "c"):
        put(alice, key, key)
    page = alice.get(f"{BASE}/", {"limit": 2}).json()
    assert ([e["key"] for e in page["entries"]], page["more"], page["next"]) == (
        ["a", "b"],
        True,
        "b",
    )
    page = alice.get(f"{BASE}/", {"limit": 2, "after": "b"}).json()
    assert ([e["key"] for e in page["entries"]], page["more"]) == (["c"], False)


def test_the_paths_without_their_trailing_slash(session):
    alice, _, _ = session
    assert alice.put(f"{BASE}/goal", {"value": 1}, format="json").status_code == 201
    assert alice.get(f"{BASE}/goal").json()["value"] == 1
    assert [e["key"] for e in alice.get(BASE).json()["entries"]] == ["goal"]
    assert alice.delete(f"{BASE}/goal").status_code == 200


def test_the_state_summary_shows_the_whiteboard_in_json_only(session):
    alice, _, _ = session
    before_md = alice.get("/api/v1/channels/session/state/", {"format": "md"}).content
    assert "whiteboard" not in alice.get("/api/v1/channels/session/state/").json()
    put(alice, "goal", {"z": 1, "a": 2})
    state = alice.get("/api/v1/channels/session/state/").json()
    [entry] = state["whiteboard"]
    assert (entry["key"], entry["value"], entry["updated_by"]) == (
        "goal",
        {"z": 1, "a": 2},
        "alice",
    )
    assert list(entry["value"]) == ["z", "a"]  # the value as written, not key-sorted
    after_md = alice.get("/api/v1/channels/session/state/", {"format": "md"}).content
    # The reference's state.md knows no whiteboard: only the audit message's seq shows.
    assert after_md.replace(b"1", b"0") == before_md.replace(b"1", b"0")
