from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "anima.core"
    # The label the models had before the layers were split out: tables, content types and migrations keep it.
    label = "anima"
    verbose_name = "Anima"
    default_auto_field = "django.db.models.BigAutoField"
