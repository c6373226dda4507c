from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from anima.core.models import ForgetReason
from conversations.models import Person
from memory.forgetting import ForgetPlan, PlannedRow, memory_forget, memory_forget_paraphrases, memory_forget_plan
from memory.forgetting_person import person_forget, person_forget_plan
from memory.models import SemanticMemory


class Command(BaseCommand):
    help = (
        "Forget one memory (--memory ID) or everything about one person (--person SLUG) everywhere: its "
        "versions, the diary, summaries, digests and audit rows that quote or cite it, and with --messages the "
        "messages that stated it (for --person: their conversations, accounts and the person). Lists what "
        "will go and asks first, unless --yes; for --memory, also lists what may say it in other words (found by "
        "recall, left for you to review)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--memory", type=int, help="semantic memory id")
        target.add_argument("--person", help="person slug (right to erasure)")
        parser.add_argument("--messages", action="store_true", help="redact the messages too")
        parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
        parser.add_argument("--reason", choices=ForgetReason.values, help="recorded on the tombstone")
        parser.add_argument("--json", action="store_true", help="print the tombstone as JSON")

    def handle(self, *args, memory, person, messages, yes, reason, **options) -> None:
        if memory is not None:
            target = SemanticMemory.objects.filter(pk=memory).first()
            if target is None:
                raise CommandError(f"no semantic memory #{memory}")
        else:
            target = Person.objects.filter(slug=person).first()
            if target is None:
                raise CommandError(f"unknown person {person!r}")
        review: list[PlannedRow] = []
        if not yes:
            if memory is not None:
                plan = memory_forget_plan(memory=target, messages=messages)
            else:
                plan = person_forget_plan(person=target, messages=messages)
            self._show(plan)
            if input("Forget all of this? [y/N] ").strip().lower() not in {"y", "yes"}:
                raise CommandError("nothing forgotten")
            review = plan.review
        elif memory is not None:
            # Found before the forget, while the texts to look for still exist.
            review = memory_forget_paraphrases(memory=target, messages=messages)
        fields = {"messages": messages, "requested_by": "manage.py forget"}
        if reason:
            fields["reason"] = reason
        if memory is not None:
            tombstone = memory_forget(memory=target, **fields)
        else:
            tombstone = person_forget(person=target, **fields)
        summary = {"tombstone": tombstone.pk, "kind": tombstone.kind, "target_id": tombstone.target_id}
        if options["json"]:
            left = [{"table": row.table, "id": row.pk, "label": row.label} for row in review]
            summary |= {"entity_ids": tombstone.entity_ids, "counts": tombstone.counts, "review": left}
            self.stdout.write(json.dumps(summary, ensure_ascii=False))
            return
        self.stdout.write(f"forgot {tombstone.kind} #{tombstone.target_id} (tombstone #{tombstone.pk})")
        for table, counts in tombstone.counts.items():
            self.stdout.write(f"  {table}: {counts['deleted']} deleted, {counts['redacted']} redacted")
        self._rows("Left as they are, may say it in other words (review them; forget or edit what does):", review)

    def _show(self, plan: ForgetPlan) -> None:
        self._rows(f"Forgetting {plan.kind} #{plan.target_id} takes:", plan.rows)
        self._rows("It leaves these, which may say it in other words (review them after):", plan.review)

    def _rows(self, heading: str, rows: list[PlannedRow]) -> None:
        if not rows:
            return
        self.stdout.write(heading)
        for row in rows:
            self.stdout.write(f"  {row.action:<8} {row.table} #{row.pk}  {' '.join(row.label.split())[:120]}")
