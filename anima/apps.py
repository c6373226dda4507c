from django.apps import AppConfig


class AnimaConfig(AppConfig):
    name = "anima"
    default_auto_field = "django.db.models.BigAutoField"
