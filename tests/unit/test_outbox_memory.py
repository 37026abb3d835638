"""The outbox on the memory store and memory driver (``ujobs dev``, tests): the store drops a
published row, fences like the Postgres store, wakes the relay in process; and the options
the relay and the facade refuse at construction."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from ujobs.clock import FrozenClock
from ujobs.context import bind_transaction
from ujobs.drivers.base import JobFilter
from ujobs.drivers.memory.driver import memory_driver
from ujobs.errors import ConfigInvalidError, InvariantError
from ujobs.execution.run import Run
from ujobs.jobs.enqueue_target import set_jobs_facade
from ujobs.jobs.job import job
from ujobs.jobs.schema import t
from ujobs.lifecycle import Lifecycle
from ujobs.outbox import (
    RelayOptions,
    memory_outbox_store,
    outbox_jobs_facade,
    outbox_purge_target,
    outbox_relay,
)
from ujobs.outbox.relay import PASS_HISTORY

T0 = 1_700_000_000_000
LEASE = 30_000


def _jobs() -> tuple[Any, Any]:
    @job(input=t.object(order=t.string), idempotency_key=lambda i: f"i:{i.order}", tenant="none")
    async def create_invoice(run: Run[Any]) -> None:
        return None

    @job(input=t.object(order=t.string), idempotency_key=lambda i: f"c:{i.order}", tenant="none")
    async def charge_card(run: Run[Any]) -> None:
        return None

    return create_invoice, charge_card


def _wired(clock: FrozenClock | None = None) -> tuple[Any, Any, Any, Any]:
    clock = clock or FrozenClock(T0)
    driver = memory_driver(clock=clock)
    store = memory_outbox_store(clock=clock)
    set_jobs_facade(outbox_jobs_facade(store=store, driver=driver))
    invoice, charge = _jobs()
    return driver, store, invoice, charge


async def _names(driver: Any) -> list[str]:
    introspect = driver.introspect
    page = await introspect.list(JobFilter())
    return [row.name for row in reversed(page.rows)]


async def test_the_memory_store_drops_a_published_row() -> None:
    driver, store, invoice, charge = _wired()
    with bind_transaction(object()):
        queued = await invoice.enqueue({"order": "o1"})
        await charge.enqueue({"order": "o1"})
    assert store.retained()[0].id == queued.id
    assert await store.pending() == 2
    relay = outbox_relay(store=store, driver=driver, lifecycle=Lifecycle())
    result = await relay.run_once()
    assert len(result.published) == 2
    assert store.retained() == []  # the backlog, not a running total
    assert await store.pending() == 0
    row = await driver.introspect.get(queued.id)
    assert row is not None
    assert row.run_id == queued.run_id


async def test_the_memory_store_fences_release_and_mark_on_the_claimant() -> None:
    _, store, invoice, _ = _wired()
    with bind_transaction(object()):
        await invoice.enqueue({"order": "o1"})
    (held,) = await store.claim("A:1", 10, now_ms=T0, lease_ms=LEASE)
    assert await store.claim("B:1", 10, now_ms=T0 + LEASE - 1, lease_ms=LEASE) == []
    (taken,) = await store.claim("B:1", 10, now_ms=T0 + LEASE, lease_ms=LEASE)
    assert taken.id == held.id
    assert await store.release([held.id], "A:1") == 0
    assert not await store.mark_published(held.id, "A:1", now_ms=T0 + LEASE)
    assert [r.claimed_by for r in store.retained()] == ["B:1"]
    assert await store.mark_published(held.id, "B:1", now_ms=T0 + LEASE)
    assert store.retained() == []


async def test_rows_staged_in_one_millisecond_are_claimed_in_staging_order() -> None:
    _, store, invoice, charge = _wired()  # a frozen clock: every staged_at is equal
    with bind_transaction(object()):
        for n in range(20):
            await invoice.enqueue({"order": f"o{n}"})
            await charge.enqueue({"order": f"o{n}"})
    staged = [r.id for r in store.retained()]
    claimed = await store.claim("A:1", 100, now_ms=T0, lease_ms=LEASE)
    assert [r.id for r in claimed] == staged


async def test_a_failing_publish_holds_back_every_row_behind_it() -> None:
    driver, store, invoice, charge = _wired()
    poison = replace(invoice.request({"order": "o1"}), max_attempts=0)  # the driver refuses it
    await store.stage(object(), [poison])
    with bind_transaction(object()):
        await charge.enqueue({"order": "o1"})
    relay = outbox_relay(store=store, driver=driver, lifecycle=Lifecycle())
    for _ in range(3):
        result = await relay.run_once()
        assert result.published == []
        assert result.released == 2
    assert await _names(driver) == []
    assert [r.claimed_by for r in store.retained()] == ["", ""]


async def test_a_stage_wakes_a_relay_idling_on_the_memory_store() -> None:
    driver, store, invoice, _ = _wired()
    relay = outbox_relay(
        store=store,
        driver=driver,
        options=RelayOptions(interval_ms=3_600_000, idle_poll_max_ms=3_600_000),
        lifecycle=Lifecycle(),
    )
    await relay.start()
    try:
        await relay.signals.wait("pass")
        with bind_transaction(object()):
            queued = await invoice.enqueue({"order": "o1"})
        await relay.signals.wait("pass", lambda p: p.published == [queued.id])
    finally:
        await relay.stop()
    assert store.retained() == []


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "30s", None])
def test_claim_lease_ms_must_be_a_positive_whole_number(bad: Any) -> None:
    with pytest.raises(InvariantError) as refused:
        RelayOptions(claim_lease_ms=bad)
    assert refused.value.code == "X_INVARIANT"
    assert refused.value.meta["option"] == "claim_lease_ms"


@pytest.mark.parametrize(
    ("option", "bad"),
    [("batch_size", 0), ("interval_ms", -5), ("idle_poll_max_ms", 2.5), ("idle_poll_max_ms", 100)],
)
def test_the_relays_other_options_are_refused_with_their_name(option: str, bad: Any) -> None:
    with pytest.raises(ConfigInvalidError) as refused:
        RelayOptions(**{option: bad})
    assert refused.value.meta["option"] == option


def test_the_facade_refuses_an_unknown_mode() -> None:
    with pytest.raises(InvariantError):
        outbox_jobs_facade(store=memory_outbox_store(), driver=memory_driver(), mode="sometimes")  # type: ignore[arg-type]


async def test_stop_before_start_and_twice_is_safe() -> None:
    relay = outbox_relay(store=memory_outbox_store(), driver=memory_driver(), lifecycle=Lifecycle())
    await relay.stop()
    await relay.start()
    await relay.stop()
    await relay.stop()
    assert not relay.running


@pytest.mark.parametrize("option", ["published_retention_ms", "batch_size", "max_batches"])
def test_purge_options_must_be_positive_whole_numbers(option: str) -> None:
    with pytest.raises(ConfigInvalidError) as refused:
        outbox_purge_target(executor=None, **{option: 0})  # type: ignore[arg-type]
    assert refused.value.meta["option"] == option


async def test_the_postgres_store_never_stages_without_the_callers_transaction() -> None:
    from ujobs.errors import OutboxNoTxError
    from ujobs.outbox import postgres_outbox_store

    invoice, _ = _jobs()
    store = postgres_outbox_store(executor=None)  # type: ignore[arg-type]  # never reached
    with pytest.raises(OutboxNoTxError):
        await store.stage(None, [invoice.request({"order": "o1"})])


async def test_the_relay_keeps_only_its_last_passes_for_its_hooks() -> None:
    driver, store, invoice, _ = _wired()
    relay = outbox_relay(store=store, driver=driver, lifecycle=Lifecycle())
    for n in range(PASS_HISTORY + 5):
        with bind_transaction(object()):
            await invoice.enqueue({"order": f"o{n}"})
        await relay.run_once()
    kept = relay.signals.emitted("pass")
    assert len(kept) == PASS_HISTORY
    assert [len(p.published) for p in kept] == [1] * PASS_HISTORY
