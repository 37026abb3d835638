"""A bench's own database under ``BENCH_PG``: made afresh and migrated before a run, dropped
after, so a run never reads a previous run's rows (nor a test's)."""

from __future__ import annotations

import os

import asyncpg

PG_BASE = os.environ.get("BENCH_PG", "postgresql://postgres@127.0.0.1:5432")


async def admin(statement: str) -> None:
    """One statement on the server's ``postgres`` database (CREATE/DROP DATABASE)."""
    conn = await asyncpg.connect(f"{PG_BASE}/postgres")
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def drop_database(name: str) -> None:
    await admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def fresh_database(name: str) -> str:
    """``name`` dropped, created and migrated; answers its DSN."""
    from ujobs.drivers.postgres.migrate import migrate

    await drop_database(name)
    await admin(f'CREATE DATABASE "{name}"')
    dsn = f"{PG_BASE}/{name}"
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    return dsn
