"""The library's own Postgres pool, which a ``keyset()`` given no ``pool=`` reads through.

An export of rows in the database the queue lives in needs no pool of the app's: every service
that runs jobs (``ujobs worker``, ``exporter``, ``webhook-deliverer``, ``dev``) installs the pool
it opened on ``DATABASE_URL`` here at start and takes it away after its drain. Rows in another
database take ``pool=`` (the app's own, opened by ``define_api(context=)``: ``run.ctx.pool``).
"""

from __future__ import annotations

from typing import Any

from ujobs.errors import ConfigInvalidError

__all__ = ["library_pool", "set_library_pool"]

_pool: Any = None


def set_library_pool(pool: Any) -> None:
    """Install this process's pool on ``DATABASE_URL`` (None takes it away)."""
    global _pool
    _pool = pool


def library_pool() -> Any:
    """The installed pool; ``X_CONFIG_INVALID`` when this process has none."""
    if _pool is None:
        raise ConfigInvalidError(
            "keyset() without pool= reads through the library's own Postgres pool, and this "
            "process has none: run it under a service with DATABASE_URL (ujobs exporter, "
            "worker or dev), or pass pool= (the app's own, e.g. run.ctx.pool from "
            "define_api(context=))",
            meta={"variable": "DATABASE_URL"},
        )
    return _pool
