"""Every ending is a settlement on ``<prefix>.settled.<job>``, not only a worker's ack or nack:
a claim that buries a lapsed final attempt and an operator's cancel (the one function behind
``ujobs jobs cancel``, ``POST /v1/jobs/{id}/cancel`` and the dashboard) write their
``x_settlements`` row in their own statement, with the Postgres driver's settlements on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import nats
import orjson
import pytest
from nats.js import JetStreamContext

from tests.services.api_support import ORG_A, MakeClient, mail, make_api
from tests.services.nats_support import drop_streams, unique_prefix
from tests.support.cli import json_of, ujobs
from tests.support.conformance import claim, claim_one, req
from ujobs.clock import FrozenClock
from ujobs.drivers.postgres.driver import PostgresDriver, postgres_driver
from ujobs.introspect import cancel_job, retry_job
from ujobs.services.nats.names import NatsNames
from ujobs.services.nats.settlements import SettlementsRelay
from ujobs.services.nats.streams import ensure_streams

LAPSE_MS = 1_000


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
async def driver(pg_pool: asyncpg.Pool[Any], clock: FrozenClock) -> AsyncIterator[PostgresDriver]:
    d = postgres_driver(pg_pool, clock=clock, settlements=True)
    yield d
    await d.close()


@pytest.fixture
async def stream(nats_url: str) -> AsyncIterator[tuple[JetStreamContext, NatsNames]]:
    names = NatsNames(unique_prefix())
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await ensure_streams(js, names)
    yield js, names
    await drop_streams(nc, names)
    await nc.drain()


async def _outbox(pool: asyncpg.Pool[Any]) -> list[tuple[Any, ...]]:
    rows = await pool.fetch("select * from x_settlements order by seq")
    return [(r["job_id"], r["name"], r["outcome"], r["code"], r["attempt"]) for r in rows]


async def _settled(js: JetStreamContext, names: NatsNames, want: int) -> list[Any]:
    """The first ``want`` bodies on the settled stream (waits up to 10 s for them)."""
    sub = await js.pull_subscribe(names.settled_wildcard, stream=names.settled_stream)
    got: list[Any] = []
    try:
        deadline = asyncio.get_running_loop().time() + 10
        while len(got) < want and asyncio.get_running_loop().time() < deadline:
            try:
                batch = await sub.fetch(batch=want - len(got), timeout=1)
            except (nats.errors.TimeoutError, TimeoutError):
                continue
            for m in batch:
                await m.ack()
                got.append((m.subject, orjson.loads(m.data)))
    finally:
        await sub.unsubscribe()
    return got


async def _lapse(driver: PostgresDriver, clock: FrozenClock, *names: str) -> list[str]:
    """One-attempt jobs whose worker died: claimed, then their leases lapsed."""
    queued = [await driver.enqueue(req(n, max_attempts=1, tenant_id="org-1")) for n in names]
    assert len(await claim(driver, visibility_ms=LAPSE_MS)) == len(names)
    clock.advance(LAPSE_MS + 1)
    return [q.id for q in queued]


async def test_a_burial_by_the_claim_is_a_settlement(
    driver: PostgresDriver,
    clock: FrozenClock,
    pg_pool: asyncpg.Pool[Any],
    stream: tuple[JetStreamContext, NatsNames],
) -> None:
    dead, dropped = await _lapse(driver, clock, "a", "b")
    assert await claim(driver, drop_exhausted=frozenset({"b"})) == []
    assert await _outbox(pg_pool) == [
        (dead, "a", "dead", "LEASE_LAPSED_FINAL_ATTEMPT", 1),
        (dropped, "b", "failed", "LEASE_LAPSED_FINAL_ATTEMPT", 1),
    ]
    js, names = stream
    assert await SettlementsRelay(pg_pool, js, names, clock=clock).run_once() == 2
    [(subject, body), _] = await _settled(js, names, 2)
    assert subject == names.settled_subject("a")
    assert (body["id"], body["outcome"], body["code"], body["attempt"], body["tenant"]) == (
        dead,
        "dead",
        "LEASE_LAPSED_FINAL_ATTEMPT",
        1,
        "org-1",
    )
    assert body["settledAt"] == clock.now_ms()


async def test_an_operator_cancel_is_a_settlement_and_the_late_ack_is_not(
    driver: PostgresDriver,
    pg_pool: asyncpg.Pool[Any],
    stream: tuple[JetStreamContext, NatsNames],
) -> None:
    ready = await driver.enqueue(req("a"))
    await cancel_job(driver, ready.id, "oops")
    await driver.enqueue(req("b"))
    running = await claim_one(driver)
    await cancel_job(driver, running.id)
    # The cancelled worker's own settle matches nothing: no second settlement.
    assert not await driver.ack(running.id, running.ref)
    assert await _outbox(pg_pool) == [
        (ready.id, "a", "cancelled", None, 0),
        (running.id, "b", "cancelled", None, 1),
    ]
    js, names = stream
    assert await SettlementsRelay(pg_pool, js, names).run_once() == 2
    got = await _settled(js, names, 2)
    assert [(s, b["id"], b["outcome"]) for s, b in got] == [
        (names.settled_subject("a"), ready.id, "cancelled"),
        (names.settled_subject("b"), running.id, "cancelled"),
    ]


async def test_a_retried_job_ending_the_same_way_again_is_a_second_message(
    driver: PostgresDriver,
    pg_pool: asyncpg.Pool[Any],
    stream: tuple[JetStreamContext, NatsNames],
) -> None:
    """``ujobs jobs retry`` resets the attempts: the re-run's ending repeats the first one's
    job id, attempt and outcome, minutes apart, inside the duplicate window. It is a second
    settlement all the same and must not be dropped as a re-publish of the first."""
    queued = await driver.enqueue(req("a"))
    for _ in range(2):
        job = await claim_one(driver)
        assert await driver.ack(job.id, job.ref)
        await retry_job(driver, queued.id)
    await cancel_job(driver, queued.id)
    await retry_job(driver, queued.id)
    await cancel_job(driver, queued.id)
    js, names = stream
    relay = SettlementsRelay(pg_pool, js, names)
    assert await relay.run_once() == 4
    got = await _settled(js, names, 4)
    assert [(b["outcome"], b["attempt"]) for _, b in got] == [
        ("completed", 1),
        ("completed", 1),
        ("cancelled", 0),
        ("cancelled", 0),
    ]
    # A relay that died before marking still publishes each one only once.
    await pg_pool.execute("update x_settlements set published_at = null")
    assert await relay.run_once() == 4
    assert (await js.stream_info(names.settled_stream)).state.messages == 4


async def test_settlements_off_the_burial_and_the_cancel_write_nothing(
    pg_pool: asyncpg.Pool[Any], clock: FrozenClock
) -> None:
    plain = postgres_driver(pg_pool, clock=clock)
    try:
        await _lapse(plain, clock, "a")
        assert await claim(plain) == []
        ready = await plain.enqueue(req("b"))
        await cancel_job(plain, ready.id)
        states = [r["state"] for r in await pg_pool.fetch("select state from x_jobs order by name")]
        assert states == ["dead", "cancelled"]
    finally:
        await plain.close()
    assert await _outbox(pg_pool) == []


async def test_a_cancel_over_http_arrives_on_the_settled_stream(
    aiohttp_client: MakeClient, pg_dsn: str, pg_pool: asyncpg.Pool[Any], nats_url: str
) -> None:
    names = NatsNames(unique_prefix())
    api = await make_api(
        aiohttp_client,
        pg_dsn,
        pg_pool,
        NATS_URL=nats_url,
        UJOBS_NATS_PREFIX=names.prefix,
        UJOBS_NATS_SETTLEMENTS="on",
    )
    nc = await nats.connect(nats_url)
    try:
        status, queued = await api.call(
            "POST",
            "/v1/jobs/send_mail",
            await api.token("enqueue:*"),
            {"input": mail(ORG_A, to="a@x.io")},
        )
        assert status == 202, queued
        status, _ = await api.call(
            "POST", f"/v1/jobs/{queued['id']}/cancel", await api.token("operate", "read")
        )
        assert status == 200
        [(subject, body)] = await _settled(nc.jetstream(), names, 1)
        assert subject == names.settled_subject("send_mail")
        assert (body["id"], body["outcome"], body["tenant"]) == (queued["id"], "cancelled", ORG_A)
    finally:
        await drop_streams(nc, names)
        await nc.drain()


def test_a_cancel_from_the_cli_writes_its_settlement(pg_dsn: str) -> None:
    async def enqueue() -> str:
        pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
        assert pool is not None
        try:
            return (await postgres_driver(pool).enqueue(req("a"))).id
        finally:
            await pool.close()

    job_id = asyncio.run(enqueue())
    env = {"UJOBS_NATS_SETTLEMENTS": "on"}
    result = ujobs("jobs", "cancel", job_id, "--json", dsn=pg_dsn, env=env)
    assert json_of(result)["state"] == "cancelled"

    async def outbox() -> list[tuple[Any, ...]]:
        pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
        assert pool is not None
        try:
            return await _outbox(pool)
        finally:
            await pool.close()

    assert asyncio.run(outbox()) == [(job_id, "a", "cancelled", None, 0)]
