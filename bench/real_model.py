"""The demo's nights on a real model server, beside the offline provider, in one run.

Run from the repository root, with any OpenAI-compatible server listening (llama-cpp-python,
vLLM, Ollama, OpenAI; see the benchmarks page of the docs for a local llama-cpp-python):

    python bench/real_model.py --base-url http://127.0.0.1:8080/v1 --model qwen2.5-0.5b-instruct \
        [--api-key KEY] [--structured auto] [--timeout 600] [--deadline 1800] [--json] [--verbose]

For each mind (the offline provider first, then the server) a throwaway database is created,
the bundled demo sample imported and the three sample nights slept (``sleep_cycle``), exactly as
``python manage.py demo`` does. Reported per mind: wall time of the nights, LLM calls, tokens,
repair rounds, truncation retries, failed calls, each night's status (with its error), and what
was written: facts, anchors, narratives, dreams and day summaries, with the facts themselves
(``--verbose``: every one, and each failed call's error). Without ``--base-url`` only the
offline provider runs.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anima.settings")

import django

django.setup()

from django.core.management import CommandError, call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.models import Sum  # noqa: E402
from django.test.utils import override_settings  # noqa: E402

from anima.agent.demo import FIXTURES, SAMPLE_DAYS  # noqa: E402
from anima.core.llm.dialects import SETTING_CHOICES  # noqa: E402
from anima.core.llm.minds import minds_since  # noqa: E402
from anima.core.models import AutoLlmRun, Component, Entity  # noqa: E402
from conversations.services import conversations_import  # noqa: E402
from memory.imports import memories_import  # noqa: E402
from sleep.models import PipelineRun  # noqa: E402

_SHOWN_FACTS = 8


def _nights(verbose: bool) -> dict:
    """Import the demo sample into the empty database, sleep its nights, and say what happened."""
    for name, importer in (("conversations.jsonl", conversations_import), ("memories.jsonl", memories_import)):
        with (FIXTURES / name).open(encoding="utf-8") as handle:
            importer(lines=handle)
    before = AutoLlmRun.objects.order_by("-id").values_list("id", flat=True).first() or 0
    started = time.monotonic()
    for day in SAMPLE_DAYS:
        try:
            call_command("sleep_cycle", day=day, stdout=io.StringIO(), stderr=io.StringIO())
        except CommandError:
            pass  # a failed night is on its PipelineRun row, reported below; the next night still runs
    seconds = time.monotonic() - started
    calls = AutoLlmRun.objects.filter(pk__gt=before)
    learned = Entity.objects.filter(primary_component=Component.SEMANTIC_MEMORY, source_conversation__isnull=False)
    blocks = Entity.objects.filter(primary_component=Component.CONTENT_BLOCK)
    return {
        "minds": [mind.label() for mind in minds_since(after_id=before)],
        "seconds": round(seconds, 1),
        "calls": calls.count(),
        "tokens": calls.aggregate(total=Sum("total_tokens"))["total"] or 0,
        "repairs": calls.filter(attempt="repair").count(),
        "longer_retries": calls.filter(attempt="longer").count(),
        "failed_calls": calls.exclude(error="").count(),
        "nights": [
            {"day": run.day.isoformat(), "status": run.status, "error": run.error}
            for run in PipelineRun.objects.order_by("id")
        ],
        "written": {
            "facts": learned.count(),
            "anchors": blocks.filter(tag="limbic").count(),
            "narratives": blocks.filter(tag="narrative").count(),
            "dreams": blocks.filter(tag="dream").count(),
            "day_summaries": Entity.objects.filter(
                primary_component=Component.TEMPORAL_SUMMARY, body__window="day"
            ).count(),
        },
        "facts": [
            f"[{m.memory_type}/{m.status}] {m.content}"
            for m in learned.order_by("id")[: None if verbose else _SHOWN_FACTS]
        ],
        "errors": [f"{run.purpose}: {run.error}" for run in calls.exclude(error="").order_by("id")] if verbose else [],
    }


def _in_throwaway_database(verbose: bool) -> dict:
    creation = connection.creation
    connection.settings_dict["TEST"]["NAME"] = f"anima_bench_real_{os.getpid()}"
    creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        return _nights(verbose)
    finally:
        creation.destroy_test_db(connection.settings_dict["NAME"], verbosity=0)


def _print(name: str, report: dict) -> None:
    print(f"\n== {name}: {'; '.join(report['minds']) or 'no LLM call'}")
    print(
        f"wall {report['seconds']} s, {report['calls']} calls, {report['tokens']} tokens, "
        f"{report['repairs']} repairs, {report['longer_retries']} truncation retries, "
        f"{report['failed_calls']} failed calls"
    )
    for night in report["nights"]:
        print(f"  night {night['day']}: {night['status']}{' — ' + night['error'] if night['error'] else ''}")
    print("  written: " + ", ".join(f"{what} {n}" for what, n in report["written"].items()))
    for fact in report["facts"]:
        print(f"    {fact}")
    for error in report["errors"]:
        print(f"    failed call {error}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", help="the server's OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1")
    parser.add_argument("--model", help="the model name the server answers to")
    parser.add_argument("--api-key", default="not-needed")
    parser.add_argument("--structured", default="auto", choices=SETTING_CHOICES)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one attempt may take")
    parser.add_argument("--deadline", type=float, default=1800.0, help="seconds one call may take, retries included")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    parser.add_argument("--verbose", action="store_true", help="every fact written and every failed call's error")
    args = parser.parse_args()
    if args.base_url and not args.model:
        parser.error("--base-url needs --model")

    reports = {}
    with override_settings(ANIMA_LLM_PROVIDER="offline"):
        reports["offline"] = _in_throwaway_database(args.verbose)
    if args.base_url:
        server = {
            "ANIMA_LLM_PROVIDER": "openai",
            "ANIMA_LLM_BASE_URL": args.base_url,
            "ANIMA_LLM_MODEL": args.model,
            "ANIMA_LLM_API_KEY": args.api_key,
            "ANIMA_LLM_STRUCTURED": args.structured,
            "ANIMA_LLM_TIMEOUT": args.timeout,
            "ANIMA_LLM_DEADLINE": args.deadline,
        }
        with override_settings(**server):
            reports["server"] = _in_throwaway_database(args.verbose)
    if args.json:
        print(json.dumps(reports, ensure_ascii=False, indent=2))
        return
    for name, report in reports.items():
        _print(name, report)


if __name__ == "__main__":
    main()
