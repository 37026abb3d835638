"""Migrations: ordered, recorded, a no-op the second time, safe when two processes race, and
the migrated schema matches the committed snapshot (regenerate with UPDATE_SNAPSHOTS=1)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import asyncpg
import orjson
import pytest
from typer.testing import CliRunner

from ujobs.drivers.postgres.migrate import migrate
from ujobs.drivers.postgres.sql import migration_files
from ujobs.services.cli.app import app

SNAPSHOT = Path(__file__).parent / "snapshots" / "pg_schema.txt"


@pytest.fixture
def blank_dsn(pg_fresh_dsn: str) -> str:
    """An empty database (no migrations applied)."""
    return pg_fresh_dsn


async def test_migrate_applies_every_file_once_then_is_a_no_op(blank_dsn: str) -> None:
    conn = await asyncpg.connect(blank_dsn)
    try:
        first = await migrate(conn)
        second = await migrate(conn)
        recorded = [r["id"] for r in await conn.fetch("select id from x_migrations order by id")]
    finally:
        await conn.close()
    assert first == [name for name, _ in migration_files()]
    assert first[0] == "0001_jobs"
    assert second == []
    assert recorded == first


async def test_two_concurrent_migrations_apply_each_file_once(blank_dsn: str) -> None:
    a = await asyncpg.connect(blank_dsn)
    b = await asyncpg.connect(blank_dsn)
    try:
        applied_a, applied_b = await asyncio.gather(migrate(a), migrate(b))
        count = await a.fetchval("select count(*) from x_migrations")
    finally:
        await a.close()
        await b.close()
    everything = [name for name, _ in migration_files()]
    assert sorted(applied_a + applied_b) == everything
    assert count == len(everything)


def test_cli_db_migrate_reports_applied_then_nothing(blank_dsn: str) -> None:
    runner = CliRunner()
    first = runner.invoke(app, ["db", "migrate", "--database-url", blank_dsn, "--json"])
    assert first.exit_code == 0, first.output
    # stdout alone: on a slow machine the CLI's progress line (after 1 s) goes to stderr.
    assert orjson.loads(first.stdout) == {"applied": [n for n, _ in migration_files()]}
    second = runner.invoke(app, ["db", "migrate", "--json"], env={"DATABASE_URL": blank_dsn})
    assert second.exit_code == 0, second.output
    assert orjson.loads(second.stdout) == {"applied": []}


def test_cli_db_migrate_without_a_database_is_driver_unavailable() -> None:
    result = CliRunner().invoke(app, ["db", "migrate", "--json"], env={"DATABASE_URL": ""})
    assert result.exit_code == 1
    assert orjson.loads(result.output)["error"]["code"] == "X_DRIVER_UNAVAILABLE"


async def schema_text(dsn: str) -> str:
    """Tables, columns, storage options, indexes, constraints and functions, sorted."""
    conn = await asyncpg.connect(dsn)
    try:
        lines: list[str] = []
        for r in await conn.fetch(
            """select c.relname, coalesce(array_to_string(c.reloptions, ','), '') as opts
                 from pg_class c join pg_namespace n on n.oid = c.relnamespace
                where n.nspname = 'public' and c.relkind = 'r' order by 1"""
        ):
            lines.append(f"table {r['relname']} ({r['opts']})")
        for r in await conn.fetch(
            """select table_name, column_name, data_type, is_nullable,
                      coalesce(column_default, '') as dflt,
                      is_identity || coalesce(' ' || identity_generation, '') as is_identity,
                      coalesce(collation_name, '') as coll
                 from information_schema.columns where table_schema = 'public'
                order by table_name, ordinal_position"""
        ):
            lines.append(
                f"column {r['table_name']}.{r['column_name']} {r['data_type']} "
                f"null={r['is_nullable']} identity={r['is_identity']} default={r['dflt']}"
                + (f" collate={r['coll']}" if r["coll"] else "")
            )
        for r in await conn.fetch(
            "select indexdef from pg_indexes where schemaname = 'public' order by indexname"
        ):
            lines.append(f"index {r['indexdef']}")
        for r in await conn.fetch(
            """select conrelid::regclass::text as tbl, conname, pg_get_constraintdef(oid) as def
                 from pg_constraint where connamespace = 'public'::regnamespace
                order by 1, 2"""
        ):
            lines.append(f"constraint {r['tbl']}.{r['conname']} {r['def']}")
        for r in await conn.fetch(
            """select p.oid::regprocedure::text as sig, p.provolatile
                 from pg_proc p where p.pronamespace = 'public'::regnamespace order by 1"""
        ):
            lines.append(f"function {r['sig']} volatile={r['provolatile']}")
        return "\n".join(lines) + "\n"
    finally:
        await conn.close()


async def test_migrated_schema_matches_the_committed_snapshot(blank_dsn: str) -> None:
    # A database of its own, migrated here: the session's shared database may hold tables
    # other tests made (the README's outbox example creates `invoices`).
    conn = await asyncpg.connect(blank_dsn)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    actual = await schema_text(blank_dsn)
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(actual)
    assert SNAPSHOT.exists(), "no snapshot yet: run with UPDATE_SNAPSHOTS=1 and commit it"
    assert actual == SNAPSHOT.read_text(), (
        "the migrated schema moved: add a NEW migration (never edit an applied one), then "
        "regenerate the snapshot with UPDATE_SNAPSHOTS=1 and review the diff"
    )
