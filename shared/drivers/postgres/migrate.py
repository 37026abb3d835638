"""``ujobs db migrate``: apply ``sql/migrations/*.sql`` in order, each once, recorded.

Each migration runs in its own transaction together with its row in ``x_migrations``, so a
failure leaves the schema at the last migration that applied. Two processes migrating at once
serialise on a transaction-scoped advisory lock taken by each transaction before it reads the
ledger: the second waits, then finds the row and skips. Transaction-scoped (not session) so a
pooled connection can never keep it after the call.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Protocol

import asyncpg

from ujobs.drivers.postgres.sql import migration_files, query
from ujobs.errors import SchemaOutdatedError

# Any fixed 64-bit key; "ujobs-migrate" hashed once, written out so it never moves.
MIGRATE_LOCK_KEY = 0x756A6F6273_4D47

_ENSURE = query("migrations_ensure")
_APPLIED = query("migrations_applied")
_RECORD = query("migrations_record")
_LOCK = query("migrations_lock")
_LEDGER = query("migrations_ledger")

MIGRATE_HINT = "run `ujobs db migrate`"


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


class _Reader(Protocol):
    """A pool or a connection: the two reads the check makes."""

    async def fetchval(self, query: str, *args: Any) -> Any: ...

    async def fetch(self, query: str, *args: Any) -> list[Any]: ...


@dataclass(frozen=True, slots=True)
class SchemaState:
    """The database's migrations against the code's: what is pending, what the code lacks."""

    ledger: bool
    pending: tuple[str, ...]
    unknown: tuple[str, ...]

    @property
    def current(self) -> bool:
        return self.ledger and not self.pending and not self.unknown


async def schema_state(executor: _Reader) -> SchemaState:
    """Read the ledger (two cheap statements; nothing is written, no lock is taken)."""
    expected = [migration_id for migration_id, _ in migration_files()]
    if not await executor.fetchval(_LEDGER):
        return SchemaState(ledger=False, pending=tuple(expected), unknown=())
    applied = {row["id"] for row in await executor.fetch(_APPLIED)}
    return SchemaState(
        ledger=True,
        pending=tuple(m for m in expected if m not in applied),
        unknown=tuple(sorted(applied - set(expected))),
    )


def schema_error(state: SchemaState, service: str) -> SchemaOutdatedError | None:
    """The one-line refusal for a schema that is not the code's, or None when it is."""
    if state.current:
        return None
    meta = {"pending": list(state.pending), "unknown": list(state.unknown), "service": service}
    if not state.ledger:
        message = f"{service}: the database has no ujobs schema; {MIGRATE_HINT} first"
    elif state.unknown:
        message = (
            f"{service}: the database schema is newer than this code (it has "
            f"{', '.join(state.unknown)}, which this release does not know); run the release "
            f"that applied them, or {MIGRATE_HINT} from this release on a matching database"
        )
    else:
        message = (
            f"{service}: the database schema is older than this code (pending: "
            f"{', '.join(state.pending)}); {MIGRATE_HINT} first"
        )
    return SchemaOutdatedError(message, meta=meta)


async def require_current_schema(executor: _Reader, service: str) -> None:
    """Raise ``X_SCHEMA_OUTDATED`` unless every migration of this code, and no other, applied."""
    error = schema_error(await schema_state(executor), service)
    if error is not None:
        raise error
