"""The worker on the Postgres driver: a drain of real rows, the registry row, fleet slots in
``x_job_leases``, a keyed refusal and a lease renewal on a frozen clock."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from tests.support.worker import T0, Gate, declare, registry_of, sample
from ujobs.clock import FrozenClock
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.execution.run import Run
from ujobs.lifecycle import Lifecycle
from ujobs.metrics import JobMetrics
from ujobs.worker import job_worker
from ujobs.worker.concurrency import job_lease_key, parse_holder


def _worker(driver: Any, *handles: Any, **kw: Any) -> Any:
    return job_worker(
        driver=driver,
        context=None,
        registry=registry_of(*handles),
        metrics=JobMetrics(CollectorRegistry()),
        lifecycle=Lifecycle(),
        close_driver=False,
        **kw,
    )


async def test_a_worker_drains_rows_and_keeps_its_registry_row(pg_pool: Any) -> None:
    driver = postgres_driver(pg_pool)
    done: list[int] = []

    async def body(run: Run[Any]) -> None:
        done.append(run.input.n)

    handle = declare(body)
    await driver.enqueue_many([handle.request({"n": n}) for n in range(40)])
    worker = _worker(driver, handle, concurrency=4)
    await worker.start()
    try:
        await worker.signals.wait("settled", lambda _: len(worker.signals.emitted("settled")) >= 40)
        (mine,) = await driver.introspect.workers()
        assert (mine.id, mine.slots) == (worker.id, 4)
    finally:
        await worker.stop()
    assert sorted(done) == list(range(40))
    assert sample(worker.metrics, "jobs_total", queue="default", outcome="ok") == 40
    assert await driver.introspect.workers() == []
    assert await pg_pool.fetchval("select count(*) from x_jobs where state <> 'done'") == 0


async def test_keyed_slots_live_in_x_job_leases_and_fail_refuses_a_busy_key(
    pg_pool: Any,
) -> None:
    driver = postgres_driver(pg_pool)
    gate = Gate()
    handle = declare(
        gate, concurrency={"key": lambda i: i.account, "limit": 1, "when_busy": "fail"}
    )
    first = (await driver.enqueue(handle.request({"n": 1, "account": "acct-1"}))).id
    busy = (await driver.enqueue(handle.request({"n": 2, "account": "acct-1"}))).id
    worker = _worker(driver, handle)
    await worker.run_once()
    await worker.signals.wait("settled")
    # One claim takes both rows; whichever acquires the key first holds it, the other is refused.
    (holder,) = await driver.leases.holders(job_lease_key(handle.name, "acct-1"))
    parsed = parse_holder(holder)
    assert parsed is not None, holder
    held, claim = parsed
    assert claim == 1
    assert held in (first, busy)
    refused = busy if held == first else first
    row = await driver.introspect.get(refused)
    assert row is not None
    assert row.state == "failed"
    assert row.last_error is not None
    assert "X_JOB_KEY_BUSY" in row.last_error
    assert worker.stats().refused == 1
    gate.open.set()
    await worker.join()
    assert await driver.leases.holders(job_lease_key(handle.name, "acct-1")) == []


async def test_the_heartbeat_renews_the_lease_on_the_frozen_clock(pg_pool: Any) -> None:
    clock = FrozenClock(T0)
    driver = postgres_driver(pg_pool, clock=clock)
    gate = Gate()
    handle = declare(gate)
    job_id = (await driver.enqueue(handle.request({"n": 1}, clock=clock))).id
    worker = _worker(driver, handle, clock=clock, visibility_timeout_ms=3_000)
    await worker.run_once()
    await gate.entered.wait()
    clock.advance(1_000)
    await worker.heartbeat_once()
    row = await driver.introspect.get(job_id)
    assert row is not None
    assert row.lease_expires_at_ms == T0 + 4_000
    gate.open.set()
    await worker.join()


async def test_claim_ahead_drains_once_each_and_stop_hands_the_buffer_back(pg_pool: Any) -> None:
    """Rows claimed beyond the free slots run once each at attempt 1; at a stop the ones still
    buffered go back to ready with the attempt the claim counted given back."""
    driver = postgres_driver(pg_pool)
    done: list[int] = []

    async def body(run: Run[Any]) -> None:
        done.append(run.input.n)

    handle = declare(body)
    await driver.enqueue_many([handle.request({"n": n}) for n in range(60)])
    worker = _worker(driver, handle, concurrency=4, claim_ahead=4)
    await worker.start()
    try:
        await worker.signals.wait("settled", lambda _: len(worker.signals.emitted("settled")) >= 60)
    finally:
        await worker.stop()
    assert sorted(done) == list(range(60))
    rows = await pg_pool.fetch("select state, attempt from x_jobs")
    assert {(r["state"], r["attempt"]) for r in rows} == {("done", 1)}

    gate = Gate()
    held = declare(gate, name="held")
    await driver.enqueue_many([held.request({"n": n}) for n in range(10)])
    stopped = _worker(driver, held, concurrency=2, claim_ahead=2)
    await stopped.start()
    await stopped.signals.wait("pass", lambda p: p.claimed == 4)
    assert len(stopped.prefetch) == 2
    stopping = stopped.stop()
    gate.open.set()
    await stopping
    rows = await pg_pool.fetch("select state, attempt from x_jobs where name = 'held'")
    assert (
        sorted((r["state"], r["attempt"]) for r in rows) == [("done", 1)] * 2 + [("ready", 0)] * 8
    )
