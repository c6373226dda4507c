"""`python manage.py prepare_turn --conversation EXTERNAL_ID --message TEXT [--at ISO] [--no-store] [--json]`."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from conversations.models import Conversation
from conversations.turn import prepare_turn
from temporal.management.commands.temporal_tick import parse_at


def messages_print(*, messages: list[dict], stdout) -> None:
    """The message list as an operator reads it: one headed block per message."""
    for index, message in enumerate(messages):
        name = f" ({message['name']})" if message["name"] else ""
        stdout.write(f"--- [{index}] {message['role']}{name}")
        stdout.write(message["content"])


class Command(BaseCommand):
    help = "Print the exact message list the LLM gets for the next turn of a conversation (stores the message)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--conversation", required=True, help="the conversation's external id")
        parser.add_argument("--message", required=True, help="the new user message")
        parser.add_argument("--at", help="assemble as of this moment (ISO-8601; naive = local time)")
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
            now=parse_at(options["at"]),
            store=not options["no_store"],
        )
        if options["json"]:
            self.stdout.write(json.dumps({"messages": messages}, ensure_ascii=False))
        else:
            messages_print(messages=messages, stdout=self.stdout)
