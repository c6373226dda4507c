"""Recall over long repetitive rows: what the trigram branch costs on the whole text vs the prefix it compares.

Run from the repository root:

    python bench/long_rows.py [--sizes 10,80,160] [--repeat 3]

In a throwaway database (created and dropped here), one message per size holds ``"zork " * N``
(N = size KB / 5 bytes). For each size it times, best of ``--repeat``:

* ``word_similarity('zork', text)`` over the whole row (what the trigram branch compared before),
* the same over ``left(text, TRIGRAM_PREFIX_CHARS)`` (what it compares now),

and then ``memory_recall("zork")`` and ``memory_recall("zorc")`` (a typo: trigram branch only) with
every row present, under the recall statement timeout. The whole-row figure is the baseline; the
prefix one should stay flat as rows grow.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anima.settings")

import django

django.setup()

from django.db import connection  # noqa: E402

from anima.core.db import throwaway_database  # noqa: E402
from anima.core.models import TRIGRAM_PREFIX_CHARS  # noqa: E402
from anima.core.segmentation import segment_text  # noqa: E402
from conversations.models import Conversation, Message  # noqa: E402
from memory.selectors import memory_recall  # noqa: E402


def best_ms(run, repeat: int) -> float:
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        timings.append((time.perf_counter() - started) * 1000)
    return min(timings)


def similarity_ms(message_id: int, expression: str, repeat: int) -> float:
    def run() -> None:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT word_similarity('zork', {expression}) FROM messages WHERE id = %s", [message_id])
            cursor.fetchall()

    return best_ms(run, repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,80,160", help="row sizes in KB, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",") if size]
    with throwaway_database():
        conversation = Conversation.objects.create(platform="cli", external_id="bench-long-rows")
        print(f"trigram prefix: {TRIGRAM_PREFIX_CHARS} characters")
        for size in sizes:
            text = "zork " * (size * 1024 // 5)
            message = Message.objects.create(
                conversation=conversation, role="user", content=text.strip(), fts_segmented=segment_text(text)
            )
            whole = similarity_ms(message.pk, "fts_segmented", args.repeat)
            prefix = similarity_ms(message.pk, f"left(fts_segmented, {TRIGRAM_PREFIX_CHARS})", args.repeat)
            print(
                f"{size:>4} KB row: word_similarity whole row {whole:9.1f} ms   prefix {prefix:6.2f} ms"
                f"   ratio {whole / prefix:8.0f}x",
                flush=True,
            )
        for query in ("zork", "zorc"):
            recall = best_ms(lambda query=query: memory_recall(query=query, memory_types=["session"]), args.repeat)
            print(f"memory_recall({query!r}) over all {len(sizes)} rows: {recall:.1f} ms")


if __name__ == "__main__":
    main()
