"""PostgreSQL for the replication tests: a fresh database per test, dropped afterwards.

``ACTORMEM_TEST_PG`` names the server (a libpq connection string to a database the user
may create databases from); the default is ``postgresql://postgres@127.0.0.1:5432/postgres``.
Without a server the tests skip with that reason; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

ENV = "ACTORMEM_TEST_PG"
DEFAULT = "postgresql://postgres@127.0.0.1:5432/postgres"


def _admin_dsn() -> str:
    return os.environ.get(ENV, DEFAULT)


def _unavailable(reason: str) -> None:
    message = f"no PostgreSQL server for the replication tests ({reason}); set {ENV}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message}; CI=true requires one")
    pytest.skip(message)


def with_dbname(dsn: str, dbname: str) -> str:
    """``dsn`` pointing at database ``dbname``."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(dsn)
    params["dbname"] = dbname
    return make_conninfo(**params)


def fresh_database() -> Iterator[str]:
    """Yield a connection string to a new, empty database, and drop it afterwards (the
    body of each test module's ``pg_dsn`` fixture)."""
    try:
        import psycopg
    except ImportError:
        _unavailable("psycopg is not installed: pip install -e '.[test]'")
    admin = _admin_dsn()
    name = f"actormem_test_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as exc:
        _unavailable(f"{admin}: {' '.join(str(exc).split())}")
    try:
        yield with_dbname(admin, name)
    finally:
        with psycopg.connect(admin, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def sql(dsn: str, statement: str, *args: object) -> list[tuple[object, ...]]:
    """Run one statement (autocommit); its rows, if any."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(statement, args or None)
        return cur.fetchall() if cur.description else []
