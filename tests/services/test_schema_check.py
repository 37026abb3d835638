"""A service refuses a database whose schema is not its code's: the worker, the relay and the
scheduler exit 1 with one ``X_SCHEMA_OUTDATED`` line that says to run ``ujobs db migrate``; the
api stays alive and answers ``/readyz`` 503 until the migrations land."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import asyncpg
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from prometheus_client import CollectorRegistry

from tests.e2e.service_process import ServiceProcess, service_env
from ujobs.drivers.postgres.migrate import migrate, schema_state
from ujobs.drivers.postgres.sql import migration_files
from ujobs.metrics import JobMetrics
from ujobs.services.api.app import create_app
from ujobs.services.config.settings import ApiConfig

Client = TestClient[web.Request, web.Application]
MakeClient = Callable[..., Awaitable[Client]]

EVERY_MIGRATION = [name for name, _ in migration_files()]


async def _run(dsn: str, *statements: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


async def _migrated(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
    finally:
        await conn.close()


async def _state(dsn: str) -> tuple[bool, tuple[str, ...], tuple[str, ...]]:
    conn = await asyncpg.connect(dsn)
    try:
        state = await schema_state(conn)
    finally:
        await conn.close()
    return state.ledger, state.pending, state.unknown


async def test_schema_state_reads_missing_older_current_and_newer(pg_fresh_dsn: str) -> None:
    assert await _state(pg_fresh_dsn) == (False, tuple(EVERY_MIGRATION), ())
    await _migrated(pg_fresh_dsn)
    assert await _state(pg_fresh_dsn) == (True, (), ())
    last = EVERY_MIGRATION[-1]
    await _run(pg_fresh_dsn, f"delete from x_migrations where id = '{last}'")
    assert await _state(pg_fresh_dsn) == (True, (last,), ())
    await _run(
        pg_fresh_dsn,
        f"insert into x_migrations (id, checksum) values ('{last}', 'x'), ('9999_future', 'x')",
    )
    assert await _state(pg_fresh_dsn) == (True, (), ("9999_future",))


async def _readyz(client: Client) -> tuple[int, dict[str, object]]:
    response = await client.get("/readyz")
    return response.status, await response.json()


async def test_the_api_is_not_ready_until_the_schema_is_the_codes(
    aiohttp_client: MakeClient, pg_fresh_dsn: str
) -> None:
    app = create_app(
        ApiConfig.load({"DATABASE_URL": pg_fresh_dsn}), metrics=JobMetrics(CollectorRegistry())
    )
    client = await aiohttp_client(app)
    status, body = await _readyz(client)
    assert status == 503
    error = body["error"]
    assert isinstance(error, dict)
    assert error["code"] == "X_SCHEMA_OUTDATED"
    assert "run `ujobs db migrate`" in error["message"]
    # Permanent until an operator migrates: no Retry-After to set every client spinning.
    assert "Retry-After" not in (await client.get("/readyz")).headers
    assert (await client.get("/healthz")).status == 200  # alive; the database is what lags

    await _migrated(pg_fresh_dsn)
    assert await _readyz(client) == (200, {"status": "ready"})

    await _run(pg_fresh_dsn, "insert into x_migrations (id, checksum) values ('9999_next', 'x')")
    status, body = await _readyz(client)
    assert status == 503
    assert isinstance(body["error"], dict)
    assert "newer than this code" in body["error"]["message"]
    assert body["error"]["meta"]["unknown"] == ["9999_next"]


SERVICES = [("worker", "--queues", "default"), ("relay",), ("scheduler",)]


@pytest.mark.slow
@pytest.mark.parametrize("older", [False, True], ids=["missing", "older"])
@pytest.mark.parametrize("args", SERVICES, ids=[s[0] for s in SERVICES])
async def test_a_service_exits_with_one_line_on_a_database_without_the_schema(
    pg_fresh_dsn: str, args: tuple[str, ...], older: bool
) -> None:
    if older:
        await _migrated(pg_fresh_dsn)
        await _run(pg_fresh_dsn, f"delete from x_migrations where id = '{EVERY_MIGRATION[-1]}'")
    env = service_env(DATABASE_URL=pg_fresh_dsn, UJOBS_APP="tests.e2e.services_app:api")
    service = await ServiceProcess.start(*args, env=env)
    try:
        code = await service.exit_code(30)
    finally:
        await service.kill()
    assert code == 1
    said = [line["line"] for line in service.logs if line.get("event") == "(not json)"]
    assert len(said) == 1, service.logs
    assert said[0].startswith("X_SCHEMA_OUTDATED: ")
    assert "run `ujobs db migrate`" in said[0]
    assert ("pending: " + EVERY_MIGRATION[-1]) in said[0] if older else "no ujobs schema" in said[0]
    assert not service.events("ujobs.service.started")
