"""Migration 0002 gives the locks held before it their index keys: a lock it missed would
never conflict again."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

BEFORE = [("locks_app", "0001_initial")]
AFTER = [("locks_app", "0002_entry_index_keys")]


@pytest.mark.django_db(transaction=True)
def test_the_anchor_migration_backfills_existing_entries():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    try:
        old = executor.loader.project_state(BEFORE).apps
        channel = old.get_model("channels_app", "Channel").objects.create(name="legacy")
        now = timezone.now()
        lock = old.get_model("locks_app", "PathLock").objects.create(
            lock_id="a" * 32,
            channel=channel,
            owner="alice",
            expires_at=now,
            locked_at=now,
            updated_at=now,
        )
        Entry = old.get_model("locks_app", "PathLockEntry")
        for position, path in enumerate(["Src/Main.py", "docs/**/*.md", "*.txt", "."]):
            Entry.objects.create(
                lock=lock,
                channel=channel,
                position=position,
                normalized_path=path,
                display_path=path,
            )
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
        new = executor.loader.project_state(AFTER).apps
        rows = new.get_model("locks_app", "PathLockEntry").objects.order_by("position")
        c = channel.pk
        assert [(row.index_key, row.index_key_folded) for row in rows] == [
            (f"{c}:Src/Main.py", f"{c}:src/main.py"),
            (f"{c}:docs", f"{c}:docs"),
            (f"{c}:.", f"{c}:."),
            (f"{c}:.", f"{c}:."),
        ]
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
