"""The operator surface on one row: get, cancel, remove, requeue (with from_step), promote."""

from __future__ import annotations

import pytest

from tests.support.conformance import claim, claim_one, make_in_state, queue_stats, req
from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimedJob, JobDriver, JobIntrospection, JobState, NackOptions
from ujobs.errors import (
    JobDuplicateError,
    JobNotFoundError,
    JobNotPromotableError,
    JobNotRemovableError,
    JobNotRequeueableError,
)
from ujobs.ids import new_id


async def _live(driver: JobDriver, clock: FrozenClock, state: JobState) -> str:
    if state == "delayed":
        return (await driver.enqueue(req(key="k", run_at_ms=clock.now_ms() + 60_000))).id
    return await make_in_state(driver, state, req(key="k"))


async def _save_steps(driver: JobDriver, job: ClaimedJob, clock: FrozenClock, *names: str) -> None:
    for name in names:
        started = clock.now_ms()
        clock.advance(5)
        assert await driver.save_step(
            job.id, job.ref, job.run_id, name, name, started_at_ms=started
        )


# --- get ----------------------------------------------------------------------------------


async def test_get_shows_the_row(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    enq = await driver.enqueue(
        req("sync", key="sync:1", queue="q", tenant_id="t1", input={"a": [1]}, max_attempts=4)
    )
    row = await introspect.get(enq.id)
    assert row is not None
    assert (row.id, row.run_id, row.name, row.queue) == (enq.id, enq.run_id, "sync", "q")
    assert (row.state, row.input, row.tenant_id, row.idempotency_key) == (
        "ready",
        {"a": [1]},
        "t1",
        "sync:1",
    )
    assert (row.attempt, row.max_attempts) == (0, 4)
    assert row.created_at_ms == row.run_at_ms == clock.now_ms()
    assert row.finished_at_ms is None
    job = await claim_one(driver, "q", worker="w9")
    row = await introspect.get(enq.id)
    assert row is not None
    assert (row.state, row.attempt, row.claimed_by, row.claim) == ("running", 1, "w9", job.claim)
    assert row.lease_expires_at_ms == job.lease_expires_at_ms
    await driver.ack(job.id, job.ref)
    row = await introspect.get(enq.id)
    assert row is not None
    assert (row.state, row.finished_at_ms) == ("done", clock.now_ms())


async def test_get_of_an_unknown_id_is_none(introspect: JobIntrospection) -> None:
    assert await introspect.get(new_id()) is None


# --- cancel -------------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["ready", "delayed", "running", "suspended"])
async def test_cancel_stops_a_live_row_and_frees_its_key(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock, state: JobState
) -> None:
    job_id = await _live(driver, clock, state)
    row = await introspect.cancel(job_id, "operator said so")
    assert row is not None
    assert (row.id, row.state) == (job_id, "cancelled")
    assert row.last_error == "cancelled: operator said so"
    stored = await introspect.get(job_id)
    assert stored is not None
    assert stored.state == "cancelled"
    assert stored.finished_at_ms == clock.now_ms()
    clock.advance(86_400_000 * 2)
    assert await claim(driver) == []
    assert not (await driver.enqueue(req(key="k"))).deduped


async def test_cancel_without_a_reason_says_cancelled_over_an_earlier_error(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    """A row backing off after a failed attempt: the cancel's wording replaces that error, as
    on every driver, so ``last_error`` always says why the row ended."""
    enq = await driver.enqueue(req(key="k"))
    job = await claim_one(driver)
    assert await driver.nack(
        job.id, job.ref, NackOptions(error="boom", run_at_ms=clock.now_ms() + 60_000)
    )
    backing_off = await introspect.get(enq.id)
    assert backing_off is not None
    assert backing_off.last_error == "boom"
    row = await introspect.cancel(enq.id)
    assert row is not None
    assert (row.state, row.last_error) == ("cancelled", "cancelled")
    stored = await introspect.get(enq.id)
    assert stored is not None
    assert stored.last_error == "cancelled"


async def test_cancel_with_an_empty_reason_says_cancelled(
    driver: JobDriver, introspect: JobIntrospection
) -> None:
    enq = await driver.enqueue(req(key="k"))
    row = await introspect.cancel(enq.id, "")
    assert row is not None
    assert row.last_error == "cancelled"


@pytest.mark.parametrize("state", ["done", "failed", "dead", "cancelled"])
async def test_cancel_leaves_a_finished_row_as_it_ended(
    driver: JobDriver, introspect: JobIntrospection, state: JobState
) -> None:
    job_id = await make_in_state(driver, state, req(), introspect=introspect)
    before = await introspect.get(job_id)
    assert await introspect.cancel(job_id, "too late") is None
    assert await introspect.get(job_id) == before


async def test_cancel_of_an_unknown_id_is_none(introspect: JobIntrospection) -> None:
    assert await introspect.cancel(new_id()) is None


# --- remove -------------------------------------------------------------------------------


async def test_remove_deletes_the_row_and_its_steps(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    enq = await driver.enqueue(req(key="k"))
    job = await claim_one(driver)
    await _save_steps(driver, job, clock, "a", "b")
    await driver.nack(job.id, job.ref, NackOptions(error="x", dead_letter=True))
    assert await introspect.remove(enq.id)
    assert await introspect.get(enq.id) is None
    assert await driver.load_steps(job.run_id, tenant_id=job.tenant_id) == []
    assert not await introspect.remove(enq.id), "already gone"


async def test_remove_of_a_live_row_frees_its_key(
    driver: JobDriver, introspect: JobIntrospection
) -> None:
    enq = await driver.enqueue(req(key="k"))
    assert await introspect.remove(enq.id)
    assert await claim(driver) == []
    assert not (await driver.enqueue(req(key="k"))).deduped


async def test_remove_keeps_steps_another_row_of_the_run_still_uses(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    run_id = new_id()
    first = await driver.enqueue(req(key="k1", run_id=run_id))
    job = await claim_one(driver)
    await _save_steps(driver, job, clock, "a")
    await driver.ack(job.id, job.ref)
    second = await driver.enqueue(req(key="k2", run_id=run_id))
    assert second.run_id == run_id
    assert await introspect.remove(first.id)
    assert [s.name for s in await driver.load_steps(run_id, tenant_id=None)] == ["a"]
    assert await introspect.remove(second.id)
    assert await driver.load_steps(run_id, tenant_id=None) == []


async def test_remove_refuses_a_running_row(
    driver: JobDriver, introspect: JobIntrospection
) -> None:
    enq = await driver.enqueue(req())
    await claim_one(driver)
    with pytest.raises(JobNotRemovableError) as caught:
        await introspect.remove(enq.id)
    assert caught.value.code == "X_JOB_NOT_REMOVABLE"
    row = await introspect.get(enq.id)
    assert row is not None
    assert row.state == "running"


async def test_remove_of_an_unknown_id_is_false(introspect: JobIntrospection) -> None:
    assert not await introspect.remove(new_id())


# --- requeue ------------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["done", "failed", "dead", "cancelled"])
async def test_requeue_moves_a_finished_row_back(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock, state: JobState
) -> None:
    job_id = await make_in_state(driver, state, req(key="k"), introspect=introspect)
    before = await introspect.get(job_id)
    assert before is not None
    clock.advance(1_000)
    row = await introspect.requeue(job_id)
    assert (row.id, row.run_id) == (job_id, before.run_id)
    assert (row.state, row.attempt, row.run_at_ms) == ("ready", 0, clock.now_ms())
    assert row.finished_at_ms is None
    assert row.last_error is None
    assert (await driver.enqueue(req(key="k"))).id == job_id, "it holds its key again"
    job = await claim_one(driver)
    assert (job.id, job.attempt) == (job_id, 1)


async def test_requeue_gives_a_fresh_attempt_budget(
    driver: JobDriver, introspect: JobIntrospection
) -> None:
    enq = await driver.enqueue(req(max_attempts=2))
    for _ in range(2):
        job = await claim_one(driver)
        await driver.nack(job.id, job.ref, NackOptions(error="x"))
    job = await claim_one(driver)
    await driver.nack(job.id, job.ref, NackOptions(error="x", dead_letter=True))
    await introspect.requeue(enq.id)
    again = await claim_one(driver)
    assert again.attempt == 1
    assert again.max_attempts == 2


async def test_a_claim_from_before_the_requeue_cannot_settle_the_new_run(
    driver: JobDriver, introspect: JobIntrospection
) -> None:
    enq = await driver.enqueue(req())
    old = await claim_one(driver, worker="w1")
    await introspect.cancel(enq.id)
    await introspect.requeue(enq.id)
    new = await claim_one(driver, worker="w1")
    assert new.ref != old.ref
    assert not await driver.ack(old.id, old.ref)
    assert await driver.heartbeat(old.id, old.ref, 1_000) == "lost"
    assert await driver.ack(new.id, new.ref)


async def test_requeue_keeps_the_steps_so_they_replay(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    enq = await driver.enqueue(req())
    job = await claim_one(driver)
    await _save_steps(driver, job, clock, "a", "b")
    await driver.nack(job.id, job.ref, NackOptions(error="x", dead_letter=True))
    await introspect.requeue(enq.id)
    assert [s.name for s in await driver.load_steps(job.run_id, tenant_id=job.tenant_id)] == [
        "a",
        "b",
    ]


async def test_requeue_from_step_drops_it_and_every_later_step(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    enq = await driver.enqueue(req())
    job = await claim_one(driver)
    await _save_steps(driver, job, clock, "provision", "email", "nudge", "report")
    await driver.nack(job.id, job.ref, NackOptions(error="x", fail=True))
    await introspect.requeue(enq.id, from_step="email")
    assert [s.name for s in await driver.load_steps(job.run_id, tenant_id=job.tenant_id)] == [
        "provision"
    ]


async def test_requeue_from_the_first_step_drops_them_all(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    enq = await driver.enqueue(req())
    job = await claim_one(driver)
    await _save_steps(driver, job, clock, "a", "b")
    await driver.ack(job.id, job.ref)
    await introspect.requeue(enq.id, from_step="a")
    assert await driver.load_steps(job.run_id, tenant_id=job.tenant_id) == []


async def test_requeue_from_a_step_never_reached_drops_nothing(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    enq = await driver.enqueue(req())
    job = await claim_one(driver)
    await _save_steps(driver, job, clock, "a")
    await driver.nack(job.id, job.ref, NackOptions(error="b failed", dead_letter=True))
    await introspect.requeue(enq.id, from_step="b")
    assert [s.name for s in await driver.load_steps(job.run_id, tenant_id=job.tenant_id)] == ["a"]


@pytest.mark.parametrize("state", ["ready", "delayed", "running", "suspended"])
async def test_requeue_refuses_a_live_row(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock, state: JobState
) -> None:
    job_id = await _live(driver, clock, state)
    before = await introspect.get(job_id)
    with pytest.raises(JobNotRequeueableError) as caught:
        await introspect.requeue(job_id)
    assert caught.value.code == "X_JOB_NOT_REQUEUEABLE"
    assert await introspect.get(job_id) == before


async def test_requeue_refuses_a_key_a_live_job_holds(
    driver: JobDriver, introspect: JobIntrospection
) -> None:
    old = await make_in_state(driver, "dead", req(key="k", tenant_id="t"))
    live = await driver.enqueue(req(key="k", tenant_id="t"))
    with pytest.raises(JobDuplicateError) as caught:
        await introspect.requeue(old)
    assert caught.value.code == "X_JOB_DUPLICATE"
    row = await introspect.get(old)
    assert row is not None
    assert row.state == "dead"
    assert (await claim_one(driver)).id == live.id


async def test_a_requeue_refused_for_its_key_never_shows_the_key(
    driver: JobDriver, introspect: JobIntrospection
) -> None:
    """The key is computed from the input, which the operator surface redacts: the refusal an
    operator's retry gets (CLI, HTTP) must not carry it either."""
    key = "invite:ada@example.com"
    old = await make_in_state(driver, "dead", req(key=key, tenant_id="t"))
    await driver.enqueue(req(key=key, tenant_id="t"))
    with pytest.raises(JobDuplicateError) as caught:
        await introspect.requeue(old)
    assert "ada@example.com" not in repr(caught.value.to_dict())


async def test_requeue_of_an_unknown_id_is_not_found(introspect: JobIntrospection) -> None:
    with pytest.raises(JobNotFoundError) as caught:
        await introspect.requeue(new_id())
    assert caught.value.code == "X_JOB_NOT_FOUND"


# --- promote ------------------------------------------------------------------------------


async def test_promote_makes_a_delayed_row_due_now(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    enq = await driver.enqueue(req(run_at_ms=clock.now_ms() + 60_000))
    row = await introspect.promote(enq.id)
    assert (row.state, row.run_at_ms) == ("ready", clock.now_ms())
    assert (await claim_one(driver)).id == enq.id


async def test_promote_makes_a_backing_off_row_due_now(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    enq = await driver.enqueue(req())
    job = await claim_one(driver)
    await driver.nack(job.id, job.ref, NackOptions(error="x", run_at_ms=clock.now_ms() + 60_000))
    await introspect.promote(enq.id)
    assert (await claim_one(driver)).attempt == 2


@pytest.mark.parametrize("state", ["ready", "running", "suspended", "done", "dead"])
async def test_promote_refuses_a_row_not_waiting(
    driver: JobDriver, introspect: JobIntrospection, state: JobState
) -> None:
    job_id = await make_in_state(driver, state, req())
    with pytest.raises(JobNotPromotableError) as caught:
        await introspect.promote(job_id)
    assert caught.value.code == "X_JOB_NOT_PROMOTABLE"


async def test_promote_of_an_unknown_id_is_not_found(introspect: JobIntrospection) -> None:
    with pytest.raises(JobNotFoundError):
        await introspect.promote(new_id())


async def test_promoting_leaves_other_queues_alone(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    a = await driver.enqueue(req(queue="a", run_at_ms=clock.now_ms() + 60_000))
    await driver.enqueue(req(queue="b", run_at_ms=clock.now_ms() + 60_000))
    await introspect.promote(a.id)
    assert (await queue_stats(driver, "b")).delayed == 1
