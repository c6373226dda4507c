from django.apps import AppConfig
from django.db.backends.signals import connection_created


class CoreConfig(AppConfig):
    name = "anima.core"
    # The label the models had before the layers were split out: tables, content types and migrations keep it.
    label = "anima"
    verbose_name = "Anima"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from anima.core.db import tolerant_date_loaders_register

        connection_created.connect(tolerant_date_loaders_register, dispatch_uid="anima-tolerant-date-loaders")
