"""What the tests share: the database of the libpq environment (PGHOST, PGPORT, PGUSER,
PGDATABASE; clients/run-tests sets them), which must have the extension idempotency 2.0."""
import os
import sys

import psycopg
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CONNECT = {"autocommit": True, "prepare_threshold": None}


@pytest.fixture(scope="session")
def db():
    """An autocommit connection of the test's own (holds, lookups)."""
    env = {k: os.environ.get(k) for k in ("PGHOST", "PGPORT", "PGUSER", "PGDATABASE")}
    try:
        conn = psycopg.connect(**CONNECT)
    except psycopg.Error as e:
        pytest.fail(f"no database: the libpq environment {env} must name one with the extension"
                    f" idempotency (clients/run-tests sets it): {e}", pytrace=False)
    if conn.execute("SELECT FROM pg_extension WHERE extname = 'idempotency'").fetchone() is None:
        pytest.fail(f"the database {env} has no extension idempotency: CREATE EXTENSION idempotency",
                    pytrace=False)
    yield conn
    conn.close()
