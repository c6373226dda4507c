"""Create or update the Celery beat schedules (sleep cycle at 02:00 local, temporal tick every 30 min)."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand

from sleep.services import SCHEDULES, schedules_setup


class Command(BaseCommand):
    help = "Create or update the periodic tasks of django-celery-beat from code; safe to run on every deploy."

    def handle(self, *args, **options) -> None:
        by_name = {schedule.name: schedule for schedule in SCHEDULES}
        for name, outcome in schedules_setup():
            schedule = by_name[name]
            self.stdout.write(
                f"{name}: {outcome} — {schedule.task} at minute {schedule.minute} hour {schedule.hour} "
                f"{settings.ANIMA_TIME_ZONE}, expires after {schedule.expire_seconds}s"
            )
