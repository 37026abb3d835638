"""Every key of a deployment lives in one Redis Cluster slot, proven by a cluster node itself.

A private ``redis-server --cluster-enabled yes`` owns ONE slot: the slot of the deployment's
hash tag. A script that touched a key of any other slot would be refused there ("non local key
in a cluster node"), so every operation landing is the proof; the keys left behind are then
checked with ``CLUSTER KEYSLOT`` and with redis-py's own CRC16.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from redis.asyncio import Redis, RedisCluster
from redis.crc import key_slot
from redis.exceptions import ResponseError

from tests.support.redis_cluster import private_cluster_node
from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimOptions, EnqueueRequest, ExhaustedJob, NackOptions
from ujobs.drivers.redis.driver import RedisDriver

PREFIX = "ujobs-slot"
SLOT = key_slot(f"{{{PREFIX}}}".encode())


@pytest.fixture(scope="module")
def cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with private_cluster_node(tmp_path_factory.mktemp("cluster"), (SLOT, SLOT)) as url:
        yield url


async def exercise(driver: RedisDriver, clock: FrozenClock) -> None:
    """Every script, on awkward names: queues and jobs holding braces and colons, tenants."""
    queues = ["default", "{other}", "a:b"]
    await driver.enqueue_many(
        [
            EnqueueRequest(
                name=name,
                input={"q": q},
                idempotency_key=f"{name}-{q}",
                queue=q,
                tenant_id="{t}" if q == "a:b" else None,
                max_attempts=1 if name == "{dies}" else 3,
                run_at_ms=clock.now_ms() + (5 if name == "later" else 0),
            )
            for q in queues
            for name in ("job:{x}", "{dies}", "later")
        ]
    )
    got = await driver.claim(ClaimOptions(queues=queues, limit=9, worker_id="w"))
    by_name = {(j.name, j.queue): j for j in got}
    for q in queues:
        job = by_name[("job:{x}", q)]
        assert await driver.heartbeat(job.id, job.ref, 10_000) == "renewed"
        assert await driver.save_step(job.id, job.ref, job.run_id, "{s}", [1], started_at_ms=0)
        assert await driver.load_steps(job.run_id, tenant_id=job.tenant_id)
    first = by_name[("job:{x}", "default")]
    assert await driver.nack(first.id, first.ref, NackOptions(error="e", duration_ms=3))
    second = by_name[("job:{x}", "{other}")]
    assert await driver.nack(second.id, second.ref, NackOptions(park=True, count=False))
    third = by_name[("job:{x}", "a:b")]
    assert await driver.nack(third.id, third.ref, NackOptions(dead_letter=True))
    clock.advance(30_000)
    buried: list[ExhaustedJob] = []

    async def on_exhausted(rows: Sequence[ExhaustedJob]) -> None:
        buried.extend(rows)

    again = await driver.claim(
        ClaimOptions(
            queues=queues,
            limit=9,
            worker_id="w2",
            on_exhausted=on_exhausted,
            drop_exhausted=frozenset({"{dies}"}),
        )
    )
    assert len(buried) == 3
    assert len(again) == 5
    for job in again[1:]:  # one stays running, so its zset stays behind to be checked
        assert await driver.ack(job.id, job.ref, duration_ms=1)
    await driver.enqueue(
        EnqueueRequest(name="n", input=None, idempotency_key="k", run_at_ms=clock.now_ms() + 1)
    )
    stats = await driver.stats()
    assert set(stats.queues) == set(queues)
    assert await driver.counter_buckets("job:{x}", 0)


async def assert_one_slot(client: Redis, keys: list[str]) -> None:
    assert keys
    for key in keys:
        assert key.startswith(f"{{{PREFIX}}}:"), key
        assert key_slot(key.encode()) == SLOT, key
        # redis-py leaves the asyncio Redis.execute_command unannotated.
        slot = await client.execute_command("CLUSTER", "KEYSLOT", key)  # type: ignore[no-untyped-call]
        assert slot == SLOT, key


async def test_the_node_refuses_a_key_of_another_slot(cluster_url: str) -> None:
    """The check bites: without this, the proof below would prove nothing."""
    client = Redis.from_url(cluster_url)
    with pytest.raises(ResponseError, match="non local key"):
        await client.eval("return redis.call('GET', 'elsewhere')", 1, f"{{{PREFIX}}}:x")
    await client.aclose()


async def test_every_key_every_operation_touches_is_in_one_slot(cluster_url: str) -> None:
    client = Redis.from_url(cluster_url, decode_responses=True)
    clock = FrozenClock()
    driver = RedisDriver(client, prefix=PREFIX, clock=clock, done_ttl_ms=60_000)
    await exercise(driver, clock)
    keys = [k async for k in client.scan_iter(count=1000)]
    await assert_one_slot(client, keys)
    # Every structure the layout names was written (so the check covered them all).
    kinds = {key.split(":", 2)[1] for key in keys}
    assert kinds >= {"job", "live", "seq", "queues", "q", "r", "d", "n", "steps", "ctr"}
    await client.delete(*keys)
    await client.aclose()


async def test_a_cluster_client_runs_the_driver_unchanged(cluster_url: str) -> None:
    client = RedisCluster.from_url(cluster_url, require_full_coverage=False)
    clock = FrozenClock()
    driver = RedisDriver(client, prefix=PREFIX, clock=clock)
    await client.script_flush()  # the first call of each script goes through NOSCRIPT
    await exercise(driver, clock)
    plain = Redis.from_url(cluster_url, decode_responses=True)
    keys = [k async for k in plain.scan_iter(count=1000)]
    await assert_one_slot(plain, keys)
    await plain.delete(*keys)
    await plain.aclose()
    await client.aclose()
