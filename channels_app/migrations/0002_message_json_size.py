"""Message.json_size: the bytes of each message's JSON, which reads and streams plan pages with.

Stored messages get theirs here, measured as the API spelled a message when this migration was
written (a frozen copy of that shape, so the migration never changes with the live code; a plan
only needs to be close: a page checks the bytes it renders)."""

import json

from django.db import migrations, models

BATCH = 500


def _size(row: dict, channel_name: str) -> int:
    record = {
        "seq": row["seq"],
        "id": row["id"],
        "channel": channel_name,
        "from": row["sender"],
        "to": row["to"],
        "reply_to": row["reply_to"],
        "status": row["status"],
        "title": row["title"],
        "body": row["body"],
        "ts": row["ts"].isoformat(),
        "kind": row["kind"],
        "conversation_id": row["conversation_id"] or None,
        "correlation_id": row["correlation_id"] or None,
        "data": row["data"],
        "content_type": row["content_type"] or None,
        "metadata": row["metadata"],
    }
    try:
        text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):  # a value JSON cannot carry: plan it as big as it can be
        return 2**31 - 1
    return len(text.encode("utf-8", "surrogatepass"))


def sizes_fill(apps, schema_editor):
    Message = apps.get_model("channels_app", "Message")
    Channel = apps.get_model("channels_app", "Channel")
    names = dict(Channel.objects.values_list("pk", "name"))
    fields = [
        "pk", "seq", "id", "channel_id", "sender", "to", "reply_to", "status", "title", "body",
        "ts", "kind", "conversation_id", "correlation_id", "data", "content_type", "metadata",
    ]
    last = ""
    while True:
        rows = list(Message.objects.filter(pk__gt=last).order_by("pk").values(*fields)[:BATCH])
        if not rows:
            return
        updates = [
            Message(pk=row["pk"], json_size=_size(row, names.get(row["channel_id"], "")))
            for row in rows
        ]
        Message.objects.bulk_update(updates, ["json_size"])
        last = rows[-1]["pk"]


class Migration(migrations.Migration):
    dependencies = [
        ("channels_app", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="json_size",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(sizes_fill, migrations.RunPython.noop, elidable=True),
        migrations.AddConstraint(
            model_name="message",
            constraint=models.CheckConstraint(
                condition=models.Q(json_size__gt=0), name="message_json_size_gt_0"
            ),
        ),
    ]
