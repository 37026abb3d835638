"""The Redis driver's core operations against a real Redis, on a key prefix of each test's own.

Behaviour every driver shares is the conformance suite's; what is here is what is Redis's own
(retention by TTL, the index structures staying in step with the rows, decoded clients,
translated errors) plus the core paths, so the driver is exercised before the suite runs it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from tests.support.redis_keys import drop_prefix, redis_test_driver
from ujobs.clock import FrozenClock
from ujobs.drivers.base import (
    LEASE_LAPSED_FINAL_ATTEMPT,
    ClaimedJob,
    ClaimOptions,
    ClaimRef,
    EnqueueRequest,
    ExhaustedJob,
    NackOptions,
    capabilities_of,
    require_backfills,
    require_introspection,
)
from ujobs.drivers.redis.driver import RedisDriver, redis_driver
from ujobs.errors import (
    ClaimQueuesEmptyError,
    ConfigInvalidError,
    DriverUnavailableError,
    InvariantError,
    NotImplementedByDriverError,
)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(1_700_000_000_000)


@pytest.fixture
async def driver(
    redis_url: str, redis_prefix: str, clock: FrozenClock
) -> AsyncIterator[RedisDriver]:
    async with redis_test_driver(redis_url, redis_prefix, clock=clock) as drv:
        yield drv


def req(key: str, *, name: str = "job", input: Any = None, **kw: Any) -> EnqueueRequest:
    return EnqueueRequest(
        name=name, input=input if input is not None else {}, idempotency_key=key, **kw
    )


async def claim(
    driver: RedisDriver,
    limit: int = 10,
    *,
    queues: Sequence[str] = ("default",),
    worker: str = "w1",
    **kw: Any,
) -> list[ClaimedJob]:
    return await driver.claim(ClaimOptions(queues=queues, limit=limit, worker_id=worker, **kw))


async def test_enqueue_dedupes_on_the_live_key_and_on_the_id(driver: RedisDriver) -> None:
    first = await driver.enqueue(req("k", input={"n": 1}))
    assert not first.deduped
    again = await driver.enqueue(req("k", input={"n": 2}))
    assert again == first.__class__(first.id, first.run_id, True)
    other_tenant = await driver.enqueue(req("k", tenant_id="t1"))
    assert not other_tenant.deduped
    # None and '' are one tenant for the live key.
    assert (await driver.enqueue(req("k", tenant_id=""))).id == first.id
    by_id = await driver.enqueue(req("other-key", id=first.id))
    assert (by_id.id, by_id.run_id, by_id.deduped) == (first.id, first.run_id, True)


async def test_a_finished_row_keeps_its_id_but_frees_its_key(driver: RedisDriver) -> None:
    first = await driver.enqueue(req("k", id="job-1", run_id="run-1"))
    [job] = await claim(driver)
    assert await driver.ack(job.id, job.ref)
    # The id still names a (done) row: nothing is inserted.
    assert await driver.enqueue(req("fresh", id="job-1")) == type(first)("job-1", "run-1", True)
    # The key is free again: a new run.
    second = await driver.enqueue(req("k"))
    assert not second.deduped
    assert second.id != "job-1"


async def test_enqueue_many_sees_the_rows_before_it(driver: RedisDriver) -> None:
    out = await driver.enqueue_many(
        [req("a", id="i1"), req("a", id="i2"), req("b", id="i1"), req("c", id="i3")]
    )
    assert [(e.id, e.deduped) for e in out] == [
        ("i1", False),
        ("i1", True),
        ("i1", True),
        ("i3", False),
    ]
    assert await driver.enqueue_many([]) == []


async def test_inputs_round_trip_as_json(driver: RedisDriver) -> None:
    value = {"big": 2**63 - 1, "neg": -(2**62), "f": 0.1, "s": "ünï:{x}", "l": [None, True]}
    await driver.enqueue(req("k", input=value, tenant_id="t", traceparent="tp", enqueued_by="me"))
    [job] = await claim(driver)
    assert job.input == value
    assert (job.tenant_id, job.traceparent, job.enqueued_by) == ("t", "tp", "me")


async def test_claim_takes_oldest_due_first_across_queues(
    driver: RedisDriver, clock: FrozenClock
) -> None:
    now = clock.now_ms()
    await driver.enqueue(req("late", id="late", queue="q1", run_at_ms=now + 5_000))
    await driver.enqueue(req("b", id="b", queue="q2"))
    await driver.enqueue(req("a", id="a", queue="q1", run_at_ms=now - 10))
    await driver.enqueue(req("c", id="c", queue="q1"))
    await driver.enqueue(req("other", id="other", queue="q3"))
    got = await claim(driver, limit=10, queues=["q1", "q2", "q1"])
    assert [j.id for j in got] == ["a", "b", "c"]
    assert all(j.attempt == 1 and j.claim == 1 for j in got)
    assert got[0].lease_expires_at_ms == now + 30_000
    clock.advance(5_000)
    assert [j.id for j in await claim(driver, queues=["q1"])] == ["late"]


async def test_claim_limit_and_bad_options(driver: RedisDriver) -> None:
    await driver.enqueue_many([req(str(i), id=f"j{i}") for i in range(5)])
    assert [j.id for j in await claim(driver, limit=2)] == ["j0", "j1"]
    assert [j.id for j in await claim(driver, limit=2)] == ["j2", "j3"]
    with pytest.raises(ClaimQueuesEmptyError):
        await claim(driver, queues=[])
    with pytest.raises(InvariantError):
        await claim(driver, limit=0)
    with pytest.raises(InvariantError):
        await driver.enqueue(req("x", max_attempts=0))


async def test_settles_are_fenced_on_the_claim(driver: RedisDriver, clock: FrozenClock) -> None:
    await driver.enqueue(req("k", id="j"))
    [first] = await claim(driver, visibility_ms=1_000)
    clock.advance(1_000)
    [second] = await claim(driver, worker="w2", visibility_ms=1_000)
    assert (second.attempt, second.claim) == (2, 2)
    assert not await driver.ack("j", first.ref)
    assert not await driver.nack("j", first.ref, NackOptions(error="x"))
    assert await driver.heartbeat("j", first.ref, 1_000) == "lost"
    # Same worker, stale claim: still refused.
    assert not await driver.ack("j", ClaimRef("w2", 1))
    assert await driver.heartbeat("j", second.ref, 1_000) == "renewed"
    assert await driver.ack("j", second.ref)
    assert await driver.heartbeat("j", second.ref, 1_000) == "lost"
    assert await driver.heartbeat("missing", second.ref, 1_000) == "lost"


async def test_heartbeat_moves_the_lease(driver: RedisDriver, clock: FrozenClock) -> None:
    await driver.enqueue(req("k", id="j"))
    [job] = await claim(driver, visibility_ms=1_000)
    clock.advance(900)
    assert await driver.heartbeat("j", job.ref, 1_000) == "renewed"
    clock.advance(900)
    assert await claim(driver, worker="w2") == []
    clock.advance(100)
    assert [j.worker_id for j in await claim(driver, worker="w2")] == ["w2"]


async def test_nack_paths(driver: RedisDriver, clock: FrozenClock) -> None:
    now = clock.now_ms()
    await driver.enqueue_many([req(k, id=k) for k in ("retry", "sleep", "dead", "fail")])
    jobs = {j.id: j for j in await claim(driver)}
    assert await driver.nack(
        "retry", jobs["retry"].ref, NackOptions(error="boom", run_at_ms=now + 1_000)
    )
    assert await driver.nack(
        "sleep", jobs["sleep"].ref, NackOptions(park=True, count=False, run_at_ms=now + 2_000)
    )
    assert await driver.nack("dead", jobs["dead"].ref, NackOptions(dead_letter=True, error="t"))
    assert await driver.nack("fail", jobs["fail"].ref, NackOptions(fail=True, count=False))
    stats = (await driver.stats()).queues["default"]
    assert (stats.ready, stats.suspended, stats.dead, stats.failed, stats.due) == (1, 1, 1, 1, 0)
    clock.advance(2_000)
    again = {j.id: j for j in await claim(driver)}
    assert again["retry"].attempt == 2
    assert again["sleep"].attempt == 1  # handed back uncounted
    assert again["sleep"].claim == 2
    buckets = await driver.counter_buckets("job", 0)
    assert sum(b.retried for b in buckets) == 1
    assert sum(b.dead for b in buckets) == 1
    assert sum(b.failed for b in buckets) == 1


async def test_final_attempt_lapse_is_buried_and_told_once(
    driver: RedisDriver, clock: FrozenClock
) -> None:
    await driver.enqueue(req("a", id="a", name="plain", max_attempts=1))
    await driver.enqueue(req("b", id="b", name="dropped", max_attempts=1))
    await driver.enqueue(req("c", id="c", name="plain", max_attempts=2))
    await claim(driver, visibility_ms=1_000)
    clock.advance(1_000)
    told: list[list[ExhaustedJob]] = []

    async def on_exhausted(rows: Sequence[ExhaustedJob]) -> None:
        told.append(list(rows))

    got = await claim(
        driver,
        worker="w2",
        limit=1,
        on_exhausted=on_exhausted,
        drop_exhausted=frozenset({"dropped"}),
    )
    assert [(j.id, j.attempt) for j in got] == [("c", 2)]
    assert len(told) == 1
    assert [(r.id, r.state, r.last_error, r.attempt) for r in told[0]] == [
        ("a", "dead", LEASE_LAPSED_FINAL_ATTEMPT, 1),
        ("b", "failed", LEASE_LAPSED_FINAL_ATTEMPT, 1),
    ]
    clock.advance(100_000)
    assert await claim(driver, on_exhausted=on_exhausted) == []
    assert len(told) == 2  # c, its final attempt lapsed too
    stats = (await driver.stats()).queues["default"]
    assert (stats.dead, stats.failed, stats.running) == (2, 1, 0)
    # The buried rows freed their keys.
    assert not (await driver.enqueue(req("a", name="plain"))).deduped


async def test_steps_are_fenced_and_first_write_wins(
    driver: RedisDriver, clock: FrozenClock
) -> None:
    await driver.enqueue(req("k", id="j", run_id="r"))
    [job] = await claim(driver, visibility_ms=1_000)
    assert await driver.save_step("j", job.ref, "r", "one", {"v": 1}, started_at_ms=5)
    clock.advance(10)
    assert await driver.save_step("j", job.ref, "r", "two", [2**60], started_at_ms=6)
    assert await driver.save_step("j", job.ref, "r", "one", {"v": "again"}, started_at_ms=7)
    assert not await driver.save_step("j", job.ref, "other-run", "x", 1, started_at_ms=1)
    assert not await driver.save_step("j", ClaimRef("w1", 9), "r", "x", 1, started_at_ms=1)
    steps = await driver.load_steps("r", tenant_id=None)
    assert [(s.name, s.output, s.started_at_ms) for s in steps] == [
        ("one", {"v": 1}, 5),
        ("two", [2**60], 6),
    ]
    assert steps[1].finished_at_ms == clock.now_ms()
    assert await driver.load_steps("nothing", tenant_id=None) == []


async def test_stats_counts_every_state(driver: RedisDriver, clock: FrozenClock) -> None:
    now = clock.now_ms()
    await driver.enqueue_many(
        [
            req("r1", id="r1", run_at_ms=now - 5),
            req("r2", id="r2"),
            req("d1", id="d1", run_at_ms=now + 100),
            req("x", id="x", queue="other"),
        ]
    )
    stats = await driver.stats()
    q = stats.queues["default"]
    assert (q.ready, q.delayed, q.due, q.oldest_due_run_at_ms) == (2, 1, 2, now - 5)
    assert stats.queues["other"].ready == 1
    [job] = await claim(driver, limit=1)
    assert await driver.ack(job.id, job.ref, duration_ms=42)
    q = (await driver.stats()).queues["default"]
    assert (q.ready, q.delayed, q.running, q.done, q.due) == (1, 1, 0, 1, 1)
    [bucket] = await driver.counter_buckets("job", 0)
    assert (bucket.done, bucket.duration_ms) == (1, 42)
    assert bucket.bucket_start_ms == now - now % 60_000


async def test_done_rows_and_their_steps_expire(
    redis_url: str, redis_prefix: str, clock: FrozenClock
) -> None:
    async with redis_test_driver(redis_url, redis_prefix, clock=clock, done_ttl_ms=200) as drv:
        await drv.enqueue_many([req(k, id=k, run_id=f"run-{k}") for k in ("done", "dead")])
        jobs = {j.id: j for j in await claim(drv)}
        for j in jobs.values():
            assert await drv.save_step(j.id, j.ref, j.run_id, "s", 1, started_at_ms=1)
        assert await drv.ack("done", jobs["done"].ref)
        assert await drv.nack("dead", jobs["dead"].ref, NackOptions(dead_letter=True))
        client = drv.client
        tag = drv.hash_tag
        assert 0 < await client.pttl(f"{tag}:job:done") <= 200
        assert 0 < await client.pttl(f"{tag}:steps:run-done") <= 200
        assert await client.pttl(f"{tag}:job:dead") == -1
        assert await client.pttl(f"{tag}:steps:run-dead") == -1
        for _ in range(200):
            if not await client.exists(f"{tag}:job:done", f"{tag}:steps:run-done"):
                break
            await asyncio.sleep(0.05)
        assert not await client.exists(f"{tag}:job:done", f"{tag}:steps:run-done")
        assert await drv.load_steps("run-done", tenant_id=None) == []
        # The driver's clock decides what stats() still counts as kept.
        assert (await drv.stats()).queues["default"].done == 1
        clock.advance(200)
        q = (await drv.stats()).queues["default"]
        assert (q.done, q.dead) == (0, 1)
        # The id names no row any more: a new enqueue under it inserts.
        assert not (await drv.enqueue(req("again", id="done"))).deduped


async def test_a_unique_for_run_is_kept_for_its_period_past_the_done_ttl(
    redis_url: str, redis_prefix: str, clock: FrozenClock
) -> None:
    """The key's marker answers the run for the whole period, so the row (and its steps) stay
    as long: an answer never names a run that is gone."""
    period = 60_000
    async with redis_test_driver(redis_url, redis_prefix, clock=clock, done_ttl_ms=200) as drv:
        await drv.enqueue_many(
            [
                req("held", id="held", run_id="run-held", unique_for_ms=period),
                req("plain", id="plain", run_id="run-plain"),
            ]
        )
        jobs = {j.id: j for j in await claim(drv)}
        for j in jobs.values():
            assert await drv.save_step(j.id, j.ref, j.run_id, "s", 1, started_at_ms=1)
            assert await drv.ack(j.id, j.ref)
        client, tag = drv.client, drv.hash_tag
        for key in (f"{tag}:job:held", f"{tag}:steps:run-held"):
            assert 200 < await client.pttl(key) <= period
        for key in (f"{tag}:job:plain", f"{tag}:steps:run-plain"):
            assert 0 < await client.pttl(key) <= 200
        await asyncio.sleep(0.3)  # Redis's own clock: past done_ttl_ms
        assert not await client.exists(f"{tag}:job:plain")
        again = await drv.enqueue(req("held", unique_for_ms=period))
        assert (again.id, again.deduped) == ("held", True)
        assert await client.exists(f"{tag}:job:held", f"{tag}:steps:run-held") == 2
        assert [s.name for s in await drv.load_steps("run-held", tenant_id=None)] == ["s"]


async def test_zero_ttl_keeps_done_rows(
    redis_url: str, redis_prefix: str, clock: FrozenClock
) -> None:
    async with redis_test_driver(redis_url, redis_prefix, clock=clock, done_ttl_ms=0) as drv:
        await drv.enqueue(req("k", id="j", run_id="r"))
        [job] = await claim(drv)
        assert await drv.save_step("j", job.ref, "r", "s", 1, started_at_ms=1)
        assert await drv.ack("j", job.ref)
        assert await drv.client.pttl(f"{drv.hash_tag}:job:j") == -1
        assert await drv.client.pttl(f"{drv.hash_tag}:steps:r") == -1
        clock.advance(30 * 86_400_000)
        assert (await drv.stats()).queues["default"].done == 1


async def test_a_client_that_decodes_responses_works_the_same(
    redis_url: str, redis_prefix: str, clock: FrozenClock
) -> None:
    client = Redis.from_url(redis_url, decode_responses=True)
    drv = redis_driver(client, prefix=redis_prefix, clock=clock)
    try:
        await drv.enqueue(req("k", id="j", run_id="r", input={"a": [1, "ü"]}))
        [job] = await claim(drv)
        assert job.input == {"a": [1, "ü"]}
        assert await drv.save_step("j", job.ref, "r", "s", "out", started_at_ms=1)
        assert [s.output for s in await drv.load_steps("r", tenant_id=None)] == ["out"]
        assert await drv.heartbeat("j", job.ref, 10) == "renewed"
        assert (await drv.stats()).queues["default"].running == 1
    finally:
        await drop_prefix(client, redis_prefix)
        await client.aclose()


async def test_an_unreachable_redis_is_driver_unreachable(clock: FrozenClock) -> None:
    # X_DRIVER_UNREACHABLE, still caught as DriverUnavailableError: the worker sends a settle
    # that failed this way again, and hands an attempt that failed this way back uncounted.
    # No client-side retries (redis-py's own back off for ~5 s before raising).
    client = Redis(host="127.0.0.1", port=1, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
    drv = redis_driver(client, prefix="ujt-unreachable", clock=clock)
    with pytest.raises(DriverUnavailableError) as info:
        await drv.enqueue(req("k"))
    assert info.value.code == "X_DRIVER_UNREACHABLE"
    assert info.value.meta == {
        "driver": "redis",
        "operation": "enqueue",
        "cause": "ConnectionError",
    }
    ref = ClaimRef("w", 1)
    for settle in (drv.ack("j", ref), drv.nack("j", ref, NackOptions())):
        with pytest.raises(DriverUnavailableError) as info:
            await settle
        assert info.value.code == "X_DRIVER_UNREACHABLE"
    await client.aclose()


async def test_bad_configuration_is_refused() -> None:
    client = Redis()
    for prefix in ("", "a{b", "c}"):
        with pytest.raises(ConfigInvalidError):
            redis_driver(client, prefix=prefix)
    with pytest.raises(ConfigInvalidError):
        redis_driver(client, done_ttl_ms=-1)
    await client.aclose()


async def test_no_operator_capabilities(driver: RedisDriver) -> None:
    caps = capabilities_of(driver)
    assert (caps.introspect, caps.leases, caps.workers, caps.backfills) == (False,) * 4
    with pytest.raises(NotImplementedByDriverError) as info:
        require_introspection(driver)
    assert info.value.code == "X_NOT_IMPLEMENTED"
    assert "needs the Postgres driver" in info.value.message
    assert "Redis driver keeps no operator index" in info.value.message
    with pytest.raises(NotImplementedByDriverError, match="Postgres driver"):
        require_backfills(driver)


async def test_the_default_client_comes_from_redis_url(
    monkeypatch: pytest.MonkeyPatch, redis_url: str, redis_prefix: str
) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    drv = redis_driver(prefix=redis_prefix)
    try:
        assert not (await drv.enqueue(req("k"))).deduped
    finally:
        await drop_prefix(drv.client, redis_prefix)
        await drv.close()


async def test_priority_bands_have_their_own_due_zsets_band_0_the_old_key(
    driver: RedisDriver,
) -> None:
    """Band 0 keeps ``{p}:q:<queue>`` (a keyspace written before priorities is read as it
    was); band n is ``{p}:q<n>:<queue>``. A claim empties the bands it takes from, a retry
    puts the row back in its own band, and a priority-0 row stores no ``priority`` field."""
    await driver.enqueue(req("zero", id="zero", queue="mail"))
    await driver.enqueue(req("seven", id="seven", queue="mail", priority=7))
    client, tag = driver.client, driver.hash_tag
    assert [m[15:] for m in await client.zrange(f"{tag}:q:mail", 0, -1)] == [b"zero"]
    assert [m[15:] for m in await client.zrange(f"{tag}:q7:mail", 0, -1)] == [b"seven"]
    assert await client.hget(f"{tag}:job:zero", "priority") is None
    assert await client.hget(f"{tag}:job:seven", "priority") == b"7"
    first, second = await claim(driver, queues=("mail",))
    assert (first.id, second.id) == ("zero", "seven")
    assert not await client.exists(f"{tag}:q:mail", f"{tag}:q7:mail")
    assert await driver.nack("seven", second.ref, NackOptions(error="boom"))
    assert [m[15:] for m in await client.zrange(f"{tag}:q7:mail", 0, -1)] == [b"seven"]
    assert not await client.exists(f"{tag}:q:mail")


async def test_tenant_keys_per_band_are_filled_by_enqueue_and_emptied_by_the_claim(
    driver: RedisDriver,
) -> None:
    """The fair claim's keys: a band's rows of one tenant in ``{p}:qt:<n>:<queue>:<band>:<t>``
    (``''`` for no tenant), the band's tenants in ``{p}:qs:<queue>:<band>``, the cursor in
    ``{p}:qc:<queue>``, weights in ``{p}:tw``. A claim that takes a tenant's last row of a band
    drops its zset and its set member; a retry puts both back."""
    await driver.enqueue(req("a1", id="a1", queue="mail", tenant_id="acme"))
    await driver.enqueue(req("n1", id="n1", queue="mail"))
    await driver.enqueue(req("a7", id="a7", queue="mail", tenant_id="acme", priority=7))
    client, tag = driver.client, driver.hash_tag
    assert [m[15:] for m in await client.zrange(f"{tag}:qt:4:mail:0:acme", 0, -1)] == [b"a1"]
    assert [m[15:] for m in await client.zrange(f"{tag}:qt:4:mail:0:", 0, -1)] == [b"n1"]
    assert [m[15:] for m in await client.zrange(f"{tag}:qt:4:mail:7:acme", 0, -1)] == [b"a7"]
    assert await client.zrange(f"{tag}:qs:mail:0", 0, -1) == [b"", b"acme"]
    assert await client.zrange(f"{tag}:qs:mail:7", 0, -1) == [b"acme"]
    await driver.weights.set_weight("acme", 4)
    assert await client.hget(f"{tag}:tw", "acme") == b"4"
    got = await claim(driver, queues=("mail",), limit=2)
    assert sorted(j.id for j in got) == ["a1", "n1"]
    assert await client.get(f"{tag}:qc:mail") in (b"", b"acme")
    assert not await client.exists(f"{tag}:qt:4:mail:0:acme", f"{tag}:qt:4:mail:0:")
    assert not await client.exists(f"{tag}:qs:mail:0")
    a1 = next(j for j in got if j.id == "a1")
    assert await driver.nack("a1", a1.ref, NackOptions(error="boom"))
    assert [m[15:] for m in await client.zrange(f"{tag}:qt:4:mail:0:acme", 0, -1)] == [b"a1"]
    assert await client.zrange(f"{tag}:qs:mail:0", 0, -1) == [b"acme"]
