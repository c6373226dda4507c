from __future__ import annotations

import io
import json

from django.core.management import call_command
from django_celery_beat.models import PeriodicTask


def setup_schedules() -> str:
    out = io.StringIO()
    call_command("setup_schedules", stdout=out)
    return out.getvalue()


def test_schedules_are_created_from_code_with_local_times_and_expiry():
    output = setup_schedules()

    sleep_task = PeriodicTask.objects.get(name="sleep-cycle")
    assert sleep_task.task == "sleep.tasks.run_sleep_cycle"
    assert json.loads(sleep_task.kwargs) == {"trigger": "cron"}  # the mode is decided when it runs
    assert (sleep_task.crontab.minute, sleep_task.crontab.hour) == ("0", "2")
    assert str(sleep_task.crontab.timezone) == "Asia/Shanghai"
    tick = PeriodicTask.objects.get(name="temporal-tick")
    assert tick.task == "temporal.tasks.temporal_tick"
    assert (tick.crontab.minute, tick.crontab.hour) == ("0,30", "*")
    assert all(task.expire_seconds and task.enabled for task in (sleep_task, tick))
    assert "sleep-cycle: created" in output and "temporal-tick: created" in output


def test_running_it_again_changes_nothing_and_repairs_edits():
    setup_schedules()

    assert "sleep-cycle: unchanged" in setup_schedules()
    assert PeriodicTask.objects.filter(name__in=["sleep-cycle", "temporal-tick"]).count() == 2

    PeriodicTask.objects.filter(name="sleep-cycle").update(enabled=False, expire_seconds=None)
    output = setup_schedules()

    assert "sleep-cycle: updated (expire_seconds, enabled)" in output
    task = PeriodicTask.objects.get(name="sleep-cycle")
    assert task.enabled and task.expire_seconds == 3 * 3600
