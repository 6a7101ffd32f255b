"""Full-text search of messages (channels_app.search): on SQLite an FTS5 external-content
table over title and body, kept by triggers (messages are never edited; a channel's deletion
deletes its rows) and filled from the messages stored before; on PostgreSQL a GIN index of
``to_tsvector('simple', title || ' ' || body)``. Other databases search without an index."""

from django.db import migrations

FTS = "channels_app_message_fts"
MESSAGES = "channels_app_message"
SQLITE = [
    f"CREATE VIRTUAL TABLE {FTS} USING fts5(title, body, content='{MESSAGES}', "
    "content_rowid='rowid', tokenize='unicode61 remove_diacritics 2')",
    f"CREATE TRIGGER {FTS}_insert AFTER INSERT ON {MESSAGES} BEGIN "
    f"INSERT INTO {FTS}(rowid, title, body) VALUES (new.rowid, new.title, new.body); END",
    f"CREATE TRIGGER {FTS}_delete AFTER DELETE ON {MESSAGES} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, title, body) "
    "VALUES ('delete', old.rowid, old.title, old.body); END",
    f"CREATE TRIGGER {FTS}_update AFTER UPDATE OF title, body ON {MESSAGES} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, title, body) "
    "VALUES ('delete', old.rowid, old.title, old.body); "
    f"INSERT INTO {FTS}(rowid, title, body) VALUES (new.rowid, new.title, new.body); END",
    f"INSERT INTO {FTS}({FTS}) VALUES ('rebuild')",
]
SQLITE_UNDO = [
    f"DROP TRIGGER IF EXISTS {FTS}_insert",
    f"DROP TRIGGER IF EXISTS {FTS}_delete",
    f"DROP TRIGGER IF EXISTS {FTS}_update",
    f"DROP TABLE IF EXISTS {FTS}",
]
POSTGRES = [
    f"CREATE INDEX message_search_gin ON {MESSAGES} "
    "USING GIN (to_tsvector('simple', title || ' ' || body))"
]
POSTGRES_UNDO = ["DROP INDEX IF EXISTS message_search_gin"]


def _run(statements_for):
    def run(apps, schema_editor):
        statements = statements_for.get(schema_editor.connection.vendor, [])
        for statement in statements:
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("channels_app", "0006_approval_indexes")]

    operations = [
        migrations.RunPython(
            _run({"sqlite": SQLITE, "postgresql": POSTGRES}),
            _run({"sqlite": SQLITE_UNDO, "postgresql": POSTGRES_UNDO}),
        )
    ]
