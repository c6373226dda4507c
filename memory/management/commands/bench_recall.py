"""Recall quality on the dev sets: R@1/3/5/10/20 of Anima's recall beside its own branches and BM25.

``--data`` is a folder holding ``madial/`` (MADial-Bench) and ``locomo/`` (LoCoMo), such as ``../shared/bench``,
or one of them. Everything is loaded into a throwaway database (``anima_bench_<pid>`` on the same server,
migrated, dropped at the end) and embedded by the backfill production uses before the queries run. Systems:
``anima`` (the default: keyword and, where vectors exist, dense branches fused), ``anima_keyword`` (its FTS and
trigram branches), ``dense`` (its dense branch; absent with ``ANIMA_EMBEDDINGS=off`` or no pgvector) and
``bm25``; ``lead``: how far ``anima`` leads the better of its branches at R@10, the mean of its differences query
by query ± that mean's standard error; then what passive recall offers (``passive``) and offers for small talk
(``smalltalk``). How each set is read: ``memory.benchmarks.madial`` and ``memory.benchmarks.locomo``. ``--sets``
measures some of the sets (``madial-zh``, ``madial-en``, ``locomo``, ``chats``), ``--passive-only`` only passive
recall and small talk.

``chats`` are the conversations written for this project in LoCoMo's format (``bench/recall/chats/<lang>.json``, a
person's chat with a friend, relative or companion and questions on it), measured as LoCoMo is as ``chats-<lang>``;
they need no ``--data``.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from anima.core.db import throwaway_database
from memory.benchmarks._common import CHATS
from memory.benchmarks.locomo import locomo_found, locomo_load, locomo_run
from memory.benchmarks.madial import LANGUAGES, madial_found, madial_load, madial_run
from memory.embedding import embed_backfill_run
from memory.search import term_stats_clear

SETS = ("madial-zh", "madial-en", "locomo", "chats")


class Command(BaseCommand):
    help = (
        "R@1/3/5/10/20 of recall, its branches and BM25 on MADial-Bench (zh, en) and LoCoMo, in a throwaway database."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--data",
            help="a folder with madial/ and locomo/ (or one of them), relative to the repo; not needed for chats alone",
        )
        parser.add_argument("--json", action="store_true", help="end with one JSON line of the figures")
        parser.add_argument(
            "--sets",
            default=",".join(SETS),
            help=f"the sets measured, comma-separated (default: all of {', '.join(SETS)})",
        )
        parser.add_argument(
            "--passive-only", action="store_true", help="measure passive recall and small talk only, not R@k"
        )

    def handle(self, *args, **options) -> None:
        if importlib.util.find_spec("rank_bm25") is None:
            raise CommandError(
                "bench_recall compares recall with rank-bm25's BM25, a development package that production installs"
                " leave out: pip install -r requirements.txt"
            )
        sets = [name.strip() for name in options["sets"].split(",") if name.strip()]
        unknown = sorted(set(sets) - set(SETS))
        if unknown or not sets:
            raise CommandError(f"unknown set(s) {', '.join(unknown) or '(none)'}: use {', '.join(SETS)}")
        chats = sorted(CHATS.glob("*.json")) if "chats" in sets else []
        languages = [lang for lang in LANGUAGES if f"madial-{lang}" in sets]
        madial = locomo = None
        if set(sets) - {"chats"}:
            if not options["data"]:
                raise CommandError(f"--data is needed for {', '.join(name for name in sets if name != 'chats')}")
            data = Path(options["data"])
            if not data.is_absolute():
                data = Path(settings.BASE_DIR) / data
            madial = next((path for path in (data / "madial", data) if madial_found(path) and languages), None)
            locomo = next((path for path in (data / "locomo", data) if locomo_found(path) and "locomo" in sets), None)
            if madial is None and locomo is None:
                raise CommandError(f"no MADial-Bench or LoCoMo data at {data} (nor in its madial/ or locomo/ folders)")
        recall = not options["passive_only"]
        report: dict[str, Any] = {}
        with throwaway_database():
            loaded = {lang: madial_load(data=madial, lang=lang) for lang in languages} if madial else {}
            samples = locomo_load(data=locomo) if locomo else []
            written = {path.stem: locomo_load(data=path) for path in chats}
            with connection.cursor() as cursor:
                # Statistics as autovacuum keeps them on a live database: recall reads its term frequencies.
                cursor.execute("ANALYZE")
            self.stdout.write("embedding …")
            dense = embed_backfill_run().available
            term_stats_clear()
            for lang, rows in loaded.items():
                report[f"madial-{lang}"] = madial_run(data=madial, lang=lang, loaded=rows, dense=dense, recall=recall)
                self._print(f"madial-{lang}", report[f"madial-{lang}"])
            if samples:
                report["locomo"] = locomo_run(samples=samples, dense=dense, recall=recall)
                self._print("locomo", report["locomo"])
            for lang, chat_samples in written.items():
                name = f"chats-{lang}"
                report[name] = locomo_run(samples=chat_samples, dense=dense, recall=recall, lang=lang)
                self._print(name, report[name])
        if options["json"]:
            self.stdout.write(json.dumps(report))

    def _print(self, name: str, figures: dict[str, Any]) -> None:
        self.stdout.write(f"{name} (n={figures['n']})")
        for key, value in figures.items():
            if key == "n":
                continue
            if isinstance(value, dict) and all(isinstance(cell, dict) for cell in value.values()):
                self.stdout.write(f"  questions {key}")
                for system, cells in value.items():
                    self.stdout.write(f"    {system:<13} {_cells(cells)}")
            else:
                self.stdout.write(f"  {key:<13} {_cells(value)}")


def _cells(cells: dict[str, float | str]) -> str:
    """``name value`` pairs, numbers to one decimal (a lead's branch, a name, as it is)."""
    return "  ".join(
        f"{name} {value}" if isinstance(value, str) else f"{name} {value:5.1f}" for name, value in cells.items()
    )
