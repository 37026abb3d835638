"""A run's fleet slot released by its settle (``JobDriver.ack`` / ``nack`` ``slot``): the
``x_job_leases`` row of (key, holder) is deleted in the settle's own statement (ack.sql,
nack.sql and their settlements twins), so a slotted run pays no ``lease_release`` round.

Held here against a real Postgres: the settle deletes exactly its own holder's row (another
holder of the key, and the same holder's row of another key, survive); a refused settle (the
row no longer ours) still frees it; a settle whose statement fails keeps it, and the worker
then releases it on its own; a suspension (``step.sleep``) frees it as before; and two
workers sharing a keyed cap never run more than its limit at once."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from prometheus_client import CollectorRegistry

from tests.support.worker import T0, Gate, declare, registry_of
from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimedJob, ClaimOptions, ClaimRef, NackOptions, slot_holder
from ujobs.drivers.postgres.driver import PostgresDriver, postgres_driver
from ujobs.execution.run import Run
from ujobs.jobs.job import JobHandle
from ujobs.lifecycle import Lifecycle
from ujobs.metrics import JobMetrics
from ujobs.worker import job_worker
from ujobs.worker.concurrency import job_lease_key, lease_holder

VISIBILITY_MS = 30_000
OTHER = "other#1@elsewhere"
# A settle statement that fails: the row's update raises, so the whole statement rolls back.
_FAILING = (
    "create or replace function test_settle_fails() returns trigger language plpgsql as"
    " $$ begin raise exception 'settle refused by the test'; end $$;"
    " create trigger test_settle_fails before update on x_jobs for each row"
    " when (old.state = 'running' and new.state <> 'running' and old.name = 'fails')"
    " execute function test_settle_fails()"
)
_NOT_FAILING = (
    "drop trigger if exists test_settle_fails on x_jobs;"
    " drop function if exists test_settle_fails()"
)


def _keyed(limit: int, body: Any = None, name: str = "work") -> JobHandle[Any]:
    return declare(
        body or Gate(), name=name, concurrency={"key": lambda i: i.account, "limit": limit}
    )


def _claim(handle: JobHandle[Any], worker: str = "w1") -> ClaimOptions:
    conc = handle.concurrency
    return ClaimOptions(
        queues=("default",),
        limit=10,
        worker_id=worker,
        visibility_ms=VISIBILITY_MS,
        slots=((handle.name, conc.limit),),  # type: ignore[union-attr]
    )


async def _leases(pool: asyncpg.Pool[Any]) -> set[tuple[str, str]]:
    rows = await pool.fetch("select key, holder from x_job_leases")
    return {(r["key"], r["holder"]) for r in rows}


async def _one_slotted(
    driver: PostgresDriver, pool: asyncpg.Pool[Any], handle: JobHandle[Any], clock: FrozenClock
) -> tuple[ClaimedJob, set[tuple[str, str]]]:
    """One claimed row holding its slot, beside another holder of its key and its own holder
    id on another key: answers the row and the two rows that must survive its settle."""
    await driver.enqueue(handle.request({"n": 1, "account": "ep"}, clock=clock))
    (claimed,) = await driver.claim(_claim(handle))
    key = job_lease_key(handle.name, "ep")
    assert claimed.slot == key
    assert await driver.leases.acquire(key, OTHER, 2, VISIBILITY_MS)
    elsewhere = job_lease_key(handle.name, "elsewhere")
    assert await driver.leases.acquire(elsewhere, lease_holder(claimed), 2, VISIBILITY_MS)
    survivors = {(key, OTHER), (elsewhere, lease_holder(claimed))}
    assert await _leases(pool) == survivors | {(key, lease_holder(claimed))}
    return claimed, survivors


@pytest.fixture
async def failing_settles(pg_pool: asyncpg.Pool[Any]) -> AsyncIterator[None]:
    """Every settle of a ``fails`` row raises inside its statement (a trigger), for the test."""
    await pg_pool.execute(_FAILING)
    try:
        yield
    finally:
        await pg_pool.execute(_NOT_FAILING)


def test_the_holder_the_settle_releases_is_the_claims() -> None:
    claimed = ClaimedJob(
        id="odd/id", run_id="r", name="work", queue="default", input={}, tenant_id=None,
        idempotency_key="k", attempt=1, max_attempts=3, worker_id="w@1", claim=7,
        run_at_ms=T0, created_at_ms=T0, lease_expires_at_ms=T0,
    )  # fmt: skip
    assert slot_holder(claimed.id, claimed.ref) == lease_holder(claimed) == "odd%2Fid#7@w@1"


@pytest.mark.parametrize("settlements", [False, True])
async def test_an_ack_releases_exactly_its_own_holders_slot(
    pg_pool: asyncpg.Pool[Any], settlements: bool
) -> None:
    clock = FrozenClock(T0)
    driver = postgres_driver(pg_pool, clock=clock, settlements=settlements)
    claimed, survivors = await _one_slotted(driver, pg_pool, _keyed(limit=2), clock)
    assert await driver.ack(claimed.id, claimed.ref, duration_ms=1, slot=claimed.slot)
    assert await _leases(pg_pool) == survivors
    assert await pg_pool.fetchval("select state from x_jobs") == "done"
    await driver.close()


@pytest.mark.parametrize("settlements", [False, True])
@pytest.mark.parametrize(
    "options",
    [
        NackOptions(error="boom", run_at_ms=T0 + 1_000),  # retried
        NackOptions(error="boom", dead_letter=True),  # dead-lettered
        NackOptions(error="X_JOB_KEY_BUSY", fail=True, count=False),  # refused
        NackOptions(count=False, run_at_ms=T0 + 1_000),  # handed back
        NackOptions(park=True, count=False, run_at_ms=T0 + 60_000),  # suspended (step.sleep)
    ],
    ids=["retried", "dead", "refused", "handed-back", "suspended"],
)
async def test_every_nack_releases_exactly_its_own_holders_slot(
    pg_pool: asyncpg.Pool[Any], settlements: bool, options: NackOptions
) -> None:
    clock = FrozenClock(T0)
    driver = postgres_driver(pg_pool, clock=clock, settlements=settlements)
    claimed, survivors = await _one_slotted(driver, pg_pool, _keyed(limit=2), clock)
    assert await driver.nack(claimed.id, claimed.ref, options, slot=claimed.slot)
    assert await _leases(pg_pool) == survivors
    await driver.close()


async def test_a_settle_the_row_refuses_still_frees_its_slot(pg_pool: asyncpg.Pool[Any]) -> None:
    """The run is over either way: a settle that no longer owns its row (the lease lapsed and
    another claim took it) frees the slot its own claim held — and only that one."""
    clock = FrozenClock(T0)
    driver = postgres_driver(pg_pool, clock=clock)
    claimed, survivors = await _one_slotted(driver, pg_pool, _keyed(limit=2), clock)
    await pg_pool.execute("update x_jobs set claim = claim + 1, claimed_by = 'w2'")
    assert not await driver.ack(claimed.id, claimed.ref, slot=claimed.slot)
    assert await _leases(pg_pool) == survivors
    assert not await driver.nack(claimed.id, claimed.ref, NackOptions(error="x"), slot=OTHER)
    assert await _leases(pg_pool) == survivors  # no (key, holder) pair of its own: nothing
    await driver.close()


@pytest.mark.usefixtures("failing_settles")
async def test_a_settle_whose_statement_fails_keeps_its_slot(pg_pool: asyncpg.Pool[Any]) -> None:
    clock = FrozenClock(T0)
    driver = postgres_driver(pg_pool, clock=clock)
    claimed, survivors = await _one_slotted(driver, pg_pool, _keyed(limit=2, name="fails"), clock)
    mine = (claimed.slot, lease_holder(claimed))
    with pytest.raises(asyncpg.RaiseError):
        await driver.ack(claimed.id, claimed.ref, slot=claimed.slot)
    assert await _leases(pg_pool) == survivors | {mine}
    with pytest.raises(asyncpg.RaiseError):
        await driver.nack(claimed.id, claimed.ref, NackOptions(error="x"), slot=claimed.slot)
    assert await _leases(pg_pool) == survivors | {mine}
    assert await pg_pool.fetchval("select state from x_jobs") == "running"
    await driver.close()


class CountedReleases:
    """The lease store's releases (each a lease_release statement of its own)."""

    def __init__(self, driver: PostgresDriver) -> None:
        self.calls: list[tuple[str, str]] = []
        store = driver.leases
        original = store.release

        async def release(key: str, holder: str) -> None:
            self.calls.append((key, holder))
            await original(key, holder)

        store.release = release  # type: ignore[method-assign]


def _worker(driver: PostgresDriver, *handles: JobHandle[Any], **kw: Any) -> Any:
    return job_worker(
        driver=driver,
        context=None,
        registry=registry_of(*handles),
        metrics=JobMetrics(CollectorRegistry()),
        lifecycle=Lifecycle(),
        close_driver=False,
        **kw,
    )


async def test_a_worker_sends_no_release_of_its_own_for_a_settled_run(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    """Done, retried and suspended (``step.sleep``): each settle frees the run's slot; the lease
    store is never asked."""

    async def body(run: Run[Any]) -> None:
        if run.input.n == 1:
            raise RuntimeError("retry me")
        if run.input.n == 2:
            await run.step.sleep("1m")

    driver = postgres_driver(pg_pool)
    releases = CountedReleases(driver)
    handle = _keyed(limit=1, body=body)
    await driver.enqueue_many([handle.request({"n": n, "account": f"ep-{n}"}) for n in range(3)])
    worker = _worker(driver, handle, concurrency=4)
    await worker.run_once()
    await worker.join()
    states = await pg_pool.fetch("select input->>'n' as n, state from x_jobs order by 1")
    assert [(r["n"], r["state"]) for r in states] == [
        ("0", "done"),
        ("1", "ready"),
        ("2", "suspended"),
    ]
    assert await _leases(pg_pool) == set()
    assert releases.calls == []
    await driver.close()


@pytest.mark.usefixtures("failing_settles")
async def test_a_worker_whose_settle_fails_releases_the_slot_on_its_own(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    driver = postgres_driver(pg_pool)
    releases = CountedReleases(driver)

    async def body(run: Run[Any]) -> None:
        return None

    handle = _keyed(limit=1, body=body, name="fails")
    await driver.enqueue(handle.request({"n": 1, "account": "ep"}))
    worker = _worker(driver, handle)
    await worker.run_once()
    await worker.join()
    (row,) = await pg_pool.fetch("select id, claim, claimed_by, state from x_jobs")
    assert row["state"] == "running"  # the settle failed: its lease lapses, as ever
    holder = slot_holder(row["id"], ClaimRef(row["claimed_by"], row["claim"]))
    assert releases.calls == [(job_lease_key(handle.name, "ep"), holder)]
    assert await _leases(pg_pool) == set()
    await driver.close()


async def test_two_workers_never_run_more_than_the_cap(pg_pool: asyncpg.Pool[Any]) -> None:
    """Two workers (two drivers, one database) over three endpoints capped at 2 each: at no
    moment do more than 2 bodies of one endpoint run, every run settles and every slot is
    gone at the end, freed by the settles alone."""
    running: Counter[str] = Counter()
    most: Counter[str] = Counter()

    async def body(run: Run[Any]) -> None:
        account = run.input.account
        running[account] += 1
        most[account] = max(most[account], running[account])
        try:
            for _ in range(3):
                await asyncio.sleep(0)
            await asyncio.sleep(0.002)
        finally:
            running[account] -= 1

    handle = _keyed(limit=2, body=body)
    drivers = [postgres_driver(pg_pool) for _ in range(2)]
    releases = [CountedReleases(d) for d in drivers]
    await drivers[0].enqueue_many(
        [handle.request({"n": n, "account": f"ep-{n % 3}"}) for n in range(90)]
    )
    workers = [_worker(d, handle, concurrency=8, poll_interval_ms=20) for d in drivers]
    for w in workers:
        await w.start()
    while await pg_pool.fetchval("select count(*) from x_jobs where state = 'done'") < 90:
        await asyncio.sleep(0.05)
    for w in workers:
        await w.stop()
    assert set(most) == {"ep-0", "ep-1", "ep-2"}
    assert max(most.values()) <= 2
    assert await _leases(pg_pool) == set()
    assert [r.calls for r in releases] == [[], []]
    for d in drivers:
        await d.close()
