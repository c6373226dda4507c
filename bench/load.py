"""The web process under load: gunicorn (3 workers) on the embedded PostgreSQL 18 and the machine's Redis.

Run from the repository root:

    REDIS_URL=redis://127.0.0.1:6379/9 python bench/load.py [--seconds 60] [--clients 12] [--recall off,local]

It measures each ``--recall`` setting in turn (``ANIMA_EMBEDDINGS`` for the web process; default: keyword-only
``off``, the baseline, then dense recall with the ``local`` model) on the same seeded rows in the same run, and
reports each one's figures against the latest baseline run before it: absolute figures move with what else the
machine is doing, the ratios much less (``--recall off,local,off,local`` measures two pairs).
The seeded rows are embedded before the load starts, and each run gets its own copy of that
database and an empty cache: a run's writes (7,000 rows a minute) would otherwise make the next one's
keyword statements slower (two keyword-only runs in a row measured 7 % apart).
A throwaway database (``anima_bench_<pid>`` on the embedded server, dropped afterwards) gets 30 people with 60
conversations, 3,000 bilingual messages and 1,500 semantic memories; then ``--clients`` client
threads (keep-alive connections, each request after the previous one's answer) send for
``--seconds`` (after a 5 s warm-up that is not counted) this mix, every text and query drawn
fresh from a 400-word vocabulary (the share of repeated queries is reported):

- 35 % ``POST /api/conversations/{id}/messages/`` (a write),
- 25 % ``GET /api/recall/?q=…`` (two or three words, half of them for one person),
- 20 % ``POST /api/conversations/{id}/prepare-turn/`` (turn assembly, storing the user message),
- 15 % ``POST /api/tools/memory_recall/`` and 5 % ``POST /api/tools/memory_remember/`` (a write).

Reported: throughput, p50 / p95 / p99 latency overall and by kind, errors (any answer but 2xx, or
no answer), the lost-write check (every write acknowledged with 2xx is looked up in the
database afterwards), and the CPU gunicorn (its workers), PostgreSQL (every process of the
embedded server) and the client threads (this process) spent per request while measured: what the
throughput on two shared cores comes down to.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import http.client
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anima.settings")

import django

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.cache import cache  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import override_settings  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402

from anima.core.db import throwaway_database  # noqa: E402
from conversations.models import Conversation, Message, Platform, Role  # noqa: E402
from conversations.services import message_create, person_ensure  # noqa: E402
from memory.embedding import embed_backfill_run  # noqa: E402
from memory.models import SemanticMemory  # noqa: E402
from memory.services import memory_create  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WARM_UP_SECONDS = 5
ZH = (
    "杭州 上海 北京 成都 深圳 西湖 地铁 公司 项目 发布 会议 周末 徒步 爬山 游泳 跑步 咖啡 奶茶 火锅 "
    "面条 饺子 米饭 水果 樱桃 草莓 西瓜 女儿 儿子 妈妈 爸爸 朋友 同事 老板 医生 老师 学校 考试 作业 "
    "钢琴 吉他 电影 小说 音乐 画画 摄影 旅行 机票 酒店 签证 护照 生日 礼物 蛋糕 聚会 婚礼 搬家 房子 "
    "租金 工资 预算 股票 基金 保险 医院 感冒 发烧 过敏 花生 牛奶 鸡蛋 海鲜 睡眠 失眠 焦虑 压力 开心 "
    "难过 生气 担心 期待 计划 目标 习惯 早起 晚睡 健身 瑜伽 冥想 猫 狗 兔子 花园 阳台 植物 手机 电脑 "
    "耳机 相机 汽车 自行车 高铁 飞机 天气 下雨 台风 春天 夏天 秋天 冬天 新年 中秋 端午 国庆 假期 加班 "
    "面试 简历 升职 辞职 创业 客户 合同 报告 代码 服务器 数据库 性能 测试 上线 回滚 迁移 支付 订单 "
    "物流 快递 外卖 超市 菜市场 厨房 做饭 洗碗 打扫 洗衣 邻居 小区 物业 停车 导航 地图 博物馆 公园 "
    "图书馆 书店 咖啡馆 餐厅 酒吧 演唱会 话剧 展览 比赛 足球 篮球 网球 羽毛球 乒乓球 滑雪 潜水 露营"
).split()
EN = (
    "lisbon porto berlin paris london tokyo seattle boston denver austin river bridge harbor market bakery "
    "coffee tea matcha espresso sandwich pasta pizza salad soup curry sushi ramen tacos burger cookies "
    "daughter son mother father friend colleague manager doctor teacher school exam homework piano guitar "
    "movie novel music painting photography travel flight hotel visa passport birthday present cake party "
    "wedding moving apartment rent salary budget stocks savings insurance hospital cold fever allergy "
    "peanuts milk eggs seafood sleep insomnia anxiety stress happy sad angry worried excited plan goal "
    "habit running hiking swimming cycling yoga meditation cat dog rabbit garden balcony plants phone "
    "laptop headphones camera car bike train airplane weather rain storm spring summer autumn winter "
    "holiday overtime interview resume promotion startup client contract report code server database "
    "performance testing release rollback migration payment order delivery groceries kitchen cooking "
    "dishes laundry neighbor parking museum park library bookstore restaurant concert theater exhibition "
    "match football basketball tennis badminton skiing diving camping sunrise sunset mountain lake ocean "
    "island desert forest village castle festival lantern dumpling noodles chocolate vanilla lemon ginger "
    "garlic pepper honey butter cheese yogurt cereal"
).split()
KINDS = (
    ("message", 35),
    ("recall", 25),
    ("prepare_turn", 20),
    ("tool_recall", 15),
    ("tool_remember", 5),
)


def words(rng: random.Random, count: int) -> list[str]:
    vocabulary = ZH if rng.random() < 0.5 else EN
    return rng.sample(vocabulary, count)


def sentence(rng: random.Random, serial: str) -> str:
    parts = words(rng, rng.randint(4, 8))
    joiner = "" if parts[0] in ZH else " "
    return joiner.join(parts) + f" #{serial}"


def populate(rng: random.Random) -> tuple[str, list[tuple[int, str]]]:
    """The database's rows and an operator token; returns the token and (conversation id, person slug) pairs."""
    user = get_user_model().objects.create_user(username="bench", password=None, is_staff=True)
    token = Token.objects.create(user=user).key
    conversations = []
    for index in range(60):
        person = person_ensure(slug=f"person-{index % 30}")
        conversation = Conversation.objects.create(
            person=person,
            platform=Platform.TELEGRAM,
            channel="telegram",
            chat_id=f"chat-{index}",
            external_id=f"bench-{index}",
            title=f"conversation {index}",
        )
        conversations.append((conversation.pk, person.slug))
        for turn in range(50):
            role = Role.USER if turn % 2 == 0 else Role.ASSISTANT
            message_create(conversation=conversation, role=role, content=sentence(rng, f"seed-{index}-{turn}"))
    for index in range(1500):
        memory_create(
            content=sentence(rng, f"fact-{index}"),
            memory_type="world",
            person=person_ensure(slug=f"person-{index % 30}"),
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return token, conversations


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def gunicorn(*, port: int, log, embeddings: str) -> Iterator[int]:
    """The Procfile's web process with 3 workers on this database, once every worker is ready; yields its pid."""
    env = {key: value for key, value in os.environ.items() if key not in ("DEBUG", "PROMETHEUS_MULTIPROC_DIR")}
    env.update(
        ANIMA_EMBEDDED_PG_DATABASE=connection.settings_dict["NAME"],
        ANIMA_EMBEDDINGS=embeddings,
        GUNICORN_BIND=f"127.0.0.1:{port}",
        WEB_CONCURRENCY="3",
        PROMETHEUS_MULTIPROC_DIR=tempfile.mkdtemp(prefix="anima-bench-metrics-"),
        OMP_NUM_THREADS="1",
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        # Every worker, not just the first: a keep-alive client stays with the worker that accepted it, so
        # clients starting while the others still load Django would all land on one process (one core).
        while Path(log.name).read_text(errors="replace").count(" is ready") < int(env["WEB_CONCURRENCY"]):
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"gunicorn did not start:\n{Path(log.name).read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)
        probe = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        probe.request("GET", "/healthz")
        if probe.getresponse().status != 200:
            raise SystemExit("gunicorn's workers are up but /healthz does not answer")
        yield process.pid
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)


class Client(threading.Thread):
    """One keep-alive connection sending the mix until ``stop``; every answer recorded."""

    def __init__(self, *, number: int, port: int, token: str, conversations, stop: threading.Event, seen) -> None:
        super().__init__(daemon=True)
        self.rng = random.Random(number)
        self.number = number
        self.port = port
        self.headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        self.conversations = conversations
        self.stop = stop
        self.seen = seen  # queries sent by every client, to count repeats
        self.samples: list[tuple[float, str, float, bool]] = []  # (started, kind, seconds, ok)
        self.writes: list[tuple[str, str]] = []  # (kind, content) of every acknowledged write
        self.sent = 0

    def run(self) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        kinds, weights = zip(*KINDS, strict=True)
        while not self.stop.is_set():
            kind = self.rng.choices(kinds, weights)[0]
            method, path, body, write = self.request(kind)
            started = time.monotonic()
            try:
                connection.request(method, path, body=json.dumps(body) if body else None, headers=self.headers)
                response = connection.getresponse()
                response.read()
                ok = 200 <= response.status < 300
            except (OSError, http.client.HTTPException):
                ok = False
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            self.samples.append((started, kind, time.monotonic() - started, ok))
            if ok and write:
                self.writes.append(write)

    def query(self, count: int) -> str:
        text = " ".join(words(self.rng, count))
        self.seen.append(text)
        return text

    def request(self, kind: str) -> tuple[str, str, dict | None, tuple[str, str] | None]:
        conversation, person = self.rng.choice(self.conversations)
        self.sent += 1
        serial = f"c{self.number}-{self.sent}"
        if kind == "message":
            content = sentence(self.rng, serial)
            body = {"role": "user", "content": content}
            return "POST", f"/api/conversations/{conversation}/messages/", body, ("message", content)
        if kind == "recall":
            params = {"q": self.query(self.rng.randint(2, 3)), "limit": 5}
            if self.rng.random() < 0.5:
                params["person"] = person
            return "GET", "/api/recall/?" + urlencode(params), None, None
        if kind == "prepare_turn":
            content = sentence(self.rng, serial)
            body = {"message": content, "store": True}
            return "POST", f"/api/conversations/{conversation}/prepare-turn/", body, ("message", content)
        if kind == "tool_recall":
            body = {"query": self.query(2), "person": person, "limit": 5}
            return "POST", "/api/tools/memory_recall/", body, None
        content = sentence(self.rng, serial)
        body = {"content": content, "person": person, "memory_type": "world"}
        return "POST", "/api/tools/memory_remember/", body, ("memory", content)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))] * 1000


def lost_writes(writes: list[tuple[str, str]]) -> int:
    wanted = collections.defaultdict(set)
    for kind, content in writes:
        wanted[kind].add(content)
    found = set(Message.objects.filter(content__in=wanted["message"]).values_list("content", flat=True))
    found |= set(SemanticMemory.objects.filter(content__in=wanted["memory"]).values_list("content", flat=True))
    return sum(len(contents - found) for contents in wanted.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--recall", default="off,local", help="ANIMA_EMBEDDINGS of each run, the first the baseline")
    args = parser.parse_args()
    modes = args.recall.split(",")
    if not set(modes) <= {"off", "local"}:
        raise SystemExit("--recall takes off and local (an openai server is measured through its own numbers)")
    if settings.DATABASE_URL or not settings.REDIS_URL:
        raise SystemExit("runs on the embedded PostgreSQL (DATABASE_URL unset) with REDIS_URL set")
    results = []
    with throwaway_database():
        token, conversations = populate(random.Random(7))
        if "local" in modes:
            # Dense recall searches real vectors of the seeded rows; the load's own writes join the backlog.
            with override_settings(ANIMA_EMBEDDINGS="local"):
                filled = embed_backfill_run()
            print(f"embedded {filled.embedded:,} rows in {filled.seconds:.0f} s before the load", flush=True)
        for mode in modes:
            with seeded_copy():
                samples, seconds, writes, seen, cpu = run(
                    mode=mode, token=token, conversations=conversations, args=args
                )
                lost = lost_writes(writes)
            result = summary(samples=samples, seconds=seconds, writes=writes, lost=lost, queries=seen, cpu=cpu)
            results.append((mode, result))
            report(mode=mode, samples=samples, result=result, seconds=seconds, clients=args.clients)
    compare(results)


@contextlib.contextmanager
def seeded_copy() -> Iterator[None]:
    """The block runs on a copy of the seeded database (``connection`` points at it), dropped afterwards."""
    creation, source = connection.creation, connection.settings_dict["NAME"]
    connection.close()  # a template must have no other connection
    creation.clone_test_db(suffix="run", verbosity=0)  # CREATE DATABASE … TEMPLATE on PostgreSQL
    connection.settings_dict["NAME"] = creation.get_test_db_clone_settings("run")["NAME"]
    cache.clear()
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict["NAME"] = source
        creation.destroy_test_db(verbosity=0, suffix="run")


def run(*, mode: str, token: str, conversations, args) -> tuple[list, float, list, list, dict[str, float]]:
    """One run of the mix against a fresh gunicorn with ``ANIMA_EMBEDDINGS=mode``; also the CPU seconds gunicorn,
    PostgreSQL and the clients (this process) spent while it was measured."""
    with tempfile.NamedTemporaryFile("w+", suffix=".log") as log:
        port = free_port()
        with gunicorn(port=port, log=log, embeddings=mode) as web:
            stop, seen = threading.Event(), []
            clients = [
                Client(number=n, port=port, token=token, conversations=conversations, stop=stop, seen=seen)
                for n in range(args.clients)
            ]
            for client in clients:
                client.start()
            time.sleep(WARM_UP_SECONDS)
            roots = {"web": web, "postgres": postmaster_pid()}
            started = {part: tree_cpu_seconds(pid) for part, pid in roots.items()}
            started["client"] = time.process_time()  # this process: the client threads, on the same cores
            begin = time.monotonic()
            time.sleep(args.seconds)
            end = time.monotonic()
            cpu = {part: tree_cpu_seconds(pid) - started[part] for part, pid in roots.items()}
            cpu["client"] = time.process_time() - started["client"]
            stop.set()
            for client in clients:
                client.join(timeout=60)
    samples = [s for client in clients for s in client.samples if begin <= s[0] < end]
    writes = [w for client in clients for w in client.writes]
    return samples, end - begin, writes, seen, cpu


def postmaster_pid() -> int:
    """The embedded server's postmaster (it runs here): the parent of this process's session."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (session,) = cursor.fetchone()
    return _stat(session)["ppid"]


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU of ``root`` and its children so far, those that exited included (the kernel adds a reaped
    child's CPU to its parent's): gunicorn's workers, or every PostgreSQL process, sessions a worker replaced too."""
    ticks = _stat(root)["cpu"]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):  # gone meanwhile: its CPU is its parent's now
                child = _stat(int(entry.name))
                if child["ppid"] == root:
                    ticks += child["cpu"]
    return ticks / os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> dict[str, int]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # utime, stime, and cutime, cstime: the CPU of its children that exited and were waited for.
    return {"ppid": int(fields[1]), "cpu": sum(int(value) for value in fields[11:15])}


def summary(*, samples, seconds: float, writes: list, lost: int, queries: list[str], cpu: dict[str, float]) -> dict:
    latencies = [s[2] for s in samples]
    return {
        "requests": len(samples),
        "throughput": round(len(samples) / seconds, 1),
        "p50_ms": round(percentile(latencies, 0.5), 1),
        "p95_ms": round(percentile(latencies, 0.95), 1),
        "p99_ms": round(percentile(latencies, 0.99), 1),
        "mean_ms": round(statistics.fmean(latencies) * 1000, 1),
        "errors": sum(1 for s in samples if not s[3]),
        "writes": len(writes),
        "lost": lost,
        "repeated_queries": round(1 - len(set(queries)) / max(1, len(queries)), 3),
        # CPU per answered request: what the throughput on a machine's cores comes down to.
        **{f"cpu_ms_{part}": round(1000 * seconds_ / max(1, len(samples)), 2) for part, seconds_ in cpu.items()},
    }


def report(*, mode: str, samples, result: dict, seconds: float, clients: int) -> None:
    print()
    print(
        f"gunicorn 3 workers, embedded PostgreSQL, Redis cache, ANIMA_EMBEDDINGS={mode}, {clients} clients,"
        f" {seconds:.0f} s measured"
    )
    print("| requests | throughput | p50 | p95 | p99 | errors | acknowledged writes | lost | repeated queries |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(
        f"| {result['requests']:,} | {result['throughput']:.1f} req/s | {result['p50_ms']:.0f} ms"
        f" | {result['p95_ms']:.0f} ms | {result['p99_ms']:.0f} ms | {result['errors']}"
        f" | {result['writes']:,} | {result['lost']} | {result['repeated_queries']:.1%} |"
    )
    print(
        f"CPU per request: gunicorn {result['cpu_ms_web']:.1f} ms, PostgreSQL {result['cpu_ms_postgres']:.1f} ms,"
        f" the load's clients {result['cpu_ms_client']:.1f} ms"
    )
    print()
    print("| kind | requests | p50 | p95 | p99 | errors |")
    print("|---|---|---|---|---|---|")
    by_kind = collections.defaultdict(list)
    for _, kind, took, ok in samples:
        by_kind[kind].append((took, ok))
    for kind, _ in KINDS:
        took = [t for t, _ in by_kind[kind]]
        failed = sum(1 for _, ok in by_kind[kind] if not ok)
        print(
            f"| {kind} | {len(took):,} | {percentile(took, 0.5):.0f} ms | {percentile(took, 0.95):.0f} ms"
            f" | {percentile(took, 0.99):.0f} ms | {failed} |"
        )
    print(json.dumps({"embeddings": mode, **result}), flush=True)


def compare(results: list[tuple[str, dict]]) -> None:
    """Each run against the latest run of the baseline mode (the first) before it: ``--recall off,local,off,local``
    gives two pairs, each measured minutes apart, which shows how much of a difference is the machine's. With more
    than one pair, the medians over the pairs close the report: one pair says little on a machine whose speed moves
    between runs."""
    base_mode = results[0][0]
    ratios: dict[str, list[dict[str, float]]] = collections.defaultdict(list)
    for number, (mode, result) in enumerate(results, start=1):
        if mode == base_mode:
            base_number, base = number, result
            continue
        ratio = {key: result[key] / base[key] for key in ("throughput", "p50_ms", "p95_ms", "p99_ms")}
        ratios[mode].append(ratio)
        print(
            f"\nrun {number} ({mode}) against run {base_number} ({base_mode}):"
            f" throughput {ratio['throughput']:.2f}×, p50 {ratio['p50_ms']:.2f}×, p95 {ratio['p95_ms']:.2f}×,"
            f" p99 {ratio['p99_ms']:.2f}×; CPU per request (web + PostgreSQL)"
            f" {cpu_ms(base):.1f} → {cpu_ms(result):.1f} ms"
        )
    for mode, pairs in ratios.items():
        if len(pairs) < 2:
            continue
        runs = {name: [result for run_mode, result in results if run_mode == name] for name in (base_mode, mode)}
        print(
            f"\n{mode} against {base_mode}, medians over {len(pairs)} pairs: throughput"
            f" {statistics.median(pair['throughput'] for pair in pairs):.2f}×, p95"
            f" {statistics.median(pair['p95_ms'] for pair in pairs):.2f}×; "
            + "; ".join(
                f"{name} {statistics.median(run['throughput'] for run in named):.1f} req/s,"
                f" p95 {statistics.median(run['p95_ms'] for run in named):.0f} ms"
                for name, named in runs.items()
            )
        )


def cpu_ms(result: dict) -> float:
    return result["cpu_ms_web"] + result["cpu_ms_postgres"]


if __name__ == "__main__":
    main()
