from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from anima.core.config import config_defaults, config_get, config_update, config_validate
from anima.core.models import RuntimeConfigChange


def test_defaults_come_from_code():
    assert config_get(section="memory.passive_recall") == config_defaults(section="memory.passive_recall")
    assert config_get(section="memory.resident")["pinned_limit"] == 40


def test_an_update_is_validated_applied_whole_and_audited():
    values = config_update(section="memory.passive_recall", values={"limit": 7, "min_score": 0}, changed_by="op")
    assert values["limit"] == 7 and values["min_score"] == 0.0
    change = RuntimeConfigChange.objects.get()
    assert (change.changed_by, change.after["limit"]) == ("op", 7)


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
