"""`python manage.py demo`: the whole job on embedded defaults, safe to re-run."""

from __future__ import annotations

import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Count, Max

from anima.agent.demo import (
    FIXTURES,
    SAMPLE_DAYS,
    demo_conversation_lines,
    demo_meaning_recall,
    demo_prepared_turn,
)
from anima.core.llm.minds import mind_configured, minds_since
from anima.core.models import AutoLlmRun, Component, Entity, MemoryStatus
from conversations.models import Conversation, Message, Person
from conversations.services import conversations_import
from memory.imports import memories_import
from sleep.selectors import sleep_failure_describe, sleep_run_failures, sleep_run_last


class Command(BaseCommand):
    help = "Migrate, create a staff user, import the bundled bilingual sample and show what Anima stored."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--no-input", action="store_true", help="accepted for scripts; the demo never prompts")

    def handle(self, *args, **options) -> None:
        self._section("1. Database")
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write(f"migrated {settings.DATABASES['default']['ENGINE']} database")

        self._section("2. Staff user for the Habitat console (/admin/)")
        self._ensure_staff_user()

        self._section("3. Bundled sample (Chinese and English, 3 days, 2 people, 3 channels)")
        for name, importer in (("conversations.jsonl", conversations_import), ("memories.jsonl", memories_import)):
            lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines()
            left_out = 0
            if importer is conversations_import:
                lines, left_out = demo_conversation_lines(lines=lines)
            report = importer(lines=lines)
            created = ", ".join(_counted(n, what) for what, n in sorted(report.created.items()) if n) or "nothing new"
            note = (
                f"; left out {_counted(left_out, 'empty conversations')} the nightly cleanup deleted"
                if left_out
                else ""
            )
            self.stdout.write(f"{name}: {report.imported} lines read, stored {created}{note}")

        self._section("4. What is stored")
        self._print_stored()

        self._section(f"5. Sleep: the nightly cycle for each sample day (LLM: {mind_configured().label()})")
        before = AutoLlmRun.objects.aggregate(last=Max("id"))["last"] or 0
        not_slept = {}
        for day in SAMPLE_DAYS:
            try:
                call_command("sleep_cycle", day=day, stdout=self.stdout, stderr=self.stderr)
            except CommandError as exc:
                # A failed or partial night is reported, and the demo goes on: the next nights retry what failed.
                not_slept[day] = str(exc)
            self.stdout.write("")
        self._print_slept()
        self._print_minds(after_id=before)
        self._print_not_slept(not_slept)

        self._section("6. A prepared turn (system prompt, peers of other conversations, passive recall)")
        demo_prepared_turn(stdout=self.stdout)

        self._section("7. Recall by meaning (vectors filled after the import, then fused with keywords)")
        demo_meaning_recall(stdout=self.stdout)

        self._section("Next")
        self.stdout.write(
            "console: python manage.py runserver, then http://127.0.0.1:8000/admin/"
            " (Sleep page: /admin/sleep/dashboard/)"
        )
        self.stdout.write(
            f"API token: python manage.py drf_create_token {settings.ANIMA_ADMIN_USERNAME}; docs at /api/docs/"
        )
        self.stdout.write('recall: python manage.py recall "你的邮箱是啥？"')

    def _section(self, title: str) -> None:
        self.stdout.write("")
        self.stdout.write(self.style.MIGRATE_HEADING(title))

    def _ensure_staff_user(self) -> None:
        username = settings.ANIMA_ADMIN_USERNAME
        password = settings.ANIMA_ADMIN_PASSWORD or self._stored_password()
        user, created = get_user_model().objects.get_or_create(
            username=username, defaults={"is_staff": True, "is_superuser": True}
        )
        if created or settings.ANIMA_ADMIN_PASSWORD:
            user.set_password(password)
            user.save()
        source = "ANIMA_ADMIN_PASSWORD" if settings.ANIMA_ADMIN_PASSWORD else f"{settings.VAR_DIR / 'admin_password'}"
        self.stdout.write(f"user {username!r} ({'created' if created else 'exists'}); password from {source}")
        if not settings.ANIMA_ADMIN_PASSWORD:
            self.stdout.write(f"  login: {username} / {password}")

    def _stored_password(self) -> str:
        # Generated once and kept under var/ (git-ignored) so re-runs print the same credentials.
        path = Path(settings.VAR_DIR) / "admin_password"
        if path.exists():
            return path.read_text().strip()
        path.parent.mkdir(parents=True, exist_ok=True)
        password = secrets.token_urlsafe(12)
        path.write_text(password)
        path.chmod(0o600)
        return password

    def _print_stored(self) -> None:
        kinds = dict(Entity.objects.values_list("primary_component").annotate(n=Count("id")))
        semantic = Entity.objects.filter(primary_component=Component.SEMANTIC_MEMORY)
        self.stdout.write(
            f"people {Person.objects.count()}, conversations {Conversation.objects.count()}, "
            f"messages {Message.objects.count()}, "
            + ", ".join(f"{kind} {kinds.get(kind, 0)}" for kind in Component.values)
        )
        by_platform = Conversation.objects.values_list("platform").annotate(n=Count("id")).order_by("platform")
        self.stdout.write("conversations by platform: " + ", ".join(f"{p} {n}" for p, n in by_platform))
        for person in Person.objects.order_by("slug"):
            self.stdout.write(f"\n{person.slug}:")
            for memory in semantic.filter(person=person).order_by("created_at")[:8]:
                pin = " (pinned)" if memory.pinned else ""
                self.stdout.write(f"  [{memory.memory_type}] {memory.content} [[anima:{memory.pk}]]{pin}")
        self.stdout.write("\nglobal:")
        for memory in semantic.filter(person=None).order_by("created_at"):
            self.stdout.write(f"  [{memory.memory_type}] {memory.content} [[anima:{memory.pk}]]")

    def _print_not_slept(self, not_slept: dict) -> None:
        """Which nights were not fully slept, and for each what was left undone (conversation, stage, why)."""
        if not not_slept:
            return
        self.stdout.write(self.style.WARNING(f"\nnights not fully slept: {len(not_slept)} of {len(SAMPLE_DAYS)}"))
        for day, error in not_slept.items():
            run = sleep_run_last(day=day)
            failures = sleep_run_failures(run=run) if run is not None else []
            status = f"run #{run.pk}, {run.status}" if run is not None else "not run"
            self.stdout.write(self.style.WARNING(f"  night {day} ({status})"))
            for failure in failures:
                self.stdout.write(f"    {sleep_failure_describe(failure=failure)}")
            if not failures:
                self.stdout.write(f"    {error}")

    def _print_minds(self, *, after_id: int) -> None:
        """Which mind the nights ran on, as their audit rows say (not as the settings hope)."""
        minds = minds_since(after_id=after_id)
        if not minds:
            self.stdout.write("\nwhich mind ran: no LLM call was made")
        for mind in minds:
            self.stdout.write(f"\nwhich mind ran: {mind.label()}; {mind.calls} calls, {mind.tokens} tokens")

    def _print_slept(self) -> None:
        for day in SAMPLE_DAYS:
            self.stdout.write(self.style.MIGRATE_LABEL(f"\n{day}"))
            learned = Entity.objects.filter(
                primary_component=Component.SEMANTIC_MEMORY, source_day=day, source_conversation__isnull=False
            )
            for memory in learned.order_by("id")[:6]:
                self.stdout.write(f"  fact      [{memory.memory_type}/{memory.status}] {memory.content}")
            blocks = Entity.objects.filter(primary_component=Component.CONTENT_BLOCK, parent__source_day=day)
            for block in blocks.order_by("tag", "id"):
                intensity = block.body.get("intensity")
                extra = f" (intensity {intensity})" if intensity is not None else ""
                self.stdout.write(f"  {block.tag:<9} {_clip(block.content)}{extra}")
            summary = Entity.objects.filter(
                primary_component=Component.TEMPORAL_SUMMARY, body__window="day", body__period_start=day.isoformat()
            ).first()
            if summary:
                self.stdout.write(f"  day summary: {_clip(summary.content, 300)}")
        retired = Entity.objects.filter(
            primary_component=Component.SEMANTIC_MEMORY, status__in=[MemoryStatus.EXPIRED, MemoryStatus.DEPRECATED]
        )
        if retired.exists():
            self.stdout.write(self.style.MIGRATE_LABEL("\nretired facts (kept for belief history, out of recall)"))
            for memory in retired.order_by("id"):
                why = f" — {memory.expired_reason}" if memory.expired_reason else ""
                now_held = f" → [[anima:{memory.superseded_by_id}]]" if memory.superseded_by_id else ""
                self.stdout.write(f"  [{memory.memory_type}/{memory.status}] {memory.content}{why}{now_held}")


def _counted(n: int, what: str) -> str:
    """``1 conversation``, ``2 conversations``; kinds that are not plural nouns (``2 limbic``) as they are."""
    return f"{n} {what[:-1] if n == 1 and what.endswith('s') else what}"


def _clip(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
