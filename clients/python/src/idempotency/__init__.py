"""Idempotency-Key handling for Python web services on the PostgreSQL extension `idempotency`:
idempotency.asgi.IdempotencyMiddleware (FastAPI, Starlette) and idempotency.flask.Idempotency
(Flask), on psycopg 3 and psycopg_pool. clients/python/README.md says how."""
from ._core import ConfigurationError, Handle, Options

__all__ = ["ConfigurationError", "Handle", "Options", "__version__"]
__version__ = "2.0.0"  # the one place of the version (pyproject.toml reads it)
