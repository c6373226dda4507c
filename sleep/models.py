"""Pipeline runs of the nightly sleep cycle: one row per run, one per step execution."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

ACTIVE_STATUSES = ("queued", "running")


class RunTrigger(models.TextChoices):
    CRON = "cron", "Cron"
    MANUAL = "manual", "Manual"
    CATCH_UP = "catch-up", "Catch-up"


class DeepSleepMode(models.TextChoices):
    FULL = "full", "Full"
    INCREMENTAL = "incremental", "Incremental"


class RunStatus(models.TextChoices):
    # Requested (API, console), waiting for a worker or the background thread.
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    # Every step ran, but one did part of its work only (a conversation of the night failed): see its error.
    PARTIAL = "partial", "Partial"
    FAILED = "failed", "Failed"


class StepStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    # Done for some of its items, failed for others (listed in its output's ``failures``); dependants run.
    PARTIAL = "partial", "Partial"
    FAILED = "failed", "Failed"
    SKIPPED = "skipped", "Skipped"


# A step in one of these is done: its dependants may run, and a resumed run does not do it again.
DONE_STATUSES = (StepStatus.SUCCEEDED, StepStatus.PARTIAL)


class PipelineRun(models.Model):
    pipeline = models.CharField(max_length=64, default="sleep-cycle")
    day = models.DateField(db_index=True)
    trigger = models.CharField(max_length=16, choices=RunTrigger.choices, default=RunTrigger.MANUAL)
    mode = models.CharField(max_length=16, choices=DeepSleepMode.choices, default=DeepSleepMode.FULL)
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.RUNNING)
    options = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True, default="")
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "pipeline_run"
        ordering = ["-started_at"]
        constraints = [
            # One run of a pipeline at a time: a second request is refused (409) naming the active one.
            models.UniqueConstraint(
                fields=["pipeline"], condition=Q(status__in=ACTIVE_STATUSES), name="pipeline_run_one_active"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.pipeline} {self.day} ({self.status})"


class PipelineStepRun(models.Model):
    run = models.ForeignKey(PipelineRun, on_delete=models.CASCADE, related_name="steps")
    step = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=StepStatus.choices, default=StepStatus.PENDING)
    attempt = models.PositiveIntegerField(default=1)
    output = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True, default="")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "pipeline_step_run"
        ordering = ["run", "id"]
        constraints = [
            # A manual retry is a new row with attempt + 1, never an overwrite.
            models.UniqueConstraint(fields=["run", "step", "attempt"], name="pipeline_step_run_attempt_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.step} #{self.attempt} ({self.status})"

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None


class LightSleepWatermark(models.Model):
    """How far light sleep consolidated one conversation's messages of one local day.

    Messages of that day stored later (an import, a delayed client) have larger ids: the next
    run consolidates just those. Advanced only after every stage of the batch succeeded. A batch
    that failed leaves it where it was (0: nothing consolidated yet) with the stage and the error,
    so that every run of the following days (within light sleep's look-back) tries it again.
    """

    conversation = models.ForeignKey("conversations.Conversation", on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    last_message_id = models.BigIntegerField()
    # The stage of the last attempt that failed and why; blank once a later attempt succeeded.
    failed_stage = models.CharField(max_length=32, blank=True, default="")
    error = models.TextField(blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "sleep_light_watermarks"
        constraints = [
            models.UniqueConstraint(fields=["conversation", "day"], name="sleep_light_watermark_once"),
        ]

    def __str__(self) -> str:
        return f"conversation {self.conversation_id} on {self.day}: up to message {self.last_message_id}"


class PipelineItemRun(models.Model):
    """One item (a conversation) of a fanned-out step execution, carried out by its own task.

    The join reads these rows, not the tasks' results, so a task delivered twice counts once.
    """

    step_run = models.ForeignKey(PipelineStepRun, on_delete=models.CASCADE, related_name="items")
    item = models.BigIntegerField()
    status = models.CharField(max_length=16, choices=StepStatus.choices, default=StepStatus.RUNNING)
    output = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True, default="")
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "pipeline_item_run"
        ordering = ["step_run", "item"]
        constraints = [models.UniqueConstraint(fields=["step_run", "item"], name="pipeline_item_run_unique")]

    def __str__(self) -> str:
        return f"{self.step_run.step} item {self.item} ({self.status})"
