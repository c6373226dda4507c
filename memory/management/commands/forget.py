from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from anima.core.models import ForgetReason
from conversations.models import Person
from memory.forgetting import ForgetPlan, memory_forget, memory_forget_plan, person_forget, person_forget_plan
from memory.models import SemanticMemory


class Command(BaseCommand):
    help = (
        "Forget one memory (--memory ID) or everything about one person (--person SLUG) everywhere: its "
        "versions, the diary, summaries, digests and audit rows that quote or cite it, and with --messages the "
        "messages that stated it (for --person: their conversations, accounts and the person). Lists what "
        "will go and asks first, unless --yes."
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
            plan = memory_forget_plan(memory=target, messages=messages)
        else:
            target = Person.objects.filter(slug=person).first()
            if target is None:
                raise CommandError(f"unknown person {person!r}")
            plan = person_forget_plan(person=target, messages=messages)
        if not yes:
            self._show(plan)
            if input("Forget all of this? [y/N] ").strip().lower() not in {"y", "yes"}:
                raise CommandError("nothing forgotten")
        fields = {"messages": messages, "requested_by": "manage.py forget"}
        if reason:
            fields["reason"] = reason
        if memory is not None:
            tombstone = memory_forget(memory=target, **fields)
        else:
            tombstone = person_forget(person=target, **fields)
        summary = {"tombstone": tombstone.pk, "kind": tombstone.kind, "target_id": tombstone.target_id}
        if options["json"]:
            self.stdout.write(json.dumps({**summary, "entity_ids": tombstone.entity_ids, "counts": tombstone.counts}))
            return
        self.stdout.write(f"forgot {tombstone.kind} #{tombstone.target_id} (tombstone #{tombstone.pk})")
        for table, counts in tombstone.counts.items():
            self.stdout.write(f"  {table}: {counts['deleted']} deleted, {counts['redacted']} redacted")

    def _show(self, plan: ForgetPlan) -> None:
        self.stdout.write(f"Forgetting {plan.kind} #{plan.target_id} takes:")
        for row in plan.rows:
            self.stdout.write(f"  {row.action:<8} {row.table} #{row.pk}  {' '.join(row.label.split())[:120]}")
