from django.apps import AppConfig


class SleepConfig(AppConfig):
    name = "sleep"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The core's /metrics reads the sleep cycle's rows through the collector registered here.
        from anima.core.metrics import scrape_collector_register
        from sleep.metrics import sleep_metric_families

        scrape_collector_register(name="sleep", collect=sleep_metric_families)
        from sleep import system_checks  # noqa: F401 (registers the system checks)
