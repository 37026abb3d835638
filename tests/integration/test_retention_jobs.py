"""``jobs_purge_target``: finished rows past their window go with their steps, in bounded
``skip locked`` batches; a live row, one an unpublished outbox row names, and one a running
backfill pass names stay (SEED § Retention sweeps are jobs too)."""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING, Any

import asyncpg
import pytest

from ujobs.errors import ConfigInvalidError
from ujobs.events.bus import events_purge_target
from ujobs.events.bus_postgres import PostgresEventBus
from ujobs.retention import jobs_purge_target, purge

if TYPE_CHECKING:
    Pool = asyncpg.Pool[Any]
else:
    Pool = asyncpg.Pool
T0 = 1_700_000_000_000
DAY = 86_400_000


@pytest.fixture
def pool(pg_pool: Pool) -> Pool:
    return pg_pool


_INSERT_JOB = """
insert into x_jobs (id, run_id, name, state, input, idempotency_key, max_attempts, run_at,
                    created_at, updated_at, finished_at)
values ($1, $2, 'j', $3, '{}', $1, 1, x_ts($4), x_ts($4), x_ts($4),
        case when $3 in ('done', 'failed', 'dead', 'cancelled') then x_ts($4) end)
"""
_INSERT_STEP = """
insert into x_job_steps (run_id, tenant_id, name, output, started_at, finished_at)
values ($1, '', $2, '1', x_ts($3), x_ts($3))
"""


async def job_row(
    pool: Pool, job_id: str, state: str, at_ms: int, *, run_id: str | None = None, steps: int = 1
) -> None:
    run = run_id or f"run-{job_id}"
    await pool.execute(_INSERT_JOB, job_id, run, state, at_ms)
    for n in range(steps):
        await pool.execute(_INSERT_STEP + " on conflict do nothing", run, f"s{n}", at_ms)


async def ids(pool: Pool) -> list[str]:
    return [r["id"] for r in await pool.fetch("select id from x_jobs order by id")]


async def step_runs(pool: Pool) -> list[str]:
    rows = await pool.fetch("select distinct run_id from x_job_steps order by run_id")
    return [r["run_id"] for r in rows]


async def test_done_goes_after_14_days_and_dead_failed_cancelled_after_90(pool: Pool) -> None:
    now = T0 + 200 * DAY
    await job_row(pool, "done-13d", "done", now - 13 * DAY)
    await job_row(pool, "done-15d", "done", now - 15 * DAY)
    for state in ("dead", "failed", "cancelled"):
        await job_row(pool, f"{state}-89d", state, now - 89 * DAY)
        await job_row(pool, f"{state}-91d", state, now - 91 * DAY)
    target = jobs_purge_target(executor=pool)
    assert target.name == "x_jobs"
    assert await target.count_expired(now) == 4
    removed = await target.purge_expired(now)
    assert (target.last.jobs, target.last.steps, target.last.leases) == (4, 4, 0)
    assert removed == 8
    assert await ids(pool) == ["cancelled-89d", "dead-89d", "done-13d", "failed-89d"]
    assert await step_runs(pool) == [
        "run-cancelled-89d",
        "run-dead-89d",
        "run-done-13d",
        "run-failed-89d",
    ]
    assert await target.purge_expired(now) == 0  # a replayed pass finds them gone


async def test_each_window_is_configurable_and_exactly_the_window_is_kept(pool: Pool) -> None:
    now = T0 + 10 * DAY
    await job_row(pool, "done-1h", "done", now - 3_600_000)
    await job_row(pool, "dead-1d", "dead", now - DAY)
    target = jobs_purge_target(executor=pool, done_retention_ms=3_600_000, dead_retention_ms=DAY)
    assert await target.purge_expired(now) == 0  # exactly at the window: kept
    assert await target.purge_expired(now + 1) == 4
    assert await ids(pool) == []
    for option in ("done_retention_ms", "dead_retention_ms", "batch_size", "max_batches"):
        bads: tuple[Any, ...] = (0, -1, 1.5, True)
        for bad in bads:
            with pytest.raises(ConfigInvalidError) as refused:
                jobs_purge_target(executor=pool, **{option: bad})
            assert refused.value.meta == {"option": option}


async def test_a_live_row_is_never_deleted_whatever_its_age(pool: Pool) -> None:
    old = T0 - 400 * DAY
    for state in ("ready", "delayed", "running", "suspended"):
        await job_row(pool, state, state, old)
    assert await jobs_purge_target(executor=pool).purge_expired(T0) == 0
    assert await ids(pool) == ["delayed", "ready", "running", "suspended"]
    assert len(await step_runs(pool)) == 4


async def test_a_done_row_whose_unique_for_period_holds_its_key_stays_until_it_ends(
    pool: Pool,
) -> None:
    """Purged, the row would free its key early: an enqueue would make a second run inside
    the period ``unique_for`` promises."""
    now = T0 + 100 * DAY
    await job_row(pool, "held-30d", "done", now - 15 * DAY)
    await job_row(pool, "held-10d", "done", now - 15 * DAY)
    await job_row(pool, "plain", "done", now - 15 * DAY)
    await pool.execute("update x_jobs set unique_for_ms = $1 where id = 'held-30d'", 30 * DAY)
    await pool.execute("update x_jobs set unique_for_ms = $1 where id = 'held-10d'", 10 * DAY)
    target = jobs_purge_target(executor=pool)
    assert await target.count_expired(now) == 2
    await target.purge_expired(now)
    assert await ids(pool) == ["held-30d"]
    assert await target.count_expired(now + 15 * DAY) == 1  # the period is over
    await target.purge_expired(now + 15 * DAY)
    assert await ids(pool) == []


async def test_a_child_stays_while_its_parent_is_live_unless_it_was_detached(
    pool: Pool,
) -> None:
    """A fan-in can outlast the first child's retention: the parent's wait reads every
    child's row when the last one ends, so a purged child would answer it as missing."""
    now = T0 + 100 * DAY
    old = now - 30 * DAY
    await job_row(pool, "parent-waiting", "suspended", old)
    await job_row(pool, "parent-done", "done", now)  # finished, but within its retention
    for child, parent, detached in (
        ("child-waited", "parent-waiting", False),
        ("child-detached", "parent-waiting", True),
        ("child-of-done", "parent-done", False),
    ):
        await job_row(pool, child, "done", old)
        await pool.execute(
            "update x_jobs set parent_id = $2, parent_detached = $3, parent_waits = true"
            " where id = $1",
            child,
            parent,
            detached,
        )
    target = jobs_purge_target(executor=pool)
    assert await target.count_expired(now) == 2
    await target.purge_expired(now)
    assert await ids(pool) == ["child-waited", "parent-done", "parent-waiting"]
    await pool.execute(
        "update x_jobs set state = 'done', finished_at = x_ts($1) where id = 'parent-waiting'", now
    )
    assert await target.count_expired(now) == 1  # its parent ended: the child goes
    await target.purge_expired(now)
    assert await ids(pool) == ["parent-done", "parent-waiting"]


async def test_a_row_an_unpublished_outbox_row_or_a_running_backfill_names_stays(
    pool: Pool,
) -> None:
    old = T0 - 100 * DAY
    await job_row(pool, "staged", "done", old)
    await pool.execute(
        "insert into x_outbox (id, run_id, name, queue, input, idempotency_key, max_attempts,"
        " staged_at) values ('staged', 'run-staged', 'j', 'default', '{}', 'k', 1, x_ts($1))",
        old,
    )
    await job_row(pool, "sweeping", "failed", old)
    await pool.execute(
        "insert into x_backfills (name, run_id, checksum, status, started_at)"
        " values ('b', 'run-sweeping', 'c', 'running', x_ts($1))",
        old,
    )
    await job_row(pool, "swept", "dead", old)
    await pool.execute(
        "insert into x_backfills (name, run_id, checksum, status, started_at)"
        " values ('b', 'run-swept', 'c', 'completed', x_ts($1))",
        old,
    )
    target = jobs_purge_target(executor=pool)
    assert await target.count_expired(T0) == 1
    await target.purge_expired(T0)
    assert await ids(pool) == ["staged", "sweeping"]
    await pool.execute("update x_outbox set published_at = x_ts($1)", T0)
    await pool.execute("update x_backfills set status = 'completed'")
    await target.purge_expired(T0)
    assert await ids(pool) == []
    assert await step_runs(pool) == []


async def test_steps_stay_while_a_row_of_the_run_still_stands(pool: Pool) -> None:
    await job_row(pool, "first", "done", T0 - 30 * DAY, run_id="shared-run", steps=2)
    await job_row(pool, "requeued", "done", T0 - DAY, run_id="shared-run", steps=0)
    target = jobs_purge_target(executor=pool)
    assert await target.purge_expired(T0) == 1
    assert await ids(pool) == ["requeued"]
    assert await step_runs(pool) == ["shared-run"]
    assert await target.purge_expired(T0 + 20 * DAY) == 3  # the last row takes both steps
    assert await step_runs(pool) == []


async def test_a_pass_runs_at_most_max_batches_of_batch_size(pool: Pool) -> None:
    for n in range(7):
        await job_row(pool, f"j{n}", "done", T0 - 30 * DAY - n, steps=0)
    bounded = jobs_purge_target(executor=pool, batch_size=2, max_batches=3)
    assert await bounded.purge_expired(T0) == 6
    assert await ids(pool) == ["j0"]  # oldest first
    assert await bounded.purge_expired(T0) == 1


async def test_orphan_steps_and_lapsed_leases_are_swept_after_the_batches(pool: Pool) -> None:
    await pool.execute(_INSERT_STEP, "run-of-a-dead-sweep", "s", T0 - DAY)
    await job_row(pool, "alive", "running", T0, steps=1)
    await pool.execute(
        "insert into x_job_leases (key, slot, holder, acquired_at, expires_at) values"
        " ('job:j', 0, 'lapsed', x_ts($1), x_ts($1)), ('job:j', 1, 'live', x_ts($1), x_ts($2))",
        T0 - 60_000,
        T0 + 60_000,
    )
    target = jobs_purge_target(executor=pool)
    assert await target.purge_expired(T0) == 2
    assert (target.last.steps, target.last.leases) == (1, 1)
    assert await step_runs(pool) == ["run-alive"]
    holders = [r["holder"] for r in await pool.fetch("select holder from x_job_leases")]
    assert holders == ["live"]


async def test_a_locked_row_is_skipped_not_waited_on(pool: Pool) -> None:
    await job_row(pool, "held", "done", T0 - 30 * DAY)
    await job_row(pool, "free", "done", T0 - 30 * DAY)
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("select 1 from x_jobs where id = 'held' for update")
        removed = await asyncio.wait_for(
            jobs_purge_target(executor=pool).purge_expired(T0), timeout=10
        )
    assert removed == 2  # the free row and its step
    assert await ids(pool) == ["held"]


async def test_two_sweeps_that_split_a_run_settle_its_steps_after_both_commit(pool: Pool) -> None:
    await job_row(pool, "a", "done", T0 - 30 * DAY, run_id="split", steps=2)
    await job_row(pool, "b", "done", T0 - 30 * DAY, run_id="split", steps=0)
    target = jobs_purge_target(executor=pool)
    async with pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        # The other sweep's batch: it deleted "b" and has not committed.
        await conn.execute("delete from x_jobs where id = 'b'")
        assert await target.purge_expired(T0) == 1  # "a" goes; "b" still stands for it
        assert await step_runs(pool) == ["split"]
        await tx.commit()
    # Once both committed, the next pass's sweep of runs with no row left takes the steps.
    assert await target.purge_expired(T0) == 2
    assert await step_runs(pool) == []


async def test_the_event_bus_is_a_target_deleting_in_batches(pool: Pool) -> None:
    bus = PostgresEventBus(pool)
    for n in range(3):
        await bus.publish("e", {"n": n}, ttl_ms=1)
    await bus.publish("kept", {}, ttl_ms=DAY)
    await asyncio.sleep(0.01)
    assert await bus.count_expired() == 3
    sweep = purge(name="sweep", targets=[events_purge_target(bus)], cron=None)
    assert await sweep.run_once() == {"x_job_events": 3}
    assert await bus.count_expired() == 0
    assert await pool.fetchval("select count(*) from x_job_events") == 1


class Rests:
    """``asyncio.sleep`` in the jobs target, recorded and not slept."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.slept: list[float] = []
        self._sleep = asyncio.sleep
        monkeypatch.setattr("ujobs.retention.jobs_target.asyncio.sleep", self.sleep)

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        await self._sleep(0)


async def test_a_sweep_rests_at_its_busy_pace_while_another_session_runs_a_statement(
    pool: Pool, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rests = Rests(monkeypatch)
    for n in range(3):
        await job_row(pool, f"q{n}", "done", T0 - 30 * DAY, steps=0)
    quiet = jobs_purge_target(executor=pool, batch_size=1, busy_rest_ratio=3)
    assert await quiet.purge_expired(T0) == 3
    assert len(rests.slept) == 3  # a rest after each full batch
    assert quiet.last.busy_rests == 0  # nobody else ran a statement: its own pace

    for n in range(3):
        await job_row(pool, f"b{n}", "done", T0 - 30 * DAY, steps=0)
    other = await asyncpg.connect(pg_dsn)  # a worker's claim, say, that takes its time
    running = asyncio.ensure_future(other.execute("select pg_sleep(5)"))
    try:
        async with asyncio.timeout(10):
            while not await pool.fetchval(
                "select count(*) from pg_stat_activity where query = 'select pg_sleep(5)'"
                " and state = 'active'"
            ):
                await asyncio.sleep(0.01)
        busy = jobs_purge_target(executor=pool, batch_size=1, busy_rest_ratio=3)
        assert await busy.purge_expired(T0) == 3
        assert busy.last.busy_rests == 3
        # rest_ratio 0 is batches back to back, busy or not: no rest, no question asked
        for n in range(2):
            await job_row(pool, f"z{n}", "done", T0 - 30 * DAY, steps=0)
        before = len(rests.slept)
        eager = jobs_purge_target(executor=pool, batch_size=1, rest_ratio=0)
        assert await eager.purge_expired(T0) == 2
        assert (len(rests.slept), eager.last.busy_rests) == (before, 0)
        # a busy ratio at or under rest_ratio: one pace whatever the load
        for n in range(2):
            await job_row(pool, f"o{n}", "done", T0 - 30 * DAY, steps=0)
        one_pace = jobs_purge_target(executor=pool, batch_size=1, rest_ratio=2, busy_rest_ratio=1)
        assert await one_pace.purge_expired(T0) == 2
        assert one_pace.last.busy_rests == 0
    finally:
        running.cancel()
        await other.close(timeout=5)
    for bad in (-1, math.nan, math.inf, True, "3"):
        with pytest.raises(ConfigInvalidError) as refused:
            jobs_purge_target(executor=pool, busy_rest_ratio=bad)  # type: ignore[arg-type]
        assert refused.value.meta == {"option": "busy_rest_ratio"}


async def test_a_sweep_rests_between_batches_as_long_as_rest_ratio_says(
    pool: Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(4):
        await job_row(pool, f"j{n}", "done", T0 - 30 * DAY, steps=0)
    target = jobs_purge_target(executor=pool, batch_size=1, rest_ratio=0)
    assert await target.purge_expired(T0) == 4
    for bad in (-1, math.nan, math.inf, True):
        with pytest.raises(ConfigInvalidError) as refused:
            jobs_purge_target(executor=pool, rest_ratio=bad)
        assert refused.value.meta == {"option": "rest_ratio"}
    rests = Rests(monkeypatch)
    for n in range(3):
        await job_row(pool, f"k{n}", "done", T0 - 30 * DAY, steps=0)
    resting = jobs_purge_target(executor=pool, batch_size=1, rest_ratio=2)
    assert await resting.purge_expired(T0) == 3
    assert len(rests.slept) == 3  # after each full batch; none after the empty one, none per state
    assert all(s > 0 for s in rests.slept)
