from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db.backends.postgresql import base as postgresql

from anima.core.embedded.server import embedded_server


class DatabaseWrapper(postgresql.DatabaseWrapper):
    """The stock PostgreSQL backend, pointed at the embedded server's Unix socket."""

    def get_connection_params(self) -> dict:
        params = super().get_connection_params()
        server = embedded_server(
            Path(settings.ANIMA_EMBEDDED_PG_DIR),
            database=settings.ANIMA_EMBEDDED_PG_DATABASE,
            shared_buffers_mb=settings.ANIMA_EMBEDDED_PG_SHARED_BUFFERS_MB,
        )
        params.update(host=server.socket_dir, port=server.port, user="postgres")
        params.pop("password", None)
        return params
