"""Settlements on a Redis-only deployment: the Redis driver's ending scripts add their entry
to the stream ``{prefix}:settled`` atomically with the row's move, and the api's Redis relay
publishes them to ``<PREFIX>_SETTLED`` exactly as the Postgres relay does (body, subject,
``Nats-Msg-Id``), in order per job, deleting only what JetStream acked."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import asyncpg
import nats
import orjson
import pytest
from nats.js import JetStreamContext

from tests.services.api_support import ORG_A, MakeClient, mail, make_api
from tests.services.nats_support import drop_streams, unique_prefix
from tests.support.cli import ujobs
from tests.support.conformance import claim, claim_one, req
from tests.support.redis_keys import redis_test_driver
from ujobs.clock import SYSTEM_CLOCK, FrozenClock
from ujobs.drivers.base import NackOptions
from ujobs.drivers.redis.driver import RedisDriver
from ujobs.drivers.redis.settlements import RedisSettlementsOutbox
from ujobs.services.nats.names import NatsNames
from ujobs.services.nats.settlements_redis import RedisSettlementsRelay
from ujobs.services.nats.streams import ensure_streams

FAR = 4_000_000_000_000
LAPSE_MS = 1_000


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
async def driver(
    redis_url: str, redis_prefix: str, clock: FrozenClock
) -> AsyncIterator[RedisDriver]:
    async with redis_test_driver(redis_url, redis_prefix, clock=clock, settlements=True) as d:
        yield d


@pytest.fixture
def outbox(driver: RedisDriver) -> RedisSettlementsOutbox:
    return RedisSettlementsOutbox(driver.client, driver.prefix)


@pytest.fixture
async def stream(nats_url: str) -> AsyncIterator[tuple[JetStreamContext, NatsNames]]:
    names = NatsNames(unique_prefix())
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await ensure_streams(js, names)
    yield js, names
    await drop_streams(nc, names)
    await nc.drain()


class _NeverForgets(RedisSettlementsOutbox):
    """An outbox whose relay dies between the publish acks and the delete."""

    async def forget(self, seqs: Sequence[str]) -> int:
        return 0


def _short(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["name"], r["outcome"], r["code"], r["attempt"]) for r in rows]


async def _settled(js: JetStreamContext, names: NatsNames, want: int) -> list[Any]:
    """The first ``want`` messages on the settled stream (waits up to 10 s for them)."""
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
                got.append(m)
    finally:
        await sub.unsubscribe()
    return got


async def test_every_ending_script_adds_one_entry(
    driver: RedisDriver, outbox: RedisSettlementsOutbox, clock: FrozenClock
) -> None:
    done = await driver.enqueue(req("a", tenant_id="org-1"))
    job = await claim_one(driver)
    assert await driver.ack(job.id, job.ref, duration_ms=5)
    await driver.enqueue(req("b"))
    job = await claim_one(driver)
    assert await driver.nack(job.id, job.ref, NackOptions(error="X_BOOM: it broke", run_at_ms=FAR))
    await driver.enqueue(req("c"))
    job = await claim_one(driver)
    assert await driver.nack(job.id, job.ref, NackOptions(error="ValueError: x", fail=True))
    await driver.enqueue(req("d"))
    job = await claim_one(driver)
    assert await driver.nack(job.id, job.ref, NackOptions(error="x", dead_letter=True))
    # A hand-back and a park end no attempt; a settle that does not land writes nothing.
    await driver.enqueue(req("e"))
    job = await claim_one(driver)
    assert await driver.nack(job.id, job.ref, NackOptions(count=False))
    job = await claim_one(driver)
    assert await driver.nack(job.id, job.ref, NackOptions(park=True, run_at_ms=FAR))
    assert not await driver.ack(job.id, job.ref)
    # A lapsed final attempt, buried by the next claim.
    buried = await driver.enqueue(req("f", max_attempts=1))
    await claim_one(driver, visibility_ms=LAPSE_MS)
    clock.advance(LAPSE_MS + 1)
    assert await claim(driver) == []
    rows = await outbox.oldest(100)
    assert _short(rows) == [
        ("a", "completed", None, 1),
        ("b", "retried", "X_BOOM", 1),
        ("c", "failed", None, 1),
        ("d", "dead", None, 1),
        ("f", "dead", "LEASE_LAPSED_FINAL_ATTEMPT", 1),
    ]
    assert (rows[0]["job_id"], rows[0]["run_id"], rows[0]["tenant_id"]) == (
        done.id,
        done.run_id,
        "org-1",
    )
    assert rows[1]["tenant_id"] is None
    assert (rows[4]["job_id"], rows[4]["settled_at_ms"]) == (buried.id, clock.now_ms())
    assert await outbox.pending() == (5, rows[0]["settled_at_ms"])


async def test_settlements_off_add_nothing(
    redis_url: str, redis_prefix: str, clock: FrozenClock
) -> None:
    async with redis_test_driver(redis_url, redis_prefix, clock=clock) as plain:
        await plain.enqueue(req())
        job = await claim_one(plain)
        assert await plain.ack(job.id, job.ref)
        await plain.enqueue(req(max_attempts=1))
        await claim_one(plain, visibility_ms=LAPSE_MS)
        clock.advance(LAPSE_MS + 1)
        assert await claim(plain) == []
        assert await RedisSettlementsOutbox(plain.client, redis_prefix).pending() == (0, None)


async def test_the_relay_publishes_each_entry_once_in_order_then_deletes_it(
    driver: RedisDriver,
    outbox: RedisSettlementsOutbox,
    stream: tuple[JetStreamContext, NatsNames],
) -> None:
    js, names = stream
    queued = await driver.enqueue(req("billing.charge", tenant_id="org-9", max_attempts=3))
    for _ in range(2):  # attempts 1 and 2 fail and retry, attempt 3 completes
        job = await claim_one(driver)
        assert await driver.nack(job.id, job.ref, NackOptions(error="X_DOWN: later", run_at_ms=0))
    job = await claim_one(driver)
    assert await driver.ack(job.id, job.ref)
    kept = await outbox.oldest(10)
    # A relay that died after publishing but before deleting: the next one publishes the
    # same entries again, and the stream drops them as duplicates.
    died = RedisSettlementsRelay(_NeverForgets(driver.client, driver.prefix), js, names)
    assert await died.run_once() == 3
    assert (await outbox.pending())[0] == 3
    relay = RedisSettlementsRelay(outbox, js, names)
    assert await relay.run_once() == 3
    assert await outbox.pending() == (0, None)
    assert await relay.run_once() == 0
    msgs = await _settled(js, names, 3)
    assert (await js.stream_info(names.settled_stream)).state.messages == 3
    assert [m.subject for m in msgs] == [names.settled_subject("billing.charge")] * 3
    bodies = [orjson.loads(m.data) for m in msgs]
    assert [(b["outcome"], b["attempt"], b["code"]) for b in bodies] == [
        ("retried", 1, "X_DOWN"),
        ("retried", 2, "X_DOWN"),
        ("completed", 3, None),
    ]
    assert bodies[0] == {
        "id": queued.id,
        "runId": queued.run_id,
        "name": "billing.charge",
        "tenant": "org-9",
        "outcome": "retried",
        "code": "X_DOWN",
        "attempt": 1,
        "settledAt": kept[0]["settled_at_ms"],
    }
    assert msgs[2].headers is not None
    assert msgs[2].headers["Nats-Msg-Id"] == f"{queued.id}:3:completed:{kept[2]['seq']}"


async def test_two_replicas_relaying_one_stream_keep_a_jobs_order(
    driver: RedisDriver,
    outbox: RedisSettlementsOutbox,
    stream: tuple[JetStreamContext, NatsNames],
    nats_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two api replicas both read the stream's head: while the first holds a job's earlier
    entry (its publish not yet sent), the second publishes that entry and then the later
    one; the first's late copy is a duplicate the stream drops, so each lands once, in
    order."""
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
    first = RedisSettlementsRelay(outbox, held_js, names, batch=1)
    second = RedisSettlementsRelay(outbox, js, names)
    try:
        holding = asyncio.create_task(first.run_once())
        await asyncio.wait_for(entered.wait(), 5)
        assert await second.run_once() == 2
        release.set()
        assert await holding == 1
    finally:
        release.set()
        await nc.drain()
    assert await outbox.pending() == (0, None)
    msgs = await _settled(js, names, 2)
    assert (await js.stream_info(names.settled_stream)).state.messages == 2
    bodies = [orjson.loads(m.data) for m in msgs]
    assert [(b["outcome"], b["attempt"]) for b in bodies] == [("retried", 1), ("completed", 2)]


async def test_entries_wait_in_redis_while_nats_is_away(
    driver: RedisDriver,
    outbox: RedisSettlementsOutbox,
    stream: tuple[JetStreamContext, NatsNames],
    nats_url: str,
) -> None:
    js, names = stream
    for _ in range(3):
        await driver.enqueue(req())
        job = await claim_one(driver)
        assert await driver.ack(job.id, job.ref)
    gone = await nats.connect(nats_url)
    await gone.close()  # every publish on it fails, as with NATS down
    away = RedisSettlementsRelay(outbox, gone.jetstream(), names, retry_s=0.05)
    with pytest.raises(nats.errors.ConnectionClosedError):
        await away.run_once()
    await away.start()
    await asyncio.sleep(0.3)
    await away.stop()
    assert away.failures >= 1
    assert (await outbox.pending())[0] == 3
    assert await RedisSettlementsRelay(outbox, js, names).run_once() == 3
    assert len(await _settled(js, names, 3)) == 3


async def test_a_redis_api_relays_what_its_workers_settle(
    aiohttp_client: MakeClient,
    pg_dsn: str,
    pg_pool: asyncpg.Pool[Any],
    nats_url: str,
    redis_url: str,
    redis_prefix: str,
) -> None:
    names = NatsNames(unique_prefix())
    api = await make_api(
        aiohttp_client,
        pg_dsn,
        pg_pool,
        NATS_URL=nats_url,
        UJOBS_NATS_PREFIX=names.prefix,
        UJOBS_NATS_SETTLEMENTS="on",
        UJOBS_DRIVER="redis",
        REDIS_URL=redis_url,
        UJOBS_REDIS_PREFIX=redis_prefix,
    )
    nc = await nats.connect(nats_url)
    try:
        async with redis_test_driver(
            redis_url, redis_prefix, clock=SYSTEM_CLOCK, settlements=True
        ) as worker:
            status, queued = await api.call(
                "POST",
                "/v1/jobs/send_mail",
                await api.token("enqueue:*"),
                {"input": mail(ORG_A, to="a@x.io")},
            )
            assert status == 202, queued
            job = await claim_one(worker)
            assert await worker.ack(job.id, job.ref)
            [msg] = await _settled(nc.jetstream(), names, 1)
        assert msg.subject == names.settled_subject("send_mail")
        body = orjson.loads(msg.data)
        assert (body["id"], body["outcome"], body["tenant"]) == (queued["id"], "completed", ORG_A)
    finally:
        await drop_streams(nc, names)
        await nc.drain()


def test_nats_status_counts_the_redis_stream(
    nats_url: str, redis_url: str, redis_prefix: str
) -> None:
    async def settle_one() -> None:
        async with redis_test_driver(redis_url, redis_prefix, settlements=True) as d:
            await d.enqueue(req())
            job = await claim_one(d)
            assert await d.ack(job.id, job.ref)
            env = {
                "NATS_URL": nats_url,
                "UJOBS_NATS_PREFIX": unique_prefix(),
                "UJOBS_DRIVER": "redis",
                "REDIS_URL": redis_url,
                "UJOBS_REDIS_PREFIX": redis_prefix,
            }
            # The CLI runs its own event loop: off this one, in a thread.
            result = await asyncio.to_thread(ujobs, "nats", "status", "--json", env=env)
            assert result.exit_code == 0, result.output
            doc = orjson.loads(result.stdout)
            assert doc["settlements"] == {"pending": 1, "oldestPendingAtMs": d.clock.now_ms()}

    asyncio.run(settle_one())
