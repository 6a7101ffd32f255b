"""HTTP v1: a channel's direct pair (the direct channel of two agents' envelopes), the agents'
mailboxes (inbox and address-book counters), deliveries, contacts and their events.

On SQLite, adding the unique column remakes the channel table; the messages' full-text search
triggers of 0007 are on the message table and stay."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('channels_app', '0009_message_imported'),
        ('core', '0001_initial'),
    ]

    operations = [
        migrations.AddField(
            model_name='channel',
            name='direct_pair',
            field=models.CharField(blank=True, max_length=129, null=True, unique=True),
        ),
        migrations.CreateModel(
            name='Mailbox',
            fields=[
                ('agent', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='mailbox', serialize=False, to='core.agent')),
                ('inbox_tail', models.BigIntegerField(default=0)),
                ('inbox_at', models.DateTimeField(blank=True, null=True)),
                ('book_tail', models.BigIntegerField(default=0)),
            ],
            options={
                'constraints': [models.CheckConstraint(condition=models.Q(('book_tail__gte', 0), ('inbox_tail__gte', 0)), name='mailbox_tails_gte_0')],
            },
        ),
        migrations.CreateModel(
            name='Contact',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('contact_id', models.CharField(max_length=64)),
                ('card', models.JSONField()),
                ('event_seq', models.BigIntegerField()),
                ('updated_at', models.DateTimeField()),
                ('owner', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='contacts', to='core.agent')),
            ],
            options={
                'ordering': ['owner_id', 'contact_id'],
                'constraints': [models.UniqueConstraint(fields=('owner', 'contact_id'), name='contact_owner_id')],
            },
        ),
        migrations.CreateModel(
            name='ContactEvent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('seq', models.BigIntegerField()),
                ('contact_id', models.CharField(max_length=64)),
                ('card', models.JSONField()),
                ('source', models.CharField(choices=[('put', 'put'), ('share', 'share')], max_length=8)),
                ('share_from', models.CharField(blank=True, default='', max_length=64)),
                ('share_id', models.CharField(blank=True, default='', max_length=128)),
                ('created_at', models.DateTimeField()),
                ('owner', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='contact_events', to='core.agent')),
            ],
            options={
                'ordering': ['owner_id', 'seq'],
                'constraints': [models.UniqueConstraint(fields=('owner', 'seq'), name='contact_event_owner_seq'), models.UniqueConstraint(condition=models.Q(('source', 'share')), fields=('owner', 'share_from', 'share_id'), name='contact_event_share_once'), models.CheckConstraint(condition=models.Q(('seq__gte', 0)), name='contact_event_seq_gte_0')],
            },
        ),
        migrations.CreateModel(
            name='Delivery',
            fields=[
                ('message', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='delivery', serialize=False, to='channels_app.message')),
                ('seq', models.BigIntegerField()),
                ('sender', models.CharField(max_length=64)),
                ('envelope_id', models.CharField(max_length=128)),
                ('kind', models.CharField(choices=[('message', 'message'), ('contact.share', 'contact.share'), ('receipt', 'receipt')], default='message', max_length=16)),
                ('has_text', models.BooleanField(default=False)),
                ('delivered_at', models.DateTimeField()),
                ('request_digest', models.CharField(max_length=64)),
                ('recipient', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='core.agent')),
            ],
            options={
                'indexes': [models.Index(fields=['recipient', 'envelope_id'], name='delivery_received_id')],
                'constraints': [models.UniqueConstraint(fields=('recipient', 'seq'), name='delivery_inbox_seq'), models.UniqueConstraint(fields=('sender', 'envelope_id'), name='delivery_sender_id'), models.CheckConstraint(condition=models.Q(('seq__gte', 0)), name='delivery_seq_gte_0')],
            },
        ),
    ]
