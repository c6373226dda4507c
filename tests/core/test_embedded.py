from __future__ import annotations

import os

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from anima.core.embedded.server import embedded_server


def test_a_data_directory_that_cannot_start_gives_a_clear_error(tmp_path):
    broken = tmp_path / "pgdata"
    broken.mkdir()
    (broken / "PG_VERSION").write_text("18\n")  # looks initialised, but holds no cluster
    with pytest.raises(ImproperlyConfigured) as excinfo:
        embedded_server(broken, database="anima")
    message = str(excinfo.value)
    assert str(broken) in message
    assert "Last server log lines" in message
    assert "DATABASE_URL" in message


@pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="runs on the embedded default only")
def test_the_default_database_is_the_embedded_postgresql_18_with_trigram():
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        assert cursor.fetchone()[0].startswith("18.")
        cursor.execute("SELECT word_similarity('邮箱', '你的 邮箱 是 啥')")
        assert cursor.fetchone()[0] == 1
    assert connection.settings_dict["ENGINE"] == "anima.core.embedded"
