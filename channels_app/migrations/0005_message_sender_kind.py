"""Message.sender_kind (provenance, issue 11): ``human`` for the messages of human agents,
``agent`` for every other. The API's message JSON gains ``"sender_kind":"agent"`` or
``"sender_kind":"human"`` (both 22 bytes with the comma), which every stored ``json_size`` gets
added (a plan: a page checks the bytes it renders)."""

from django.db import migrations, models
from django.db.models import F

ADDED_BYTES = len(',"sender_kind":"agent"')  # "human" is as long


def kinds_fill(apps, schema_editor):
    Message = apps.get_model("channels_app", "Message")
    Agent = apps.get_model("core", "Agent")
    humans = Agent.objects.filter(kind="human").values("name")
    Message.objects.filter(sender__in=humans).update(sender_kind="human")
    Message.objects.update(json_size=F("json_size") + ADDED_BYTES)


class Migration(migrations.Migration):
    dependencies = [
        ("channels_app", "0004_channel_spellings_message_frontmatter"),
        ("core", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="sender_kind",
            field=models.CharField(
                choices=[("agent", "agent"), ("human", "human")], default="agent", max_length=8
            ),
        ),
        migrations.RunPython(kinds_fill, migrations.RunPython.noop, elidable=True),
    ]
