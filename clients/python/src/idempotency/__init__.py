"""Idempotency-Key handling for Python web services on the PostgreSQL extension `idempotency`:
idempotency.asgi.IdempotencyMiddleware (FastAPI, Starlette) and idempotency.flask.idempotent
(Flask), on psycopg 3 and psycopg_pool. clients/python/README.md says how."""
from ._core import Handle, Options

__all__ = ["Handle", "Options"]
__version__ = "1.1.0"
