"""`python manage.py mcp [--person SLUG] [--conversation EXT]`, or `mcp --transport http [--host H] [--port P]`."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from anima.agent.mcp import mcp_serve_http, mcp_serve_stdio, mcp_stdio_access
from anima.core.errors import AccessDenied, AnimaError


class Command(BaseCommand):
    help = (
        "Serve the agent tools over MCP: on stdin/stdout (operator, narrowed by --person / --conversation), "
        "or over streamable HTTP at /mcp (API tokens: Authorization: Bearer <key>)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
        parser.add_argument("--host", default="127.0.0.1", help="http: address to listen on (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=8001, help="http: port (default 8001)")
        parser.add_argument("--person", help="stdio: act for this person (slug)")
        parser.add_argument("--conversation", help="stdio: act in this conversation (external id); its person")

    def handle(self, *args, **options) -> None:
        if options["transport"] == "http":
            if options["person"] or options["conversation"]:
                raise CommandError(
                    "--person / --conversation narrow stdio only; over HTTP the token's binding and the "
                    "X-Anima-Person / X-Anima-Conversation headers do"
                )
            mcp_serve_http(host=options["host"], port=options["port"])
            return
        try:
            access = mcp_stdio_access(person=options["person"], conversation=options["conversation"])
        except (AccessDenied, AnimaError) as exc:
            raise CommandError(str(exc)) from None
        mcp_serve_stdio(access=access)
