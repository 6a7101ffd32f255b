"""EP-0118: Message.signal_type (a signal is a message with a type) and the partial index of a
channel's signals, SignalRead (per-message read markers of ``ack_signals``) and
WhiteboardEntry (a channel's key/value store).

On SQLite, adding a column that is not null remakes the messages table, which drops the
full-text search triggers of 0007: they are made again and the index rebuilt, as in 0009."""

import importlib

import django.db.models.deletion
from django.db import migrations, models

_SEARCH = importlib.import_module("channels_app.migrations.0007_message_search")


def search_triggers_again(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    for statement in _SEARCH.SQLITE_UNDO[:3] + _SEARCH.SQLITE[1:]:  # triggers, then rebuild
        schema_editor.execute(statement)


class Migration(migrations.Migration):

    dependencies = [
        ('channels_app', '0010_v1_inbox'),
        ('core', '0001_initial'),
    ]

    operations = [
        migrations.CreateModel(
            name='SignalRead',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('read_at', models.DateTimeField()),
            ],
        ),
        migrations.CreateModel(
            name='WhiteboardEntry',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key', models.CharField(max_length=128)),
                ('value_json', models.TextField()),
                ('size', models.PositiveIntegerField()),
                ('updated_by', models.CharField(max_length=64)),
                ('updated_at', models.DateTimeField()),
                ('audit_seq', models.BigIntegerField()),
            ],
            options={
                'ordering': ['channel_id', 'key'],
            },
        ),
        migrations.AddField(
            model_name='message',
            name='signal_type',
            field=models.CharField(blank=True, default='', max_length=16),
        ),
        migrations.AddIndex(
            model_name='message',
            index=models.Index(condition=models.Q(('signal_type', ''), _negated=True), fields=['channel', 'seq'], name='message_signal_seq'),
        ),
        migrations.AddField(
            model_name='signalread',
            name='agent',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='signal_reads', to='core.agent'),
        ),
        migrations.AddField(
            model_name='signalread',
            name='message',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='signal_reads', to='channels_app.message'),
        ),
        migrations.AddField(
            model_name='whiteboardentry',
            name='channel',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='whiteboard', to='channels_app.channel'),
        ),
        migrations.AddConstraint(
            model_name='signalread',
            constraint=models.UniqueConstraint(fields=('agent', 'message'), name='signal_read_unique'),
        ),
        migrations.AddConstraint(
            model_name='whiteboardentry',
            constraint=models.UniqueConstraint(fields=('channel', 'key'), name='whiteboard_channel_key'),
        ),
        migrations.RunPython(search_triggers_again, migrations.RunPython.noop),
    ]
