"""Migration 0002 gives the locks held before it their index keys: a lock it missed would
never conflict again."""

from __future__ import annotations

from pathlib import Path

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
        # The channels app stays at its latest migration: its tables have its latest columns.
        channels = [
            node for node in executor.loader.graph.leaf_nodes() if node[0] == "channels_app"
        ]
        old = executor.loader.project_state([*BEFORE, *channels]).apps
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


def test_the_migrations_copy_of_the_index_keys_agrees_with_the_live_code():
    # Migration 0002 once imported locks_app.paths: a later change there would have changed
    # what an old migration does. It carries its own copy; this keeps the copy honest.
    import importlib

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from locks_app.paths import entry_index_keys

    migration = importlib.import_module("locks_app.migrations.0002_entry_index_keys")
    assert "from locks_app" not in Path(migration.__file__).read_text()
    segment = st.text(alphabet="ab[]!^-*?ßSİ\u0587.", min_size=1, max_size=8)

    @settings(max_examples=500, deadline=None)
    @given(st.lists(segment, min_size=0, max_size=4))
    def agrees(segments):
        path = "/".join(segments) or "."
        assert migration.entry_index_keys(7, path) == entry_index_keys(7, path)

    agrees()
    long = "/".join(["\u0587" * 127] * 4)  # the folded anchor is cut at 1,024 bytes
    assert migration.entry_index_keys(7, long) == entry_index_keys(7, long)


@pytest.mark.django_db
def test_the_models_and_the_migrations_agree():
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()
