"""``job(priority=)`` and ``enqueue(priority=)``: the declaration's priority reaches every request
(``enqueue``, ``enqueue_many``, ``as_``, a task's fire, an enqueue staged in the outbox and its
relay's publish), an enqueue's own overrides it, and a bad one is refused where it is written:
``X_JOB_DECLARATION_INVALID`` in a declaration, ``X_PRIORITY_INVALID`` on an enqueue."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ujobs.clock import FrozenClock
from ujobs.context import Actor, bind_transaction
from ujobs.drivers.base import ClaimOptions, JobDriver
from ujobs.drivers.memory.driver import MemoryDriver, memory_driver
from ujobs.errors import JobDeclarationInvalidError, PriorityInvalidError
from ujobs.execution.run import Run
from ujobs.jobs.enqueue_target import reset_jobs_facade, set_jobs_facade
from ujobs.jobs.job import JobHandle, job
from ujobs.jobs.schema import t
from ujobs.jobs.task import task
from ujobs.lifecycle import Lifecycle
from ujobs.outbox import memory_outbox_store, outbox_jobs_facade, outbox_relay

T0 = 1_700_000_000_000


async def body(run: Run[Any]) -> None:
    return None


def declare(name: str, **overrides: Any) -> JobHandle[Any]:
    options: dict[str, Any] = {
        "name": name,
        "run": body,
        "input": t.object(k=t.optional(t.string)),
        "idempotency_key": lambda i: i.k or "k",
        "tenant": "none",
    }
    options.update(overrides)
    handle: JobHandle[Any] = job(**options)
    return handle


@pytest.fixture
def driver() -> Iterator[MemoryDriver]:
    found = memory_driver(clock=FrozenClock(T0))
    set_jobs_facade(found)
    yield found
    reset_jobs_facade()


async def priorities(driver: JobDriver) -> list[tuple[Any, int]]:
    claimed = await driver.claim(ClaimOptions(queues=["default"], limit=100, worker_id="w"))
    return [(job.input.get("k"), job.priority) for job in claimed]


def test_the_default_is_zero_and_the_declaration_reaches_the_request() -> None:
    assert declare("prio_plain").request({}).priority == 0
    handle = declare("prio_declared", priority=7)
    assert handle.request({}).priority == 7
    assert handle.request({}, priority=1).priority == 1
    assert handle.describe()["priority"] == 7
    assert declare("prio_plain_described").describe()["priority"] == 0


@pytest.mark.parametrize("value", [-1, 10, True, 2.0, "3", None])
def test_a_bad_declared_priority_is_refused_where_declared(value: object) -> None:
    with pytest.raises(JobDeclarationInvalidError) as info:
        declare("prio_bad", priority=value)
    assert info.value.meta["field"] == "priority"


@pytest.mark.parametrize("value", [-1, 10, False, 2.5, "3"])
async def test_a_bad_enqueue_priority_is_x_priority_invalid(
    driver: MemoryDriver, value: object
) -> None:
    handle = declare("prio_enqueue_bad")
    with pytest.raises(PriorityInvalidError) as info:
        await handle.enqueue({}, priority=value)  # type: ignore[arg-type]
    assert info.value.code == "X_PRIORITY_INVALID"
    assert info.value.meta["field"] == "priority"
    with pytest.raises(PriorityInvalidError):
        await handle.enqueue_many([{"k": "a"}], priority=value)  # type: ignore[arg-type]
    assert await priorities(driver) == []


async def test_enqueue_enqueue_many_and_as_carry_it(driver: MemoryDriver) -> None:
    handle = declare("prio_paths", priority=5)
    await handle.enqueue({"k": "declared"})
    await handle.enqueue({"k": "own"}, priority=2)
    await handle.enqueue_many([{"k": "many-a"}, {"k": "many-b"}], priority=9)
    await handle.as_(Actor(id="user-1"), {"k": "as"}, priority=0)
    assert await priorities(driver) == [
        ("as", 0),
        ("own", 2),
        ("declared", 5),
        ("many-a", 9),
        ("many-b", 9),
    ]


def test_a_task_fire_carries_the_jobs_declared_priority() -> None:
    urgent = declare("prio_task_urgent", priority=1)
    plain = declare("prio_task_plain")

    @task(cron="0 3 * * *", tz="UTC", name="prio_nightly")
    def nightly(occurrence_ms: int) -> list[tuple[JobHandle[Any], Any]]:
        return [(urgent, {"k": "u"}), (plain, {"k": "p"})]

    assert [r.priority for r in nightly.requests_for(T0)] == [1, 0]


async def test_the_outbox_stages_it_and_the_relay_publishes_it() -> None:
    clock = FrozenClock(T0)
    driver = memory_driver(clock=clock)
    store = memory_outbox_store(clock=clock)
    set_jobs_facade(outbox_jobs_facade(store=store, driver=driver))
    try:
        handle = declare("prio_outbox", priority=4)
        with bind_transaction(object()):
            await handle.enqueue({"k": "declared"})
            await handle.enqueue_many([{"k": "many"}], priority=8)
            await handle.enqueue({"k": "first"}, priority=0)
            with pytest.raises(PriorityInvalidError):
                await handle.enqueue({"k": "bad"}, priority=11)
        assert [r.priority for r in store.retained()] == [4, 8, 0]
        relay = outbox_relay(store=store, driver=driver, lifecycle=Lifecycle())
        assert len((await relay.run_once()).published) == 3
        assert await priorities(driver) == [("first", 0), ("declared", 4), ("many", 8)]
    finally:
        reset_jobs_facade()
