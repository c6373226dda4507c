"""Import throughput: `import_conversations` (validation + jieba + bulk insert) vs a bare bulk INSERT.

Run from the repository root:

    python bench/import_throughput.py [--messages 20000]

Both are measured in the same run, in a throwaway database (created and dropped
here), on the same synthetic bilingual messages. The baseline inserts the same
rows with psycopg's executemany and no validation or segmentation: the floor
for getting the rows into PostgreSQL at all.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anima.settings")

import django

django.setup()

from django.db import connection  # noqa: E402

from conversations.models import Message  # noqa: E402
from conversations.services import conversations_import  # noqa: E402

ZH = "今天 我们 讨论 产品 发布 的 问题 我 有点 担心 女儿 周末 徒步 杭州 邮箱".split()
EN = ["today", "we", "talked", "about", "the", "launch", "and", "my", "cat", "Miso", "exam", "Lisbon", "shift"]


def synthetic_lines(messages: int, per_conversation: int = 40, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for c in range(messages // per_conversation):
        words = ZH if c % 2 == 0 else EN
        joiner = "" if words is ZH else " "
        rows = [
            {
                "external_id": f"m{i}",
                "role": "user" if i % 2 == 0 else "assistant",
                "content": joiner.join(rng.choice(words) for _ in range(rng.randint(8, 30))),
                "created_at": f"2026-11-{1 + c % 28:02d}T{8 + i // 60 % 12:02d}:{i % 60:02d}:00+08:00",
            }
            for i in range(per_conversation)
        ]
        conversation = {"external_id": f"bench-{c}", "platform": "web", "person": f"p{c % 50}"}
        lines.append(json.dumps({"conversation": conversation, "messages": rows}, ensure_ascii=False))
    return lines


def bare_insert(lines: list[str]) -> float:
    """Insert the same messages with plain executemany into a scratch table shaped like `messages`."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE bench_messages (LIKE messages INCLUDING ALL)")
        started = time.perf_counter()
        for number, line in enumerate(lines):
            obj = json.loads(line)
            cursor.executemany(
                "INSERT INTO bench_messages (conversation_id, role, name, content, external_id, created_at)"
                " VALUES (%s, %s, '', %s, %s, %s)",
                [(number, m["role"], m["content"], m["external_id"], m["created_at"]) for m in obj["messages"]],
            )
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=20000)
    args = parser.parse_args()
    lines = synthetic_lines(args.messages)
    total = sum(len(json.loads(line)["messages"]) for line in lines)
    creation = connection.creation
    connection.settings_dict["TEST"]["NAME"] = f"anima_bench_{os.getpid()}"
    creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        started = time.perf_counter()
        report = conversations_import(lines=lines)
        anima_seconds = time.perf_counter() - started
        assert report.ok and Message.objects.count() == total, report.errors[:3]
        baseline_seconds = bare_insert(lines)
    finally:
        creation.destroy_test_db(connection.settings_dict["NAME"], verbosity=0)
    anima_rate, baseline_rate = total / anima_seconds, total / baseline_seconds
    print(f"messages: {total}")
    print(f"import_conversations: {anima_seconds:.2f}s  {anima_rate:,.0f} messages/s")
    print(f"bare INSERT baseline: {baseline_seconds:.2f}s  {baseline_rate:,.0f} messages/s")
    print(f"ratio (import / bare): {anima_seconds / baseline_seconds:.2f}x the time")


if __name__ == "__main__":
    main()
