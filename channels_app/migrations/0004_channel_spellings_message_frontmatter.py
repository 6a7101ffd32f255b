"""Issue 10's folder fields: ``Channel.spellings`` (times as an imported ``_meta.json`` spelled
them) and ``Message.frontmatter`` (an imported file's extra keys). The API now spells a
message's ``ts`` to the second, so the stored ``json_size`` of every message is measured again:
with migration 0002's frozen shape of the record and that one spelling changed (a frozen shape,
so this migration never changes with the live code)."""

import importlib
from datetime import UTC

from django.db import migrations, models

_V2 = importlib.import_module("channels_app.migrations.0002_message_json_size")


class _Spelled:
    """A ``ts`` that 0002's shape spells as the API now does: as an import kept it, else UTC
    to the second."""

    def __init__(self, row):
        self.text = row["ts_text"] or row["ts"].astimezone(UTC).isoformat(timespec="seconds")

    def isoformat(self) -> str:
        return self.text


def sizes_refill(apps, schema_editor):
    Message = apps.get_model("channels_app", "Message")
    Channel = apps.get_model("channels_app", "Channel")
    names = dict(Channel.objects.values_list("pk", "name"))
    fields = [
        "pk", "seq", "id", "channel_id", "sender", "to", "reply_to", "status", "title", "body",
        "ts", "ts_text", "kind", "conversation_id", "correlation_id", "data", "content_type",
        "metadata",
    ]  # fmt: skip
    last = ""
    while True:
        rows = list(Message.objects.filter(pk__gt=last).order_by("pk").values(*fields)[: _V2.BATCH])
        if not rows:
            return
        updates = []
        for row in rows:
            spelled = {**row, "ts": _Spelled(row)}
            size = _V2._size(spelled, names.get(row["channel_id"], ""))
            updates.append(Message(pk=row["pk"], json_size=size))
        Message.objects.bulk_update(updates, ["json_size"])
        last = rows[-1]["pk"]


class Migration(migrations.Migration):
    dependencies = [
        ("channels_app", "0003_presence_and_event_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="channel",
            name="spellings",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="message",
            name="frontmatter",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.RunPython(sizes_refill, migrations.RunPython.noop, elidable=True),
    ]
