"""GET /v1/monitor: every inbox fanned in, the opaque versioned cursor (the monitor's sequence;
version 1, a vector, refused with where to resume), tails, and the admin token
(AGENT_CHAT_ADMIN_TOKEN) kept apart from the agents' tokens both ways."""

from __future__ import annotations

import base64
import json

import pytest

from agentchat.core.identity import services as identity
from channels_app.envelopes import MonitorCursor, monitor_cursor_decode
from tests.errors import error_code

ADMIN = "adm_" + "Q" * 40


@pytest.fixture
def admin(api_client, settings):
    settings.AGENTCHAT_ADMIN_TOKEN = ADMIN
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {ADMIN}")
    return api_client


def send(client, frm, to, text):
    r = client.post(f"/v1/agents/{frm}/messages", {"to": to, "text": text}, format="json")
    assert r.status_code == 201, r.content
    return r.json()


def monitor(client, query="", **headers):
    return client.get(f"/v1/monitor{query}", **headers)


def decoded(cursor):
    return json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))


def test_without_an_admin_token_the_monitor_is_disabled(api_client, alice, settings):
    settings.AGENTCHAT_ADMIN_TOKEN = ""
    for client in (api_client, alice):
        r = monitor(client)
        assert (r.status_code, error_code(r)) == (404, "MONITOR_DISABLED")
    api_client.credentials(HTTP_AUTHORIZATION="Bearer anything-at-all-here")
    assert error_code(monitor(api_client)) == "MONITOR_DISABLED"


def test_the_monitor_takes_the_admin_token_only(admin, alice, api_for, settings):
    r = monitor(alice)
    assert (r.status_code, error_code(r)) == (403, "ADMIN_TOKEN_REQUIRED")
    anonymous = api_for("nobody")
    anonymous.credentials()
    r = monitor(anonymous)
    assert (r.status_code, error_code(r)) == (401, "AUTH_REQUIRED")
    for near in (ADMIN[:-1], ADMIN + "x", ADMIN[:-1] + "R", ADMIN.lower()):
        anonymous.credentials(HTTP_AUTHORIZATION=f"Bearer {near}")
        assert error_code(monitor(anonymous)) == "ADMIN_TOKEN_REQUIRED"
    assert monitor(admin).status_code == 200


def test_tokens_are_compared_in_constant_time(admin, monkeypatch):
    compared = []
    real = identity.hmac.compare_digest

    def recording(a, b):
        compared.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(identity.hmac, "compare_digest", recording)
    assert monitor(admin).status_code == 200
    # digests of equal length, whatever the token's length
    assert compared and all(a == b == 64 for a, b in compared)


def test_the_monitor_fans_in_every_inbox_in_presentation_order(admin, alice, bob, carol):
    sent = [
        send(alice, "alice", "bob", "a1"),
        send(carol, "carol", "alice", "c1"),
        send(alice, "alice", "bob", "a2"),
        send(bob, "bob", "carol", "b1"),
    ]
    page = monitor(admin).json()
    assert set(page) == {"deliveries", "next_cursor", "tails"}
    assert page["tails"] == {"alice": 1, "bob": 2, "carol": 1}
    rows = page["deliveries"]
    assert [d["envelope"] for d in rows] == sent  # one clock: the order they were sent
    assert [(d["inbox"], d["seq_num"]) for d in rows] == [
        ("bob", 0),
        ("alice", 0),
        ("bob", 1),
        ("carol", 0),
    ]
    keys = [(d["timestamp"], d["inbox"], d["seq_num"]) for d in rows]
    assert keys == sorted(keys)
    # each delivery carries the cursor after it (its monitor number); the page's next cursor
    # is the last one's
    assert [decoded(d["cursor"]) for d in rows] == [{"v": 2, "s": n} for n in (1, 2, 3, 4)]
    assert page["next_cursor"] == rows[-1]["cursor"]


def test_resuming_at_next_cursor_yields_only_newer_deliveries(admin, alice, bob):
    send(alice, "alice", "bob", "old")
    cursor = monitor(admin).json()["next_cursor"]
    empty = monitor(admin, f"?cursor={cursor}").json()
    assert (empty["deliveries"], empty["next_cursor"]) == ([], cursor)
    new = send(bob, "bob", "alice", "new")
    page = monitor(admin, f"?cursor={cursor}").json()
    assert [d["envelope"] for d in page["deliveries"]] == [new]
    # as Last-Event-ID when the query has none; the query wins
    assert monitor(admin, HTTP_LAST_EVENT_ID=cursor).json() == page
    assert monitor(admin, f"?cursor={cursor}", HTTP_LAST_EVENT_ID="garbage").json() == page


def test_paging_by_one_gives_every_delivery_once(admin, alice, bob, carol):
    for i in range(4):
        send(alice, "alice", "bob", f"ab{i}")
        send(bob, "bob", "carol", f"bc{i}")
        send(carol, "carol", "alice", f"ca{i}")
    everything = monitor(admin).json()["deliveries"]
    seen = []
    cursor = None
    while True:
        page = monitor(admin, f"?limit=1&cursor={cursor}" if cursor else "?limit=1").json()
        if not page["deliveries"]:
            break
        seen += page["deliveries"]
        cursor = page["next_cursor"]
    assert seen == everything
    assert len(seen) == 12


def test_an_agent_registered_after_the_cursor_is_read_from_zero(admin, alice, api_for):
    send(alice, "alice", "alice", "note")
    cursor = monitor(admin).json()["next_cursor"]
    dave = api_for("dave")
    first = send(alice, "alice", "dave", "welcome")
    send(dave, "dave", "alice", "thanks")
    page = monitor(admin, f"?cursor={cursor}").json()
    assert [(d["inbox"], d["seq_num"]) for d in page["deliveries"]] == [("dave", 0), ("alice", 1)]
    assert page["deliveries"][0]["envelope"] == first
    assert page["tails"]["dave"] == 1


def test_the_documents_cursor_spelling_is_read_as_version_1():
    # from the HTTP v1 document's example page: a vector, what servers before the sequence made
    assert monitor_cursor_decode("eyJ2IjoxLCJwIjp7ImJvYiI6NDN9fQ") == MonitorCursor(
        0, legacy={"bob": 43}
    )
    assert MonitorCursor(43).encode() == _b64(b'{"v":2,"s":43}')
    assert monitor_cursor_decode(MonitorCursor(43).encode()) == MonitorCursor(43)


def legacy(positions):
    kept = {name: pos for name, pos in sorted(positions.items()) if pos}
    return _b64(json.dumps({"v": 1, "p": kept}, separators=(",", ":")).encode())


def test_a_version_1_cursor_is_refused_with_where_to_resume_losing_nothing(
    admin, alice, bob, carol
):
    sent = [
        send(alice, "alice", "bob", "a1"),  # bob 0
        send(carol, "carol", "alice", "c1"),  # alice 0
        send(alice, "alice", "bob", "a2"),  # bob 1
        send(bob, "bob", "carol", "b1"),  # carol 0
    ]
    # alice and bob read up to their first delivery: bob 1 and carol 0 are to come, exactly
    r = monitor(admin, "?cursor=" + legacy({"alice": 1, "bob": 1}))
    assert (r.status_code, error_code(r)) == (400, "MONITOR_CURSOR_RETIRED")
    resume = r.json()["error"]["detail"]["resume_cursor"]
    page = monitor(admin, f"?cursor={resume}").json()
    assert [d["envelope"] for d in page["deliveries"]] == [sent[2], sent[3]]
    # bob read ahead of alice: from the resume point alice 0 comes, and bob 1 again (its
    # inbox and seq_num tell it), nothing of carol's is lost
    r = monitor(admin, HTTP_LAST_EVENT_ID=legacy({"bob": 2}))
    resume = r.json()["error"]["detail"]["resume_cursor"]
    page = monitor(admin, f"?cursor={resume}").json()
    assert [d["envelope"] for d in page["deliveries"]] == sent[1:]
    # everything read: the monitor's tail, nothing to come; an agent gone is skipped
    r = monitor(admin, "?cursor=" + legacy({"alice": 1, "bob": 2, "carol": 1, "zed": 4}))
    resume = r.json()["error"]["detail"]["resume_cursor"]
    assert decoded(resume) == {"v": 2, "s": 4}
    assert monitor(admin, f"?cursor={resume}").json()["deliveries"] == []


def _b64(value):
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@pytest.mark.parametrize(
    "cursor",
    [
        "not base64!",
        "%%%",
        _b64(b"not json"),
        _b64(b"\xff\xfe"),
        _b64([1, 2]),
        _b64({"v": 2, "p": {}}),
        _b64({"v": 3, "s": 1}),
        _b64({"v": 2}),
        _b64({"v": 2, "s": -1}),
        _b64({"v": 2, "s": "1"}),
        _b64({"v": 2, "s": 1.0}),
        _b64({"v": 2, "s": True}),
        _b64({"v": 2, "s": 10**30}),
        _b64({"v": 2, "s": 1, "p": {}}),
        _b64(b'{"v": 2, "s": 0}'),
        _b64(b'{"s":0,"v":2}'),
        _b64(b'{"v":2,"s":00}'),
        "eyJ2IjoyLCJzIjowfQ==",
        _b64({"v": True, "p": {}}),
        _b64({"v": 1}),
        _b64({"v": 1, "p": {}, "x": 1}),
        _b64({"v": 1, "p": []}),
        _b64({"v": 1, "p": {"bob": -1}}),
        _b64({"v": 1, "p": {"bob": "1"}}),
        _b64({"v": 1, "p": {"bob": 1.0}}),
        _b64({"v": 1, "p": {"bob": True}}),
        _b64({"v": 1, "p": {"Bob/..": 1}}),
        _b64({"v": 1, "p": {"bob": 10**30}}),
        _b64(b"[" * 100_000),
        "A" * 12_289,
        # other spellings of a valid cursor: padding, spaces, a repeated key, order, a zero
        "eyJ2IjoxLCJwIjp7ImJvYiI6NDN9fQ==",
        _b64(b'{"v": 1, "p": {"bob": 43}}'),
        _b64(b'{"v":1,"p":{"bob":1,"bob":43}}'),
        _b64(b'{"p":{"bob":43},"v":1}'),
        _b64(b'{"v":1,"p":{"carol":2,"bob":43}}'),
        _b64(b'{"v":1,"p":{"bob":43,"carol":0}}'),
        _b64(b'{"v":1,"p":{"bob":043}}'),
        _b64(b'{"v":1,"p":{"bob":43}}\n'),
    ],
)
def test_a_malformed_monitor_cursor_is_invalid(admin, cursor):
    r = monitor(admin, HTTP_LAST_EVENT_ID=cursor)
    assert (r.status_code, error_code(r)) == (400, "INVALID_CURSOR")


def test_a_cursor_beyond_the_monitors_tail_is_invalid(admin, alice, bob):
    send(alice, "alice", "bob", "one")
    assert monitor(admin, "?cursor=" + MonitorCursor(1).encode()).json()["deliveries"] == []
    r = monitor(admin, "?cursor=" + MonitorCursor(2).encode())
    assert (r.status_code, error_code(r)) == (400, "INVALID_CURSOR")


def test_the_monitor_page_keeps_the_byte_budget(admin, alice, bob, settings):
    for i in range(5):
        send(alice, "alice", "bob", str(i) * 3000)
    settings.AGENTCHAT_READ_MAX_BYTES = 7000
    page = monitor(admin).json()
    assert 1 <= len(page["deliveries"]) <= 2
    assert page["next_cursor"] == page["deliveries"][-1]["cursor"]


@pytest.mark.parametrize("bad", ["0", "1001", "x"])
def test_monitor_limit_is_1_to_1000(admin, bad):
    assert error_code(monitor(admin, f"?limit={bad}")) == "INVALID_VALUE"
    assert error_code(monitor(admin, f"?follow=false&limit={bad}")) == "INVALID_VALUE"


def test_the_live_endpoints_refuse_the_admin_token_too(admin, alice):
    alice.post("/api/v1/channels/", {"name": "review"}, format="json")
    r = admin.get("/api/v1/channels/review/wait/?timeout=0")
    assert (r.status_code, error_code(r)) == (403, "ADMIN_TOKEN_NOT_ALLOWED")
