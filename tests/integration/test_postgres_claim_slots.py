"""Fleet slots taken by the claim itself (sql/queries/claim_slots.sql, ``ClaimOptions.slots``):
a row whose lease key was stored at enqueue holds its ``concurrency`` slot when the claim answers,
under lease_acquire.sql's rules (the limit across the rows of one claim and across concurrent
claimers, a lapsed slot reused), with ``lease_holder``'s id; the worker then sends no acquire,
the run's settle releases the slot (test_postgres_slot_settle.py), and a busy key still waits
or is refused through the lease store."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
from prometheus_client import CollectorRegistry

from tests.support.worker import T0, Gate, declare, registry_of
from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimedJob, ClaimOptions
from ujobs.drivers.postgres.driver import PostgresDriver, postgres_driver
from ujobs.jobs.job import JobHandle
from ujobs.lifecycle import Lifecycle
from ujobs.metrics import JobMetrics
from ujobs.worker import job_worker
from ujobs.worker.concurrency import job_cap_key, job_lease_key, lease_holder

VISIBILITY_MS = 30_000


def _keyed(limit: int, when_busy: str = "wait", body: Any = None) -> JobHandle[Any]:
    return declare(
        body or Gate(),
        concurrency={"key": lambda i: i.account, "limit": limit, "when_busy": when_busy},
    )


def _claim(handle: JobHandle[Any], worker: str, limit: int = 10, **kw: Any) -> ClaimOptions:
    conc = handle.concurrency
    cap = conc if isinstance(conc, int) else conc.limit  # type: ignore[union-attr]
    return ClaimOptions(
        queues=("default",),
        limit=limit,
        worker_id=worker,
        visibility_ms=VISIBILITY_MS,
        slots=((handle.name, cap),),
        **kw,
    )


async def _holders(pool: asyncpg.Pool[Any], key: str, now_ms: int) -> list[str]:
    rows = await pool.fetch(
        "select holder from x_job_leases where key = $1 and expires_at > x_ts($2) order by slot",
        key,
        now_ms,
    )
    return [r["holder"] for r in rows]


def _worker(driver: PostgresDriver, handle: JobHandle[Any], **kw: Any) -> Any:
    return job_worker(
        driver=driver,
        context=None,
        registry=registry_of(handle),
        metrics=JobMetrics(CollectorRegistry()),
        lifecycle=Lifecycle(),
        close_driver=False,
        **kw,
    )


class CountedAcquires:
    """Counts the lease store's acquires (each would be a lease_acquire statement)."""

    def __init__(self, driver: PostgresDriver) -> None:
        self.calls: list[str] = []
        store = driver.leases
        original = store.acquire

        async def acquire(key: str, holder: str, limit: int, ttl_ms: int) -> bool:
            self.calls.append(key)
            return await original(key, holder, limit, ttl_ms)

        store.acquire = acquire  # type: ignore[method-assign]


async def test_the_claim_takes_its_rows_slots_up_to_the_limit(pg_pool: asyncpg.Pool[Any]) -> None:
    clock = FrozenClock(T0)
    driver = postgres_driver(pg_pool, clock=clock)
    handle = _keyed(limit=2)
    inputs = [{"n": n, "account": "ep-1"} for n in range(3)] + [{"n": 3, "account": "ep-2"}]
    await driver.enqueue_many([handle.request(i, clock=clock) for i in inputs])  # COPY
    await driver.enqueue(handle.request({"n": 4, "account": "ep-3"}, clock=clock))  # single
    stored = await pg_pool.fetch("select slot_key from x_jobs order by seq")
    assert [r["slot_key"] for r in stored] == [
        job_lease_key(handle.name, a) for a in ("ep-1", "ep-1", "ep-1", "ep-2", "ep-3")
    ]
    claimed = await driver.claim(_claim(handle, "w1"))
    assert len(claimed) == 5
    by_n = {c.input["n"]: c for c in claimed}
    ep1 = job_lease_key(handle.name, "ep-1")
    # The first two of ep-1 in hand-out order hold its two slots; the third is left to the
    # worker (it will wait); ep-2 and ep-3 hold theirs.
    assert [by_n[n].slot for n in range(5)] == [
        ep1,
        ep1,
        None,
        job_lease_key(handle.name, "ep-2"),
        job_lease_key(handle.name, "ep-3"),
    ]
    assert await _holders(pg_pool, ep1, T0) == [lease_holder(by_n[0]), lease_holder(by_n[1])]
    expires = await pg_pool.fetchval(
        "select x_ms(max(expires_at)) from x_job_leases where key = $1", ep1
    )
    assert expires == T0 + VISIBILITY_MS
    await driver.close()


async def test_rows_the_claim_gives_no_slot(pg_pool: asyncpg.Pool[Any]) -> None:
    """An id lease_holder() would percent-encode, a job not in ``slots``, no stored key
    (enqueued before 0032): each answers ``slot=None``; a row claimed ahead holds its slot."""
    clock = FrozenClock(T0)
    driver = postgres_driver(pg_pool, clock=clock)
    handle = _keyed(limit=5)
    await driver.enqueue(handle.request({"n": 0, "account": "a"}, clock=clock, job_id="odd/id"))
    await driver.enqueue(handle.request({"n": 1, "account": "a"}, clock=clock))
    await driver.enqueue(handle.request({"n": 2, "account": "a"}, clock=clock))
    await driver.enqueue(handle.request({"n": 3, "account": "a"}, clock=clock))
    await pg_pool.execute("update x_jobs set slot_key = null where input->>'n' = '3'")
    claimed = await driver.claim(_claim(handle, "w1", ahead_after=3))
    slots = {c.input["n"]: c.slot for c in claimed}
    key = job_lease_key(handle.name, "a")
    assert slots == {0: None, 1: key, 2: key, 3: None}
    await driver.enqueue(handle.request({"n": 5, "account": "a"}, clock=clock))
    (ahead,) = await driver.claim(_claim(handle, "w1", ahead_after=0))
    assert (ahead.ahead, ahead.slot) == (True, key)
    # Not asked to take any: none taken.
    await driver.enqueue(handle.request({"n": 4, "account": "b"}, clock=clock))
    plain = ClaimOptions(queues=("default",), limit=5, worker_id="w2", visibility_ms=1_000)
    (row,) = await driver.claim(plain)
    assert row.slot is None
    assert await _holders(pg_pool, job_lease_key(handle.name, "b"), T0) == []
    await driver.close()


async def test_concurrent_claimers_never_exceed_the_limit(pg_pool: asyncpg.Pool[Any]) -> None:
    clock = FrozenClock(T0)
    drivers = [postgres_driver(pg_pool, clock=clock) for _ in range(2)]
    handle = _keyed(limit=2)
    for round_ in range(5):
        account = f"ep-{round_}"
        await drivers[0].enqueue_many(
            [
                handle.request({"n": round_ * 100 + n, "account": account}, clock=clock)
                for n in range(8)
            ]
        )
        got = await asyncio.gather(
            *(d.claim(_claim(handle, f"w{i}", limit=4)) for i, d in enumerate(drivers))
        )
        held = [c for rows in got for c in rows if c.slot is not None]
        key = job_lease_key(handle.name, account)
        assert len(held) <= 2
        live = await _holders(pg_pool, key, T0)
        assert len(live) <= 2
        assert sorted(live) == sorted(lease_holder(c) for c in held)
    for d in drivers:
        await d.close()


async def test_a_lapsed_slot_is_taken_over_and_a_live_one_is_not(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    clock = FrozenClock(T0)
    driver = postgres_driver(pg_pool, clock=clock)
    handle = declare(Gate(), concurrency=1)  # a plain cap: job:<name>
    key = job_cap_key(handle.name)
    await pg_pool.execute(
        "insert into x_job_leases (key, slot, holder, acquired_at, expires_at)"
        " values ($1, 0, 'gone#1@dead', x_ts($2), x_ts($2))",
        key,
        T0 - 1,
    )
    await driver.enqueue(handle.request({"n": 1}, clock=clock))
    (first,) = await driver.claim(_claim(handle, "w1"))
    assert first.slot == key
    assert await _holders(pg_pool, key, T0) == [lease_holder(first)]
    await driver.enqueue(handle.request({"n": 2}, clock=clock))
    (second,) = await driver.claim(_claim(handle, "w2"))
    assert second.slot is None  # the cap is held: the worker's lease store path decides
    await driver.close()


async def test_a_dead_workers_slot_frees_by_its_ttl(pg_pool: asyncpg.Pool[Any]) -> None:
    """Worker w1 claims (taking the slot) and dies; after the visibility timeout the row's lease
    and its slot have both lapsed, and the next claim takes both."""
    clock = FrozenClock(T0)
    driver = postgres_driver(pg_pool, clock=clock)
    handle = _keyed(limit=1)
    await driver.enqueue(handle.request({"n": 1, "account": "ep"}, clock=clock))
    (dead,) = await driver.claim(_claim(handle, "w1"))
    key = job_lease_key(handle.name, "ep")
    assert dead.slot == key
    clock.advance(VISIBILITY_MS - 1)
    assert await driver.claim(_claim(handle, "w2")) == []
    clock.advance(1)
    (again,) = await driver.claim(_claim(handle, "w2"))
    assert (again.id, again.claim, again.slot) == (dead.id, 2, key)
    assert await _holders(pg_pool, key, clock.now_ms()) == [lease_holder(again)]
    await driver.close()


async def test_the_worker_runs_on_the_claims_slot_and_releases_it(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    driver = postgres_driver(pg_pool)
    acquires = CountedAcquires(driver)
    gate = Gate()
    handle = _keyed(limit=1, body=gate)
    await driver.enqueue_many([handle.request({"n": n, "account": f"ep-{n}"}) for n in range(3)])
    worker = _worker(driver, handle, concurrency=4)
    await worker.run_once()
    while len(gate.started) < 3:
        await asyncio.sleep(0.01)
    held = await pg_pool.fetch("select key, holder from x_job_leases order by key")
    assert [r["key"] for r in held] == [job_lease_key(handle.name, f"ep-{n}") for n in range(3)]
    assert acquires.calls == []  # no lease_acquire: the claim took all three
    gate.open.set()
    await worker.join()
    assert await pg_pool.fetchval("select count(*) from x_job_leases") == 0
    assert await pg_pool.fetchval("select count(*) from x_jobs where state = 'done'") == 3
    await driver.close()


async def test_a_busy_key_still_waits_or_is_refused(pg_pool: asyncpg.Pool[Any]) -> None:
    driver = postgres_driver(pg_pool)
    waits, fails = (
        _keyed(limit=1),
        declare(
            Gate(),
            name="fails",
            concurrency={"key": lambda i: i.account, "limit": 1, "when_busy": "fail"},
        ),
    )
    for handle in (waits, fails):
        key = job_lease_key(handle.name, "ep")
        assert await driver.leases.acquire(key, "other#1@elsewhere", 1, 60_000)
    acquires = CountedAcquires(driver)
    for handle in (waits, fails):
        key = job_lease_key(handle.name, "ep")
        job_id = (await driver.enqueue(handle.request({"n": 1, "account": "ep"}))).id
        worker = _worker(driver, handle)
        await worker.run_once()
        await worker.join()
        row = await driver.introspect.get(job_id)
        assert row is not None
        claims = await pg_pool.fetchval("select claim from x_jobs where id = $1", job_id)
        if handle is waits:  # a key with no room: never claimed, nothing to hand back
            assert (row.state, row.attempt, claims, worker.stats().waited) == ("ready", 0, 0, 0)
        else:  # claimed to be refused, through the lease store
            assert (row.state, claims) == ("failed", 1)
            assert "X_JOB_KEY_BUSY" in (row.last_error or "")
        assert await driver.leases.holders(key) == ["other#1@elsewhere"]
    assert len(acquires.calls) == 1  # the refused run's: the claim had no room to give it
    await driver.close()


async def test_a_key_that_changed_since_the_enqueue_takes_the_inputs_key(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    driver = postgres_driver(pg_pool)
    gate = Gate()
    handle = _keyed(limit=1, body=gate)
    await driver.enqueue(handle.request({"n": 1, "account": "now"}))
    stale = job_lease_key(handle.name, "then")
    await pg_pool.execute("update x_jobs set slot_key = $1", stale)
    worker = _worker(driver, handle)
    await worker.run_once()
    await gate.entered.wait()
    # The run holds the input's key now, and its row says so: its settle releases that one.
    claimed: ClaimedJob = next(iter(worker.held.values())).claimed
    assert claimed.slot == job_lease_key(handle.name, "now")
    assert await driver.leases.holders(stale) == []
    assert await driver.leases.holders(job_lease_key(handle.name, "now")) == [lease_holder(claimed)]
    gate.open.set()
    await worker.join()
    assert await pg_pool.fetchval("select count(*) from x_job_leases") == 0
    await driver.close()


async def test_a_row_claimed_ahead_holds_its_slot_and_gives_it_back_unstarted(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    driver = postgres_driver(pg_pool)
    gate = Gate()
    handle = _keyed(limit=1, body=gate)
    await driver.enqueue_many([handle.request({"n": n, "account": f"ep-{n}"}) for n in range(6)])
    worker = _worker(driver, handle, concurrency=2, claim_ahead=2)
    await worker.start()
    await worker.signals.wait("pass", lambda p: p.claimed == 4)
    assert len(worker.prefetch) == 2
    # Two running, two buffered: all four hold their endpoint's slot from the claim.
    assert await pg_pool.fetchval("select count(*) from x_job_leases") == 4
    stopping = worker.stop()
    gate.open.set()
    await stopping
    assert await pg_pool.fetchval("select count(*) from x_job_leases") == 0
    states = await pg_pool.fetch("select state, count(*) as n from x_jobs group by state")
    assert {r["state"]: r["n"] for r in states} == {"done": 2, "ready": 4}
    await driver.close()


async def test_a_key_with_no_room_is_not_claimed_and_moves_back(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    """One hot key's backlog (one endpoint's deliveries): a claim hands out only the rows its
    key has room for, and the rows it could not are left unclaimed and made due now, behind
    the other keys' rows, instead of being claimed and handed back one lease round each."""
    clock = FrozenClock(T0)
    driver = postgres_driver(pg_pool, clock=clock)
    handle = _keyed(limit=2)
    hot = [{"n": n, "account": "hot"} for n in range(5)]
    await driver.enqueue_many([handle.request(i, clock=clock) for i in hot])
    clock.advance(10)
    await driver.enqueue(handle.request({"n": 8, "account": "cold"}, clock=clock))
    hot_key, cold_key = job_lease_key(handle.name, "hot"), job_lease_key(handle.name, "cold")
    assert await driver.leases.acquire(hot_key, "other#1@elsewhere", 2, 60_000)
    waits = frozenset({handle.name})
    clock.advance(10)
    claimed = await driver.claim(_claim(handle, "w1", limit=4, ahead_after=1, slots_wait=waits))
    # The one room left on the hot key; the next three hot rows move back behind the cold one.
    assert [(c.input["n"], c.slot, c.ahead) for c in claimed] == [(0, hot_key, False)]
    moved = await pg_pool.fetch(
        "select input->>'n' as n, state, claim, attempt, x_ms(run_at) as run_at from x_jobs"
        " where input->>'account' = 'hot' and x_ms(run_at) = $1 order by seq",
        T0 + 20,
    )
    assert [(r["n"], r["state"], r["claim"], r["attempt"]) for r in moved] == [
        (str(n), "ready", 0, 0) for n in (1, 2, 3)
    ]
    clock.advance(10)
    claimed = await driver.claim(_claim(handle, "w2", limit=4, slots_wait=waits))
    # Hot row 4, then the cold row, then the rows moved back: the cold row is not held behind.
    assert [(c.input["n"], c.slot) for c in claimed] == [(8, cold_key)]
    # A freed slot lets the oldest hot row in; without the wait list every row is handed out.
    await driver.leases.release(hot_key, "other#1@elsewhere")
    (next_row,) = await driver.claim(_claim(handle, "w3", slots_wait=waits))
    assert (next_row.input["n"], next_row.slot) == (3, hot_key)  # moved back first, due first
    rest = await driver.claim(_claim(handle, "w4"))
    assert sorted((c.input["n"], c.slot) for c in rest) == [(n, None) for n in (1, 2, 4)]
    await driver.close()


async def test_a_lapsed_run_of_a_full_key_is_handed_out_again(pg_pool: asyncpg.Pool[Any]) -> None:
    """A row whose lease lapsed is re-claimed even when its key has no room: the lapse must be
    handed out (or buried) whatever the key holds; its worker then waits on the slot."""
    clock = FrozenClock(T0)
    driver = postgres_driver(pg_pool, clock=clock)
    handle = _keyed(limit=1)
    waits = frozenset({handle.name})
    await driver.enqueue(handle.request({"n": 1, "account": "ep"}, clock=clock))
    (first,) = await driver.claim(_claim(handle, "w1", slots_wait=waits))
    key = job_lease_key(handle.name, "ep")
    await pg_pool.execute(
        "update x_job_leases set expires_at = x_ts($1) where key = $2", T0 + 10 * VISIBILITY_MS, key
    )
    clock.advance(VISIBILITY_MS)
    (again,) = await driver.claim(_claim(handle, "w2", slots_wait=waits))
    assert (again.id, again.claim, again.slot) == (first.id, 2, None)
    await driver.close()
