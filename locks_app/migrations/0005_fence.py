import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("channels_app", "0001_initial"),
        ("locks_app", "0004_pathlock_spellings"),
    ]

    operations = [
        migrations.AddField(
            model_name="pathlock",
            name="fence",
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.CreateModel(
            name="LockFence",
            fields=[
                (
                    "channel",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="lock_fence",
                        serialize=False,
                        to="channels_app.channel",
                    ),
                ),
                ("last_fence", models.PositiveBigIntegerField(default=0)),
            ],
            options={"verbose_name": "path lock fence"},
        ),
    ]
