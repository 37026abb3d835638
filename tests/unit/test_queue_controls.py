"""``job(debounce=, unique_for=)`` and ``enqueue(debounce=)``: the declaration's periods reach
the request, an enqueue's debounce overrides it, bad values are refused where written, a
debounced answer is no conflict under ``on_conflict="error"``, and the outbox refuses to stage
what its relay could not honour."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from ujobs.clock import FrozenClock
from ujobs.context import bind_transaction
from ujobs.drivers.base import EnqueueRequest
from ujobs.drivers.memory.driver import memory_driver
from ujobs.errors import (
    EnqueueOptionUnsupportedError,
    InvariantError,
    JobDeclarationInvalidError,
    JobDuplicateError,
)
from ujobs.execution.run import Run
from ujobs.jobs.enqueue_target import reset_jobs_facade, set_jobs_facade
from ujobs.jobs.job import JobHandle, job
from ujobs.outbox import memory_outbox_store, outbox_jobs_facade

T0 = 1_700_000_000_000


async def body(run: Run[Any]) -> None:
    return None


def declare(**overrides: Any) -> JobHandle[Any]:
    options: dict[str, Any] = {
        "name": "qc",
        "run": body,
        "idempotency_key": lambda i: "k",
        "tenant": "none",
    }
    options.update(overrides)
    handle: JobHandle[Any] = job(**options)
    return handle


def test_the_declaration_reaches_the_request_and_an_enqueue_overrides_the_debounce() -> None:
    handle = declare(debounce=timedelta(seconds=5), unique_for="1h")
    request = handle.request({})
    assert (request.debounce_ms, request.unique_for_ms) == (5_000, 3_600_000)
    assert handle.request({}, debounce="2s").debounce_ms == 2_000
    assert (handle.describe()["debounceMs"], handle.describe()["uniqueForMs"]) == (
        5_000,
        3_600_000,
    )
    plain = declare(name="qc_plain").request({})
    assert (plain.debounce_ms, plain.unique_for_ms, plain.controlled) == (None, None, False)


@pytest.mark.parametrize("field", ["debounce", "unique_for"])
@pytest.mark.parametrize("value", [0, "-1s", timedelta(days=400), "soon"])
def test_a_bad_period_is_refused_where_declared(field: str, value: object) -> None:
    with pytest.raises(JobDeclarationInvalidError) as info:
        declare(**{field: value})
    assert info.value.meta["field"] == field


@pytest.mark.parametrize("value", [0, timedelta(days=400)])
def test_a_bad_debounce_on_an_enqueue_is_refused(value: object) -> None:
    with pytest.raises(InvariantError):
        declare().request({}, debounce=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [0, -5, True, 400 * 86_400_000])
async def test_the_driver_refuses_a_period_out_of_range(value: object) -> None:
    driver = memory_driver()
    bad = EnqueueRequest(name="qc", input={}, idempotency_key="k", debounce_ms=value)  # type: ignore[arg-type]
    with pytest.raises(InvariantError):
        await driver.enqueue(bad)


async def test_a_debounced_answer_is_no_conflict_under_on_conflict_error() -> None:
    clock = FrozenClock(T0)
    driver = memory_driver(clock=clock)
    set_jobs_facade(outbox_jobs_facade(store=memory_outbox_store(clock=clock), driver=driver))
    try:
        handle = declare(debounce="5s")
        first = await handle.enqueue({}, on_conflict="error")
        moved = await handle.enqueue({}, on_conflict="error")
        assert (moved.id, moved.debounced) == (first.id, True)
        # Without the debounce the same key is a plain conflict.
        plain = declare(name="qc_plain")
        held = await plain.enqueue({})
        with pytest.raises(JobDuplicateError) as info:
            await plain.enqueue({}, on_conflict="error")
        assert info.value.meta["id"] == held.id
    finally:
        reset_jobs_facade()


async def test_the_outbox_refuses_to_stage_a_debounce_or_unique_for() -> None:
    clock = FrozenClock(T0)
    driver = memory_driver(clock=clock)
    store = memory_outbox_store(clock=clock)
    set_jobs_facade(outbox_jobs_facade(store=store, driver=driver))
    try:
        debounced = declare(debounce="5s")
        unique = declare(name="qc_unique", unique_for="1h")
        with bind_transaction(object()):
            with pytest.raises(EnqueueOptionUnsupportedError):
                await debounced.enqueue({})
            with pytest.raises(EnqueueOptionUnsupportedError):
                await unique.enqueue_many([{}, {}])
            staged = await declare(name="qc_plain").enqueue({})
        assert await store.pending() == 1
        assert staged.deduped is False
        # Outside a transaction it goes straight to the driver, which honours it.
        assert (await debounced.enqueue({})).deduped is False
        assert (await debounced.enqueue({})).debounced is True
    finally:
        reset_jobs_facade()


def test_a_tasks_fire_carries_no_debounce_or_unique_for() -> None:
    """A fire's key is its occurrence's own: a debounce would only delay it (and Postgres
    fires in a statement of its own), so every scheduler state fires it as declared."""
    from ujobs import task

    handle = declare(name="qc_cron", debounce="5s", unique_for="1h")
    nightly = task(name="qc_nightly", cron="0 3 * * *", tz="UTC", enqueue=lambda o: [(handle, {})])
    [request] = nightly.requests_for(T0)
    assert (request.debounce_ms, request.unique_for_ms) == (None, None)
    assert request.idempotency_key.endswith(f"@qc_nightly:{T0}")
