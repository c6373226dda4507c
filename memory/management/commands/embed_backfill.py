"""Embed the rows that have no vector from the current model yet; a thin adapter over memory.embedding."""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandError

from anima.core.embeddings import EmbeddingsUnavailable
from memory.embedding import DEFAULT_BATCH, embed_backfill_run


class Command(BaseCommand):
    help = (
        "Embed semantic memories, diary blocks, temporal summaries and messages that have no vector yet "
        "(resumable; exits 0 when nothing is pending or recall is keyword-only here)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--batch", type=int, default=DEFAULT_BATCH, help="texts per model call")
        parser.add_argument("--limit", type=int, help="stop after embedding this many rows")
        parser.add_argument(
            "--json", action="store_true", help="print {model, available, embedded, pending, unusable, seconds}"
        )
        parser.add_argument("--rebuild", action="store_true", help="delete every vector first (after a model change)")

    def handle(self, *args, **options) -> None:
        if options["batch"] < 1 or (options["limit"] is not None and options["limit"] < 0):
            raise CommandError("--batch must be at least 1 and --limit at least 0")

        def progress(embedded: int, pending: int) -> None:
            sys.stderr.write(f"embedded {embedded}, pending {pending}\n")

        try:
            report = embed_backfill_run(
                batch=options["batch"], limit=options["limit"], rebuild=options["rebuild"], progress=progress
            )
        except EmbeddingsUnavailable as exc:
            raise CommandError(str(exc)) from exc
        if options["json"]:
            self.stdout.write(json.dumps(report.as_dict()))
            if not report.available:
                sys.stderr.write(f"{report.reason}\n")
        elif not report.available:
            self.stdout.write(f"nothing embedded: {report.reason}")
        else:
            unusable = (
                f" ({report.unusable} without a usable vector from the server, see the log)" if report.unusable else ""
            )
            self.stdout.write(
                f"{report.model}: embedded {report.embedded} in {report.seconds:.1f} s; {report.pending} pending"
                + unusable
            )
