"""``ujobs db migrate``: apply ``sql/migrations/*.sql`` in order, each once, recorded.

Each migration runs in its own transaction together with its row in ``x_migrations``, so a
failure leaves the schema at the last migration that applied. Two processes migrating at once
serialise on a transaction-scoped advisory lock taken by each transaction before it reads the
ledger: the second waits, then finds the row and skips. Transaction-scoped (not session) so a
pooled connection can never keep it after the call.
"""

from __future__ import annotations

import hashlib
from typing import Any

import asyncpg

from shared.drivers.postgres.sql import migration_files, query

# Any fixed 64-bit key; "ujobs-migrate" hashed once, written out so it never moves.
MIGRATE_LOCK_KEY = 0x756A6F6273_4D47

_ENSURE = query("migrations_ensure")
_APPLIED = query("migrations_applied")
_RECORD = query("migrations_record")
_LOCK = query("migrations_lock")


def checksum(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


async def migrate(conn: asyncpg.Connection[Any]) -> list[str]:
    """Apply every pending migration on ``conn``; answers the ids applied (empty: a no-op)."""
    applied: list[str] = []
    async with conn.transaction():
        await conn.execute(_LOCK, MIGRATE_LOCK_KEY)
        await conn.execute(_ENSURE)
    for migration_id, text in migration_files():
        async with conn.transaction():
            await conn.execute(_LOCK, MIGRATE_LOCK_KEY)
            done = {row["id"] for row in await conn.fetch(_APPLIED)}
            if migration_id in done:
                continue
            await conn.execute(text)
            await conn.execute(_RECORD, migration_id, checksum(text))
            applied.append(migration_id)
    return applied
