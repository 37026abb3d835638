"""Children (``run.step.enqueue`` / ``wait`` / ``gather``) on every driver that has them: the
replay that never spawns twice, the one wake per wait, a parent that crashes while waiting, a
child dead-lettered, the cancel that reaches the children, two tenants. A driver without the
capability (Redis) refuses with ``X_DRIVER_UNSUPPORTED``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.children import (
    batch_parent,
    child_ids,
    due,
    leaf,
    parent,
    parent_row,
    run_claimed,
    run_due,
    single,
    trespasser,
)
from ujobs.clock import FrozenClock
from ujobs.drivers.base import JobDriver, JobIntrospection
from ujobs.drivers.children import JobChildren, children_of
from ujobs.drivers.delegating import DelegatingDriver
from ujobs.introspect import retry_job


@pytest.fixture
def children(driver: JobDriver) -> JobChildren:
    found = children_of(driver)
    if found is None:
        pytest.skip(f"driver {driver.name!r} has no children")
    return found


async def _parent(driver: JobDriver, count: int, org: str = "org-a", **extra: Any) -> str:
    answer = await driver.enqueue(parent.request({"key": "p", "org": org, "count": count, **extra}))
    return answer.id


async def test_a_gather_parks_the_parent_and_the_last_child_wakes_it_once(
    driver: JobDriver, children: JobChildren
) -> None:
    parent_id = await _parent(driver, 3)
    [first] = await run_due(driver)
    assert first.outcome == "suspended"
    kids = await child_ids(children, parent_id)
    assert len(kids) == 3
    claimed = await due(driver)
    assert sorted(c.id for c in claimed) == sorted(kids)
    for c in claimed[:2]:
        await run_claimed(driver, c)
        assert await due(driver) == [], "the parent is not woken before its last child"
    await run_claimed(driver, claimed[2])
    woken = await due(driver)
    assert [c.id for c in woken] == [parent_id], "the last child made the parent due now"
    done = await run_claimed(driver, woken[0])
    assert done.outcome == "completed"
    row = await parent_row(driver, parent_id)
    assert (row.state, row.result) == ("done", {"sum": 0 + 2 + 4})
    child = await parent_row(driver, kids[0])
    assert (child.parent_id, child.tenant_id) == (parent_id, "org-a")


async def test_a_gather_of_many_children_is_one_wake(
    driver: JobDriver, children: JobChildren
) -> None:
    parent_id = await _parent(driver, 200)
    await run_due(driver)
    claimed = await due(driver)
    assert len(claimed) == 200
    for c in claimed[:-1]:
        await run_claimed(driver, c)
    assert await due(driver) == []
    await run_claimed(driver, claimed[-1])
    [woken] = await due(driver)
    assert (await run_claimed(driver, woken)).outcome == "completed"
    row = await parent_row(driver, parent_id)
    assert row.result == {"sum": sum(2 * n for n in range(200))}
    page = await children.list(parent_id, limit=5)
    assert (len(page.children), page.total) == (5, 200)


async def test_enqueue_many_is_one_step_and_its_replay_never_spawns_twice(
    driver: JobDriver, children: JobChildren, clock: FrozenClock
) -> None:
    crashing = _CrashAfterChildEnqueue(driver)
    parent_id = (
        await driver.enqueue(batch_parent.request({"key": "b", "org": "org-a", "count": 30}))
    ).id
    [claimed] = await due(driver)
    assert (await run_claimed(crashing, claimed)).outcome != "completed"
    kids = await child_ids(children, parent_id)
    assert len(kids) == 30, "the batch landed, its step's save did not"
    clock.advance(3_600_000)
    claimed_now = await due(driver)  # the parent's retry and its 30 children
    [again] = [c for c in claimed_now if c.id == parent_id]
    assert (await run_claimed(crashing, again)).outcome == "suspended"
    assert sorted(await child_ids(children, parent_id)) == sorted(kids), "the same 30"
    steps = await driver.load_steps(claimed.run_id, tenant_id="org-a")
    assert [s.name for s in steps if s.name.startswith("enqueue_many:")] == [
        "enqueue_many:children.leaf#1"
    ]
    for c in claimed_now:
        if c.id != parent_id:
            await run_claimed(driver, c)
    [woken] = await due(driver)
    assert (await run_claimed(driver, woken)).outcome == "completed"
    assert (await parent_row(driver, parent_id)).result == {"sum": sum(2 * n for n in range(30))}


class _CrashAfterChildEnqueue(DelegatingDriver):
    """Fails the save of the first enqueue step, once: a crash between the child's insert and
    the step's save."""

    crashed = False

    async def save_step(
        self, job_id: str, ref: Any, run_id: str, name: str, output: Any, *, started_at_ms: int
    ) -> bool:
        if name.startswith(("enqueue:", "enqueue_many:")) and not self.crashed:
            self.crashed = True
            raise ConnectionError("the worker died before the step was saved")
        return await self.inner.save_step(
            job_id, ref, run_id, name, output, started_at_ms=started_at_ms
        )


async def test_a_replay_after_a_crash_between_enqueue_and_save_never_spawns_twice(
    driver: JobDriver, children: JobChildren, clock: FrozenClock
) -> None:
    crashing = _CrashAfterChildEnqueue(driver)
    parent_id = await _parent(driver, 1)
    [claimed] = await due(driver)
    first = await run_claimed(crashing, claimed)
    assert first.outcome != "completed"
    assert len(await child_ids(children, parent_id)) == 1, "the insert landed, the save did not"
    clock.advance(3_600_000)
    for c in await due(driver):
        if c.id == parent_id:
            assert (await run_claimed(crashing, c)).outcome == "suspended"
    assert len(await child_ids(children, parent_id)) == 1, "the replay met the same child"


async def test_a_parent_that_crashes_while_waiting_resumes_and_gets_the_result(
    driver: JobDriver, children: JobChildren, clock: FrozenClock
) -> None:
    parent_id = await _parent(driver, 2)
    await run_due(driver)
    await run_due(driver)  # both children done: the parent is due
    [woken] = await due(driver, worker="dies")  # claimed by a worker that dies at once
    assert woken.id == parent_id
    clock.advance(30_001)  # its lease lapses
    [again] = await due(driver, worker="w2")
    assert again.id == parent_id
    assert (await run_claimed(driver, again)).outcome == "completed"
    assert (await parent_row(driver, parent_id)).result == {"sum": 2}


async def test_a_dead_child_fails_the_wait_with_its_code_as_the_cause(
    driver: JobDriver, children: JobChildren
) -> None:
    parent_id = await _parent(driver, 2, fail=[1])
    await run_due(driver)
    await run_due(driver)
    kids = await child_ids(children, parent_id)
    assert {(await parent_row(driver, k)).state for k in kids} == {"done", "dead"}
    [woken] = await due(driver)
    execution = await run_claimed(driver, woken)
    assert execution.outcome == "dead-lettered"
    error = execution.error
    assert error is not None
    assert getattr(error, "code", None) == "X_CHILD_FAILED"
    assert getattr(error.__cause__, "code", None) == "X_APP_CHILD_BROKE"
    row = await parent_row(driver, parent_id)
    assert row.state == "dead"
    assert (row.last_error or "").startswith("X_CHILD_FAILED")


async def test_a_parent_retried_from_its_enqueue_step_meets_the_same_child_as_it_stands(
    driver: JobDriver, children: JobChildren
) -> None:
    """The step derives the child's id again, so the retried parent answers the child that
    already ran (dead here), without a new run of it: the guide's "retry the child itself"."""
    parent_id = await _parent(driver, 1, fail=[0])
    await run_due(driver)  # the parent enqueues its child and parks
    await run_due(driver)  # the child fails for good
    [kid] = await child_ids(children, parent_id)
    [woken] = await due(driver)
    assert (await run_claimed(driver, woken)).outcome == "dead-lettered"
    dead_child = await parent_row(driver, kid)

    moved = await retry_job(driver, parent_id, from_step="enqueue:children.leaf#1")
    assert moved.state == "ready"
    [again] = await due(driver)
    assert again.id == parent_id
    execution = await run_claimed(driver, again)
    assert execution.outcome == "dead-lettered"
    assert getattr(execution.error, "code", None) == "X_CHILD_FAILED"
    assert await child_ids(children, parent_id) == [kid]
    assert await parent_row(driver, kid) == dead_child  # not run again


async def test_cancelling_a_parent_cancels_its_live_children_but_not_detached_ones(
    driver: JobDriver, children: JobChildren, introspect: JobIntrospection
) -> None:
    parent_id = await _parent(driver, 3, detached=1)
    await run_due(driver)
    kids = await child_ids(children, parent_id)
    running = await due(driver)  # every child is running now
    assert len(running) == 3
    assert await introspect.cancel(parent_id, "not needed") is not None
    rows = [await parent_row(driver, k) for k in kids]
    states = {r.id: r.state for r in rows}
    [detached] = [r.id for r in rows if r.input["n"] == 0]  # the first is enqueued detached
    assert states.pop(detached) == "running", "a detached child keeps running"
    assert set(states.values()) == {"cancelled"}
    for k in states:
        assert (
            await parent_row(driver, k)
        ).last_error == f"cancelled: parent {parent_id} cancelled"


async def test_cancel_with_detach_children_keeps_every_child(
    driver: JobDriver, children: JobChildren, introspect: JobIntrospection
) -> None:
    parent_id = await _parent(driver, 2)
    await run_due(driver)
    assert await introspect.cancel(parent_id, detach_children=True) is not None
    kids = await child_ids(children, parent_id)
    assert {(await parent_row(driver, k)).state for k in kids} == {"ready"}


async def test_a_child_runs_under_its_parents_tenant_and_another_tenants_job_is_missing(
    driver: JobDriver, children: JobChildren
) -> None:
    foreign = await driver.enqueue(leaf.request({"n": 99, "org": "org-b"}))
    parent_id = await _parent(driver, 1, foreign=foreign.id)
    [execution] = [e for e in await run_due(driver) if e.job_id == parent_id]
    assert getattr(execution.error, "code", None) == "X_JOB_NOT_FOUND"
    assert (await children.read(parent_id, [foreign.id])) == []
    [kid] = await child_ids(children, parent_id)
    assert (await parent_row(driver, kid)).tenant_id == "org-a"


async def test_a_child_naming_another_tenant_is_refused(
    driver: JobDriver, children: JobChildren
) -> None:
    parent_id = (await driver.enqueue(trespasser.request({"key": "t"}))).id
    [execution] = await run_due(driver)
    assert getattr(execution.error, "code", None) == "X_JOB_TENANT_MISMATCH"
    assert await child_ids(children, parent_id) == []


async def test_a_wait_times_out_on_the_ordinary_retry_path(
    driver: JobDriver, children: JobChildren, clock: FrozenClock
) -> None:
    await driver.enqueue(single.request({"key": "s", "timeout": "10s"}))
    [first] = await run_due(driver)
    assert first.outcome == "suspended"
    clock.advance(10_000)
    ran = [await run_claimed(driver, c) for c in await due(driver) if c.name == single.name]
    assert [e.outcome for e in ran] == ["retried"]
    assert getattr(ran[0].error, "code", None) == "X_JOB_TIMEOUT"


async def test_a_driver_without_children_refuses_with_driver_unsupported(
    driver: JobDriver,
) -> None:
    if children_of(driver) is not None:
        pytest.skip(f"driver {driver.name!r} has children")
    await driver.enqueue(single.request({"key": "s"}))
    [execution] = await run_due(driver)
    assert getattr(execution.error, "code", None) == "X_DRIVER_UNSUPPORTED"


async def test_an_operator_cancelling_the_last_child_wakes_the_parent(
    driver: JobDriver, children: JobChildren, introspect: JobIntrospection
) -> None:
    parent_id = await _parent(driver, 1)
    await run_due(driver)
    [kid] = await child_ids(children, parent_id)
    assert await introspect.cancel(kid, "not needed") is not None
    [woken] = await due(driver)
    assert woken.id == parent_id, "the cancel of its last child made the parent due now"
    execution = await run_claimed(driver, woken)
    assert getattr(execution.error, "code", None) == "X_CHILD_FAILED"
    assert (execution.error.__cause__ if execution.error else None) is not None
