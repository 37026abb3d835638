"""The Redis driver's per-turn batching (``shared/drivers/redis/batch.py``) against a real Redis:
calls issued in one turn share a pipeline, acks and heartbeats of one turn share a script call,
and each caller still gets exactly its own answer or its own error."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

import ujobs.drivers.redis.codec as codec
from tests.support.redis_keys import redis_test_driver
from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimOptions, ClaimRef, EnqueueRequest, NackOptions
from ujobs.drivers.redis.batch import ScriptBatcher
from ujobs.drivers.redis.driver import RedisDriver, redis_driver
from ujobs.drivers.redis.scripts import SCRIPTS, LuaScript
from ujobs.errors import DriverUnavailableError, DriverUnreachableError


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(1_700_000_000_000)


@pytest.fixture
async def driver(
    redis_url: str, redis_prefix: str, clock: FrozenClock
) -> AsyncIterator[RedisDriver]:
    async with redis_test_driver(redis_url, redis_prefix, clock=clock) as drv:
        yield drv


def req(key: str) -> EnqueueRequest:
    return EnqueueRequest(name="job", input={"k": key}, idempotency_key=key, id=key)


async def claim_all(driver: RedisDriver, limit: int = 10) -> list[str]:
    jobs = await driver.claim(ClaimOptions(queues=["default"], limit=limit, worker_id="w"))
    return [j.id for j in jobs]


def script(name: str, body: str) -> LuaScript:
    return LuaScript(name=name, source=body, sha=hashlib.sha1(body.encode()).hexdigest())


async def test_acks_of_one_turn_each_answer_their_own_fence(driver: RedisDriver) -> None:
    await driver.enqueue_many([req(k) for k in ("a", "b", "c")])
    jobs = {j.id: j for j in await driver.claim(ClaimOptions(["default"], 10, "w"))}
    landed = await asyncio.gather(
        driver.ack("a", jobs["a"].ref, duration_ms=5),
        driver.ack("b", ClaimRef("w", 99)),  # a stale claim: refused, alone
        driver.ack("missing", jobs["a"].ref),
        driver.ack("c", jobs["c"].ref, duration_ms=7),
        driver.ack("a", jobs["a"].ref),  # the same row twice in one call: once
    )
    # gather answers a list; its annotation says tuple, hence list() for the comparison.
    assert list(landed) == [True, False, False, True, False]
    stats = (await driver.stats()).queues["default"]
    assert (stats.done, stats.running) == (2, 1)
    [bucket] = await driver.counter_buckets("job", 0)
    assert (bucket.done, bucket.duration_ms) == (2, 12)
    assert await driver.ack("b", jobs["b"].ref)


async def test_heartbeats_of_one_turn_each_answer_their_own_row(
    driver: RedisDriver, clock: FrozenClock
) -> None:
    await driver.enqueue_many([req(k) for k in ("a", "b")])
    jobs = {j.id: j for j in await driver.claim(ClaimOptions(["default"], 10, "w", 1_000))}
    assert await driver.ack("b", jobs["b"].ref)
    answers = await asyncio.gather(
        driver.heartbeat("a", jobs["a"].ref, 5_000),
        driver.heartbeat("b", jobs["b"].ref, 5_000),
        driver.heartbeat("a", ClaimRef("other", 1), 5_000),
    )
    assert list(answers) == ["renewed", "lost", "lost"]  # gather's annotation says tuple
    clock.advance(4_000)  # past the claim's lease, inside the renewed one
    assert await claim_all(driver) == []


async def test_mixed_operations_of_one_turn_all_land(driver: RedisDriver) -> None:
    await driver.enqueue_many([req(k) for k in ("a", "b")])
    jobs = {j.id: j for j in await driver.claim(ClaimOptions(["default"], 10, "w"))}
    enqueued, acked, nacked, claimed, steps = await asyncio.gather(
        driver.enqueue(req("c")),
        driver.ack("a", jobs["a"].ref),
        driver.nack("b", jobs["b"].ref, NackOptions(error="boom")),
        driver.claim(ClaimOptions(["other"], 10, "w")),
        driver.load_steps(jobs["a"].run_id, tenant_id=jobs["a"].tenant_id),
    )
    assert (enqueued.id, enqueued.deduped, acked, nacked, claimed, steps) == (
        "c",
        False,
        True,
        True,
        [],
        [],
    )
    assert sorted(await claim_all(driver)) == ["b", "c"]


async def test_noscript_inside_a_pipeline_loads_and_answers(driver: RedisDriver) -> None:
    await driver.enqueue_many([req(k) for k in ("a", "b")])
    jobs = {j.id: j for j in await driver.claim(ClaimOptions(["default"], 10, "w"))}
    await driver.client.script_flush()
    answers = await asyncio.gather(
        driver.ack("a", jobs["a"].ref),
        driver.heartbeat("b", jobs["b"].ref, 1_000),
        driver.enqueue(req("c")),
        driver.stats(),
    )
    assert list(answers[:2]) == [True, "renewed"]  # gather's annotation says tuple
    assert answers[2].id == "c"
    assert answers[3].queues["default"].done == 1
    shas = [SCRIPTS[op].sha for op in ("ack", "heartbeat", "enqueue", "stats")]
    assert await driver.client.script_exists(*shas) == [True] * 4


async def test_a_script_error_reaches_only_its_own_caller(
    redis_url: str, redis_prefix: str
) -> None:
    client = Redis.from_url(redis_url)
    keys = [f"{{{redis_prefix}}}"]
    batcher = ScriptBatcher(client, keys)
    boom = script("boom", "return redis.error_reply('boom')")
    echo = script("echo", "return ARGV[1]")
    try:
        first = batcher.call(echo, ["one"])
        failed = batcher.call(boom, [])
        last = batcher.call(echo, ["two"])
        results = await asyncio.gather(first, failed, last, return_exceptions=True)
        assert results[0] == b"one"
        assert isinstance(results[1], ResponseError)
        assert "boom" in str(results[1])
        assert results[2] == b"two"
    finally:
        await client.aclose()


async def test_a_call_cancelled_before_the_flush_is_never_sent(driver: RedisDriver) -> None:
    batcher = driver._batcher
    assert batcher is not None
    now = driver.clock.now_ms()
    enqueue = SCRIPTS["enqueue"]
    dropped = batcher.call(enqueue, codec.enqueue_args(now, [(req("gone"), "gone", "r1")]))
    dropped.cancel()
    kept = batcher.call(enqueue, codec.enqueue_args(now, [(req("kept"), "kept", "r2")]))
    assert codec.enqueued_from(await kept)[0].id == "kept"
    await driver.enqueue(req("a"))
    jobs = {j.id: j for j in await driver.claim(ClaimOptions(["default"], 10, "w"))}
    assert sorted(jobs) == ["a", "kept"]  # "gone" was never enqueued
    # One merged ack call: the cancelled row is left out, the other lands.
    head = [driver.done_ttl_ms, 0]
    gone = batcher.call_rows(SCRIPTS["ack"], head, ["a", "w", jobs["a"].claim, now, ""])
    gone.cancel()
    landed = batcher.call_rows(SCRIPTS["ack"], head, ["kept", "w", jobs["kept"].claim, now, ""])
    assert await landed == 1
    stats = (await driver.stats()).queues["default"]
    assert (stats.running, stats.done) == (1, 1)  # the cancelled ack of "a" never ran
    assert await driver.ack("a", jobs["a"].ref)


async def test_a_connection_failure_fails_every_call_of_the_batch(clock: FrozenClock) -> None:
    client = Redis(host="127.0.0.1", port=1, socket_connect_timeout=1)
    drv = redis_driver(client, prefix="ujt-unreachable", clock=clock)
    try:
        results = await asyncio.gather(
            drv.enqueue(req("a")),
            drv.ack("a", ClaimRef("w", 1)),
            drv.heartbeat("a", ClaimRef("w", 1), 1_000),
            return_exceptions=True,
        )
        assert [type(r) for r in results] == [DriverUnreachableError] * 3
        assert [r.meta["operation"] for r in results if isinstance(r, DriverUnavailableError)] == [
            "enqueue",
            "ack",
            "heartbeat",
        ]
    finally:
        await client.aclose()


async def test_a_lone_call_leads_its_turn_and_is_sent_from_its_own_task(
    redis_url: str, redis_prefix: str
) -> None:
    client = Redis.from_url(redis_url)
    batcher = ScriptBatcher(client, [f"{{{redis_prefix}}}"])
    echo = script("echo", "return ARGV[1]")
    pipelines = 0
    inner = batcher._pipeline

    async def counted(batch: list[Any]) -> list[Any]:
        nonlocal pipelines
        pipelines += 1
        return await inner(batch)

    batcher._pipeline = counted  # type: ignore[method-assign]
    try:
        leader = asyncio.ensure_future(batcher.run(echo, ["alone"]))
        await asyncio.sleep(0)  # the leader queued itself and yields one turn
        assert not batcher._sending  # no sender task: it sends and reads itself
        assert await leader == b"alone"
        assert pipelines == 0
        # Calls of one turn still leave together, each with its own answer.
        answers = await asyncio.gather(*(batcher.run(echo, [str(n)]) for n in range(3)))
        assert answers == [b"0", b"1", b"2"]
        assert pipelines == 1
    finally:
        await client.aclose()


async def test_a_leader_cancelled_before_its_turn_is_never_sent_and_strands_nobody(
    driver: RedisDriver,
) -> None:
    batcher = driver._batcher
    assert batcher is not None
    now = driver.clock.now_ms()
    enqueue = SCRIPTS["enqueue"]
    leader = asyncio.ensure_future(
        batcher.run(enqueue, codec.enqueue_args(now, [(req("gone"), "gone", "r1")]))
    )
    follower = asyncio.ensure_future(
        batcher.run(enqueue, codec.enqueue_args(now, [(req("kept"), "kept", "r2")]))
    )
    await asyncio.sleep(0)  # the leader waits out its turn; the follower queued behind it
    leader.cancel()
    assert codec.enqueued_from(await follower)[0].id == "kept"
    with pytest.raises(asyncio.CancelledError):
        await leader
    assert await claim_all(driver) == ["kept"]  # "gone" was never enqueued
