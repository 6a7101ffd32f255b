"""Pages and stream batches plan with the bytes of each message's JSON, stored with it
(``Message.json_size``). They used to estimate from the characters of the title, body and data:
metadata and recipients were not counted and a character of non-ASCII text is 2-4 bytes, so a
batch of 256 KiB could load megabytes (and a ring carried messages far past its inline cap)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from channels_app import selectors
from channels_app.models import Message
from channels_app.records import message_json
from channels_app.selectors import messages_after_within
from channels_app.services import PUSH_INLINE_LIMIT, channel_create, message_post, message_read


@pytest.fixture
def channel(db, make_agent):
    make_agent("alice")
    return channel_create(name="sizes", created_by="alice")


def test_the_stored_size_is_the_bytes_the_api_sends(channel):
    message, _ = message_post(
        channel=channel,
        sender="alice",
        title="é",
        body="😀 \u2028 " * 100,
        to=["bob", "carol"],
        data={"k": [1, "ü"]},
        metadata={"trace": "x" * 500},
    )
    stored = Message.objects.get(pk=message.pk)
    assert stored.json_size == len(message_json(stored))


def test_a_stream_batch_counts_metadata_and_bytes_not_characters(channel):
    for n in range(20):  # small bodies, big metadata: ~100 KB each
        message_post(channel=channel, sender="alice", title=f"m{n}", metadata={"k": "x" * 100_000})
    for n in range(20):  # 30,000 characters of 4 bytes each: ~120 KB each
        message_post(channel=channel, sender="alice", title=f"e{n}", body="😀" * 30_000)
    batch = messages_after_within(channel=channel, after=0, limit=64, max_bytes=256 * 1024)
    assert len(batch) == 2  # before: all 40 (an estimate of ~300 bytes each)
    batch = messages_after_within(channel=channel, after=20, limit=64, max_bytes=256 * 1024)
    assert len(batch) == 2  # before: 8 (30,000 characters taken for 30,000 bytes)


def test_a_read_loads_past_its_first_batch_only_what_it_can_send(channel, make_agent, monkeypatch):
    bob, _ = make_agent("bob")
    for n in range(selectors.PAGE_BATCH):
        message_post(channel=channel, sender="alice", title=f"small {n}")
    for n in range(40):
        message_post(
            channel=channel, sender="alice", title=f"big {n}", metadata={"k": "x" * 50_000}
        )
    loaded = []
    real = selectors._attach

    def counting(rows, channel):
        result = real(rows, channel)
        loaded.append(len(result))
        return result

    monkeypatch.setattr(selectors, "_attach", counting)
    page = message_read(channel=channel, agent=bob, max_bytes=256 * 1024)
    assert (len(page.parts), page.more) == (selectors.PAGE_BATCH + 5, True)  # 5 x 50 KB
    assert sum(loaded) <= len(page.parts) + 1  # before: the 40 big ones too


def test_only_a_small_message_rides_its_ring(channel, monkeypatch):
    from channels_app import services

    events = []
    monkeypatch.setattr(
        services.channels, "push_on_commit", lambda group, event: events.append(event)
    )
    monkeypatch.setattr(
        services.claims, "push_on_commit", lambda group, event: events.append(event)
    )
    monkeypatch.setattr(
        services.messages, "push_on_commit", lambda group, event: events.append(event)
    )
    message_post(channel=channel, sender="alice", title="small")
    message_post(
        channel=channel, sender="alice", title="meta", metadata={"k": "x" * PUSH_INLINE_LIMIT}
    )
    assert ["message" in event for event in events] == [True, False]  # before: True, True


@pytest.mark.django_db(transaction=True)
def test_the_migration_measures_the_messages_stored_before_it():
    before, after = [("channels_app", "0001_initial")], [("channels_app", "0002_message_json_size")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    try:
        old = executor.loader.project_state(before).apps
        legacy = old.get_model("channels_app", "Channel").objects.create(name="legacy")
        OldMessage = old.get_model("channels_app", "Message")
        for seq, (body, metadata) in enumerate([("plain", {}), ("ü" * 1000, {"k": "v" * 999})], 1):
            OldMessage.objects.create(
                id=f"msg_{seq}",
                channel=legacy,
                seq=seq,
                sender="alice",
                to=["bob"] if seq == 2 else [],
                ts=timezone.now(),
                title=f"t{seq}",
                body=body,
                metadata=metadata,
            )
        executor = MigrationExecutor(connection)
        executor.migrate(after)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    for message in Message.objects.filter(channel__name="legacy"):
        assert message.json_size == len(message_json(message))


def test_a_row_without_its_size_is_refused_by_the_database(channel):
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        Message.objects.create(
            id="msg_x", channel=channel, seq=1, sender="alice", ts=timezone.now(), title="t"
        )
