"""The loop guard (channels_app.services.loopguard): a run of agent messages in one channel,
each soon after the one before, flags the channel once and (configured) refuses agents."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentchat.core.identity.services import agent_get_or_create
from agentchat.core.models import Agent
from agentchat.core.rules.errors import AppError
from channels_app import services
from channels_app.models import Channel, LoopGuard, Message
from channels_app.services.loopguard import EVENT_LOOP_SUSPECTED
from tasks_app.services.tasks import task_create

N = 6


@pytest.fixture
def guard(settings, clock):
    settings.AGENTCHAT_LOOP_GUARD_MESSAGES = N
    settings.AGENTCHAT_LOOP_GUARD_SECONDS = 30
    settings.AGENTCHAT_LOOP_GUARD_COOLDOWN_SECONDS = 600
    settings.AGENTCHAT_LOOP_GUARD_REFUSE = True
    settings.AGENTCHAT_POST_RATE = ""
    return settings


@pytest.fixture
def room(db) -> Channel:
    for name in ("alice", "bob"):
        agent_get_or_create(name=name)
    agent_get_or_create(name="pat", kind=Agent.Kind.HUMAN)
    return services.channel_create(name="room", created_by="alice")


def post(channel: Channel, sender: str, title: str = "ping") -> Message:
    kind = Agent.Kind.HUMAN if sender == "pat" else Agent.Kind.AGENT
    message, _ = services.message_post(
        channel=channel, sender=sender, sender_kind=kind, title=title
    )
    return message


def suspected(channel: Channel) -> list[Message]:
    return list(Message.objects.filter(channel=channel, status=EVENT_LOOP_SUSPECTED))


def refused(channel: Channel, sender: str) -> AppError:
    with pytest.raises(AppError) as caught:
        post(channel, sender)
    return caught.value


def test_ping_pong_is_flagged_once_then_refused(guard, room, clock):
    for i in range(N):
        clock.advance(5)
        last = post(room, ("alice", "bob")[i % 2])
    (flag,) = suspected(room)
    assert flag.kind == Message.Kind.AUDIT and flag.seq == last.seq + 1
    assert f'"run": {N}' in flag.body and '"refusing": true' in flag.body
    clock.advance(5)
    error = refused(room, "alice")
    assert (error.code, error.status) == ("LOOP_SUSPECTED", 429)
    assert error.detail["retry_after"] == 600 - 5
    assert error.detail["flagged_seq"] == flag.seq
    # Refused posts count nothing, write nothing, and post no second flag.
    before = Message.objects.filter(channel=room).count()
    refused(room, "bob")
    assert Message.objects.filter(channel=room).count() == before
    assert len(suspected(room)) == 1


def test_without_refusing_the_flag_only_tells(guard, room, clock):
    guard.AGENTCHAT_LOOP_GUARD_REFUSE = False
    for i in range(3 * N):
        clock.advance(1)
        post(room, ("alice", "bob")[i % 2])
    assert len(suspected(room)) == 1
    assert '"refusing": false' in suspected(room)[0].body


def test_a_human_post_resets_the_run_and_lifts_the_flag(guard, room, clock):
    for i in range(N - 1):
        clock.advance(1)
        post(room, ("alice", "bob")[i % 2])
    post(room, "pat", "enough, both of you")
    for i in range(N - 1):
        clock.advance(1)
        post(room, ("alice", "bob")[i % 2])
    assert suspected(room) == []
    clock.advance(1)
    post(room, "bob")  # the N-th since the human: flagged
    assert len(suspected(room)) == 1
    assert refused(room, "alice").code == "LOOP_SUSPECTED"
    post(room, "pat", "stop and summarize")
    assert post(room, "alice", "summary").seq > 0
    assert LoopGuard.objects.get(pk=room.pk).flagged_at is None


def test_task_changes_in_between_keep_it_unflagged(guard, room, clock):
    for i in range(10 * N):
        clock.advance(1)
        post(room, ("alice", "bob")[i % 2])
        if i % (N - 2) == 0:
            task_create(channel=room, task_id=f"T-{i}", title=f"step {i}", created_by="alice")
    assert suspected(room) == []
    assert Message.objects.filter(channel=room, kind="message").count() == 10 * N


def test_one_agent_alone_is_no_exchange(guard, room, clock):
    for _ in range(3 * N):
        clock.advance(1)
        post(room, "alice")
    assert suspected(room) == []


def test_a_pause_longer_than_the_window_ends_the_run(guard, room, clock):
    for _ in range(4):
        for i in range(N - 1):
            clock.advance(29)
            post(room, ("alice", "bob")[i % 2])
        clock.advance(31)
    assert suspected(room) == []


def test_the_cool_down_ends_the_refusal_and_a_new_run_starts(guard, room, clock):
    for i in range(N):
        clock.advance(1)
        post(room, ("alice", "bob")[i % 2])
    clock.advance(599)
    assert refused(room, "alice").detail["retry_after"] == 1
    clock.advance(1)
    for i in range(N - 1):
        post(room, ("alice", "bob")[i % 2])
        clock.advance(1)
    assert len(suspected(room)) == 1  # counting from the cool-down's end
    post(room, "bob")
    assert len(suspected(room)) == 2


def test_channels_count_apart(guard, room, clock):
    other = services.channel_create(name="other", created_by="bob")
    for i in range(2 * N - 2):
        clock.advance(1)
        post((room, other)[i % 2], ("alice", "bob")[(i // 2) % 2])
    assert suspected(room) == suspected(other) == []


def test_the_guard_off_writes_nothing(guard, room, clock):
    guard.AGENTCHAT_LOOP_GUARD_MESSAGES = 0
    for i in range(2 * N):
        post(room, ("alice", "bob")[i % 2])
    assert suspected(room) == [] and not LoopGuard.objects.exists()


def _queries_of_a_post(channel: Channel, sender: str) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        post(channel, sender)
    return [q["sql"] for q in queries.captured_queries]


def test_the_post_path_adds_one_query_whatever_the_channel_holds(guard, room, clock):
    guard.AGENTCHAT_LOOP_GUARD_MESSAGES = 10_000  # counting, never crossing
    post(room, "alice")
    first = _queries_of_a_post(room, "bob")
    for i in range(300):
        post(room, ("alice", "bob")[i % 2])
    later = _queries_of_a_post(room, "bob")
    assert len(later) == len(first)
    guarded = [q for q in later if LoopGuard._meta.db_table in q]
    assert len(guarded) == 1 and "ON CONFLICT" in guarded[0]
    guard.AGENTCHAT_LOOP_GUARD_MESSAGES = 0
    assert len(_queries_of_a_post(room, "alice")) == len(later) - 1


def test_a_flag_refuses_only_the_namespaces_of_the_run_not_a_third_agent(guard, room, clock):
    """One agent and its own sub-agent (one token) can make a run of two senders: the flag
    must not become a way to silence the channel for everyone else. The refusal is for the
    agents whose namespace took part in the run that set the flag."""
    agent_get_or_create(name="carol")
    for i in range(N):
        clock.advance(1)
        post(room, ("alice", "alice.bot")[i % 2])
    assert len(suspected(room)) == 1
    clock.advance(1)
    assert refused(room, "alice").code == "LOOP_SUSPECTED"
    assert refused(room, "alice.bot").code == "LOOP_SUSPECTED"
    assert refused(room, "alice.other").code == "LOOP_SUSPECTED"  # alice's namespace
    for _ in range(3):  # carol's posts go through, however many
        clock.advance(1)
        assert post(room, "carol", "not part of it").seq > 0
    assert refused(room, "alice").code == "LOOP_SUSPECTED"
    assert len(suspected(room)) == 1
