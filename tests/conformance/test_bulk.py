"""Bulk moves: requeue_many, remove_many, promote_many and their ``{affected, remaining}``."""

from __future__ import annotations

import pytest

from tests.support.conformance import claim, claim_one, make_in_state, queue_stats, req
from ujobs.clock import FrozenClock
from ujobs.drivers.base import (
    MAX_BULK_ROWS,
    BulkFilter,
    BulkResult,
    JobDriver,
    JobIntrospection,
    JobState,
    NackOptions,
)
from ujobs.errors import JobNotPromotableError, JobNotRemovableError, JobNotRequeueableError


async def _dead(
    driver: JobDriver,
    n: int,
    *,
    name: str = "send-email",
    queue: str = "default",
    tenant_id: str | None = None,
) -> None:
    """``n`` dead rows (claimed and dead-lettered in one pass; the queue must hold no others)."""
    await driver.enqueue_many([req(name, queue=queue, tenant_id=tenant_id) for _ in range(n)])
    jobs = await claim(driver, queue, limit=n)
    assert len(jobs) == n
    for job in jobs:
        assert await driver.nack(job.id, job.ref, NackOptions(error="x", dead_letter=True))


async def _state(introspect: JobIntrospection, job_id: str) -> JobState:
    row = await introspect.get(job_id)
    assert row is not None
    return row.state


# --- requeue_many -------------------------------------------------------------------------


async def test_requeue_many_moves_the_rows_it_names(
    driver: JobDriver, introspect: JobIntrospection
) -> None:
    await _dead(driver, 3, name="a", queue="q1")
    await _dead(driver, 2, name="b", queue="q1")
    await _dead(driver, 2, name="a", queue="q2")
    result = await introspect.requeue_many(BulkFilter(state="dead", queue="q1", name="a"))
    assert result == BulkResult(affected=3, remaining=0)
    q1 = await queue_stats(driver, "q1")
    assert (q1.ready, q1.dead) == (3, 2)
    assert (await queue_stats(driver, "q2")).dead == 2
    again = await claim(driver, "q1", limit=10)
    assert sorted(j.name for j in again) == ["a", "a", "a"]
    assert all(j.attempt == 1 for j in again)


async def test_requeue_many_filters_by_tenant(
    driver: JobDriver, introspect: JobIntrospection
) -> None:
    await _dead(driver, 2, tenant_id="t1")
    await _dead(driver, 1, tenant_id="t2")
    result = await introspect.requeue_many(BulkFilter(state="dead", tenant_id="t2"))
    assert result == BulkResult(affected=1, remaining=0)
    assert [j.tenant_id for j in await claim(driver)] == ["t2"]


async def test_requeue_many_skips_a_held_key_and_does_not_count_it(
    driver: JobDriver, introspect: JobIntrospection
) -> None:
    held = await make_in_state(driver, "dead", req(key="held"))
    free = await make_in_state(driver, "dead", req(key="free"))
    live = await driver.enqueue(req(key="held"))
    result = await introspect.requeue_many(BulkFilter(state="dead"))
    assert result == BulkResult(affected=1, remaining=0)
    assert (await _state(introspect, held), await _state(introspect, free)) == ("dead", "ready")
    assert await introspect.requeue_many(BulkFilter(state="dead")) == BulkResult(0, 0)
    assert {j.id for j in await claim(driver)} == {free, live.id}


async def test_requeue_many_moves_the_oldest_of_rows_sharing_a_key(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    ids = []
    for _ in range(3):
        ids.append(await make_in_state(driver, "failed", req(key="same")))
        clock.advance(1_000)
    result = await introspect.requeue_many(BulkFilter(state="failed"))
    assert result == BulkResult(affected=1, remaining=0)
    states = [await _state(introspect, i) for i in ids]
    assert states == ["ready", "failed", "failed"]


async def test_requeue_many_refuses_a_live_state(introspect: JobIntrospection) -> None:
    live: tuple[JobState, ...] = ("ready", "delayed", "running", "suspended")
    for state in live:
        with pytest.raises(JobNotRequeueableError):
            await introspect.requeue_many(BulkFilter(state=state))


async def test_requeue_many_is_bounded_and_says_what_is_left(
    driver: JobDriver, introspect: JobIntrospection
) -> None:
    total = MAX_BULK_ROWS + 3
    ids = [e.id for e in await driver.enqueue_many([req() for _ in range(total)])]
    for job_id in ids:
        await introspect.cancel(job_id)
    first = await introspect.requeue_many(BulkFilter(state="cancelled"))
    assert first == BulkResult(affected=MAX_BULK_ROWS, remaining=3)
    second = await introspect.requeue_many(BulkFilter(state="cancelled"))
    assert second == BulkResult(affected=3, remaining=0)
    assert (await queue_stats(driver)).ready == total


# --- remove_many --------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["ready", "delayed", "suspended", "done", "dead"])
async def test_remove_many_deletes_rows_of_a_state(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock, state: JobState
) -> None:
    if state == "delayed":
        for _ in range(2):
            await driver.enqueue(req(run_at_ms=clock.now_ms() + 60_000))
    else:
        for _ in range(2):
            await make_in_state(driver, state, req())
    await driver.enqueue(req(queue="other"))
    assert await introspect.remove_many(BulkFilter(state=state, queue="default")) == BulkResult(
        2, 0
    )
    stats = await queue_stats(driver)
    assert getattr(stats, state) == 0
    assert (await queue_stats(driver, "other")).ready == 1


async def test_remove_many_frees_the_keys_and_steps(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    enq = await driver.enqueue(req(key="k"))
    job = await claim_one(driver)
    await driver.save_step(job.id, job.ref, job.run_id, "a", 1, started_at_ms=clock.now_ms())
    await driver.nack(job.id, job.ref, NackOptions(error="x", dead_letter=True))
    assert await introspect.remove_many(BulkFilter(state="dead")) == BulkResult(1, 0)
    assert await introspect.get(enq.id) is None
    assert await driver.load_steps(job.run_id, tenant_id=job.tenant_id) == []
    ready = await driver.enqueue(req(key="r"))
    assert await introspect.remove_many(BulkFilter(state="ready")) == BulkResult(1, 0)
    assert not (await driver.enqueue(req(key="r"))).deduped
    assert await introspect.get(ready.id) is None


async def test_remove_many_refuses_running(driver: JobDriver, introspect: JobIntrospection) -> None:
    await make_in_state(driver, "running", req())
    with pytest.raises(JobNotRemovableError) as caught:
        await introspect.remove_many(BulkFilter(state="running"))
    assert caught.value.code == "X_JOB_NOT_REMOVABLE"
    assert (await queue_stats(driver)).running == 1


async def test_remove_many_is_bounded_and_says_what_is_left(
    driver: JobDriver, introspect: JobIntrospection
) -> None:
    await driver.enqueue_many([req() for _ in range(MAX_BULK_ROWS + 5)])
    assert await introspect.remove_many(BulkFilter(state="ready")) == BulkResult(MAX_BULK_ROWS, 5)
    assert await introspect.remove_many(BulkFilter(state="ready")) == BulkResult(5, 0)
    assert await introspect.remove_many(BulkFilter(state="ready")) == BulkResult(0, 0)


# --- promote_many -------------------------------------------------------------------------


async def test_promote_many_makes_waiting_rows_due(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    later = clock.now_ms() + 60_000
    await driver.enqueue_many([req(run_at_ms=later), req(run_at_ms=later)])
    await driver.enqueue(req(run_at_ms=later, name="other"))
    await driver.enqueue(req())  # ready and already due: nothing to promote
    result = await introspect.promote_many(BulkFilter(state="delayed", name="send-email"))
    assert result == BulkResult(affected=2, remaining=0)
    assert len(await claim(driver, limit=10)) == 3
    assert (await queue_stats(driver)).delayed == 1


async def test_promote_many_of_ready_promotes_rows_backing_off(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    await driver.enqueue(req())
    job = await claim_one(driver)
    await driver.nack(job.id, job.ref, NackOptions(error="x", run_at_ms=clock.now_ms() + 60_000))
    await driver.enqueue(req())
    assert await introspect.promote_many(BulkFilter(state="ready")) == BulkResult(1, 0)
    assert len(await claim(driver, limit=10)) == 2


@pytest.mark.parametrize("state", ["running", "suspended", "done", "dead", "failed", "cancelled"])
async def test_promote_many_refuses_other_states(
    introspect: JobIntrospection, state: JobState
) -> None:
    with pytest.raises(JobNotPromotableError) as caught:
        await introspect.promote_many(BulkFilter(state=state))
    assert caught.value.code == "X_JOB_NOT_PROMOTABLE"


async def test_promote_many_is_bounded_and_says_what_is_left(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    later = clock.now_ms() + 60_000
    await driver.enqueue_many([req(run_at_ms=later) for _ in range(MAX_BULK_ROWS + 2)])
    assert await introspect.promote_many(BulkFilter(state="delayed")) == BulkResult(
        MAX_BULK_ROWS, 2
    )
    assert await introspect.promote_many(BulkFilter(state="delayed")) == BulkResult(2, 0)
