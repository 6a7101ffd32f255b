"""Direct messages are messages of a members-only direct channel per pair: the channel views,
search and wait show them to the pair and to nobody else, and the channel takes nothing but
envelopes (its roster is who may read them)."""

from __future__ import annotations

import pytest

from channels_app.models import Channel, Message
from channels_app.services import direct_channel_for
from channels_app.services.direct import direct_channel_names
from tests.errors import error_code


def send(client, frm, to, **fields):
    r = client.post(f"/v1/agents/{frm}/messages", {"to": to, **fields}, format="json")
    assert r.status_code == 201, r.content
    return r.json()


def test_a_pairs_first_envelope_makes_its_members_only_channel(alice, bob):
    envelope = send(alice, "alice", "bob", text="Please inspect\nthis result", data={"k": 1})
    send(bob, "bob", "alice", text="done")
    channel = Channel.objects.get()
    assert (channel.name, channel.direct_pair, channel.members, channel.visibility) == (
        "dm.alice.bob",
        "alice bob",
        ["alice", "bob"],
        "members",
    )
    messages = alice.get("/api/v1/channels/dm.alice.bob/messages/").json()["messages"]
    first = messages[0]
    assert (first["id"], first["from"], first["to"], first["title"], first["body"]) == (
        envelope["id"],
        "alice",
        ["bob"],
        "Please inspect",
        "Please inspect\nthis result",
    )
    assert (first["status"], first["data"], first["conversation_id"]) == (
        "message",
        {"k": 1},
        envelope["conversation_id"],
    )
    assert first["sender_kind"] == "agent"
    assert [m["from"] for m in messages] == ["alice", "bob"]


def test_the_direct_channel_is_invisible_to_others(alice, bob, carol):
    send(alice, "alice", "bob", text="secret plan zebra")
    r = carol.get("/api/v1/channels/dm.alice.bob/messages/")
    assert (r.status_code, error_code(r)) == (404, "CHANNEL_NOT_FOUND")
    assert carol.get("/api/v1/channels/").json()["channels"] == []
    assert carol.get("/api/v1/search/?q=zebra").json()["results"] == []
    assert [m["title"] for m in bob.get("/api/v1/search/?q=zebra").json()["results"]] == [
        "secret plan zebra"
    ]


def test_bob_reads_his_direct_messages_through_the_channel_too(alice, bob):
    send(alice, "alice", "bob", text="one")
    read = bob.post("/api/v1/channels/dm.alice.bob/read/", format="json").json()
    assert [m["title"] for m in read["messages"]] == ["one"]
    # the channel cursor and the inbox are apart: reading the channel moves no inbox cursor
    assert len(bob.get("/v1/agents/bob/inbox").json()["deliveries"]) == 1


def test_the_direct_channel_takes_only_envelopes(alice, bob):
    send(alice, "alice", "bob", text="hi")
    base = "/api/v1/channels/dm.alice.bob"
    attempts = [
        alice.post(f"{base}/messages/", {"title": "sneak"}, format="json"),
        alice.patch(f"{base}/", {"members": ["alice", "bob", "carol"]}, format="json"),
        alice.patch(f"{base}/", {"visibility": "open"}, format="json"),
        alice.patch(f"{base}/", {"topic": "renamed"}, format="json"),
        alice.post(
            f"{base}/events/", {"type": "status", "harness": "x", "status": "busy"}, format="json"
        ),
        alice.post(f"{base}/tasks/", {"id": "T-1", "title": "t"}, format="json"),
        alice.post(f"{base}/locks/", {"paths": ["src/a.py"]}, format="json"),
    ]
    for r in attempts:
        assert (r.status_code, error_code(r)) == (409, "CHANNEL_DIRECT"), r.content
    channel = Channel.objects.get()
    assert (channel.members, channel.visibility, channel.last_seq) == (
        ["alice", "bob"],
        "members",
        1,
    )
    assert Message.objects.count() == 1


def test_the_admin_cannot_open_a_direct_channel(alice, bob):
    from channels_app.services import channel_update

    send(alice, "alice", "bob", text="hi")
    channel = Channel.objects.get()
    with pytest.raises(Exception, match="CHANNEL_DIRECT"):
        channel_update(channel=channel, actor="root", visibility="open", admin=True)
    channel.refresh_from_db()
    assert channel.visibility == "members"


def test_channel_messages_work_as_before_beside_direct_ones(alice, bob):
    send(alice, "alice", "bob", text="dm")
    alice.post("/api/v1/channels/", {"name": "review", "members": ["alice", "bob"]}, format="json")
    r = alice.post("/api/v1/channels/review/messages/", {"title": "t", "to": "bob"}, format="json")
    assert (r.status_code, r.json()["seq"]) == (201, 1)
    names = [c["name"] for c in bob.get("/api/v1/channels/").json()["channels"]]
    assert names == ["dm.alice.bob", "review"]


def test_one_agents_notes_to_itself_have_a_channel_of_one(alice):
    send(alice, "alice", "alice", text="note")
    channel = Channel.objects.get()
    assert (channel.name, channel.members, channel.direct_pair) == (
        "dm.alice.alice",
        ["alice"],
        "alice alice",
    )


def test_the_dm_prefix_is_reserved_for_direct_channels(alice, bob):
    for name in ("dm.alice.bob", "DM.alice.bob", "Dm.x", "dm.bob.x"):
        r = alice.post("/api/v1/channels/", {"name": name}, format="json")
        assert (r.status_code, error_code(r)) == (400, "INVALID_NAME"), name
    assert not Channel.objects.exists()
    for name in ("dm", "dmx.a", "adm.x", "d.m.x"):
        assert alice.post("/api/v1/channels/", {"name": name}, format="json").status_code == 201


def test_marker_claims_are_refused_in_a_direct_channel(alice, bob):
    send(alice, "alice", "bob", text="hi")
    r = alice.post("/api/v1/channels/dm.alice.bob/claims/m1/", format="json")
    assert (r.status_code, error_code(r)) == (409, "CHANNEL_DIRECT")
    assert not Channel.objects.get().marker_claims.exists()


def test_a_name_taken_or_too_long_gives_the_pair_a_digest_name(alice, bob, api_for):
    # Only a folder's import (the reference CLI's folders may have any name) can take it now.
    Channel.objects.create(name="DM.alice.bob", created_by="alice")  # squatted
    send(alice, "alice", "bob", text="still private")
    direct = Channel.objects.get(direct_pair="alice bob")
    assert direct.name == direct_channel_names("alice", "bob")[1]
    assert direct.name.startswith("dm.") and len(direct.name) == 27
    assert direct.visibility == "members"
    squatted = Channel.objects.get(name="DM.alice.bob")
    assert squatted.messages.count() == 0
    long_a, long_b = "a" * 40, "b" * 40
    api_for(long_a)
    api_for(long_b)
    assert direct_channel_names(long_a, long_b)[0].startswith("dm.")
    assert len(direct_channel_names(long_a, long_b)[0]) == 27
    # names with dots that would read alike get channels of their own
    assert direct_channel_for("a.b", "c").pk != direct_channel_for("a", "b.c").pk


def test_every_name_a_folder_can_foresee_taken_still_gives_the_pair_its_channel(alice, bob):
    # An import may make channels of any dm. name (the API refuses the prefix): squatting every
    # deterministic name made the pair's envelopes SERVICE_UNAVAILABLE for ever.
    for name in direct_channel_names("alice", "bob"):
        Channel.objects.create(name=name, created_by="carol", members=["carol"])
    send(alice, "alice", "bob", text="still private")
    direct = Channel.objects.get(direct_pair="alice bob")
    assert direct.name.startswith(direct_channel_names("alice", "bob")[1] + "-")
    assert len(direct.name) == 27 + 13 and direct.members == ["alice", "bob"]
    assert direct.messages.count() == 1
    assert all(not c.messages.exists() for c in Channel.objects.filter(direct_pair__isnull=True))
