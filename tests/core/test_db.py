"""Database helpers: rows no entry point accepts any more still read, unreachable servers are told apart, and the
read-replica router sends each read to the right alias."""

from __future__ import annotations

import datetime as dt

import pgtrigger
import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.db import DataError, IntegrityError, OperationalError, connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from anima.agent.turn import prepare_turn
from anima.api.testing import api_client
from anima.core.db import (
    REPLICA,
    ReplicaRouter,
    database_unreachable,
    fetch_under,
    primary_reads,
    read_alias,
    replica_reads,
)
from conversations.models import HistoryEntry, Message
from memory.models import SemanticMemory
from memory.workspace import workspace_export
from tests.factories import (
    ConversationFactory,
    HistoryEntryFactory,
    MessageFactory,
    PersonFactory,
    SemanticMemoryFactory,
)

# What ``import_memories`` stored for "0001-01-01T00:00:00" before dates were checked: year 1 BC in UTC.
BEFORE_YEAR_ONE = "0001-12-31 15:54:17+00 BC"


def _store_by_hand(table: str, column: str, row_id: int, value: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET {column} = %s::timestamptz WHERE id = %s", [value, row_id])


def test_a_timestamp_before_year_one_stored_by_hand_does_not_break_any_reader(tmp_path):
    leo = PersonFactory(slug="leo")
    conversation = ConversationFactory(person=leo, platform="telegram", channel="telegram", chat_id="42")
    memory = SemanticMemoryFactory(person=leo, content="Leo 的邮箱是 leo@example.com", pinned=True)
    message = MessageFactory(conversation=conversation, role="user", content="我的邮箱是 leo@example.com")
    history = HistoryEntryFactory(person=leo, content="Leo 换了邮箱", channel="telegram")
    _store_by_hand("entities", "created_at", memory.pk, BEFORE_YEAR_ONE)
    _store_by_hand("messages", "created_at", message.pk, BEFORE_YEAR_ONE)
    with pgtrigger.ignore("conversations.HistoryEntry:history_entries_append_only"):  # as a hand edit would
        _store_by_hand("history_entries", "timestamp", history.pk, "10000-01-01 00:00:00+00")
    client = api_client(staff=True)

    memories = client.get("/api/memories/")
    recall = client.get("/api/recall/", {"q": "邮箱"})
    tool = client.post("/api/tools/memory_recall/", {"query": "邮箱", "person": "leo"}, format="json")
    history_page = client.get("/api/history/", {"person": "leo"})
    turn = prepare_turn(conversation=conversation, user_message="我的邮箱是啥？", store=False)
    written = workspace_export(root=tmp_path / "ws")

    assert memories.status_code == 200 and memories.json()["results"][0]["created_at"].startswith("0001-01-0")
    assert recall.status_code == 200 and {hit["id"] for hit in recall.json()["results"]} >= {memory.pk, message.pk}
    assert tool.status_code == 200 and tool.json()["results"]
    assert history_page.status_code == 200
    assert "leo@example.com" in turn[0]["content"]
    assert written
    assert SemanticMemory.objects.get(pk=memory.pk).created_at.year == 1
    assert Message.objects.get(pk=message.pk).created_at.year == 1
    assert HistoryEntry.objects.get(pk=history.pk).timestamp.year == 9999


def test_unreachable_is_told_apart_from_a_refused_statement():
    with pytest.raises(DataError) as data_error, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT 'not a number'::int")
    assert not database_unreachable(data_error.value)
    assert not database_unreachable(IntegrityError("duplicate key"))
    assert database_unreachable(psycopg.OperationalError("connection failed: No such file or directory"))
    cancelled = OperationalError("canceling statement due to statement timeout")
    cancelled.__cause__ = psycopg.errors.QueryCanceled("canceling statement due to statement timeout")
    assert not database_unreachable(cancelled)
    shutdown = OperationalError("terminating connection due to administrator command")
    shutdown.__cause__ = psycopg.errors.AdminShutdown("terminating connection due to administrator command")
    assert database_unreachable(shutdown)


def test_timestamps_in_range_read_back_exactly():
    moment = dt.datetime(1900, 1, 1, 0, 0, 1, tzinfo=dt.UTC)
    memory = SemanticMemoryFactory()
    SemanticMemory.objects.filter(pk=memory.pk).update(created_at=moment)
    assert SemanticMemory.objects.get(pk=memory.pk).created_at == moment


# --- The read-replica router -------------------------------------------------------------------------


def test_without_a_replica_every_read_is_on_the_primary():
    with replica_reads():
        assert read_alias() == "default"
        assert SemanticMemory.objects.all().db == "default"


def test_inside_replica_reads_only_animas_tables_are_read_from_the_replica(replica):
    assert SemanticMemory.objects.all().db == "default"
    with replica_reads():
        assert read_alias() == REPLICA
        assert SemanticMemory.objects.all().db == REPLICA
        # Users and sessions come from the primary, so a fresh login is never lost to lag.
        assert get_user_model().objects.all().db == "default"
        with primary_reads():
            assert read_alias() == "default"
            assert SemanticMemory.objects.all().db == "default"
            with replica_reads():  # a pinned primary wins over a nested request for the replica
                assert read_alias() == "default"
        assert read_alias() == REPLICA
    assert read_alias() == "default"


def test_writes_and_migrations_stay_on_the_primary(replica):
    router = ReplicaRouter()
    with replica_reads():
        assert router.db_for_write(SemanticMemory) == "default"
        memory = SemanticMemoryFactory(content="written inside replica_reads")
    assert memory._state.db == "default"
    assert router.allow_migrate("default", "memory") and not router.allow_migrate(REPLICA, "memory")
    with replica_reads():
        assert SemanticMemory.objects.get(pk=memory.pk).content == "written inside replica_reads"
    assert connections[REPLICA].settings_dict["NAME"] == connections["default"].settings_dict["NAME"]


WANTED = {"enable_seqscan": ("off", "on"), "statement_timeout": ("4s", "0")}
SHOWN = "SELECT current_setting('enable_seqscan'), current_setting('statement_timeout'), %(value)s::int"


def _settings() -> tuple[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('enable_seqscan'), current_setting('statement_timeout')")
        return cursor.fetchone()


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_a_statement_runs_under_its_settings_in_one_round_trip_and_leaves_none_behind():
    before = _settings()
    with CaptureQueriesContext(connection) as sent:
        rows = fetch_under(sql=SHOWN, params={"value": 7}, wanted=WANTED)

    assert rows == [("off", "4s", 7)]
    assert len(sent) == 1  # the settings travel with the statement
    assert _settings() == before


@pytest.mark.django_db(transaction=True)
def test_a_statement_past_its_timeout_is_cancelled_and_the_session_keeps_its_own_timeout():
    before = _settings()
    with pytest.raises(OperationalError) as cancelled:
        fetch_under(sql="SELECT pg_sleep(2)", params={}, wanted={"statement_timeout": ("50ms", "0")})

    assert isinstance(cancelled.value.__cause__, psycopg.errors.QueryCanceled)
    assert _settings() == before
    assert fetch_under(sql="SELECT 1", params={}, wanted=WANTED) == [(1,)]


def test_inside_a_callers_transaction_its_settings_are_restored_after_the_statement():
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL statement_timeout = '42s'")
        before = _settings()
        assert fetch_under(sql=SHOWN, params={"value": 1}, wanted=WANTED) == [("off", "4s", 1)]
        assert _settings() == before
