"""The dev sets as recall queries, for the scripts beside this file: MADial (zh, en) and LoCoMo loaded into a
throwaway database as ``bench_recall`` loads them, embedded, then every query with a test of what is relevant.

Imported after ``django.setup()``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import connection

from anima.core.db import throwaway_database
from memory.benchmarks._common import CHATS, smalltalk_lines
from memory.benchmarks.locomo import locomo_load
from memory.benchmarks.madial import LANGUAGES, madial_load, madial_read
from memory.embedding import embed_backfill_run
from memory.search import search_text_plain, term_stats_clear
from memory.selectors import SEMANTIC, SESSION


@dataclass(frozen=True)
class DevQuery:
    """One query of a dev set: ``memory_recall``'s arguments, and which hit ids are relevant."""

    set_name: str
    recall: dict[str, Any]
    relevant: Callable[[int], bool]
    category: int = 0
    wanted: int = 0  # how many rows are relevant (a MADial dialogue's memories, a LoCoMo question's turns)


@contextmanager
def dev_sets_loaded(data: Path, *, chats: bool = False) -> Iterator[list[DevQuery]]:
    """Load and embed the sets in ``data`` (``madial/``, ``locomo/``) into a throwaway database; yield the queries.

    Sets: ``madial-<lang>`` (dialogues), ``madial-<lang>-last`` (each dialogue's last user message, read as passive
    recall reads it), ``smalltalk-<lang>`` (nothing relevant), ``locomo`` (questions over turns), ``locomo-facts``
    (questions over the sessions' observations); with ``chats``, the chats written for this project too
    (``chats-<lang>``, questions over turns, as ``locomo``).
    """
    with throwaway_database():
        queries: list[DevQuery] = []
        for lang in LANGUAGES:
            _, persons, key_of = madial_load(data=data / "madial", lang=lang)
            for dialogue in madial_read(data=data / "madial", lang=lang, persons=persons):

                def is_relevant(pk: int, relevant=dialogue.relevant, key_of=key_of) -> bool:
                    return key_of.get(pk) in relevant

                semantic = {"person": dialogue.person, "memory_types": [SEMANTIC]}
                queries.append(
                    DevQuery(
                        f"madial-{lang}", {**semantic, "query": dialogue.query}, is_relevant, 0, len(dialogue.relevant)
                    )
                )
                queries.append(DevQuery(f"madial-{lang}-last", _passive(semantic, dialogue.last), is_relevant))
            for line in smalltalk_lines(lang=lang):
                for person in list(persons.values())[:5]:
                    recall = _passive({"person": person, "memory_types": [SEMANTIC]}, line)
                    queries.append(DevQuery(f"smalltalk-{lang}", recall, lambda pk: False))
        written = [(f"chats-{path.stem}", path) for path in sorted(CHATS.glob("*.json"))] if chats else []
        for set_name, path in [("locomo", data / "locomo"), *written]:
            for sample in locomo_load(data=path):
                _questions_add(queries, set_name=set_name, sample=sample)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        print("embedding …", flush=True)
        embed_backfill_run()
        term_stats_clear()
        yield queries


def _questions_add(queries: list[DevQuery], *, set_name: str, sample) -> None:
    """``sample``'s questions (a LoCoMo-format conversation's), over its turns and over its observations' facts."""
    for question in sample.questions:
        evidence = set(question["evidence"])
        asked = {"person": sample.person, "query": question["question"]}
        queries.append(
            DevQuery(
                set_name,
                {**asked, "memory_types": [SESSION]},
                lambda pk, evidence=evidence, keys=sample.message_key: keys.get(pk) in evidence,
                question["category"],
                len(evidence),
            )
        )
        queries.append(
            DevQuery(
                f"{set_name}-facts",
                {**asked, "memory_types": [SEMANTIC]},
                lambda pk, evidence=evidence, facts=sample.fact_sources: bool(facts.get(pk, set()) & evidence),
                question["category"],
            )
        )


def _passive(recall: dict[str, Any], message: str) -> dict[str, Any]:
    """The search passive recall makes for ``message``."""
    return {**recall, "query": search_text_plain(message), "keyword_gate": True, "global_only": True}
