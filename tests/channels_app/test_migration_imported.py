"""Migration 0009: the messages imported before it (the rows with a ``ts_text``) are marked
imported, lose the provenance their files claimed (kept as the claim), are no audits, and keep
a ``json_size`` that is their JSON's; search still finds every message (on SQLite the table is
remade, and the full-text triggers and index with it)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from channels_app import services
from channels_app.models import Channel, Message
from channels_app.records import message_json
from channels_app.search import messages_search


@pytest.mark.django_db(transaction=True)
def test_the_migration_marks_the_imported_messages_and_search_still_works(make_agent):
    before = [("channels_app", "0008_marker_claim_text")]
    after = [("channels_app", "0009_message_imported")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    try:
        old = executor.loader.project_state(before).apps
        legacy = old.get_model("channels_app", "Channel").objects.create(name="legacy", last_seq=3)
        OldMessage = old.get_model("channels_app", "Message")
        rows = [  # (ts_text, sender_kind, status, kind)
            ("", "human", "approved", "message"),  # posted here
            ("2026-11-29T15:46:18+00:00", "human", "approved", "message"),
            ("2026-11-29T15:46:19Z", "agent", "task.created", "audit"),
        ]
        for seq, (ts_text, kind_of_sender, status, kind) in enumerate(rows, 1):
            message = OldMessage(
                id=f"msg_{seq}", channel=legacy, seq=seq, sender="alice", to=[],
                ts=timezone.now(), ts_text=ts_text, sender_kind=kind_of_sender, status=status,
                title=f"needle{seq}", body="haystack", kind=kind, json_size=1,
            )  # fmt: skip
            message.save()
        executor = MigrationExecutor(connection)
        executor.migrate(after)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    got = {
        m.seq: (m.imported, m.sender_kind, m.claimed_sender_kind, m.kind)
        for m in Message.objects.filter(channel__name="legacy")
    }
    assert got == {
        1: (False, "human", "", "message"),
        2: (True, "agent", "human", "message"),
        3: (True, "agent", "", "message"),
    }
    for message in Message.objects.filter(channel__name="legacy", imported=True):
        assert b'"imported":true' in message_json(message)
    make_agent("alice")
    channel = Channel.objects.get(name="legacy")
    services.message_post(channel=channel, sender="alice", title="needle4", body="haystack")
    found, _ = messages_search(viewer="alice", query="haystack", channel=channel, limit=10)
    assert sorted(m.seq for m in found) == [1, 2, 3, 4]
