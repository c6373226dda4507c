"""Turn assembly: prompt size of `prepare_turn` against the full raw history, and its latency.

Run from the repository root:

    python bench/prepare_turn.py [--sizes 100,500,2000] [--repeat 200]

For each history size, one conversation with that many bilingual messages (spread over one
local day, three peer conversations beside it, a temporal tick every half hour) is built in a
throwaway database (created and dropped here). Two facts are planted in the earliest
messages and, as light sleep would, stored as semantic memories. Reported:

- size: characters of the `prepare_turn` list vs the naive prompt (system prompt + every raw
  message + the new message), and how much smaller it is;
- reachability: whether each planted fact is still in the prepared list (through resident /
  person memory or passive recall) although its raw message was consolidated away;
- latency: p50 / p95 of `prepare_turn(store=False)` once the snapshot, peer blocks and peer
  rollups exist (the cache-hit path a runtime sees on every turn), and of the passive-recall
  search alone, which is part of it.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anima.settings")

import django

django.setup()

from django.db import connection  # noqa: E402

from anima.agent.turn import prepare_turn  # noqa: E402
from anima.core.calendar import BUCKET  # noqa: E402
from anima.core.models import Component, MemoryType  # noqa: E402
from conversations.models import Conversation, Message, Person, Role  # noqa: E402
from memory.models import SemanticMemory  # noqa: E402
from memory.passive import passive_recall  # noqa: E402
from temporal.tick import temporal_tick_run  # noqa: E402

NOW = datetime.fromisoformat("2026-11-28T23:40+08:00")
ZH = "今天 我们 讨论 产品 发布 的 问题 我 有点 担心 支付 迁移 周末 徒步 杭州 性能 回滚 方案".split()
EN = "today we talked about the launch and the payment migration plus weekend hiking plans near Hangzhou".split()
FACTS = [
    # (planted raw message, the semantic memory light sleep made of it, the later question)
    ("顺便说一下，我的邮箱是 leo.chen@example.com。", "Leo 的邮箱是 leo.chen@example.com", "我的邮箱是什么来着？"),
    ("My cat is called Miso, a ginger tabby.", "Leo's cat is called Miso, a ginger tabby", "What is my cat called?"),
]


def _sentence(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return "".join(rng.choice(ZH) for _ in range(rng.randint(10, 30))) + "。"
    return " ".join(rng.choice(EN) for _ in range(rng.randint(10, 30))).capitalize() + "."


def _history(*, size: int, seed: int) -> tuple[Conversation, Person]:
    rng = random.Random(seed)
    person = Person.objects.create(slug=f"leo-{size}", display_name="Leo")
    conversation = Conversation.objects.create(external_id=f"bench-{size}", platform="telegram", person=person)
    step = timedelta(hours=11) / size  # one active day, no 12 h silence
    start = NOW - timedelta(hours=11)
    rows = []
    for i in range(size):
        content = FACTS[i // 2][0] if i in (0, 2) else _sentence(rng)
        role = Role.USER if i % 2 == 0 else Role.ASSISTANT
        rows.append(Message(conversation=conversation, role=role, content=content, created_at=start + step * i))
    Message.objects.bulk_create(rows)
    for _, fact, _ in FACTS:
        SemanticMemory.objects.create(
            primary_component=Component.SEMANTIC_MEMORY,
            memory_type=MemoryType.WORLD,
            content=fact,
            person=person,
            source_day=NOW.date(),
        )
    return conversation, person


def _peers(*, seed: int) -> None:
    rng = random.Random(seed)
    for p in range(3):
        peer = Conversation.objects.create(external_id=f"bench-peer-{seed}-{p}", platform="web")
        moments = sorted(NOW - timedelta(minutes=rng.randint(20, 11 * 60)) for _ in range(40))
        Message.objects.bulk_create(
            [Message(conversation=peer, role=Role.USER, content=_sentence(rng), created_at=at) for at in moments]
        )


def _chars(messages: list[dict]) -> int:
    return sum(len(m["content"]) for m in messages)


def _measure(size: int, repeat: int) -> dict:
    conversation, _ = _history(size=size, seed=size)
    _peers(seed=size)
    tick = NOW.replace(hour=0, minute=30)
    while tick <= NOW:
        temporal_tick_run(at=tick)
        tick += BUCKET
    question = FACTS[0][2]
    prepared = prepare_turn(conversation=conversation, user_message=question, now=NOW, store=False)
    raw = [prepared[0]] + [
        {"content": m.content} for m in Message.objects.filter(conversation=conversation).order_by("created_at", "pk")
    ]
    raw_chars = _chars(raw) + len(question)
    reachable = {}
    for _, fact, ask in FACTS:
        turn = prepare_turn(conversation=conversation, user_message=ask, now=NOW, store=False)
        where = [m["name"] or m["role"] for m in turn if fact in m["content"]]
        reachable[fact] = where
    timings, passive = [], []
    for i in range(repeat):
        started = time.perf_counter()
        prepare_turn(conversation=conversation, user_message=FACTS[i % 2][2], now=NOW, store=False)
        timings.append((time.perf_counter() - started) * 1000)
        # The share of one part that is not turn assembly itself: the passive-recall search.
        started = time.perf_counter()
        passive_recall(conversation=conversation, user_message=FACTS[i % 2][2])
        passive.append((time.perf_counter() - started) * 1000)
    timings.sort()
    passive.sort()
    return {
        "size": size,
        "raw_chars": raw_chars,
        "prepared_chars": _chars(prepared),
        "messages": len(prepared),
        "reachable": reachable,
        "p50": statistics.median(timings),
        "p95": _p95(timings),
        "passive_p50": statistics.median(passive),
        "passive_p95": _p95(passive),
    }


def _p95(sorted_ms: list[float]) -> float:
    return sorted_ms[max(int(len(sorted_ms) * 0.95) - 1, 0)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,500,2000")
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    creation = connection.creation
    connection.settings_dict["TEST"]["NAME"] = f"anima_bench_{os.getpid()}"
    creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        results = [_measure(int(size), args.repeat) for size in args.sizes.split(",")]
    finally:
        creation.destroy_test_db(connection.settings_dict["NAME"], verbosity=0)
    print("history | raw prompt chars | prepare_turn chars (messages) | smaller by | p50 ms | p95 ms | passive p50/p95")
    for r in results:
        saved = 1 - r["prepared_chars"] / r["raw_chars"]
        print(
            f"{r['size']:>7} | {r['raw_chars']:>16,} | {r['prepared_chars']:>18,} ({r['messages']:>3}) "
            f"| {saved:>9.1%} | {r['p50']:>6.1f} | {r['p95']:>6.1f} | {r['passive_p50']:.1f} / {r['passive_p95']:.1f}"
        )
    for r in results:
        for fact, where in r["reachable"].items():
            print(f"{r['size']:>7}: {fact!r} reachable via {', '.join(where) or 'NOT REACHABLE'}")


if __name__ == "__main__":
    main()
