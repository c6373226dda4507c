"""What each fact states of its subject (its slot's attribute), so recall can bring the facts a question asks for.

The next night's ``subjects`` step fills it for every active fact; until then recall finds them as before.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0005_restated_facts_provenance"),
    ]

    operations = [
        migrations.AddField(
            model_name="subjectmention",
            name="attribute",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
    ]
