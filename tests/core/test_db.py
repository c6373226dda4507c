"""The read-replica router: which alias serves which read."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import connections

from anima.core.db import REPLICA, ReplicaRouter, primary_reads, read_alias, replica_reads
from memory.models import SemanticMemory
from tests.factories import SemanticMemoryFactory


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
