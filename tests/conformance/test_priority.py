"""Priority (``EnqueueRequest.priority``, 0 first, 9 last, default 0) on every driver: a claim
hands out due rows by (priority, run_at, seq) across all the queues it takes from; a retried,
snoozed, debounced or lapsed row keeps its priority; an out-of-range priority is refused with
``X_PRIORITY_INVALID`` and queues nothing."""

from __future__ import annotations

import pytest

from tests.support.children import prioritised_parent, run_due
from tests.support.conformance import claim, claim_one, queue_stats, req
from ujobs.clock import FrozenClock
from ujobs.drivers.base import JobDriver, JobFilter, JobIntrospection, NackOptions
from ujobs.drivers.children import children_of
from ujobs.errors import PriorityInvalidError


async def test_a_higher_priority_enqueued_later_is_claimed_first(
    driver: JobDriver, clock: FrozenClock
) -> None:
    low = await driver.enqueue(req(priority=5))
    clock.advance(1_000)
    high = await driver.enqueue(req(priority=1))
    first = await claim_one(driver)
    assert (first.id, first.priority) == (high.id, 1)
    second = await claim_one(driver)
    assert (second.id, second.priority) == (low.id, 5)


async def test_the_default_priority_is_zero_and_first(
    driver: JobDriver, clock: FrozenClock
) -> None:
    later = await driver.enqueue(req(priority=3))
    clock.advance(1_000)
    plain = await driver.enqueue(req())
    got = await claim(driver)
    assert [(j.id, j.priority) for j in got] == [(plain.id, 0), (later.id, 3)]


async def test_equal_priorities_keep_run_at_order_then_enqueue_order(
    driver: JobDriver, clock: FrozenClock
) -> None:
    now = clock.now_ms()
    newer = await driver.enqueue(req(priority=2, run_at_ms=now - 1_000))
    older = await driver.enqueue(req(priority=2, run_at_ms=now - 5_000))
    same_a = await driver.enqueue(req(priority=2, run_at_ms=now))
    same_b = await driver.enqueue(req(priority=2, run_at_ms=now))
    got = await claim(driver)
    assert [j.id for j in got] == [older.id, newer.id, same_a.id, same_b.id]


async def test_an_older_run_of_a_lower_priority_waits_for_a_newer_higher_one(
    driver: JobDriver, clock: FrozenClock
) -> None:
    now = clock.now_ms()
    old_low = await driver.enqueue(req(priority=9, run_at_ms=now - 60_000))
    new_high = await driver.enqueue(req(priority=8))
    got = await claim(driver)
    assert [j.id for j in got] == [new_high.id, old_low.id]


async def test_one_claim_orders_by_priority_across_its_queues(driver: JobDriver) -> None:
    a_low = await driver.enqueue(req(queue="a", priority=4))
    b_low = await driver.enqueue(req(queue="b", priority=6))
    b_high = await driver.enqueue(req(queue="b", priority=0))
    a_high = await driver.enqueue(req(queue="a", priority=1))
    got = await claim(driver, "a", "b")
    assert [j.id for j in got] == [b_high.id, a_high.id, a_low.id, b_low.id]


async def test_the_limit_is_filled_from_the_first_bands(driver: JobDriver) -> None:
    lows = [await driver.enqueue(req(priority=7)) for _ in range(3)]
    highs = [await driver.enqueue(req(priority=0)) for _ in range(3)]
    first = await claim(driver, limit=2)
    assert [j.id for j in first] == [h.id for h in highs[:2]]
    rest = await claim(driver, limit=10)
    assert [j.id for j in rest] == [highs[2].id, *(low.id for low in lows)]


async def test_a_retried_row_keeps_its_priority(driver: JobDriver, clock: FrozenClock) -> None:
    await driver.enqueue(req(priority=3))
    job = await claim_one(driver)
    assert await driver.nack(job.id, job.ref, NackOptions(error="boom"))
    later = await driver.enqueue(req(priority=6))
    clock.advance(1)
    again = await claim(driver)
    assert [(j.id, j.priority) for j in again] == [(job.id, 3), (later.id, 6)]


async def test_a_lapsed_lease_is_handed_out_in_its_priority(
    driver: JobDriver, clock: FrozenClock
) -> None:
    await driver.enqueue(req(priority=2))
    lapsed = await claim_one(driver, visibility_ms=1_000)
    clock.advance(2_000)
    low = await driver.enqueue(req(priority=5))
    high = await driver.enqueue(req(priority=0))
    got = await claim(driver)
    assert [(j.id, j.priority) for j in got] == [(high.id, 0), (lapsed.id, 2), (low.id, 5)]


async def test_a_debounce_moves_the_waiting_run_within_its_priority(
    driver: JobDriver, clock: FrozenClock
) -> None:
    first = await driver.enqueue(req(key="k", priority=4, debounce_ms=1_000))
    clock.advance(500)
    moved = await driver.enqueue(req(key="k", priority=4, debounce_ms=1_000))
    assert (moved.id, moved.debounced) == (first.id, True)
    clock.advance(1_000)
    job = await claim_one(driver)
    assert (job.id, job.priority) == (first.id, 4)


async def test_the_due_count_covers_every_band(driver: JobDriver, clock: FrozenClock) -> None:
    for priority in (0, 3, 9):
        await driver.enqueue(req(priority=priority, run_at_ms=clock.now_ms() - priority))
    stats = await queue_stats(driver)
    assert (stats.due, stats.oldest_due_run_at_ms) == (3, clock.now_ms() - 9)


@pytest.mark.parametrize("priority", [-1, 10, 100, True, 1.5, "1", None])
async def test_an_invalid_priority_is_refused_and_queues_nothing(
    driver: JobDriver, priority: object
) -> None:
    with pytest.raises(PriorityInvalidError) as refused:
        await driver.enqueue(req(priority=priority))
    assert refused.value.code == "X_PRIORITY_INVALID"
    with pytest.raises(PriorityInvalidError):
        await driver.enqueue_many([req(priority=1), req(priority=priority)])
    assert await claim(driver) == []


async def test_a_job_page_shows_the_priority(
    driver: JobDriver, introspect: JobIntrospection
) -> None:
    queued = await driver.enqueue(req(priority=7))
    row = await introspect.get(queued.id)
    assert row is not None
    assert row.priority == 7
    page = await introspect.list(JobFilter())
    assert [(r.id, r.priority) for r in page.rows] == [(queued.id, 7)]


async def test_a_child_is_enqueued_at_the_priority_its_step_names(
    driver: JobDriver, introspect: JobIntrospection
) -> None:
    if children_of(driver) is None:
        pytest.skip(f"driver {driver.name!r} has no children")
    await driver.enqueue(prioritised_parent.request({"key": "p", "org": "org-a"}))
    [parent_run] = await run_due(driver)
    assert parent_run.outcome == "completed"
    got = await claim(driver)
    assert [(j.name, j.input["n"], j.priority) for j in got] == [
        ("children.leaf", 1, 2),
        ("children.leaf", 2, 6),
        ("children.leaf", 3, 6),
    ]
