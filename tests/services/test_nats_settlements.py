"""The settlements outbox (written in the settle's own statement by the Postgres driver with
settlements on) and its relay to ``<PREFIX>_SETTLED``: one message per settlement, deduped
by ``Nats-Msg-Id``, in order per job, and nothing lost while NATS is away."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import nats
import nats.js.errors
import orjson
import pytest
from nats.js import JetStreamContext

from tests.services.nats_support import drop_streams, unique_prefix
from tests.support.conformance import claim_one, req
from ujobs.drivers.base import NackOptions
from ujobs.drivers.postgres.driver import PostgresDriver, postgres_driver
from ujobs.services.nats.names import NatsNames
from ujobs.services.nats.settlements import (
    SettlementResults,
    SettlementsRelay,
    idle_pauses,
    waves,
)
from ujobs.services.nats.streams import ensure_streams


@pytest.fixture
async def driver(pg_pool: asyncpg.Pool[Any]) -> AsyncIterator[PostgresDriver]:
    d = postgres_driver(pg_pool, settlements=True)
    yield d
    await d.close()


FAR = 4_000_000_000_000


async def _outbox(pool: asyncpg.Pool[Any]) -> list[asyncpg.Record]:
    return list(await pool.fetch("select * from x_settlements order by seq"))


async def test_every_ending_settle_writes_one_row_in_its_statement(
    driver: PostgresDriver, pg_pool: asyncpg.Pool[Any]
) -> None:
    done = await driver.enqueue(req("a", tenant_id="org-1"))
    job = await claim_one(driver)
    assert await driver.ack(job.id, job.ref, duration_ms=5)
    await driver.enqueue(req("b"))
    job_b = await claim_one(driver)
    assert await driver.nack(
        job_b.id, job_b.ref, NackOptions(error="X_BOOM: it broke\nstack", run_at_ms=FAR)
    )
    await driver.enqueue(req("c"))
    job_c = await claim_one(driver)
    assert await driver.nack(job_c.id, job_c.ref, NackOptions(error="ValueError: x", fail=True))
    await driver.enqueue(req("d"))
    job_d = await claim_one(driver)
    assert await driver.nack(job_d.id, job_d.ref, NackOptions(error="x", dead_letter=True))
    # A hand-back and a park end no attempt: no settlement.
    await driver.enqueue(req("e"))
    job_e = await claim_one(driver)
    assert await driver.nack(job_e.id, job_e.ref, NackOptions(count=False))
    job_e = await claim_one(driver)
    assert await driver.nack(job_e.id, job_e.ref, NackOptions(park=True, run_at_ms=FAR))
    # A settle that does not land (the claim is gone) writes nothing either.
    assert not await driver.ack(job.id, job.ref)
    rows = await _outbox(pg_pool)
    assert [(r["name"], r["outcome"], r["code"], r["attempt"]) for r in rows] == [
        ("a", "completed", None, 1),
        ("b", "retried", "X_BOOM", 1),
        ("c", "failed", None, 1),
        ("d", "dead", None, 1),
    ]
    assert (rows[0]["job_id"], rows[0]["run_id"], rows[0]["tenant_id"]) == (
        done.id,
        done.run_id,
        "org-1",
    )
    assert all(r["published_at"] is None for r in rows)


async def test_settlements_off_writes_nothing(pg_pool: asyncpg.Pool[Any]) -> None:
    plain = postgres_driver(pg_pool)
    try:
        await plain.enqueue(req())
        job = await claim_one(plain)
        assert await plain.ack(job.id, job.ref)
        await plain.enqueue(req())
        job = await claim_one(plain)
        assert await plain.nack(job.id, job.ref, NackOptions(error="x", dead_letter=True))
    finally:
        await plain.close()
    assert await _outbox(pg_pool) == []


def test_waves_never_hold_one_job_twice() -> None:
    rows = [{"job_id": j} for j in ["a", "b", "a", "c", "a", "b"]]
    assert [[r["job_id"] for r in w] for w in waves(rows)] == [["a", "b"], ["a", "c"], ["a", "b"]]


def test_an_idle_relay_backs_off_from_a_quick_look_to_the_idle_pause() -> None:
    pauses = idle_pauses()
    assert [next(pauses) for _ in range(7)] == [0.005, 0.01, 0.02, 0.04, 0.05, 0.05, 0.05]


async def _settled_messages(js: JetStreamContext, names: NatsNames) -> list[Any]:
    sub = await js.pull_subscribe(names.settled_wildcard, stream=names.settled_stream)
    got = []
    try:
        while True:
            try:
                batch = await sub.fetch(batch=100, timeout=1)
            except (nats.errors.TimeoutError, TimeoutError):
                break
            for m in batch:
                await m.ack()
                got.append(m)
    finally:
        await sub.unsubscribe()
    return got


@pytest.fixture
async def stream(nats_url: str) -> AsyncIterator[tuple[JetStreamContext, NatsNames]]:
    names = NatsNames(unique_prefix())
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await ensure_streams(js, names)
    yield js, names
    await drop_streams(nc, names)
    await nc.drain()


async def test_the_relay_publishes_each_settlement_once_in_order(
    driver: PostgresDriver,
    pg_pool: asyncpg.Pool[Any],
    stream: tuple[JetStreamContext, NatsNames],
) -> None:
    js, names = stream
    queued = await driver.enqueue(req("billing.charge", tenant_id="org-9", max_attempts=3))
    for _ in range(2):  # attempt 1 and 2 fail and retry, attempt 3 completes
        job = await claim_one(driver)
        assert await driver.nack(job.id, job.ref, NackOptions(error="X_DOWN: later", run_at_ms=0))
    job = await claim_one(driver)
    assert await driver.ack(job.id, job.ref)
    relay = SettlementsRelay(pg_pool, js, names)
    assert await relay.run_once() == 3
    assert await relay.run_once() == 0
    # A relay that died after publishing but before marking publishes again: deduped.
    await pg_pool.execute("update x_settlements set published_at = null")
    assert await relay.run_once() == 3
    msgs = await _settled_messages(js, names)
    assert [m.subject for m in msgs] == [names.settled_subject("billing.charge")] * 3
    bodies = [orjson.loads(m.data) for m in msgs]
    assert [(b["outcome"], b["attempt"], b["code"]) for b in bodies] == [
        ("retried", 1, "X_DOWN"),
        ("retried", 2, "X_DOWN"),
        ("completed", 3, None),
    ]
    first = bodies[0]
    assert set(first) == {
        "id",
        "runId",
        "name",
        "tenant",
        "outcome",
        "code",
        "attempt",
        "settledAt",
    }
    assert (first["id"], first["runId"], first["tenant"]) == (queued.id, queued.run_id, "org-9")
    assert msgs[2].headers is not None
    seq = await pg_pool.fetchval("select max(seq) from x_settlements")
    assert msgs[2].headers["Nats-Msg-Id"] == f"{queued.id}:3:completed:{seq}"


async def test_settlements_wait_while_nats_is_away(
    driver: PostgresDriver,
    pg_pool: asyncpg.Pool[Any],
    stream: tuple[JetStreamContext, NatsNames],
    nats_url: str,
) -> None:
    js, names = stream
    for _ in range(3):
        await driver.enqueue(req())
        job = await claim_one(driver)
        assert await driver.ack(job.id, job.ref)
    # The relay's own connection closed: every publish fails, as with NATS down.
    gone = await nats.connect(nats_url)
    await gone.close()
    away = SettlementsRelay(pg_pool, gone.jetstream(), names, retry_s=0.05)
    with pytest.raises(nats.errors.ConnectionClosedError):
        await away.run_once()
    assert all(r["published_at"] is None for r in await _outbox(pg_pool))
    await away.start()
    await asyncio.sleep(0.3)
    await away.stop()
    assert away.failures >= 1
    assert all(r["published_at"] is None for r in await _outbox(pg_pool))
    back = SettlementsRelay(pg_pool, js, names)
    assert await back.run_once() == 3
    assert len(await _settled_messages(js, names)) == 3


async def test_a_publish_the_stream_refuses_leaves_its_settlement_pending(
    driver: PostgresDriver,
    pg_pool: asyncpg.Pool[Any],
    stream: tuple[JetStreamContext, NatsNames],
) -> None:
    js, names = stream
    await driver.enqueue(req())
    job = await claim_one(driver)
    assert await driver.ack(job.id, job.ref)
    await js.delete_stream(names.settled_stream)  # nothing captures the subject: no ack
    relay = SettlementsRelay(pg_pool, js, names, publish_timeout_s=2.0)
    with pytest.raises(nats.js.errors.NoStreamResponseError):
        await relay.run_once()
    assert all(r["published_at"] is None for r in await _outbox(pg_pool))
    await ensure_streams(js, names)
    assert await relay.run_once() == 1
    assert len(await _settled_messages(js, names)) == 1


async def test_two_relays_on_one_database_keep_a_jobs_order(
    driver: PostgresDriver,
    pg_pool: asyncpg.Pool[Any],
    stream: tuple[JetStreamContext, NatsNames],
    nats_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two api replicas' relays: while the first holds a job's earlier settlement (its publish
    not yet sent), the second claims nothing, rather than skip that row and publish the
    job's later settlement first."""
    js, names = stream
    await driver.enqueue(req("billing.charge", max_attempts=2))
    job = await claim_one(driver)
    assert await driver.nack(job.id, job.ref, NackOptions(error="X_DOWN: later", run_at_ms=0))
    job = await claim_one(driver)
    assert await driver.ack(job.id, job.ref)
    nc = await nats.connect(nats_url)
    held_js = nc.jetstream()
    entered, release = asyncio.Event(), asyncio.Event()
    publish_async = held_js.publish_async

    async def held(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        await release.wait()
        return await publish_async(*args, **kwargs)

    monkeypatch.setattr(held_js, "publish_async", held)
    first = SettlementsRelay(pg_pool, held_js, names, batch=1)
    second = SettlementsRelay(pg_pool, js, names, batch=1)
    try:
        holding = asyncio.create_task(first.run_once())
        await asyncio.wait_for(entered.wait(), 5)
        assert await second.run_once() == 0
        release.set()
        assert await holding == 1
    finally:
        release.set()
        await nc.drain()
    assert await second.run_once() == 1
    bodies = [orjson.loads(m.data) for m in await _settled_messages(js, names)]
    assert [(b["outcome"], b["attempt"]) for b in bodies] == [("retried", 1), ("completed", 2)]


async def test_completed_settlements_carry_the_result_of_the_jobs_that_ask_for_it(
    driver: PostgresDriver,
    pg_pool: asyncpg.Pool[Any],
    stream: tuple[JetStreamContext, NatsNames],
) -> None:
    js, names = stream
    results = {"report": '{"rows": 3, "url": "s3://r"}', "big": '"' + "x" * 100 + '"'}
    for name in ("report", "big", "quiet"):
        await driver.enqueue(req(name))
        job = await claim_one(driver)
        assert await driver.ack(job.id, job.ref, result=results.get(name, '"unasked"'))
    await driver.enqueue(req("report"))
    job = await claim_one(driver)
    assert await driver.nack(job.id, job.ref, NackOptions(error="X_DOWN: later", run_at_ms=FAR))
    relay = SettlementsRelay(
        pg_pool, js, names, results=SettlementResults.of(("report", "big"), max_bytes=64)
    )
    assert await relay.run_once() == 4
    bodies = [orjson.loads(m.data) for m in await _settled_messages(js, names)]
    by = [(b["name"], b["outcome"]) for b in bodies]
    assert by == [("report", "completed"), ("big", "completed"), ("quiet", "completed"),
                  ("report", "retried")]  # fmt: skip
    assert bodies[0]["result"] == {"rows": 3, "url": "s3://r"}
    assert (bodies[1]["result"], bodies[1]["resultTooLarge"]) == (None, True)
    assert "result" not in bodies[2], "a job nobody asked for carries no result"
    assert "result" not in bodies[3], "only a completion carries one"


async def test_every_jobs_result_rides_along_with_a_star(
    driver: PostgresDriver,
    pg_pool: asyncpg.Pool[Any],
    stream: tuple[JetStreamContext, NatsNames],
) -> None:
    js, names = stream
    await driver.enqueue(req("anything"))
    job = await claim_one(driver)
    assert await driver.ack(job.id, job.ref)  # no result: carried as null
    relay = SettlementsRelay(pg_pool, js, names, results=SettlementResults.of(("*",), 1_000))
    assert await relay.run_once() == 1
    [body] = [orjson.loads(m.data) for m in await _settled_messages(js, names)]
    assert ("result" in body, body["result"]) == (True, None)
