from django.apps import AppConfig


class AgentConfig(AppConfig):
    name = "anima.agent"
    label = "agent"
    verbose_name = "Agent runtime"
    default_auto_field = "django.db.models.BigAutoField"
