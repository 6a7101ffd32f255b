"""The approvals' partial indexes cover what the pending query reads (``channels_app.models``,
``channels_app.approval_rule``): deciding what is pending reads no message row, whose columns
after a long body SQLite reaches through the body's overflow pages (issue 17: 300 requests of
400 KB took 19 s a call). Index changes only: no table is remade."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('channels_app', '0011_ep_signals'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='message',
            name='message_approval_requests',
        ),
        migrations.RemoveIndex(
            model_name='message',
            name='message_approval_deciders',
        ),
        migrations.AddIndex(
            model_name='message',
            index=models.Index(condition=models.Q(('status', 'needs-approval')), fields=['channel', 'seq', 'ts', 'id', 'sender', 'json_size', 'status'], name='message_approval_requests'),
        ),
        migrations.AddIndex(
            model_name='message',
            index=models.Index(condition=models.Q(('imported', False), ('sender_kind', 'human'), ('status__in', ('approved', 'rejected'))), fields=['channel', 'reply_to', 'sender', 'status', 'sender_kind', 'imported'], name='message_approval_deciders'),
        ),
    ]
