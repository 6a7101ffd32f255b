"""Message.imported and Message.claimed_sender_kind (provenance of imported messages), and the
partial index of the approval answers narrowed to those that may decide
(``channels_app.approval_rule.ANSWER_CONDITION``).

Messages imported before this migration are the rows with a ``ts_text`` (only the import sets
it): they are marked imported, their ``sender_kind`` goes back to ``agent`` (a file's claim is
no identity) and is kept as the claim the sync writes back, an audit-shaped one is a message,
and their ``json_size`` grows by the ``"imported":true`` the API now says of them.

On SQLite, adding a column that is not null remakes the table, which drops the full-text
search triggers of 0007 (and renumbers the rowids its index points at): they are made again
and the index rebuilt."""

import importlib

from django.db import migrations, models
from django.db.models import F

_SEARCH = importlib.import_module("channels_app.migrations.0007_message_search")

ADDED_BYTES = len(',"imported":true')


def imported_mark(apps, schema_editor):
    Message = apps.get_model("channels_app", "Message")
    rows = Message.objects.exclude(ts_text="")
    rows.filter(sender_kind="human").update(claimed_sender_kind="human")
    rows.filter(kind="audit").update(kind="message")
    rows.update(imported=True, sender_kind="agent", json_size=F("json_size") + ADDED_BYTES)


def search_triggers_again(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    for statement in _SEARCH.SQLITE_UNDO[:3] + _SEARCH.SQLITE[1:]:  # triggers, then rebuild
        schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("channels_app", "0008_marker_claim_text")]

    operations = [
        migrations.RemoveIndex(model_name="message", name="message_approval_answers"),
        migrations.AddField(
            model_name="message",
            name="claimed_sender_kind",
            field=models.CharField(blank=True, default="", max_length=8),
        ),
        migrations.AddField(
            model_name="message",
            name="imported",
            field=models.BooleanField(default=False),
        ),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                condition=models.Q(
                    ("imported", False),
                    ("sender_kind", "human"),
                    ("status__in", ("approved", "rejected")),
                ),
                fields=["channel", "reply_to"],
                name="message_approval_deciders",
            ),
        ),
        # The data last: on PostgreSQL no schema change may follow an update in the same
        # transaction (its deferred foreign-key checks are still pending).
        migrations.RunPython(search_triggers_again, migrations.RunPython.noop),
        migrations.RunPython(imported_mark, migrations.RunPython.noop, elidable=True),
    ]
