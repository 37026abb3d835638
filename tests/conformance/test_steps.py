"""Steps: saved only under the live claim, loaded in start order, replayed across attempts."""

from __future__ import annotations

from tests.support.conformance import claim_one, req
from ujobs.clock import FrozenClock
from ujobs.drivers.base import JobDriver, NackOptions
from ujobs.ids import new_id


async def test_steps_load_in_start_order_with_their_outputs(
    driver: JobDriver, clock: FrozenClock
) -> None:
    await driver.enqueue(req())
    job = await claim_one(driver)
    outputs = {"provision": {"org": "o1", "ids": [1, 2]}, "email": "sent", "count": 3}
    for name, output in outputs.items():
        started = clock.now_ms()
        clock.advance(10)
        assert await driver.save_step(
            job.id, job.ref, job.run_id, name, output, started_at_ms=started
        )
    steps = await driver.load_steps(job.run_id, tenant_id=job.tenant_id)
    assert [s.name for s in steps] == ["provision", "email", "count"]
    assert [s.output for s in steps] == list(outputs.values())
    assert steps[0].started_at_ms < steps[1].started_at_ms < steps[2].started_at_ms
    assert all(s.finished_at_ms >= s.started_at_ms for s in steps)
    assert steps[0].seq < steps[1].seq < steps[2].seq


async def test_null_and_falsy_outputs_are_stored(driver: JobDriver, clock: FrozenClock) -> None:
    await driver.enqueue(req())
    job = await claim_one(driver)
    falsy: list[object] = [None, 0, "", [], {}, False]
    for i, output in enumerate(falsy):
        assert await driver.save_step(
            job.id, job.ref, job.run_id, f"s{i}", output, started_at_ms=clock.now_ms() + i
        )
    assert [s.output for s in await driver.load_steps(job.run_id, tenant_id=job.tenant_id)] == falsy


async def test_a_step_is_refused_without_the_live_claim(
    driver: JobDriver, clock: FrozenClock
) -> None:
    await driver.enqueue(req())
    old = await claim_one(driver, worker="w1", visibility_ms=1_000)
    clock.advance(1_000)
    new = await claim_one(driver, worker="w1")
    now = clock.now_ms()
    assert not await driver.save_step(old.id, old.ref, old.run_id, "a", 1, started_at_ms=now)
    assert await driver.load_steps(old.run_id, tenant_id=old.tenant_id) == []
    assert await driver.save_step(new.id, new.ref, new.run_id, "a", 2, started_at_ms=now)
    assert await driver.ack(new.id, new.ref)
    assert not await driver.save_step(new.id, new.ref, new.run_id, "b", 3, started_at_ms=now)
    assert [
        (s.name, s.output) for s in await driver.load_steps(new.run_id, tenant_id=new.tenant_id)
    ] == [("a", 2)]


async def test_a_step_is_refused_under_another_run_id(
    driver: JobDriver, clock: FrozenClock
) -> None:
    await driver.enqueue(req())
    job = await claim_one(driver)
    other_run = new_id()
    assert not await driver.save_step(
        job.id, job.ref, other_run, "a", 1, started_at_ms=clock.now_ms()
    )
    assert await driver.load_steps(other_run, tenant_id=None) == []


async def test_a_saved_step_is_never_rewritten(driver: JobDriver, clock: FrozenClock) -> None:
    await driver.enqueue(req())
    job = await claim_one(driver)
    now = clock.now_ms()
    assert await driver.save_step(job.id, job.ref, job.run_id, "a", "first", started_at_ms=now)
    await driver.save_step(job.id, job.ref, job.run_id, "a", "second", started_at_ms=now + 1)
    assert [
        (s.name, s.output) for s in await driver.load_steps(job.run_id, tenant_id=job.tenant_id)
    ] == [("a", "first")]


async def test_steps_replay_on_the_next_attempt(driver: JobDriver, clock: FrozenClock) -> None:
    await driver.enqueue(req(max_attempts=3))
    first = await claim_one(driver)
    await driver.save_step(first.id, first.ref, first.run_id, "a", 1, started_at_ms=clock.now_ms())
    await driver.nack(first.id, first.ref, NackOptions(error="step b failed"))
    second = await claim_one(driver)
    assert second.run_id == first.run_id
    assert [s.name for s in await driver.load_steps(second.run_id, tenant_id=second.tenant_id)] == [
        "a"
    ]


async def test_runs_keep_their_own_steps(driver: JobDriver, clock: FrozenClock) -> None:
    await driver.enqueue_many([req(), req()])
    a = await claim_one(driver)
    b = await claim_one(driver)
    now = clock.now_ms()
    await driver.save_step(a.id, a.ref, a.run_id, "x", "a", started_at_ms=now)
    await driver.save_step(b.id, b.ref, b.run_id, "x", "b", started_at_ms=now)
    assert [s.output for s in await driver.load_steps(a.run_id, tenant_id=a.tenant_id)] == ["a"]
    assert [s.output for s in await driver.load_steps(b.run_id, tenant_id=b.tenant_id)] == ["b"]
    assert await driver.load_steps(new_id(), tenant_id=None) == []
