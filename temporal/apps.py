from django.apps import AppConfig


class TemporalConfig(AppConfig):
    name = "temporal"
    default_auto_field = "django.db.models.BigAutoField"
