"""Events and presence over REST: ``POST|GET channels/<name>/events/`` and
``GET channels/<name>/presence/``."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest

from channels_app import services
from channels_app.models import Channel, Message, Presence
from channels_app.selectors import channel_get
from tests.errors import error_code

pytestmark = pytest.mark.django_db

TS_SECONDS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00\Z")


@pytest.fixture
def room(alice):
    r = alice.post("/api/v1/channels/", {"name": "room"}, format="json")
    assert r.status_code == 201, r.content
    return "room"


def post_event(client, channel, body, *, status=201):
    r = client.post(f"/api/v1/channels/{channel}/events/", body, format="json")
    assert r.status_code == status, r.content
    return r.json()


def read_events(client, channel, **query):
    r = client.get(f"/api/v1/channels/{channel}/events/", query)
    assert r.status_code == 200, r.content
    return r.json()


def error(client, channel, body):
    r = client.post(f"/api/v1/channels/{channel}/events/", body, format="json")
    assert r.status_code == 400, r.content
    return error_code(r), r.json()["error"]["message"]


def test_a_status_event_is_a_broadcast_message_with_the_references_body(alice, room):
    posted = post_event(alice, room, {"type": "status", "harness": "cursor", "status": "busy"})
    event = posted["event"]
    assert TS_SECONDS.match(event["ts"])
    assert event == {
        "schema_version": 1,
        "event": "status",
        "agent": "alice",
        "harness": "cursor",
        "ts": event["ts"],
        "status": "busy",
    }
    message = Message.objects.get(seq=posted["seq"])
    assert (message.id, message.sender, message.to) == (posted["id"], "alice", [])
    assert (message.kind, message.status, message.title) == (
        "event",
        "event.status",
        "event:status",
    )
    assert message.body == (
        '{"agent":"alice","event":"status","harness":"cursor","schema_version":1,'
        f'"status":"busy","ts":"{event["ts"]}"}}'
    )
    # The message carries the instant its event names (the folder spells both to the second).
    assert message.ts.replace(microsecond=0) == datetime.fromisoformat(event["ts"])
    # Peek shows it like any message.
    peek = alice.get(f"/api/v1/channels/{room}/messages/").json()["messages"]
    assert [(m["seq"], m["kind"], m["title"]) for m in peek] == [
        (posted["seq"], "event", "event:status")
    ]


def test_a_capability_event_defaults_to_all_eight_primitives(alice, room):
    event = post_event(alice, room, {"type": "capability", "harness": "omp"})["event"]
    assert event["primitives"] == [
        "messages",
        "cursors",
        "wait",
        "tasks",
        "dependencies",
        "leases",
        "path_locks",
        "state_summary",
    ]
    event = post_event(
        alice, room, {"type": "capability", "harness": "omp", "primitives": ["wait", "leases"]}
    )["event"]
    assert event["primitives"] == ["wait", "leases"]
    detail = post_event(
        alice, room, {"type": "status", "harness": "h", "status": "idle", "detail": "café ☕"}
    )
    assert json.loads(Message.objects.get(seq=detail["seq"]).body)["detail"] == "café ☕"
    assert "café ☕" in Message.objects.get(seq=detail["seq"]).body  # not \\u-escaped


def st(**fields):
    """A status request; ``...`` drops a field."""
    body = {"type": "status", "harness": "h", "status": "busy", **fields}
    return {name: value for name, value in body.items() if value is not ...}


def cap(**fields):
    """A capability request; ``...`` drops a field."""
    body = {"type": "capability", "harness": "h", **fields}
    return {name: value for name, value in body.items() if value is not ...}


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        (st(type=...), "EVENT_INVALID_TYPE", None),
        (st(type="heartbeat"), "EVENT_INVALID_TYPE", None),
        (st(type=True), "EVENT_INVALID_TYPE", None),
        (st(agent="x"), "EVENT_UNKNOWN_FIELD", "agent"),
        (st(ts="x", schema_version=2), "EVENT_UNKNOWN_FIELD", "schema_version, ts"),
        (st(primitives=["wait"]), "EVENT_UNKNOWN_FIELD", "primitives"),
        (cap(status="busy"), "EVENT_UNKNOWN_FIELD", "status"),
        (st(harness=...), "EVENT_REQUIRED_FIELD_MISSING", "harness"),
        (st(harness=None), "EVENT_REQUIRED_FIELD_MISSING", "harness"),
        (st(harness=""), "EVENT_INVALID_TEXT", None),
        (st(harness="a/b"), "EVENT_INVALID_TEXT", None),
        (st(harness=".hidden"), "EVENT_INVALID_TEXT", None),
        (st(harness="h\x1b[2J"), "EVENT_INVALID_TEXT", None),
        (st(harness="h\u0085"), "EVENT_INVALID_TEXT", None),
        (st(harness=5), "EVENT_INVALID_TEXT", None),
        (st(harness=["h"]), "EVENT_INVALID_TEXT", None),
        (cap(primitives=[]), "EVENT_INVALID_PRIMITIVES", None),
        (cap(primitives="wait"), "EVENT_INVALID_PRIMITIVES", None),
        (cap(primitives=[True]), "EVENT_INVALID_PRIMITIVES", None),
        (cap(primitives=[1]), "EVENT_INVALID_PRIMITIVES", None),
        (cap(primitives=["wait", "wait"]), "EVENT_DUPLICATE_PRIMITIVE", None),
        (cap(primitives=["wait", "mcp"]), "EVENT_UNKNOWN_PRIMITIVE", "mcp"),
        (st(status=...), "EVENT_INVALID_STATUS", "None"),
        (st(status="online"), "EVENT_INVALID_STATUS", "online"),
        (st(status=1), "EVENT_INVALID_STATUS", "1"),
        (st(detail="a\nb"), "EVENT_INVALID_TEXT", None),
        (st(detail=5), "EVENT_INVALID_TEXT", None),
        (st(detail=True), "EVENT_INVALID_TEXT", None),
        # One-line texts: no invisible or direction-changing character (the agents page shows
        # them).
        (st(harness="evil\u202eharness"), "INVISIBLE_CHARACTER", None),
        (st(harness="h\u200d"), "INVISIBLE_CHARACTER", None),
        (st(detail="work \u202edetail"), "INVISIBLE_CHARACTER", None),
        (st(detail="\ufeffdone"), "INVISIBLE_CHARACTER", None),
        (st(detail="\u3164"), "INVISIBLE_CHARACTER", None),
        (cap(harness="co\u2066dex"), "INVISIBLE_CHARACTER", None),
        # The order: the type first, then unknown fields, then harness, then the rest.
        (st(type="nope", harness="", extra=1), "EVENT_INVALID_TYPE", None),
        (st(harness="", extra=1, status="x"), "EVENT_UNKNOWN_FIELD", "extra"),
        (st(harness="", status="x"), "EVENT_INVALID_TEXT", None),
    ],
)
def test_each_violation_answers_its_event_code_and_posts_nothing(alice, room, body, code, message):
    got = error(alice, room, body)
    assert got[0] == code
    if message is not None:
        assert got[1] == message
    assert not Message.objects.exists()
    assert Channel.objects.get(name=room).last_seq == 0


def test_hostile_bodies(alice, room):
    base = {"type": "capability", "harness": "h"}
    # Huge lists, of every shape, answer the reference's code at once.
    assert error(alice, room, {**base, "primitives": ["wait"] * 60_000})[0] == (
        "EVENT_DUPLICATE_PRIMITIVE"
    )
    assert error(alice, room, {**base, "primitives": [0, "x"] * 30_000})[0] == (
        "EVENT_INVALID_PRIMITIVES"
    )
    many = {**base, **{f"k{i}": 1 for i in range(20_000)}}
    code, message = error(alice, room, many)
    assert code == "EVENT_UNKNOWN_FIELD" and message.startswith("k0, k1, k10, ")
    # A lone surrogate never reaches the view: the JSON layer refuses it for every endpoint.
    raw = b'{"type": "status", "harness": "h\\ud800", "status": "busy"}'
    r = alice.post(f"/api/v1/channels/{room}/events/", raw, content_type="application/json")
    assert (r.status_code, r.json()["error"]["code"]) == (400, "INVALID_TEXT")
    # A body that is no object.
    r = alice.post(f"/api/v1/channels/{room}/events/", [base], format="json")
    assert (r.status_code, r.json()["error"]["code"]) == (400, "INVALID_JSON")
    # A harness too big for a message body.
    r = alice.post(
        f"/api/v1/channels/{room}/events/",
        {"type": "status", "harness": "h" * 600_000, "status": "busy"},
        format="json",
    )
    assert (r.status_code, r.json()["error"]["code"]) == (413, "FIELD_TOO_LARGE")
    assert not Message.objects.exists()


def test_ordinary_messages_cannot_wear_an_event_status(alice, room):
    # The reference's `event read` parses every message whose status starts with "event." and
    # fails on the first that is no event: such a post would break it for the whole channel.
    r = alice.post(
        f"/api/v1/channels/{room}/messages/",
        {"title": "hi", "status": "event.status", "body": "not an event"},
        format="json",
    )
    assert (r.status_code, r.json()["error"]["code"]) == (400, "INVALID_VALUE")
    assert r.json()["error"]["detail"] == {"field": "status"}
    r = alice.post(
        f"/api/v1/channels/{room}/messages/",
        {"title": "hi", "status": "eventually"},
        format="json",
    )
    assert r.status_code == 201


def test_reading_filters_by_type_and_ignores_ordinary_messages(alice, bob, room):
    alice.post(f"/api/v1/channels/{room}/messages/", {"title": "hello"}, format="json")
    cap = post_event(alice, room, {"type": "capability", "harness": "omp"})
    busy = post_event(bob, room, {"type": "status", "harness": "codex", "status": "busy"})
    alice.post(f"/api/v1/channels/{room}/messages/", {"title": "again"}, format="json")
    idle = post_event(bob, room, {"type": "status", "harness": "codex", "status": "idle"})

    every = read_events(bob, room)
    assert [item["seq"] for item in every["events"]] == [cap["seq"], busy["seq"], idle["seq"]]
    assert every["events"][0] == cap
    assert every["more"] is False
    statuses = read_events(bob, room, type="status")["events"]
    assert [item["event"]["status"] for item in statuses] == ["busy", "idle"]
    capabilities = read_events(bob, room, type="capability")["events"]
    assert [item["seq"] for item in capabilities] == [cap["seq"]]

    # Paged like peek: the last `limit` without `after`, the first `limit` after it.
    last = read_events(bob, room, limit=2)
    assert ([item["seq"] for item in last["events"]], last["more"]) == (
        [busy["seq"], idle["seq"]],
        True,
    )
    after = read_events(bob, room, after=cap["seq"], limit=1)
    assert ([item["seq"] for item in after["events"]], after["more"]) == ([busy["seq"]], True)
    rest = read_events(bob, room, after=busy["seq"], limit=5)
    assert ([item["seq"] for item in rest["events"]], rest["more"]) == ([idle["seq"]], False)
    # Reading moves no cursor.
    assert bob.get(f"/api/v1/channels/{room}/").json()["cursor"] == 0


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ({"type": "heartbeat"}, "EVENT_INVALID_TYPE"),
        ({"type": ""}, "EVENT_INVALID_TYPE"),
        ({"after": "-1"}, "INVALID_SEQ"),
        ({"after": "²"}, "INVALID_SEQ"),
        ({"limit": "0"}, "INVALID_VALUE"),
        ({"limit": "1001"}, "INVALID_VALUE"),
    ],
)
def test_bad_read_parameters(alice, room, query, code):
    r = alice.get(f"/api/v1/channels/{room}/events/", query)
    assert (r.status_code, r.json()["error"]["code"]) == (400, code)


def test_a_stored_event_that_does_not_parse_is_named(alice, room):
    channel = channel_get(room, viewer="alice")
    message, _ = services.message_post(
        channel=channel,
        sender="alice",
        title="event:status",
        status="event.status",
        kind=Message.Kind.EVENT,
        body="{broken",
    )
    r = alice.get(f"/api/v1/channels/{room}/events/")
    assert (r.status_code, r.json()["error"]["code"]) == (400, "EVENT_MALFORMED_BODY")
    assert r.json()["error"]["message"] == f"#{message.seq}"


def test_presence_is_the_latest_status_event_and_the_last_activity(alice, bob, room):
    assert alice.get(f"/api/v1/channels/{room}/presence/").json() == {"presence": []}
    post_event(alice, room, {"type": "capability", "harness": "omp", "primitives": ["wait"]})
    first = post_event(alice, room, st(harness="omp", detail="T-1"))
    busy = post_event(alice, room, {"type": "status", "harness": "omp", "status": "idle"})
    said = alice.post(f"/api/v1/channels/{room}/messages/", {"title": "hi"}, format="json").json()
    bob.post(f"/api/v1/channels/{room}/read/", {}, format="json")

    presence = {
        p["agent"]: p for p in bob.get(f"/api/v1/channels/{room}/presence/").json()["presence"]
    }
    assert list(presence) == ["alice", "bob"]
    a = presence["alice"]
    assert first["seq"] < busy["seq"]
    assert (a["status"], a["detail"], a["status_ts"], a["status_seq"]) == (
        "idle",
        None,  # the latest status event had no detail
        busy["event"]["ts"],
        busy["seq"],
    )
    assert (a["harness"], a["primitives"], a["capability_seq"]) == ("omp", ["wait"], 1)
    assert a["last_seq"] == said["seq"]  # the last thing it sent, event or not
    # Presence keeps the microseconds; the message's ts is spelled to the second, as the folder.
    sent = Message.objects.get(channel__name=room, seq=said["seq"]).ts
    assert a["last_sent_at"] == sent.astimezone(UTC).isoformat(timespec="microseconds")
    assert said["ts"] == sent.astimezone(UTC).isoformat(timespec="seconds")
    assert a["cursor"] is None and a["last_read_at"] is None
    assert a["last_active_at"] == a["last_sent_at"]
    b = presence["bob"]
    assert (b["status"], b["last_seq"], b["last_sent_at"], b["cursor"]) == (None, None, None, 4)
    assert b["last_read_at"] is not None and b["last_active_at"] == b["last_read_at"]
    # An audit message is activity too (task and lock mutations post through message_post).
    assert Presence.objects.get(agent="alice").last_seq == said["seq"]


def test_presence_reads_no_messages(alice, room, django_assert_max_num_queries):
    for index in range(30):
        alice.post(f"/api/v1/channels/{room}/messages/", {"title": f"m{index}"}, format="json")
    post_event(alice, room, {"type": "status", "harness": "h", "status": "ready"})
    channel = channel_get(room, viewer="alice")
    from channels_app.selectors import presence_list

    with django_assert_max_num_queries(3):  # the access re-check, presence rows, cursors
        items = presence_list(channel=channel, viewer="alice")
    assert [(item.agent, item.presence.status) for item in items] == [("alice", "ready")]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("get", "events/", None),
        ("get", "events/?type=status", None),
        ("post", "events/", {"type": "status", "harness": "h", "status": "busy"}),
        ("get", "presence/", None),
    ],
)
def test_a_members_only_channel_is_hidden_from_non_members(api_for, method, path, body):
    alice, bob = api_for("alice"), api_for("bob")
    r = alice.post("/api/v1/channels/", {"name": "secret", "visibility": "members"}, format="json")
    assert r.status_code == 201
    post_event(alice, "secret", {"type": "status", "harness": "h", "status": "busy"})
    before = Message.objects.count()
    if method == "get":
        hidden, missing = (
            bob.get(f"/api/v1/channels/secret/{path}"),
            bob.get(f"/api/v1/channels/nothing/{path}"),
        )
    else:
        hidden = bob.post(f"/api/v1/channels/secret/{path}", body, format="json")
        missing = bob.post(f"/api/v1/channels/nothing/{path}", body, format="json")
    assert hidden.status_code == 404
    assert hidden.json()["error"]["code"] == "CHANNEL_NOT_FOUND"
    # The same answer as for a channel that does not exist, the name aside.
    assert hidden.json()["error"]["detail"] == {"name": "secret"}
    assert missing.json()["error"]["code"] == "CHANNEL_NOT_FOUND"
    assert Message.objects.count() == before
    # The member sees all three.
    assert alice.get(f"/api/v1/channels/secret/{path}").status_code == 200


def test_the_schema_documents_the_three_operations(api_client):
    document = api_client.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()
    events = document["paths"]["/api/v1/channels/{name}/events/"]
    assert set(events) >= {"get", "post"}
    post_codes = events["post"]["x-error-codes"]
    assert {"EVENT_INVALID_TYPE", "EVENT_UNKNOWN_PRIMITIVE", "CHANNEL_NOT_FOUND"} <= set(post_codes)
    assert "EVENT_INVALID_TYPE" in events["get"]["x-error-codes"]
    request = events["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert [branch["title"] for branch in request["oneOf"]] == [
        "CapabilityEventInput",
        "StatusEventInput",
    ]
    assert "get" in document["paths"]["/api/v1/channels/{name}/presence/"]


def test_the_event_body_is_required_in_the_schema_and_by_the_server(api_client, alice, room):
    document = api_client.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()
    post = document["paths"]["/api/v1/channels/{name}/events/"]["post"]
    assert post["requestBody"]["required"] is True  # schemathesis sent no body before
    r = alice.post(f"/api/v1/channels/{room}/events/")
    assert (r.status_code, r.json()["error"]["code"]) == (400, "EVENT_INVALID_TYPE")


@pytest.mark.parametrize(
    "body",
    [{"type": "nope"}, {"type": "status", "harness": "h", "status": "busy", "from": "x"}, {}],
)
def test_a_hidden_or_missing_channel_wins_over_a_bad_event(api_for, body):
    alice, bob = api_for("alice"), api_for("bob")
    r = alice.post("/api/v1/channels/", {"name": "secret", "visibility": "members"}, format="json")
    assert r.status_code == 201
    before = Message.objects.count()
    for name in ("secret", "nothing"):
        r = bob.post(f"/api/v1/channels/{name}/events/", body, format="json")
        assert (r.status_code, error_code(r)) == (404, "CHANNEL_NOT_FOUND")
    assert Message.objects.count() == before
