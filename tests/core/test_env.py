from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from anima.core.env import env_bool, env_choice, env_int, env_int_map, env_rate, env_time_zone, env_url
from anima.core.llm.dialects import SETTING_CHOICES

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("raw", "expected"), [("1", True), ("yes", True), ("Off", False), ("", False)])
def test_env_bool_reads_common_spellings(monkeypatch, raw, expected):
    monkeypatch.setenv("ANIMA_FLAG", raw)
    assert env_bool("ANIMA_FLAG") is expected


def test_env_bool_rejects_garbage_naming_the_variable(monkeypatch):
    monkeypatch.setenv("ANIMA_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="ANIMA_FLAG"):
        env_bool("ANIMA_FLAG")


def test_env_int_checks_type_and_range(monkeypatch):
    monkeypatch.setenv("ANIMA_N", "abc")
    with pytest.raises(ImproperlyConfigured, match="ANIMA_N must be an integer"):
        env_int("ANIMA_N", 1)
    monkeypatch.setenv("ANIMA_N", "0")
    with pytest.raises(ImproperlyConfigured, match=">= 1"):
        env_int("ANIMA_N", 5, minimum=1)
    monkeypatch.delenv("ANIMA_N")
    assert env_int("ANIMA_N", 5) == 5


def test_env_url_requires_a_known_scheme(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "mysql://x")
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL"):
        env_url("DATABASE_URL", schemes=("postgres", "postgresql"))
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@h/db")
    assert env_url("DATABASE_URL", schemes=("postgres", "postgresql")) == "postgresql://u@h/db"


def test_time_zone_and_choice_validation(monkeypatch):
    monkeypatch.setenv("ANIMA_TIME_ZONE", "Mars/Olympus")
    with pytest.raises(ImproperlyConfigured, match="IANA time zone"):
        env_time_zone("ANIMA_TIME_ZONE", "Asia/Shanghai")
    monkeypatch.setenv("ANIMA_LLM_PROVIDER", "gpt")
    with pytest.raises(ImproperlyConfigured, match="one of offline, openai"):
        env_choice("ANIMA_LLM_PROVIDER", "offline", choices=("offline", "openai"))


def test_settings_refuse_a_bad_environment_at_start_up():
    env = {**os.environ, "ANIMA_TIME_ZONE": "Nowhere/Land"}
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "anima.settings"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "ANIMA_TIME_ZONE must be an IANA time zone" in result.stderr


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        # Exactly the dialects the LLM layer speaks (the settings cannot import it to list them).
        ("ANIMA_LLM_STRUCTURED", "grammar", f"ANIMA_LLM_STRUCTURED must be one of {', '.join(SETTING_CHOICES)},"),
        ("ANIMA_LLM_DEADLINE", "soon", "ANIMA_LLM_DEADLINE must be a number"),
        ("ANIMA_LLM_MAX_TOKENS", "light-sleep.semantic=lots", "light-sleep.semantic must be an integer"),
    ],
)
def test_settings_refuse_a_bad_llm_setting_at_start_up(name, value, message):
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env={**os.environ, name: value, "DJANGO_SETTINGS_MODULE": "anima.settings"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert message in result.stderr


def test_env_int_map_reads_pairs_and_checks_each(monkeypatch):
    monkeypatch.setenv("X_BUDGETS", "dream=1000, light-sleep.semantic = 1500")
    assert env_int_map("X_BUDGETS", minimum=16, maximum=65536) == {"dream": 1000, "light-sleep.semantic": 1500}
    monkeypatch.setenv("X_BUDGETS", "dream")
    with pytest.raises(ImproperlyConfigured, match="X_BUDGETS must be key=integer pairs"):
        env_int_map("X_BUDGETS", minimum=16, maximum=65536)
    monkeypatch.setenv("X_BUDGETS", "dream=3")
    with pytest.raises(ImproperlyConfigured, match=r"dream must be within 16\.\.65536, got 3"):
        env_int_map("X_BUDGETS", minimum=16, maximum=65536)


def test_defaults_are_embedded_and_safe(settings):
    if "DEBUG" not in os.environ:
        assert settings.DEBUG is False
    assert settings.TIME_ZONE == os.environ.get("ANIMA_TIME_ZONE", "Asia/Shanghai")
    if not os.environ.get("DATABASE_URL"):
        assert settings.DATABASES["default"]["ENGINE"] == "anima.core.embedded"
    if not os.environ.get("CELERY_BROKER_URL"):
        assert settings.CELERY_TASK_ALWAYS_EAGER is True


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("600/min", "600/min"), ("5/S", "5/s"), ("off", None), ("", "100/hour"), (" 2/day ", "2/day")],
)
def test_env_rate_reads_a_rate_or_off(monkeypatch, raw, expected):
    monkeypatch.setenv("X_RATE", raw)
    assert env_rate("X_RATE", "100/hour") == expected


@pytest.mark.parametrize("raw", ["600", "600/fortnight", "0/min", "-1/min", "ten/min", "600/min/extra"])
def test_env_rate_refuses_anything_else_naming_the_variable(monkeypatch, raw):
    monkeypatch.setenv("X_RATE", raw)
    with pytest.raises(ImproperlyConfigured, match="X_RATE must be a rate such as 600/min"):
        env_rate("X_RATE", "100/hour")
