from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from rest_framework.authtoken.models import Token

from anima.core.errors import AnimaError
from conversations.access import access_for_user, conversation_find
from conversations.models import Person, ScopeKind
from conversations.services import scoped_token_ensure, token_scope_clear, token_scope_set


class Command(BaseCommand):
    help = (
        "Show, set or clear what a non-staff user's API token may reach: agent (tools, turn assembly, proxy; "
        "bound to persons and/or conversations) or person (one person plus global memories). "
        "Without --scope or --clear it shows the current scope. With --create the user and its token are made "
        "too (the key is printed once)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("user", help="username")
        action = parser.add_mutually_exclusive_group()
        action.add_argument("--scope", choices=ScopeKind.values, help="give this scope (replaces any earlier one)")
        action.add_argument("--clear", action="store_true", help="take the scope away: the token has no rights")
        parser.add_argument("--person", nargs="+", action="extend", default=[], metavar="SLUG", help="bound person")
        parser.add_argument(
            "--conversation", nargs="+", action="extend", default=[], metavar="EXT", help="bound conversation"
        )
        parser.add_argument(
            "--create",
            action="store_true",
            help="with --scope: create the (non-staff) user when missing and its API token, and print the key",
        )

    def handle(
        self,
        *args,
        user: str,
        scope: str | None,
        clear: bool,
        person: list,
        conversation: list,
        create: bool,
        **options,
    ):
        if create and scope is None:
            raise CommandError("--create needs --scope: a new user's token has no rights without one")
        if (person or conversation) and scope is None:
            raise CommandError("--person and --conversation need --scope")
        if create:
            try:
                found, key = scoped_token_ensure(
                    username=user,
                    scope=scope,
                    persons=self._persons(person),
                    conversations=self._conversations(conversation),
                )
            except AnimaError as exc:
                raise CommandError(str(exc)) from None
            self.stdout.write(f"{user}: {access_for_user(found).binding}")
            if key is not None:
                self.stdout.write(f"token {key}  (shown once: give it to the agent as its API key)")
            return
        found = get_user_model().objects.filter(username=user).first()
        if found is None:
            raise CommandError(f"no user {user!r} (--create makes it)")
        if clear:
            cleared = token_scope_clear(user=found)
            self.stdout.write(f"{user}: scope cleared" if cleared else f"{user}: had no scope")
        elif scope is not None:
            try:
                token_scope_set(
                    user=found,
                    scope=scope,
                    persons=self._persons(person),
                    conversations=self._conversations(conversation),
                )
            except AnimaError as exc:
                raise CommandError(str(exc)) from None
        self.stdout.write(f"{user}: {access_for_user(found).binding}")
        if not Token.objects.filter(user=found).exists():
            self.stdout.write(f"(no API token yet: python manage.py drf_create_token {user})")

    @staticmethod
    def _persons(slugs: list[str]) -> list[Person]:
        persons = {person.slug: person for person in Person.objects.filter(slug__in=slugs)}
        missing = [slug for slug in slugs if slug not in persons]
        if missing:
            raise CommandError(f"unknown person(s): {', '.join(missing)}")
        return list(persons.values())

    @staticmethod
    def _conversations(references: list[str]) -> list:
        found = {reference: conversation_find(reference) for reference in references}
        missing = [reference for reference, conversation in found.items() if conversation is None]
        if missing:
            raise CommandError(f"unknown conversation(s): {', '.join(missing)}")
        return list(found.values())
