"""Members-only channels (DESIGN §5 "Visibility"), over REST and in the services.

To a non-member a members-only channel does not exist: every surface answers exactly what it
answers for a channel that does not exist, and nothing changes. Members work as before. Every
change of topic, members or visibility is audited in its own transaction.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection

from agentchat.core.rules.errors import AppError
from channels_app import services
from channels_app.models import Channel, Cursor, MarkerClaim, Message
from channels_app.selectors import channel_get, channels_visible_to
from locks_app.models import PathLock
from tasks_app.models import Lease, Task
from tests.errors import error_code

pytestmark = pytest.mark.django_db


def create(client, name, **body):
    r = client.post("/api/v1/channels/", {"name": name, **body}, format="json")
    assert r.status_code == 201, r.content
    return r.json()


def patch(client, name, **body):
    return client.patch(f"/api/v1/channels/{name}/", body, format="json")


def post(client, name, **body):
    r = client.post(f"/api/v1/channels/{name}/messages/", body, format="json")
    assert r.status_code == 201, r.content
    return r.json()


def snapshot() -> dict[str, Any]:
    """Everything a request could have changed."""
    return {
        "channels": list(Channel.objects.order_by("pk").values()),
        "messages": list(Message.objects.order_by("pk").values()),
        "cursors": list(Cursor.objects.order_by("pk").values("agent_id", "channel_id", "seq")),
        "claims": list(MarkerClaim.objects.order_by("pk").values("marker", "owner")),
        "tasks": list(Task.objects.order_by("pk").values()),
        "leases": list(Lease.objects.order_by("pk").values()),
        "locks": list(PathLock.objects.order_by("pk").values()),
    }


@pytest.fixture
def secret(alice, bob):
    """A members-only channel of alice and bob with a message, a task leased by bob and a lock
    of bob's: something behind every surface."""
    create(alice, "secret", members=["alice", "bob"], visibility="members", topic="hidden")
    post(alice, "secret", title="for members")
    r = bob.post("/api/v1/channels/secret/tasks/", {"id": "T-1", "title": "task"}, format="json")
    assert r.status_code == 201, r.content
    assert (
        bob.post("/api/v1/channels/secret/tasks/T-1/claim/", {}, format="json").status_code == 200
    )
    r = bob.post("/api/v1/channels/secret/locks/", {"paths": ["src/a.py"]}, format="json")
    assert r.status_code == 201, r.content
    return {"lock_id": r.json()["lock_id"]}


def surfaces(lock_id: str) -> list[tuple[str, str, Any]]:
    """(method, path under /api/v1/channels/{ch}/, JSON body) of every REST operation that
    names a channel."""
    task = "tasks/T-1/"
    lock = f"locks/{lock_id}/"
    return [
        ("GET", "", None),
        ("PATCH", "", {"members": ["carol"]}),
        ("PATCH", "", {"visibility": "open"}),
        ("GET", "messages/", None),
        ("GET", "messages/?after=0&limit=5", None),
        ("POST", "messages/", {"title": "intruder"}),
        ("POST", "read/", None),
        ("POST", "ack/", {"seq": 1}),
        ("POST", "ack/", None),
        ("POST", "claims/m1/", None),
        ("GET", "tasks/", None),
        ("POST", "tasks/", {"id": "T-2", "title": "intruder"}),
        ("GET", task, None),
        ("PATCH", task, {"title": "intruder"}),
        ("POST", task + "claim/", {}),
        ("POST", task + "renew/", {}),
        ("POST", task + "done/", {}),
        ("POST", task + "block/", {}),
        ("POST", task + "release/", {}),
        ("POST", task + "recover/", {"reason": "intruder"}),
        ("POST", "tasks/recover-pending/", {}),
        ("GET", "locks/", None),
        ("POST", "locks/", {"paths": ["src/b.py"]}),
        ("POST", "locks/check/", {"paths": ["src"]}),
        ("DELETE", "locks/?path=src/a.py", None),
        ("GET", lock, None),
        ("DELETE", lock, None),
        ("POST", lock + "recover/", {"reason": "intruder"}),
    ]


def call(client, method: str, channel: str, path: str, body: Any):
    url = f"/api/v1/channels/{channel}/{path}"
    if body is None:
        return client.generic(method, url)
    return client.generic(method, url, json.dumps(body), content_type="application/json")


def test_a_non_member_gets_exactly_the_answer_of_a_missing_channel_and_changes_nothing(
    carol, secret
):
    before = snapshot()
    for method, path, body in surfaces(secret["lock_id"]):
        hidden = call(carol, method, "secret", path, body)
        missing = call(carol, method, "ghost", path, body)
        assert hidden.status_code == 404, (method, path, hidden.content)
        assert error_code(hidden) == "CHANNEL_NOT_FOUND"
        # The same bytes, but for the name the caller gave.
        assert hidden.content == missing.content.replace(b"ghost", b"secret"), (method, path)
        assert hidden["Content-Type"] == missing["Content-Type"]
    assert snapshot() == before


def test_members_work_as_before(alice, bob, secret):
    expected = {
        ("GET", ""): 200,
        ("PATCH", ""): 200,
        ("GET", "messages/"): 200,
        ("POST", "messages/"): 201,
        ("POST", "read/"): 200,
        ("POST", "ack/"): 200,
        ("POST", "claims/m1/"): 201,
        ("GET", "tasks/"): 200,
        ("POST", "tasks/"): 201,
        ("GET", "tasks/T-1/"): 200,
        ("POST", "tasks/T-1/renew/"): 200,
        ("GET", "locks/"): 200,
        ("POST", "locks/"): 201,
        ("POST", "locks/check/"): 200,
    }
    for method, path, body in surfaces(secret["lock_id"]):
        if (method, path) not in expected or body == {"members": ["carol"]}:
            continue
        if body == {"visibility": "open"}:
            body = {"topic": "still hidden"}
        r = call(bob, method, "secret", path, body)
        assert r.status_code == expected[(method, path)], (method, path, r.content)
    shown = bob.get("/api/v1/channels/secret/").json()
    assert shown["visibility"] == "members"
    assert shown["topic"] == "still hidden"
    # alice reads what bob wrote
    titles = [m["title"] for m in alice.post("/api/v1/channels/secret/read/").json()["messages"]]
    assert "intruder" in titles  # bob's post (its title comes from the shared surface list)


def test_list_and_unread_counts_show_only_visible_channels(alice, bob, carol, secret):
    create(alice, "lobby")
    post(alice, "lobby", title="hello")
    assert [c["name"] for c in carol.get("/api/v1/channels/").json()["channels"]] == ["lobby"]
    listed = {c["name"]: c for c in bob.get("/api/v1/channels/").json()["channels"]}
    assert sorted(listed) == ["lobby", "secret"]
    # alice's message; the task and lock audits are bob's own, so not unread to him
    assert listed["secret"]["unread"] == 1
    assert listed["secret"]["visibility"] == "members"
    assert listed["lobby"]["visibility"] == "open"
    assert listed["lobby"]["unread"] == 1


def test_visibility_is_in_every_representation_and_defaults_to_open(alice):
    created = create(alice, "plain")
    assert created["visibility"] == "open"
    assert alice.get("/api/v1/channels/plain/").json()["visibility"] == "open"
    assert alice.get("/api/v1/channels/").json()["channels"][0]["visibility"] == "open"
    r = patch(alice, "plain", visibility="members")
    assert r.status_code == 200
    assert r.json()["visibility"] == "members"


def test_the_schema_documents_visibility_and_the_bounds(api_client):
    r = api_client.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    schemas = json.loads(r.content)["components"]["schemas"]
    assert schemas["VisibilityEnum"]["enum"] == ["open", "members"]
    for name in ("ChannelCreateInputRequest", "PatchedChannelUpdateInputRequest"):
        fields = schemas[name]["properties"]
        assert fields["visibility"]["allOf"] == [{"$ref": "#/components/schemas/VisibilityEnum"}]
        assert fields["members"]["maxItems"] == services.MEMBERS_MAX
        assert fields["topic"]["maxLength"] == services.TOPIC_MAX
    assert schemas["ChannelCreateInputRequest"]["properties"]["visibility"]["default"] == "open"
    output = schemas["ChannelOutput"]
    assert output["properties"]["visibility"] == {"$ref": "#/components/schemas/VisibilityEnum"}
    assert "visibility" in output["required"]


@pytest.mark.parametrize(
    ("value", "code"),
    [("private", "INVALID_VALUE"), ("Members", "INVALID_VALUE"), ("", "INVALID_VALUE"),
     (1, "INVALID_TYPE"), (None, "INVALID_TYPE"), (["members"], "INVALID_TYPE"),
     ("members\n", "INVALID_VALUE")],
)  # fmt: skip
def test_bad_visibility_is_refused_on_create_and_update(alice, value, code):
    r = alice.post("/api/v1/channels/", {"name": "x", "visibility": value}, format="json")
    assert (r.status_code, error_code(r)) == (400, code)
    assert r.json()["error"]["detail"] == {"field": "visibility"}
    assert not Channel.objects.exists()
    create(alice, "y")
    before = snapshot()
    r = patch(alice, "y", visibility=value)
    assert (r.status_code, error_code(r)) == (400, code)
    assert snapshot() == before


def test_the_creator_of_a_members_only_channel_is_always_a_member(alice, bob):
    created = create(alice, "mine", members=["bob"], visibility="members")
    assert created["members"] == ["alice", "bob"]
    assert alice.get("/api/v1/channels/mine/").status_code == 200
    created = create(bob, "solo", visibility="members")
    assert created["members"] == ["bob"]
    # an open channel's roster stays what was asked
    assert create(alice, "open1", members=["bob"])["members"] == ["bob"]


# --- changes of visibility and members ----------------------------------------------------


def test_making_a_channel_members_only_hides_it_at_once(alice, bob, carol):
    create(alice, "room", members=["alice", "bob"])
    post(alice, "room", title="before")
    assert carol.get("/api/v1/channels/room/").status_code == 200
    r = patch(alice, "room", visibility="members")
    assert r.status_code == 200
    for response in (
        carol.get("/api/v1/channels/room/"),
        carol.post("/api/v1/channels/room/read/"),
        carol.get("/api/v1/channels/room/messages/"),
    ):
        assert (response.status_code, error_code(response)) == (404, "CHANNEL_NOT_FOUND")
    assert carol.get("/api/v1/channels/").json()["channels"] == []
    assert [m["title"] for m in bob.post("/api/v1/channels/room/read/").json()["messages"]] == [
        "before",
        "channel.updated room",
    ]
    # and open again: carol sees it, history included
    assert patch(alice, "room", visibility="open").status_code == 200
    titles = [m["title"] for m in carol.post("/api/v1/channels/room/read/").json()["messages"]]
    assert titles == ["before", "channel.updated room", "channel.updated room"]


def test_whoever_makes_a_channel_members_only_joins_its_roster(alice, bob):
    create(alice, "room", members=["bob"])
    r = patch(alice, "room", visibility="members")
    assert r.json()["members"] == ["alice", "bob"]
    # also when the same request names a roster without the actor
    create(alice, "room2")
    r = patch(alice, "room2", visibility="members", members=["bob"])
    assert (r.status_code, r.json()["members"]) == (200, ["alice", "bob"])


def test_a_member_may_leave_but_a_members_only_channel_keeps_an_agent_member(alice, bob):
    create(alice, "pair", members=["alice", "bob"], visibility="members")
    r = patch(bob, "pair", members=["alice", "ghost"])  # ghost: a name, no agent (yet)
    assert (r.status_code, r.json()["members"]) == (200, ["alice", "ghost"])
    assert bob.get("/api/v1/channels/pair/").status_code == 404  # bob left
    before = snapshot()
    for members in ([], ["ghost"]):  # nobody, or nobody who could ever read it
        r = patch(alice, "pair", members=members)
        assert (r.status_code, error_code(r)) == (400, "CHANNEL_MEMBERS_REQUIRED")
        assert r.json()["error"]["detail"] == {"field": "members"}
    assert snapshot() == before
    # the rule holds for a creator who is no agent too (a service call, e.g. an import)
    with pytest.raises(AppError) as info:
        services.channel_create(name="x", created_by="ghost", visibility="members")
    assert info.value.code == "CHANNEL_MEMBERS_REQUIRED"


def test_a_non_member_cannot_remove_the_creator(alice, carol):
    create(alice, "owned", members=["alice"], visibility="members")
    before = snapshot()
    r = patch(carol, "owned", members=["carol"])
    assert (r.status_code, error_code(r)) == (404, "CHANNEL_NOT_FOUND")
    assert snapshot() == before  # no change, no audit message


@pytest.mark.parametrize(
    ("members", "code"),
    [(["Bob"], "INVALID_NAME"), (["bob", "x" * 65], "INVALID_NAME"), (["a:b"], "INVALID_NAME"),
     (["user:ops"], "INVALID_NAME"), (["bob\n"], "INVALID_NAME"), ([""], "INVALID_VALUE"),
     ("bob", "INVALID_TYPE"), ([1], "INVALID_TYPE")],
)  # fmt: skip
def test_bad_members_are_refused_and_change_nothing(alice, members, code):
    create(alice, "room")
    before = snapshot()
    r = patch(alice, "room", members=members, topic="changed")
    assert (r.status_code, error_code(r)) == (400, code)
    assert snapshot() == before


def test_topic_and_members_are_bounded_so_the_audit_always_fits(alice):
    create(alice, "room")
    before = snapshot()
    r = patch(alice, "room", topic="t" * (services.TOPIC_MAX + 1))
    assert (r.status_code, error_code(r)) == (400, "INVALID_VALUE")
    many = [f"agent{i}" for i in range(services.MEMBERS_MAX + 1)]
    r = patch(alice, "room", members=many)
    assert (r.status_code, error_code(r)) == (400, "INVALID_VALUE")
    assert r.json()["error"]["detail"]["field"] == "members"
    assert snapshot() == before
    # at the bounds the audit carries both sides (the biggest topic in 4-byte characters)
    big = [f"{'a' * 55}{i:04d}" for i in range(services.MEMBERS_MAX)]
    assert patch(alice, "room", topic="😀" * services.TOPIC_MAX, members=big).status_code == 200
    assert (
        patch(alice, "room", topic="🙂" * services.TOPIC_MAX, members=big[::-1]).status_code == 200
    )


# --- the audit message ----------------------------------------------------------------------


def audits(channel: str) -> list[Message]:
    return list(
        Message.objects.filter(channel__name=channel, status="channel.updated").order_by("seq")
    )


def test_each_change_posts_one_channel_updated_audit_with_before_and_after(alice, bob):
    create(alice, "room", topic="old", members=["alice"])
    r = patch(alice, "room", topic="new", members=["alice", "bob"], visibility="members")
    assert r.status_code == 200
    assert r.json()["last_seq"] == 1
    [audit] = audits("room")
    assert (audit.sender, audit.kind, audit.to, audit.title) == (
        "alice",
        "audit",
        [],
        "channel.updated room",
    )
    payload = {
        "actor": "alice",
        "after": {"members": ["alice", "bob"], "topic": "new", "visibility": "members"},
        "before": {"members": ["alice"], "topic": "old", "visibility": "open"},
        "changed_fields": ["members", "topic", "visibility"],
        "channel": "room",
        "event": "channel.updated",
    }
    # key-sorted, indented JSON, as the task and lock audits
    assert audit.body == json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False)
    # only what changed is recorded
    assert patch(bob, "room", topic="newer", members=["alice", "bob"]).status_code == 200
    last = json.loads(audits("room")[-1].body)
    assert (last["actor"], last["before"], last["after"], last["changed_fields"]) == (
        "bob",
        {"topic": "new"},
        {"topic": "newer"},
        ["topic"],
    )
    assert audits("room")[-1].sender == "bob"


def test_a_patch_that_changes_nothing_posts_nothing(alice):
    create(alice, "room", topic="same", members=["alice", "bob"])
    before = snapshot()
    for body in (
        {},
        {"topic": "same"},
        {"members": ["alice", "bob"]},
        {"members": ["alice", "bob", "alice"]},  # duplicates are dropped: the same roster
        {"visibility": "open"},
        {"topic": "same", "members": ["alice", "bob"], "visibility": "open"},
    ):
        r = patch(alice, "room", **body)
        assert r.status_code == 200, body
        assert r.json()["last_seq"] == 0
    assert snapshot() == before


def test_the_change_and_its_audit_commit_together(alice, monkeypatch):
    create(alice, "room", topic="old")
    before = snapshot()

    def fail(**kwargs):
        raise RuntimeError("audit store down")

    monkeypatch.setattr(services, "audit_post", fail)
    monkeypatch.setattr(services.channels, "audit_post", fail)
    with pytest.raises(RuntimeError):
        services.channel_update(
            channel=channel_get("room", viewer="alice"), actor="alice", topic="new"
        )
    assert snapshot() == before


def test_the_update_rechecks_access_on_the_locked_row(alice, bob):
    create(alice, "pair", members=["alice", "bob"], visibility="members")
    seen_by_bob = channel_get("pair", viewer="bob")  # bob's request looked it up...
    services.channel_update(channel=channel_get("pair", viewer="alice"), actor="alice",
                            members=["alice"])  # fmt: skip
    before = snapshot()
    with pytest.raises(AppError) as info:  # ...then alice removed him first: he loses
        services.channel_update(channel=seen_by_bob, actor="bob", members=["alice", "bob"])
    assert info.value.code == "CHANNEL_NOT_FOUND"
    assert snapshot() == before


def test_the_admin_flag_acts_without_membership_and_adds_nobody(alice, bob):
    create(alice, "room")
    channel = channel_get("room", viewer="alice")
    with pytest.raises(AppError) as info:
        services.channel_update(channel=channel, actor="ops", visibility="members", admin=True)
    assert info.value.code == "CHANNEL_MEMBERS_REQUIRED"
    updated = services.channel_update(
        channel=channel, actor="ops", visibility="members", members=["bob"], admin=True
    )
    assert updated.members == ["bob"]
    assert json.loads(audits("room")[-1].body)["actor"] == "ops"
    services.channel_update(channel=channel, actor="ops", topic="by the admin", admin=True)
    assert channel_get("room", viewer="bob").topic == "by the admin"


# --- reads that started before a change obey it -----------------------------------------------


def test_a_read_or_ack_of_a_stale_lookup_is_refused_after_removal(alice, bob, make_agent):
    create(alice, "pair", members=["alice", "bob"], visibility="members")
    post(alice, "pair", title="for bob")
    bob_agent = make_agent("bob")[0]
    looked_up = channel_get("pair", viewer="bob")
    patch(alice, "pair", members=["alice"])
    before = snapshot()
    for attempt in (
        lambda: services.message_read(channel=looked_up, agent=bob_agent),
        lambda: services.message_read(channel=looked_up, agent=bob_agent, advance_if_empty=False),
        lambda: services.cursor_ack(channel=looked_up, agent=bob_agent),
    ):
        with pytest.raises(AppError) as info:
            attempt()
        assert info.value.code == "CHANNEL_NOT_FOUND"
        assert info.value.detail == {"name": "pair"}
    assert snapshot() == before


# --- the rule itself, in SQL and in Python ----------------------------------------------------


@pytest.mark.parametrize(
    ("members", "viewer", "visible"),
    [
        (["bob"], "bob", True),
        (["bob"], "bo", False),
        (["bob"], "bobby", False),
        (["bobby"], "bob", False),
        (["b_b"], "bxb", False),  # no LIKE wildcards
        (["b%"], "bob", False),
        (["alice", "bob"], "bob", True),
        ([["bob"]], "bob", False),  # not nested
        ([{"bob": 1}], "bob", False),
        (["Bob"], "bob", False),  # exact, no case folding
        ([], "bob", False),
        (["user:ops"], "user:ops", True),  # stored only by hand; the rule is still exact
        ('"bob"', "bob", False),  # a JSON string, not a list
    ],
)
def test_membership_is_exact_in_sql_and_in_python(members, viewer, visible):
    # Stored directly: the services refuse most of these, the rule must not depend on it.
    Channel.objects.create(name="c", members=members, visibility="members")
    Channel.objects.create(name="open", members=[], visibility="open")
    Channel.objects.create(name="odd", members=[viewer], visibility="unknown")  # closed
    names = list(channels_visible_to(viewer).values_list("name", flat=True))
    assert names == (["c", "open"] if visible else ["open"]), connection.vendor
    try:
        channel_get("c", viewer=viewer)
        found = True
    except AppError:
        found = False
    assert found is visible
    with pytest.raises(AppError):
        channel_get("odd", viewer=viewer)
