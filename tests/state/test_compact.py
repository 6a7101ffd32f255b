"""Compaction: a stored snapshot and its state.compacted audit in one transaction; nothing else
changes, a strict failure changes nothing at all."""

from __future__ import annotations

import json

import pytest

from agentchat.core.rules.errors import AppError
from agentchat.models import StateSnapshot
from agentchat.state import checkpoints, selectors, services
from agentchat.state.markdown import state_markdown
from channels_app.models import Channel, Cursor, Message, Presence
from locks_app.models import PathLock, PathLockEntry
from tasks_app.models import Lease, LeaseHistory, Task, TaskDependency
from tests.state.scenario import CHANNEL, Scenario, as_imported, imported_message

pytestmark = pytest.mark.django_db


def everything() -> dict[str, list]:
    """Every row a compaction must leave alone."""
    tables = (
        Channel,
        Message,
        Cursor,
        Presence,
        Task,
        TaskDependency,
        Lease,
        LeaseHistory,
        PathLock,
        PathLockEntry,
    )
    return {model.__name__: list(model.objects.order_by("pk").values()) for model in tables} | {
        "StateSnapshot": list(StateSnapshot.objects.order_by("pk").values())
    }


@pytest.fixture
def scenario(api_for, frozen):
    built = Scenario(api_for, frozen)
    built.build()
    return built


def compact(client, channel=CHANNEL, body=None):
    return client.post(f"/api/v1/channels/{channel}/compact/", body or {}, format="json")


def test_compaction_stores_the_summary_and_posts_its_audit(scenario):
    channel = Channel.objects.get(name=CHANNEL)
    before_seq = channel.last_seq
    expected = selectors.state_summary(channel=channel)
    scenario.clock.advance(5)
    response = compact(scenario.clients["bob"])
    assert response.status_code == 201, response.content
    body = response.json()
    audit = Message.objects.get(channel=channel, seq=before_seq + 1)
    snapshot = StateSnapshot.objects.get()
    assert body == {
        "audit_seq": audit.seq,
        "blockers_count": len(expected["blockers"]),
        "channel": CHANNEL,
        "compacted_at": "2030-01-02T03:04:43+00:00",
        "compacted_by": "bob",
        "decisions_count": len(expected["decisions"]),
        "last_seq": before_seq,
        "markdown": state_markdown(expected),
        "open_tasks_count": len(expected["open_tasks"]),
        "path_locks_count": len(expected["path_locks"]),
    }
    assert (audit.kind, audit.sender, audit.to, audit.status, audit.title) == (
        Message.Kind.AUDIT,
        "bob",
        [],
        "state.compacted",
        "state.compacted",
    )
    assert json.loads(audit.body) == {
        "blockers_count": body["blockers_count"],
        "channel": CHANNEL,
        "compacted_at": "2030-01-02T03:04:43+00:00",
        "decisions_count": body["decisions_count"],
        "event": "state.compacted",
        "last_seq": before_seq,
        "open_tasks_count": body["open_tasks_count"],
        "path_locks_count": body["path_locks_count"],
    }
    assert audit.body == json.dumps(json.loads(audit.body), indent=2, sort_keys=True)
    assert (snapshot.last_seq, snapshot.audit_seq, snapshot.compacted_by) == (
        before_seq,
        audit.seq,
        "bob",
    )
    assert snapshot.markdown == state_markdown(expected)
    assert snapshot.summary == expected | {"generated_at": "2030-01-02T03:04:43+00:00"}
    assert selectors.latest_snapshot(channel) == snapshot


def test_compaction_never_deletes_or_edits_anything(scenario):
    before = everything()
    assert compact(scenario.clients["alice"]).status_code == 201
    after = everything()
    new_messages = after["Message"][len(before["Message"]) :]
    assert after["Message"][: len(before["Message"])] == before["Message"]
    assert [message["status"] for message in new_messages] == ["state.compacted"]
    assert len(after["StateSnapshot"]) == 1
    for table in ("Cursor", "Task", "TaskDependency", "Lease", "LeaseHistory", "PathLock"):
        assert after[table] == before[table], table
    assert after["PathLockEntry"] == before["PathLockEntry"]


def test_a_second_compaction_covers_the_first_ones_audit(scenario):
    alice = scenario.clients["alice"]
    first = compact(alice).json()
    second = compact(alice).json()
    assert second["last_seq"] == first["audit_seq"] == first["last_seq"] + 1
    assert second["audit_seq"] == second["last_seq"] + 1
    channel = Channel.objects.get(name=CHANNEL)
    assert selectors.latest_snapshot(channel).audit_seq == second["audit_seq"]
    assert StateSnapshot.objects.count() == 2


def test_a_strict_compaction_that_fails_changes_nothing(api_for):
    alice = api_for("alice")
    alice.post("/api/v1/channels/", {"name": "events"}, format="json")
    channel = Channel.objects.get(name="events")
    imported_message(channel, 1, title="event:status", body="{}", frontmatter=[],
                     status="event.status", kind=Message.Kind.EVENT)  # fmt: skip
    before = everything()
    response = compact(alice, "events", {"strict": True})
    assert (response.status_code, response.json()["error"]["code"]) == (
        409,
        "STATE_MALFORMED_SOURCE",
    )
    assert everything() == before
    with pytest.raises(AppError):
        services.state_compact(channel=channel, actor="alice", strict=True)
    assert everything() == before
    assert compact(alice, "events").status_code == 201  # lenient passes over it


def test_messages_posted_after_the_first_fold_are_in_the_snapshot(scenario, monkeypatch):
    """The fold outside the write transaction, then the messages posted meanwhile inside it:
    a post between the two is counted, and the audit's last_seq is the seq before the audit."""
    channel = Channel.objects.get(name=CHANNEL)
    commit = services._compact_commit

    def post_then_commit(**kwargs):
        scenario.post("carol", "Decision: late", "posted during the compaction")
        return commit(**kwargs)

    monkeypatch.setattr(services, "_compact_commit", post_then_commit)
    snapshot = services.state_compact(channel=channel, actor="alice")
    late = Message.objects.get(channel=channel, title="Decision: late")
    assert snapshot.last_seq == late.seq == snapshot.audit_seq - 1
    assert snapshot.summary["decisions"][-1]["seq"] == late.seq
    now = selectors.state_summary(channel=channel)
    assert now["last_seq"] == snapshot.audit_seq
    assert snapshot.summary["decisions"] == now["decisions"]
    assert "**late**" in snapshot.markdown


def test_latest_snapshot_is_none_before_any_compaction(api_for):
    api_for("alice").post("/api/v1/channels/", {"name": "fresh"}, format="json")
    assert selectors.latest_snapshot(Channel.objects.get(name="fresh")) is None


@pytest.mark.django_db(transaction=True)
def test_summary_and_compaction_outside_a_test_transaction(api_for):
    """The paths a server takes (no transaction open): on PostgreSQL the summary's read-only
    REPEATABLE READ snapshot and the compaction's row lock; on SQLite the FIFO writer."""
    alice = api_for("alice")
    alice.post("/api/v1/channels/", {"name": "real"}, format="json")
    alice.post("/api/v1/channels/real/messages/", {"title": "Decision: x"}, format="json")
    channel = Channel.objects.get(name="real")
    summary = selectors.state_summary(channel=channel)
    assert [item["seq"] for item in summary["decisions"]] == [1]
    snapshot = services.state_compact(channel=channel, actor="alice")
    assert (snapshot.last_seq, snapshot.audit_seq) == (1, 2)
    assert selectors.state_summary(channel=channel)["last_seq"] == 2


def test_a_summary_goes_on_from_the_latest_compactions_fold(scenario, monkeypatch):
    channel = Channel.objects.get(name=CHANNEL)
    alice = scenario.clients["alice"]
    assert compact(alice).status_code == 201
    scenario.post("bob", "Decision: after the compaction", "x")
    scenario.post("carol", "evidence: later", "y")
    resumed = selectors.state_summary(channel=channel)
    folded = []
    real = checkpoints.message_views

    def counted(channel, *, after=0, **kwargs):
        folded.append(after)
        return real(channel, after=after, **kwargs)

    monkeypatch.setattr(checkpoints, "message_views", counted)
    selectors.state_summary(channel=channel)
    assert folded == [StateSnapshot.objects.get().last_seq]  # only what came after
    # A snapshot without a fold of this version: the channel is folded from its start.
    StateSnapshot.objects.update(fold={"version": -1})
    assert selectors.state_summary(channel=channel) == resumed
    assert folded[-1] == 0
    StateSnapshot.objects.update(fold=None)
    assert selectors.state_summary(channel=channel) == resumed


def test_strict_mode_sees_a_malformed_message_from_before_the_compaction(api_for):
    alice = api_for("alice")
    alice.post("/api/v1/channels/", {"name": "deep"}, format="json")
    alice.post("/api/v1/channels/deep/messages/", {"title": "t", "body": "[" * 5000},
               format="json")  # fmt: skip
    as_imported("deep", 1, status="lease.completed")
    assert compact(alice, "deep").status_code == 201  # lenient
    channel = Channel.objects.get(name="deep")
    assert StateSnapshot.objects.get().fold["malformed"]["detail"] == {"seq": 1}
    with pytest.raises(AppError) as info:
        selectors.state_summary(channel=channel, strict=True)
    assert info.value.detail == {"seq": 1}
    assert compact(alice, "deep", {"strict": True}).status_code == 409
    assert StateSnapshot.objects.count() == 1
