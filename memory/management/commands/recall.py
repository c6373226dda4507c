from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from anima.core.calendar import moment_parse
from anima.core.commands import date_arg
from conversations.models import Person
from memory.search import QuerySyntaxError, SearchTimeout, dense_status
from memory.selectors import MEMORY_TYPES, memory_recall, recall_keywords

BATCH_FIELDS = (
    "memory_type",
    "id",
    "external_id",
    "score",
    "snippet",
    "conversation_external_id",
    "message_external_id",
)


class Command(BaseCommand):
    help = (
        "Hybrid recall over semantic, session, limbic and autobiographical memory. "
        "With --batch FILE.jsonl, one JSON line per query line "
        "{id, query, types?, person?, limit?, as_of?, min_score?, entity?}."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("query", nargs="?", help='search text; AND / OR / NOT and "phrases" are honoured')
        parser.add_argument("--types", help=f"comma-separated subset of {','.join(MEMORY_TYPES)}")
        parser.add_argument("--limit", type=int, default=10)
        parser.add_argument(
            "--min-score",
            type=float,
            default=0.0,
            help="leave out hits less likely than this to be relevant (each hit's score, 0..1)",
        )
        parser.add_argument("--person", help="person slug: their memories and conversations plus global memories")
        parser.add_argument("--since", type=date_arg, help="YYYY-MM-DD, inclusive")
        parser.add_argument("--until", type=date_arg, help="YYYY-MM-DD, inclusive")
        parser.add_argument(
            "--as-of",
            help="recall what was held then: YYYY-MM-DD (the end of that local day) or an ISO datetime",
        )
        parser.add_argument("--channel", help="only session hits from conversations of this channel")
        parser.add_argument(
            "--entity",
            help="ask about one of the person's subjects (key, relation, name or alias): its profile, facts, "
            "latest lines; QUERY may then be left out",
        )
        parser.add_argument("--json", action="store_true", help="print the results as JSON")
        parser.add_argument("--explain", action="store_true", help="show each hit's rank in each branch")
        parser.add_argument("--batch", help="JSONL file of queries; one JSON result line per query")

    def handle(self, *args, **options) -> None:
        if not 0.0 <= options["min_score"] <= 1.0:
            raise CommandError(f"--min-score must be between 0 and 1, not {options['min_score']}")
        if options["batch"]:
            self._batch(options)
            return
        if not options["query"] and not options["entity"]:
            raise CommandError("give a QUERY, --entity NAME or --batch FILE.jsonl")
        person = _person(options["person"])
        try:
            results = memory_recall(
                query=options["query"] or "",
                memory_types=_types(options["types"]),
                limit=options["limit"],
                person=person,
                since=options["since"],
                until=options["until"],
                channel=options["channel"],
                as_of=moment_parse(options["as_of"], field="--as-of"),
                min_score=options["min_score"],
                entity=options["entity"],
            )
        except (ValueError, SearchTimeout) as exc:
            raise CommandError(str(exc)) from exc
        # The person's own name is no keyword in their scope: --explain says so when the query held it.
        left_out = recall_keywords(text=options["query"] or "", person=person)[1] if options["explain"] else []
        if options["json"]:
            payload: dict[str, Any] = {"results": [_shape(r, explain=options["explain"]) for r in results]}
            if options["explain"]:
                payload["dense"] = _dense_text()
                payload["keywords_without"] = left_out
            self.stdout.write(json.dumps(payload, ensure_ascii=False))
            return
        if options["explain"]:
            self.stdout.write(f"dense: {_dense_text()}")
            if left_out:
                names = ", ".join(left_out)
                self.stdout.write(f"keywords: without {names}, the person's own name (the dense branch reads it)")
        if not results:
            self.stdout.write("no matches")
        for number, result in enumerate(results, start=1):
            ranks = "  " + _ranks_text(result["ranks"], result["scores"]) if options["explain"] else ""
            snippet = " ".join(result["snippet"].split())
            self.stdout.write(
                f"{number:>2}. [{result['memory_type']} #{result['id']}] {result['score']:.4f}{ranks}  {snippet}"
            )

    def _batch(self, options: dict[str, Any]) -> None:
        persons: dict[str, Person] = {}
        with open(options["batch"], encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                    if not isinstance(item, dict) or not isinstance(item.get("query"), str):
                        raise ValueError("expected an object with a string 'query'")
                except ValueError as exc:
                    self.stderr.write(f"line {number}: bad JSON line: {exc}")
                    continue
                self.stdout.write(
                    json.dumps(self._batch_one(item, persons, explain=options["explain"]), ensure_ascii=False)
                )

    def _batch_one(self, item: dict[str, Any], persons: dict[str, Person], *, explain: bool) -> dict[str, Any]:
        try:
            slug = item.get("person")
            if slug and slug not in persons:
                persons[slug] = _person(slug)
            types = item.get("types")
            results = memory_recall(
                query=item["query"],
                memory_types=_types(",".join(types) if isinstance(types, list) else types),
                limit=int(item.get("limit") or 10),
                person=persons.get(slug) if slug else None,
                as_of=moment_parse(item.get("as_of"), field="as_of"),
                min_score=float(item.get("min_score") or 0.0),
                entity=item.get("entity") or None,
            )
        except (QuerySyntaxError, ValueError, CommandError, SearchTimeout) as exc:
            return {"id": item.get("id"), "error": str(exc)}
        return {"id": item.get("id"), "results": [_shape(r, explain=explain) for r in results]}


def _types(value: str | None) -> list[str] | None:
    if not value:
        return None
    return [part.strip() for part in value.split(",") if part.strip()]


def _person(slug: str | None) -> Person | None:
    if not slug:
        return None
    try:
        return Person.objects.get(slug=slug)
    except Person.DoesNotExist:
        raise CommandError(f"unknown person {slug!r}") from None


def _shape(result: dict[str, Any], *, explain: bool) -> dict[str, Any]:
    shaped = {name: result.get(name) for name in BATCH_FIELDS}
    if explain:
        shaped["ranks"] = result["ranks"]
        shaped["scores"] = result["scores"]
    return shaped


def _ranks_text(ranks: dict[str, int], scores: dict[str, float]) -> str:
    return "(" + ", ".join(f"{branch} #{rank} {scores[branch]:.3f}" for branch, rank in sorted(ranks.items())) + ")"


def _dense_text() -> str:
    model, reason = dense_status()
    return f"on ({model.name}, {model.dim} dimensions)" if model else f"unavailable: {reason}; keyword-only"
