"""The worker registry: beats upsert, ``draining_at`` sticks, rows expire after their TTL."""

from __future__ import annotations

from ujobs.clock import FrozenClock
from ujobs.drivers.base import (
    MAX_WORKER_IN_FLIGHT,
    JobIntrospection,
    WorkerInfo,
    WorkerRegistry,
)
from ujobs.ids import new_id


def _info(worker_id: str, started_at_ms: int) -> WorkerInfo:
    return WorkerInfo(
        id=worker_id,
        host="host-1",
        pid=4242,
        started_at_ms=started_at_ms,
        queues=("default", "emails"),
        slots=8,
    )


async def test_a_beat_registers_the_worker(
    workers: WorkerRegistry, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    job_ids = [new_id(), new_id()]
    await workers.beat(_info("w1", clock.now_ms()), job_ids, 30_000)
    [row] = await introspect.workers()
    assert (row.id, row.host, row.pid, row.slots) == ("w1", "host-1", 4242, 8)
    assert row.started_at_ms == clock.now_ms()
    assert tuple(row.queues) == ("default", "emails")
    assert tuple(row.in_flight) == tuple(job_ids)
    assert row.last_heartbeat_ms == clock.now_ms()
    assert row.expires_at_ms == clock.now_ms() + 30_000
    assert row.draining_at_ms is None


async def test_beats_upsert_one_row(
    workers: WorkerRegistry, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    started = clock.now_ms()
    await workers.beat(_info("w1", started), [new_id()], 30_000)
    clock.advance(10_000)
    await workers.beat(_info("w1", started), [], 30_000)
    [row] = await introspect.workers()
    assert row.in_flight == ()
    assert row.last_heartbeat_ms == clock.now_ms()
    assert row.expires_at_ms == clock.now_ms() + 30_000


async def test_in_flight_ids_are_capped(
    workers: WorkerRegistry, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    ids = [new_id() for _ in range(MAX_WORKER_IN_FLIGHT + 20)]
    await workers.beat(_info("w1", clock.now_ms()), ids, 30_000)
    [row] = await introspect.workers()
    assert len(row.in_flight) == MAX_WORKER_IN_FLIGHT
    assert set(row.in_flight) <= set(ids)


async def test_draining_at_is_stamped_by_the_first_draining_beat_and_kept(
    workers: WorkerRegistry, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    started = clock.now_ms()
    await workers.beat(_info("w1", started), [], 30_000)
    clock.advance(1_000)
    drained_at = clock.now_ms()
    await workers.beat(_info("w1", started), [new_id()], 30_000, draining=True)
    clock.advance(1_000)
    await workers.beat(_info("w1", started), [], 30_000, draining=True)
    clock.advance(1_000)
    await workers.beat(_info("w1", started), [], 30_000)
    [row] = await introspect.workers()
    assert row.draining_at_ms == drained_at


async def test_rows_expire_a_ttl_after_the_last_beat(
    workers: WorkerRegistry, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    await workers.beat(_info("w1", clock.now_ms()), [], 10_000)
    clock.advance(5_000)
    await workers.beat(_info("w2", clock.now_ms()), [], 10_000)
    clock.advance(4_999)
    assert [w.id for w in await introspect.workers()] == ["w1", "w2"]
    clock.advance(1)
    assert [w.id for w in await introspect.workers()] == ["w2"]
    clock.advance(5_000)
    assert await introspect.workers() == []


async def test_workers_list_oldest_first_and_remove(
    workers: WorkerRegistry, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    t0 = clock.now_ms()
    await workers.beat(_info("w-b", t0 + 2), [], 30_000)
    await workers.beat(_info("w-a", t0 + 1), [], 30_000)
    await workers.beat(_info("w-c", t0 + 2), [], 30_000)
    assert [w.id for w in await introspect.workers()] == ["w-a", "w-b", "w-c"]
    await workers.remove("w-b")
    await workers.remove("never-there")
    assert [w.id for w in await introspect.workers()] == ["w-a", "w-c"]
