"""The relay against real Postgres: order, a failed publish, the claim as a lease, the fences,
a pass that throws, and the two relays that must never publish one row twice."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import pytest

from tests.support.outbox import (
    Billing,
    Pool,
    Wired,
    billing_jobs,
    job_rows,
    outbox_rows,
    relay_for,
    wire,
)
from ujobs.clock import FrozenClock
from ujobs.context import transaction
from ujobs.drivers.base import Enqueued
from ujobs.jobs.enqueue_target import jobs_facade
from ujobs.lifecycle import Deadline, Lifecycle
from ujobs.outbox import OutboxRecord, RelayPass, postgres_outbox_store

T0 = 1_700_000_000_000
LEASE = 30_000

# A real failed publish: the database refuses the FIRST insert of one job name (a sequence is
# not transactional, so the refusal is not rolled back with the failed statement).
FAIL_FIRST_INSERT = """
create sequence fail_seq;
create function fail_first_insert() returns trigger language plpgsql as $$
begin
  if new.name = TG_ARGV[0] and nextval('fail_seq') = 1 then
    raise exception 'publish refused (test)';
  end if;
  return new;
end $$;
create trigger fail_first_insert before insert on x_jobs
  for each row execute function fail_first_insert('{name}');
"""
# The database outlives the test (pg_dsn empties rows, not schema): take it all out again.
UNDO_FAIL_FIRST_INSERT = """
drop trigger if exists fail_first_insert on x_jobs;
drop function if exists fail_first_insert();
drop sequence if exists fail_seq;
"""


@pytest.fixture
async def refuse_first_insert(pg_pool: Pool) -> AsyncIterator[Callable[[str], Awaitable[None]]]:
    """``await refuse_first_insert("charge_card")``: the first publish of that job fails."""

    async def install(name: str) -> None:
        await pg_pool.execute(UNDO_FAIL_FIRST_INSERT + FAIL_FIRST_INSERT.format(name=name))

    yield install
    await pg_pool.execute(UNDO_FAIL_FIRST_INSERT)


async def _stage_orders(pool: Pool, billing: Billing, orders: list[str]) -> None:
    """One transaction per order: its invoice, then its charge."""
    for order in orders:
        async with pool.acquire() as conn, transaction(conn):
            await billing.create_invoice.enqueue({"order": order})
            await billing.charge_card.enqueue({"order": order})


@pytest.fixture
def billing() -> Billing:
    return billing_jobs()


async def test_invoice_then_charge_are_published_in_staging_order(
    pg_pool: Pool, billing: Billing
) -> None:
    wired = wire(pg_pool)
    await _stage_orders(pg_pool, billing, ["o1", "o2"])
    result = await relay_for(wired).run_once()
    names = [(j["name"], j["input"]) for j in await job_rows(pg_pool)]
    assert names == [
        ("create_invoice", '{"order": "o1"}'),
        ("charge_card", '{"order": "o1"}'),
        ("create_invoice", '{"order": "o2"}'),
        ("charge_card", '{"order": "o2"}'),
    ]
    assert result.published == [r["id"] for r in await outbox_rows(pg_pool)]


async def test_a_failed_publish_stops_the_batch_and_releases_the_rest_at_once(
    pg_pool: Pool,
    billing: Billing,
    caplog: pytest.LogCaptureFixture,
    refuse_first_insert: Callable[[str], Awaitable[None]],
) -> None:
    wired = wire(pg_pool)
    await refuse_first_insert("charge_card")
    await _stage_orders(pg_pool, billing, ["o1", "o2"])
    staged = [r["id"] for r in await outbox_rows(pg_pool)]
    relay = relay_for(wired)

    first = await relay.run_once()
    assert first.published == staged[:1]  # the invoice of o1
    assert first.failed == staged[1]  # the charge of o1
    assert first.released == 3
    # Nothing behind the failure overtook it: not o2's invoice, not the charge.
    assert [j["name"] for j in await job_rows(pg_pool)] == ["create_invoice"]
    rows = await outbox_rows(pg_pool)
    assert [r["claimed_by"] for r in rows[1:]] == [None, None, None]
    assert any(r.getMessage() == "jobs.outbox.publish-failed" for r in caplog.records)
    assert relay.delay_ms == relay.interval_ms  # released rows wait an interval, not a lease

    second = await relay.run_once()
    assert second.published == staged[1:]
    assert [(j["name"], j["input"]) for j in await job_rows(pg_pool)] == [
        ("create_invoice", '{"order": "o1"}'),
        ("charge_card", '{"order": "o1"}'),
        ("create_invoice", '{"order": "o2"}'),
        ("charge_card", '{"order": "o2"}'),
    ]


async def test_a_failed_first_publish_publishes_nothing_of_the_transaction(
    pg_pool: Pool, billing: Billing, refuse_first_insert: Callable[[str], Awaitable[None]]
) -> None:
    wired = wire(pg_pool)
    await refuse_first_insert("create_invoice")
    await _stage_orders(pg_pool, billing, ["o1"])
    relay = relay_for(wired)
    first = await relay.run_once()
    assert (first.published, first.released) == ([], 2)
    assert await job_rows(pg_pool) == []
    await relay.run_once()
    assert [j["name"] for j in await job_rows(pg_pool)] == ["create_invoice", "charge_card"]


async def test_two_relays_polling_one_table_never_publish_a_row_twice(
    pg_dsn: str, pg_pool: Pool, billing: Billing
) -> None:
    wired = wire(pg_pool)
    requests = [billing.create_invoice.request({"order": f"o{n}"}) for n in range(240)]
    async with pg_pool.acquire() as conn, transaction(conn):
        await jobs_facade().enqueue_many(requests)
    other_pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    assert other_pool is not None
    # Every publish the driver answered, per relay, deduped or not: a row published twice
    # would show here even though the id dedupe keeps x_jobs at one row per id.
    publishes: dict[str, list[str]] = {"A": [], "B": []}

    def recorder(relay_id: str) -> Any:
        async def record(row: OutboxRecord, answer: Enqueued) -> None:
            publishes[relay_id].append(row.id)

        return record

    try:
        other = Wired(wired.driver, postgres_outbox_store(executor=other_pool))
        relays = [
            relay_for(wired, batch_size=7, relay_id="A", on_published=recorder("A")),
            relay_for(other, batch_size=7, relay_id="B", on_published=recorder("B")),
        ]

        async def drive(relay: Any) -> None:
            idle = 0
            while idle < 3:
                result: RelayPass = await relay.run_once()
                idle = idle + 1 if not result.claimed else 0

        await asyncio.gather(*(drive(r) for r in relays))
    finally:
        await other_pool.close()
    assert publishes["A"], "both relays should have taken a share"
    assert publishes["B"], "both relays should have taken a share"
    everything = publishes["A"] + publishes["B"]
    assert len(everything) == len(set(everything)) == 240
    assert len(await job_rows(pg_pool)) == 240


async def test_a_claim_holds_rows_for_its_lease_then_another_relay_may_take_them(
    pg_pool: Pool, billing: Billing
) -> None:
    wire(pg_pool)
    await _stage_orders(pg_pool, billing, ["o1"])
    wired = wire(pg_pool)
    store = wired.store
    held = await store.claim("A:1", 10, now_ms=T0, lease_ms=LEASE)
    assert [r.claimed_by for r in held] == ["A:1", "A:1"]
    assert await store.claim("B:1", 10, now_ms=T0 + LEASE - 1, lease_ms=LEASE) == []
    taken = await store.claim("B:1", 10, now_ms=T0 + LEASE, lease_ms=LEASE)
    assert [r.id for r in taken] == [r.id for r in held]


async def test_a_stalled_relays_late_release_and_mark_touch_nothing(
    pg_pool: Pool, billing: Billing
) -> None:
    wired = wire(pg_pool)
    await _stage_orders(pg_pool, billing, ["o1", "o2"])
    ids = [r["id"] for r in await outbox_rows(pg_pool)]

    # Relay A claims at T0, publishes its first row and stalls before the mark.
    a_stalled = asyncio.Event()
    a_resume = asyncio.Event()

    async def stall_a(record: OutboxRecord, answer: Enqueued) -> None:
        a_stalled.set()
        await a_resume.wait()

    relay_a = relay_for(wired, clock=FrozenClock(T0), relay_id="A", on_published=stall_a)
    a_pass = asyncio.ensure_future(relay_a.run_once())
    await asyncio.wait_for(a_stalled.wait(), 10)

    # Its lease lapses; relay B reclaims the batch and is mid-publish on the first row.
    b_stalled = asyncio.Event()
    b_resume = asyncio.Event()

    async def stall_b(record: OutboxRecord, answer: Enqueued) -> None:
        b_stalled.set()
        await b_resume.wait()

    relay_b = relay_for(wired, clock=FrozenClock(T0 + LEASE), relay_id="B", on_published=stall_b)
    b_pass = asyncio.ensure_future(relay_b.run_once())
    await asyncio.wait_for(b_stalled.wait(), 10)
    b_token = (await outbox_rows(pg_pool))[0]["claimed_by"]
    assert b_token.startswith("B:")

    # A wakes: its mark is refused, so it owns nothing and stops; its late release is a no-op.
    a_resume.set()
    a_result = await asyncio.wait_for(a_pass, 10)
    assert a_result.lost == ids[0]
    assert a_result.published == []
    a_token = a_result.claimant
    assert await wired.store.release(ids, a_token) == 0
    assert not await wired.store.mark_published(ids[1], a_token, now_ms=T0 + 1)
    rows = await outbox_rows(pg_pool)
    assert [r["claimed_by"] for r in rows] == [b_token] * 4
    assert [r["published_at_ms"] for r in rows] == [None] * 4
    # A third relay finds nothing to take: B's claim is a fresh lease.
    assert (await relay_for(wired, clock=FrozenClock(T0 + LEASE + 1)).run_once()).claimed == []

    b_resume.set()
    b_result = await asyncio.wait_for(b_pass, 10)
    assert b_result.published == ids
    assert len(await job_rows(pg_pool)) == 4


async def test_a_pass_that_throws_is_logged_and_the_loop_rearms(
    pg_dsn: str, pg_pool: Pool, billing: Billing, caplog: pytest.LogCaptureFixture
) -> None:
    wired = wire(pg_pool)
    # The relay's own pool gives up on a lock at once, so a held table lock fails its claim.
    relay_pool = await asyncpg.create_pool(
        pg_dsn, min_size=1, max_size=2, server_settings={"lock_timeout": "20"}
    )
    assert relay_pool is not None
    relay = relay_for(
        Wired(wired.driver, postgres_outbox_store(executor=relay_pool)),
        interval_ms=5,
        idle_poll_max_ms=20,
    )
    try:
        async with pg_pool.acquire() as locker:
            tx = locker.transaction()
            await tx.start()
            await locker.execute("lock table x_outbox in access exclusive mode")
            await relay.start()
            failed = await relay.signals.wait("tick-failed")
            assert isinstance(failed, asyncpg.LockNotAvailableError)
            await tx.rollback()
        assert any(r.getMessage() == "jobs.outbox.tick-failed" for r in caplog.records)
        await _stage_orders(pg_pool, billing, ["o1"])
        await relay.signals.wait("pass", lambda p: len(p.published) == 2)
        assert relay.running
    finally:
        await relay.stop()
        await relay_pool.close()
    assert [j["name"] for j in await job_rows(pg_pool)] == ["create_invoice", "charge_card"]


async def test_idle_backoff_doubles_to_the_ceiling_and_work_brings_it_back(
    pg_pool: Pool, billing: Billing
) -> None:
    wired = wire(pg_pool)
    relay = relay_for(wired, batch_size=2)
    delays = []
    for _ in range(6):
        await relay.run_once()
        delays.append(relay.delay_ms)
    assert delays == [200, 400, 800, 1600, 2000, 2000]  # 30 claims per idle minute, unproven

    await _stage_orders(pg_pool, billing, ["o1"])  # two rows: a FULL batch passes again at once
    await relay.run_once()
    assert relay.delay_ms == 0
    await _stage_orders(pg_pool, billing, ["o2"])
    billing_one = billing.create_invoice
    async with pg_pool.acquire() as conn, transaction(conn):
        await billing_one.enqueue({"order": "o3"})
    await relay.run_once()
    assert relay.delay_ms == 0
    await relay.run_once()  # one row of two: work, so an interval
    assert relay.delay_ms == 200
    await relay.run_once()  # empty again: the doubling starts over
    assert relay.delay_ms == 200
    await relay.run_once()
    assert relay.delay_ms == 400

    declared = relay_for(wired, idle_poll_max_ms=700)
    for _ in range(4):
        await declared.run_once()
    assert declared.delay_ms == 700


async def test_stop_joins_the_pass_in_flight(pg_pool: Pool, billing: Billing) -> None:
    wired = wire(pg_pool)
    entered = asyncio.Event()
    gate = asyncio.Event()

    async def hold(record: OutboxRecord, answer: Enqueued) -> None:
        entered.set()
        await gate.wait()

    relay = relay_for(wired, interval_ms=5, idle_poll_max_ms=10, on_published=hold)
    await relay.start()
    await relay.start()  # safe twice
    await _stage_orders(pg_pool, billing, ["o1"])
    await asyncio.wait_for(entered.wait(), 10)
    stopping = asyncio.ensure_future(relay.stop())
    for _ in range(20):
        await asyncio.sleep(0)
    assert not stopping.done(), "stop() returned while a publish was still waiting its mark"
    gate.set()
    await asyncio.wait_for(stopping, 10)
    rows = await outbox_rows(pg_pool)
    assert rows[0]["published_at_ms"] is not None  # marked before stop() returned
    assert rows[1]["published_at_ms"] is not None  # the pass in flight ran to its end
    assert not relay.running
    await relay.stop()  # safe twice


async def test_a_shutdown_deadline_bounds_a_manual_stop_already_waiting(
    pg_pool: Pool, billing: Billing, caplog: pytest.LogCaptureFixture
) -> None:
    wired = wire(pg_pool)
    entered = asyncio.Event()

    async def hang(record: OutboxRecord, answer: Enqueued) -> None:
        entered.set()
        await asyncio.Event().wait()

    lifecycle = Lifecycle()
    relay = relay_for(wired, interval_ms=5, on_published=hang, lifecycle=lifecycle)
    await relay.start()
    await _stage_orders(pg_pool, billing, ["o1"])
    await asyncio.wait_for(entered.wait(), 10)
    manual = asyncio.ensure_future(relay.stop())  # no deadline: would wait forever
    for _ in range(10):
        await asyncio.sleep(0)
    assert not manual.done()
    await asyncio.wait_for(lifecycle.drain(deadline_ms=50), 10)  # the late, earlier deadline
    await asyncio.wait_for(manual, 10)
    assert relay.signals.emitted("stopped") == [True]
    assert any(r.getMessage() == "jobs.outbox.drain-abandoned" for r in caplog.records)
    # The abandoned row was published but never marked: it waits out its lease, and its
    # republish will meet the job already made.
    rows = await outbox_rows(pg_pool)
    assert rows[0]["published_at_ms"] is None
    assert rows[0]["claimed_by"] is not None
    assert lifecycle.hook_count == 0


async def test_the_earliest_of_two_stop_deadlines_wins(pg_pool: Pool, billing: Billing) -> None:
    wired = wire(pg_pool)
    entered = asyncio.Event()

    async def hang(record: OutboxRecord, answer: Enqueued) -> None:
        entered.set()
        await asyncio.Event().wait()

    relay = relay_for(wired, interval_ms=5, on_published=hang)
    await relay.start()
    await _stage_orders(pg_pool, billing, ["o1"])
    await asyncio.wait_for(entered.wait(), 10)
    late = asyncio.ensure_future(relay.stop(Deadline.after_ms(600_000)))
    for _ in range(10):
        await asyncio.sleep(0)
    await asyncio.wait_for(relay.stop(Deadline.after_ms(20)), 10)
    await asyncio.wait_for(late, 10)
    assert relay.signals.emitted("stopped") == [True]


async def test_drain_on_shutdown_false_registers_no_hooks(pg_pool: Pool) -> None:
    wired = wire(pg_pool)
    lifecycle = Lifecycle()
    relay = relay_for(wired, lifecycle=lifecycle, drain_on_shutdown=False)
    await relay.start()
    assert lifecycle.hook_count == 0
    await relay.stop()
    with_hooks = relay_for(wired, lifecycle=lifecycle)
    await with_hooks.start()
    assert lifecycle.hook_count == 1
    await with_hooks.stop()
    assert lifecycle.hook_count == 0
