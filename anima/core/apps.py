from pathlib import Path

from django.apps import AppConfig
from django.conf import settings
from django.db.backends.signals import connection_created


class CoreConfig(AppConfig):
    name = "anima.core"
    # The label the models had before the layers were split out: tables, content types and migrations keep it.
    label = "anima"
    verbose_name = "Anima"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from anima.core import checks  # noqa: F401 (registers the system checks)
        from anima.core.db import tolerant_date_loaders_register
        from anima.core.embedded.server import abandoned_server_stop_at_exit, sigterm_exits_cleanly

        connection_created.connect(tolerant_date_loaders_register, dispatch_uid="anima-tolerant-date-loaders")
        if settings.DATABASES["default"]["ENGINE"] == "anima.core.embedded":
            sigterm_exits_cleanly()
            abandoned_server_stop_at_exit(Path(settings.ANIMA_EMBEDDED_PG_DIR))
