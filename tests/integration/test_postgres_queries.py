"""The named statements: each one parses against the migrated schema, each is run by some
code, every driver operation names its statements, and no Python module builds SQL."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import asyncpg

import ujobs.drivers.postgres.backfills as postgres_backfills
import ujobs.drivers.postgres.children as postgres_children
import ujobs.drivers.postgres.driver as postgres
import ujobs.drivers.postgres.introspect as postgres_introspect
import ujobs.drivers.postgres.leases as postgres_leases
import ujobs.drivers.postgres.results as postgres_results
import ujobs.drivers.postgres.weights as postgres_weights
import ujobs.drivers.postgres.workers as postgres_workers
from ujobs.drivers.base import (
    BackfillLedger,
    JobDriver,
    JobIntrospection,
    LeaseStore,
    WorkerRegistry,
)
from ujobs.drivers.children import JobChildren
from ujobs.drivers.fairness import TenantWeights
from ujobs.drivers.postgres.sql import QUERIES
from ujobs.drivers.results import JobResults

ROOT = Path(__file__).resolve().parents[2]
CODE_DIRS = ("shared", "services", "webhooks", "exports")
USE = re.compile(r"""\bquery\(\s*["']([a-z0-9_]+)["']\s*\)""")
SQL_IN_PYTHON = re.compile(
    r"""f["'].*\b(select|insert into|update|delete from)\b.*\{""", re.IGNORECASE
)


def python_files() -> list[Path]:
    return [p for d in CODE_DIRS for p in (ROOT / d).rglob("*.py")]


def test_every_query_file_is_run_by_some_code() -> None:
    used = {name for path in python_files() for name in USE.findall(path.read_text())}
    assert set(QUERIES) - used == set(), "query files no code runs"
    assert used - set(QUERIES) == set(), "names asked for with no file"


def protocol_members(protocol: type) -> set[str]:
    return {
        name
        for name, member in vars(protocol).items()
        if not name.startswith("_") and inspect.isfunction(member)
    }


def test_every_driver_operation_names_its_statements() -> None:
    pairs: list[tuple[type, dict[str, tuple[str, ...]], set[str]]] = [
        (JobDriver, postgres.OPERATION_QUERIES, {"close"}),
        (JobIntrospection, postgres_introspect.OPERATION_QUERIES, set()),
        (LeaseStore, postgres_leases.OPERATION_QUERIES, set()),
        (WorkerRegistry, postgres_workers.OPERATION_QUERIES, set()),
        (BackfillLedger, postgres_backfills.OPERATION_QUERIES, set()),
        (JobResults, postgres_results.OPERATION_QUERIES, {"listen"}),
        (JobChildren, postgres_children.OPERATION_QUERIES, set()),
        (TenantWeights, postgres_weights.OPERATION_QUERIES, set()),
    ]
    for protocol, mapping, without_sql in pairs:
        assert protocol_members(protocol) - without_sql == set(mapping), protocol.__name__
        for names in mapping.values():
            assert names
            assert all(name in QUERIES for name in names)


def test_no_python_module_builds_sql_in_an_f_string() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in python_files()
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if SQL_IN_PYTHON.search(line)
    ]
    assert offenders == []


async def test_every_statement_parses_against_the_migrated_schema(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    async with pg_pool.acquire() as conn:
        for name, text in QUERIES.items():
            if name.startswith("migrations_"):
                continue
            try:
                await conn.prepare(text)
            except asyncpg.PostgresError as exc:  # pragma: no cover - the failure message
                raise AssertionError(f"{name}.sql does not prepare: {exc}") from exc
