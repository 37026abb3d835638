"""The operator surface on Postgres: pages both ways, requeue/cancel/remove/promote rules, the
bulk members' {affected, remaining}, pauses, counters and their rollup, task fires."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from ujobs.clock import FrozenClock
from ujobs.drivers.base import (
    MAX_BULK_ROWS,
    MAX_JOB_PAGE,
    BulkFilter,
    ClaimOptions,
    EnqueueRequest,
    JobFilter,
    NackOptions,
)
from ujobs.drivers.postgres.driver import PostgresDriver
from ujobs.errors import (
    JobDuplicateError,
    JobNotFoundError,
    JobNotPromotableError,
    JobNotRemovableError,
    JobNotRequeueableError,
    JobPageInvalidError,
    JobRowStatusUnknownError,
)
from ujobs.services.api.common import status_for


def req(key: str, **kw: Any) -> EnqueueRequest:
    return EnqueueRequest(name=kw.pop("name", "send"), input={"k": key}, idempotency_key=key, **kw)


def opts(limit: int = 100) -> ClaimOptions:
    return ClaimOptions(queues=["default"], limit=limit, worker_id="w1")


async def finish_all(pg: PostgresDriver, *, dead: bool = False) -> None:
    for j in await pg.claim(opts()):
        if dead:
            assert await pg.nack(j.id, j.ref, NackOptions(error="x", dead_letter=True))
        else:
            assert await pg.ack(j.id, j.ref)


async def test_list_pages_newest_first_both_ways(pg: PostgresDriver, clock: FrozenClock) -> None:
    ids = []
    for i in range(7):
        ids.append((await pg.enqueue(req(f"k{i}"))).id)
        clock.advance(1)
    newest_first = list(reversed(ids))
    page1 = await pg.introspect.list(JobFilter(limit=3))
    assert [r.id for r in page1.rows] == newest_first[:3]
    assert not page1.is_last
    page2 = await pg.introspect.list(JobFilter(limit=3, after=page1.next_cursor))
    assert [r.id for r in page2.rows] == newest_first[3:6]
    page3 = await pg.introspect.list(JobFilter(limit=3, after=page2.next_cursor))
    assert [r.id for r in page3.rows] == newest_first[6:]
    assert page3.is_last
    back = await pg.introspect.list(JobFilter(limit=3, before=page3.prev_cursor))
    assert [r.id for r in back.rows] == newest_first[3:6]
    back2 = await pg.introspect.list(JobFilter(limit=2, before=page2.prev_cursor))
    assert [r.id for r in back2.rows] == newest_first[1:3]


async def test_list_filters_and_refuses_bad_pages(pg: PostgresDriver, clock: FrozenClock) -> None:
    a = await pg.enqueue(req("a", tenant_id="t1"))
    clock.advance(10)
    await pg.enqueue(req("b", name="other", queue="q2"))
    assert [r.id for r in (await pg.introspect.list(JobFilter(tenant_id="t1"))).rows] == [a.id]
    assert [r.name for r in (await pg.introspect.list(JobFilter(queue="q2"))).rows] == ["other"]
    assert [r.id for r in (await pg.introspect.list(JobFilter(id_prefix=a.id[:30]))).rows] == [a.id]
    window = JobFilter(created_from_ms=clock.now_ms() - 5, created_to_ms=clock.now_ms())
    assert [r.name for r in (await pg.introspect.list(window)).rows] == ["other"]
    with pytest.raises(JobPageInvalidError):
        await pg.introspect.list(JobFilter(limit=MAX_JOB_PAGE + 1))
    with pytest.raises(JobPageInvalidError):
        await pg.introspect.list(JobFilter(after="not-a-cursor"))


async def test_requeue_rules(pg: PostgresDriver) -> None:
    live = await pg.enqueue(req("live"))
    with pytest.raises(JobNotRequeueableError):
        await pg.introspect.requeue(live.id)
    with pytest.raises(JobNotFoundError):
        await pg.introspect.requeue("nobody")
    await finish_all(pg, dead=True)
    again = await pg.enqueue(req("live"))
    with pytest.raises(JobDuplicateError):
        await pg.introspect.requeue(live.id)
    assert await pg.introspect.cancel(again.id) is not None
    row = await pg.introspect.requeue(live.id)
    assert (row.state, row.attempt, row.last_error, row.finished_at_ms) == ("ready", 0, None, None)


async def test_requeue_from_step_drops_that_step_and_later_ones(pg: PostgresDriver) -> None:
    await pg.enqueue(req("a"))
    [j] = await pg.claim(opts())
    for n, name in enumerate(["one", "two", "three"]):
        assert await pg.save_step(j.id, j.ref, j.run_id, name, n, started_at_ms=n)
    assert await pg.nack(j.id, j.ref, NackOptions(dead_letter=True))
    await pg.introspect.requeue(j.id, from_step="two")
    assert [s.name for s in await pg.load_steps(j.run_id, tenant_id=j.tenant_id)] == ["one"]


async def test_cancel_only_live_jobs(pg: PostgresDriver) -> None:
    queued = await pg.enqueue(req("a"))
    row = await pg.introspect.cancel(queued.id, "runaway")
    assert row is not None
    assert row.state == "cancelled"
    assert row.last_error == "cancelled: runaway"
    assert await pg.introspect.cancel(queued.id) is None
    assert await pg.introspect.cancel("nobody") is None


async def test_remove_refuses_running_and_keeps_shared_steps(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any]
) -> None:
    await pg.enqueue(req("a", run_id="run-1"))
    [j] = await pg.claim(opts())
    assert await pg.save_step(j.id, j.ref, "run-1", "s", 1, started_at_ms=0)
    with pytest.raises(JobNotRemovableError):
        await pg.introspect.remove(j.id)
    await pg.ack(j.id, j.ref)
    other = await pg.enqueue(req("b", run_id="run-1"))
    assert await pg.introspect.remove(j.id)
    assert await pg.load_steps("run-1", tenant_id=None) != []
    assert await pg.introspect.remove(other.id)
    assert await pg.load_steps("run-1", tenant_id=None) == []
    assert not await pg.introspect.remove(other.id)


async def test_promote_only_what_waits_on_its_run_at(
    pg: PostgresDriver, clock: FrozenClock
) -> None:
    later = await pg.enqueue(req("later", run_at_ms=clock.now_ms() + 60_000))
    due = await pg.enqueue(req("due"))
    row = await pg.introspect.promote(later.id)
    assert (row.state, row.run_at_ms) == ("ready", clock.now_ms())
    with pytest.raises(JobNotPromotableError):
        await pg.introspect.promote(due.id)
    with pytest.raises(JobNotFoundError):
        await pg.introspect.promote("nobody")


async def test_bulk_requeue_moves_the_oldest_per_free_key(
    pg: PostgresDriver, clock: FrozenClock
) -> None:
    for key in ["a", "b", "held"]:
        await pg.enqueue(req(key))
    await finish_all(pg, dead=True)
    clock.advance(5)
    for key in ["a", "held"]:
        await pg.enqueue(req(key))
    [a2, held2] = await pg.claim(opts())
    await pg.nack(a2.id, a2.ref, NackOptions(dead_letter=True))
    await pg.enqueue(req("held"))  # deduped onto the running one: the key stays held
    result = await pg.introspect.requeue_many(BulkFilter(state="dead"))
    assert (result.affected, result.remaining) == (2, 0)
    ready = (await pg.introspect.list(JobFilter(state="ready"))).rows
    assert sorted(r.idempotency_key for r in ready) == ["a", "b"]
    assert min(r.created_at_ms for r in ready) == clock.now_ms() - 5
    assert held2.idempotency_key == "held"
    with pytest.raises(JobNotRequeueableError):
        await pg.introspect.requeue_many(BulkFilter(state="ready"))


async def test_bulk_remove_and_promote_answer_affected_and_remaining(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any], clock: FrozenClock
) -> None:
    total = MAX_BULK_ROWS + 5
    await pg.enqueue_many([req(f"k{i}", run_at_ms=clock.now_ms() + 60_000) for i in range(total)])
    first = await pg.introspect.promote_many(BulkFilter(state="delayed"))
    assert (first.affected, first.remaining) == (MAX_BULK_ROWS, 5)
    second = await pg.introspect.promote_many(BulkFilter(state="delayed"))
    assert (second.affected, second.remaining) == (5, 0)
    gone = await pg.introspect.remove_many(BulkFilter(state="ready", name="send"))
    assert (gone.affected, gone.remaining) == (MAX_BULK_ROWS, 5)
    assert await pg_pool.fetchval("select count(*) from x_jobs") == 5
    with pytest.raises(JobNotRemovableError):
        await pg.introspect.remove_many(BulkFilter(state="running"))
    with pytest.raises(JobNotPromotableError):
        await pg.introspect.promote_many(BulkFilter(state="done"))


async def test_pauses_of_queues_and_tasks(pg: PostgresDriver) -> None:
    await pg.introspect.pause_queue("b")
    await pg.introspect.pause_queue("a")
    await pg.introspect.pause_queue("a")
    await pg.introspect.pause_task("nightly")
    assert await pg.introspect.paused_queues() == ["a", "b"]
    assert await pg.introspect.paused_tasks() == ["nightly"]
    await pg.introspect.resume_queue("a")
    await pg.introspect.resume_task("nightly")
    assert await pg.introspect.paused_queues() == ["b"]
    assert await pg.introspect.paused_tasks() == []


async def test_counters_roll_up_through_the_tiers_idempotently(
    pg: PostgresDriver, clock: FrozenClock
) -> None:
    start = clock.now_ms()
    for _ in range(3):
        await pg.enqueue(req("a"))
        [j] = await pg.claim(opts())
        assert await pg.ack(j.id, j.ref, duration_ms=10)
        clock.advance(60_000)
    assert [b.done for b in await pg.introspect.counters("send", start - 60_000)] == [1, 1, 1]
    clock.advance(86_400_000)
    folded = await pg.introspect.rollup_counters()
    assert folded == 3
    assert await pg.introspect.rollup_counters() == 0
    buckets = await pg.introspect.counters("send", 0)
    assert sum(b.done for b in buckets) == 3
    assert {b.width_ms for b in buckets} == {300_000}
    [totals] = await pg.introspect.counter_totals(0)
    assert (totals.done, totals.duration_ms) == (3, 30)
    clock.advance(40 * 86_400_000)
    assert await pg.introspect.rollup_counters() >= 1
    assert await pg.introspect.counters("send", 0) == []


async def test_task_fires_keep_the_latest_occurrence(
    pg: PostgresDriver, clock: FrozenClock
) -> None:
    await pg.introspect.record_task_fire("nightly", 2_000)
    await pg.introspect.record_task_fire("nightly", 1_000)
    await pg.introspect.record_task_fire("hourly", 500)
    fires = await pg.introspect.task_fires()
    assert [(f.task, f.occurrence_ms, f.fired_at_ms) for f in fires] == [
        ("hourly", 500, clock.now_ms()),
        ("nightly", 2_000, clock.now_ms()),
    ]


async def test_a_row_in_a_state_this_version_does_not_know_is_reported_by_its_code(
    pg: PostgresDriver,
) -> None:
    """What a newer release leaves behind after widening the states: a read names the row
    and its state (X_JOB_ROW_STATUS_UNKNOWN, 503 at the api) instead of passing it on."""
    job = await pg.enqueue(req("k-archived"))
    async with pg.pool.acquire() as conn:
        await conn.execute("alter table x_jobs drop constraint x_jobs_state_check")
        await conn.execute("update x_jobs set state = 'archived' where id = $1", job.id)
    with pytest.raises(JobRowStatusUnknownError) as unknown:
        await pg.introspect.get(job.id)
    assert unknown.value.code == "X_JOB_ROW_STATUS_UNKNOWN"
    assert unknown.value.meta["state"] == "archived"
    with pytest.raises(JobRowStatusUnknownError):
        await pg.introspect.list(JobFilter(limit=10))
    assert status_for(unknown.value.code) == 503
