from django.apps import AppConfig


class SleepConfig(AppConfig):
    name = "sleep"
    default_auto_field = "django.db.models.BigAutoField"
