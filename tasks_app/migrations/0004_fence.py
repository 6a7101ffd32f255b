from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tasks_app", "0003_lease_spellings_task_spellings"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="fence",
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="lease",
            name="fence",
            field=models.PositiveBigIntegerField(default=0),
        ),
    ]
