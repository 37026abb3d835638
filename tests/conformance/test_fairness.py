"""Tenant-fair claims (issue 41, ``ujobs.drivers.fairness``): within a queue that is not
strict, a claim interleaves the tenants with due work, weighted and work-conserving, from a
rotating cursor; a strict queue keeps first-in first-out. Every driver, the same answers."""

from __future__ import annotations

from collections import Counter

from tests.support.conformance import claim, req
from ujobs.clock import FrozenClock
from ujobs.drivers.base import JobDriver
from ujobs.drivers.fairness import TenantWeights, weights_of


def _weights(driver: JobDriver) -> TenantWeights:
    weights = weights_of(driver)
    assert weights is not None, "every driver stores tenant weights"
    return weights


async def _flood(
    driver: JobDriver, tenant: str | None, n: int, queue: str = "default", priority: int = 0
) -> None:
    for start in range(0, n, 500):
        await driver.enqueue_many(
            [
                req(tenant_id=tenant, queue=queue, priority=priority)
                for _ in range(min(500, n - start))
            ]
        )


async def test_a_quiet_tenant_is_in_the_first_batch_behind_a_flood(
    driver: JobDriver, clock: FrozenClock
) -> None:
    await _flood(driver, "flood", 1_000)
    clock.advance(1)
    quiet = await driver.enqueue(req(tenant_id="quiet"))
    got = await claim(driver, limit=16)
    assert len(got) == 16
    assert quiet.id in [j.id for j in got]
    assert Counter(j.tenant_id for j in got) == {"flood": 15, "quiet": 1}


async def test_rows_come_back_in_hand_out_order_and_each_tenants_oldest_first(
    driver: JobDriver, clock: FrozenClock
) -> None:
    ids: dict[str, list[str]] = {"a": [], "b": []}
    for n in range(6):
        tenant = "a" if n < 4 else "b"
        ids[tenant].append((await driver.enqueue(req(tenant_id=tenant))).id)
        clock.advance(1)
    got = await claim(driver, limit=4)
    # Two tenants of weight 1 share a batch of four: two rounds, a then b in each.
    assert [j.id for j in got] == [ids["a"][0], ids["b"][0], ids["a"][1], ids["b"][1]]


async def test_contending_tenants_share_by_weight(driver: JobDriver, clock: FrozenClock) -> None:
    weights = _weights(driver)
    assert await weights.weight("heavy") == 1  # nobody weighed it yet
    assert await weights.set_weight("heavy", 3) == 3
    assert await weights.weight("heavy") == 3
    await _flood(driver, "heavy", 200)
    await _flood(driver, "light", 200)
    shares: Counter[str | None] = Counter()
    for _ in range(5):
        got = await claim(driver, limit=16)
        assert len(got) == 16
        shares.update(j.tenant_id for j in got)
    assert shares == {"heavy": 60, "light": 20}


async def test_a_weight_takes_effect_at_the_next_claim(driver: JobDriver) -> None:
    await _flood(driver, "a", 40)
    await _flood(driver, "b", 40)
    first = Counter(j.tenant_id for j in await claim(driver, limit=8))
    assert first == {"a": 4, "b": 4}
    await _weights(driver).set_weight("b", 7)
    second = Counter(j.tenant_id for j in await claim(driver, limit=8))
    assert second == {"a": 1, "b": 7}


async def test_a_lone_tenant_gets_every_slot(driver: JobDriver) -> None:
    enqueued = await driver.enqueue_many([req(tenant_id="alone") for _ in range(100)])
    got = await claim(driver, limit=32)
    # Work-conserving, and in its own order: oldest first.
    assert [j.id for j in got] == [e.id for e in enqueued[:32]]


async def test_the_cursor_rotates_so_single_row_claims_take_turns(driver: JobDriver) -> None:
    for tenant in ("a", "b", "c"):
        await _flood(driver, tenant, 4)
    await _flood(driver, None, 4)  # jobs without a tenant: one group of their own
    order = [(await claim(driver, limit=1))[0].tenant_id for _ in range(8)]
    assert order[:4] == order[4:]
    assert sorted(order[:4], key=str) == sorted(["a", "b", "c", None], key=str)


async def test_ten_thousand_tenants_each_get_their_turn(driver: JobDriver) -> None:
    tenants = [f"t{n:05d}" for n in range(10_000)]
    for start in range(0, len(tenants), 1_000):
        await driver.enqueue_many([req(tenant_id=t) for t in tenants[start : start + 1_000]])
    await _flood(driver, "big", 500)
    seen: list[str | None] = []
    first = await claim(driver, limit=100)
    assert len({j.tenant_id for j in first}) == 100  # one row each: a hundred tenants
    seen.extend(j.tenant_id for j in first)
    while got := await claim(driver, limit=500):
        seen.extend(j.tenant_id for j in got)
    assert len(seen) == 10_500
    assert Counter(seen)["big"] == 500
    assert set(seen) == {*tenants, "big"}


async def test_a_strict_queue_keeps_first_in_first_out(
    driver: JobDriver, clock: FrozenClock
) -> None:
    flood = [(await driver.enqueue(req(tenant_id="flood", queue="bulk"))).id for _ in range(20)]
    clock.advance(1)
    await driver.enqueue(req(tenant_id="quiet", queue="bulk"))
    got = await claim(driver, "bulk", limit=16, strict_queues=frozenset({"bulk"}))
    assert [j.id for j in got] == flood[:16]


async def test_strict_and_fair_queues_in_one_claim(driver: JobDriver, clock: FrozenClock) -> None:
    await _flood(driver, "flood", 30, queue="fair")
    await _flood(driver, "flood", 30, queue="strict")
    clock.advance(1)
    quiet_fair = await driver.enqueue(req(tenant_id="quiet", queue="fair"))
    quiet_strict = await driver.enqueue(req(tenant_id="quiet", queue="strict"))
    got = await claim(driver, "fair", "strict", limit=8, strict_queues=frozenset({"strict"}))
    ids = [j.id for j in got]
    assert quiet_fair.id in ids
    assert quiet_strict.id not in ids
    assert len(got) == 8


async def test_priority_first_then_fair_inside_a_band(
    driver: JobDriver, clock: FrozenClock
) -> None:
    await _flood(driver, "flood", 300)  # priority 0 is the default: the top band
    urgent = await driver.enqueue(req(tenant_id="flood"))
    clock.advance(1)
    routine = await driver.enqueue(req(tenant_id="quiet", priority=5))
    quiet = await driver.enqueue(req(tenant_id="quiet"))
    got = await claim(driver, limit=16)
    ids = [j.id for j in got]
    # Inside the top band the quiet tenant is in the first batch...
    assert quiet.id in ids
    # ...but a lower band waits behind a higher one, whoever floods it.
    assert routine.id not in ids
    assert {j.priority for j in got} == {0}
    # Once the top band is empty the lower band is served: the flood's 301 rows, the quiet
    # tenant's other one and then the routine job.
    rest = [j for _ in range(4) for j in await claim(driver, limit=100)]
    assert [j.id for j in rest][-1] == routine.id
    assert urgent.id in ids + [j.id for j in rest]


async def test_a_flooding_tenants_urgent_job_beats_a_quiet_tenants_routine_one(
    driver: JobDriver, clock: FrozenClock
) -> None:
    await _flood(driver, "flood", 200, priority=5)
    clock.advance(1)
    routine = await driver.enqueue(req(tenant_id="quiet", priority=5))
    urgent = await driver.enqueue(req(tenant_id="flood", priority=1))
    got = await claim(driver, limit=1)
    assert [j.id for j in got] == [urgent.id]  # the higher band first, though its tenant floods
    # Band 5 is now the top band: the quiet tenant is in its first batch, not behind the flood.
    assert routine.id in [j.id for j in await claim(driver, limit=4)]
