from __future__ import annotations

import threading

import pytest
from django.core.exceptions import ValidationError
from django.db import connection, transaction

from anima.core import config
from anima.core.config import config_defaults, config_get, config_update, config_validate
from anima.core.models import RuntimeConfig, RuntimeConfigChange


def test_defaults_come_from_code():
    assert config_get(section="memory.passive_recall") == config_defaults(section="memory.passive_recall")
    assert config_get(section="memory.resident")["pinned_limit"] == 40


def test_an_update_is_validated_applied_whole_and_audited():
    values = config_update(section="memory.passive_recall", values={"limit": 7, "min_score": 0}, changed_by="op")
    assert values["limit"] == 7 and values["min_score"] == 0.0
    change = RuntimeConfigChange.objects.get()
    assert (change.changed_by, change.after["limit"]) == ("op", 7)


def test_a_change_in_this_process_is_read_at_once_and_another_processs_within_the_cache_time(monkeypatch):
    assert config_get(section="stm")["raw_ttl_hours"] == 12
    config_update(section="stm", values={"raw_ttl_hours": 5})
    assert config_get(section="stm")["raw_ttl_hours"] == 5
    with connection.cursor() as cursor:  # as another process would change it: no signal reaches this one
        cursor.execute("""UPDATE runtime_config SET "values" = '{"raw_ttl_hours": 7}' WHERE section = 'stm'""")

    assert config_get(section="stm")["raw_ttl_hours"] == 5
    monkeypatch.setattr(config, "CONFIG_CACHE_SECONDS", -1.0)  # the cache time has passed
    assert config_get(section="stm")["raw_ttl_hours"] == 7


@pytest.mark.django_db(transaction=True)
def test_a_change_is_read_at_once_after_commit_by_every_thread_of_this_process():
    config_update(section="stm", values={"raw_ttl_hours": 5})
    with transaction.atomic():  # config_update's own transaction, between its save and its commit
        row = RuntimeConfig.objects.select_for_update().get(section="stm")
        row.values = {"raw_ttl_hours": 9}
        row.save()
        # Another thread (a gthread worker's) reads before the commit: the row as committed, which it keeps.
        seen = []
        reader = threading.Thread(target=lambda: (seen.append(config_get(section="stm")), connection.close()))
        reader.start()
        reader.join()
        assert seen[0]["raw_ttl_hours"] == 5

    assert config_get(section="stm")["raw_ttl_hours"] == 9


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": "5"}, "limit"),
        ({"enabled": 1}, "enabled"),
        ({"min_score": float("nan")}, "min_score"),
        ({"min_score": float("inf")}, "min_score"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_a_bad_value_is_refused_naming_the_field_and_nothing_is_applied(values, field):
    with pytest.raises(ValidationError) as excinfo:
        config_update(section="memory.passive_recall", values={"limit": 9, **values})
    assert field in excinfo.value.message_dict
    assert config_get(section="memory.passive_recall")["limit"] == 5
    assert not RuntimeConfigChange.objects.exists()


def test_unknown_section_is_refused():
    with pytest.raises(ValidationError, match="unknown config section"):
        config_validate(section="memory.nope", values={})


def test_cross_person_is_one_of_its_choices_and_defaults_to_topics():
    assert config_get(section="memory.temporal_summary")["cross_person"] == "topics"
    with pytest.raises(ValidationError) as caught:
        config_update(section="memory.temporal_summary", values={"cross_person": "everything"})
    assert "topics, full, none" in caught.value.message_dict["cross_person"][0]
    assert config_update(section="memory.temporal_summary", values={"cross_person": "none"})["cross_person"] == "none"


def test_the_console_offers_the_choices_of_a_choice_setting(admin_client):
    page = admin_client.get("/admin/anima/runtimeconfig/").content.decode()
    assert '<option value="full"' in page and '<option value="topics" selected' in page
