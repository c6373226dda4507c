"""`python manage.py prepare_turn --conversation EXTERNAL_ID --message TEXT [--at ISO] [--no-store] [--json]`."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from anima.agent.turn import messages_format, prepare_turn
from anima.core.commands import moment_arg
from conversations.models import Conversation


class Command(BaseCommand):
    help = "Print the exact message list the LLM gets for the next turn of a conversation (stores the message)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--conversation", required=True, help="the conversation's external id")
        parser.add_argument("--message", required=True, help="the new user message")
        parser.add_argument("--at", type=moment_arg, help="assemble as of this moment (ISO-8601; naive = local time)")
        parser.add_argument("--no-store", action="store_true", help="do not store the user message")
        parser.add_argument("--json", action="store_true", help='end with one line {"messages": [...]}')

    def handle(self, *args, **options) -> None:
        try:
            conversation = Conversation.objects.select_related("person").get(external_id=options["conversation"])
        except Conversation.DoesNotExist:
            raise CommandError(f"no conversation with external id {options['conversation']!r}") from None
        messages = prepare_turn(
            conversation=conversation,
            user_message=options["message"],
            now=options["at"],
            store=not options["no_store"],
        )
        if options["json"]:
            self.stdout.write(json.dumps({"messages": messages}, ensure_ascii=False))
        else:
            self.stdout.write(messages_format(messages=messages))
