"""``on_conflict="error"`` (the spec's ``onConflict: 'error'``): an enqueue whose idempotency key
a live run holds is ``X_JOB_DUPLICATE`` naming that run, on a real driver; the default answers
the live run (deduped); once the run finished, the key is free again."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from ujobs import Actor, Run, job, t
from ujobs.drivers.base import ClaimOptions
from ujobs.drivers.memory.driver import memory_driver
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.errors import InvariantError, JobDuplicateError
from ujobs.jobs.enqueue_target import set_job_driver


@pytest.fixture(params=["postgres", "memory"])
def driver(request: pytest.FixtureRequest, pg_pool: asyncpg.Pool[Any]) -> Any:
    chosen = postgres_driver(pg_pool) if request.param == "postgres" else memory_driver()
    set_job_driver(chosen)
    return chosen


async def test_a_live_key_is_an_error_only_when_asked(driver: Any) -> None:
    @job(input=t.object(org=t.string), idempotency_key=lambda i: f"org:{i.org}", tenant="none")
    async def onboard(run: Run[Any]) -> None:
        return None

    first = await onboard.enqueue({"org": "acme"})
    again = await onboard.enqueue({"org": "acme"})
    assert (again.id, again.deduped) == (first.id, True)
    with pytest.raises(JobDuplicateError) as info:
        await onboard.enqueue({"org": "acme"}, on_conflict="error")
    assert info.value.code == "X_JOB_DUPLICATE"
    assert info.value.meta["id"] == first.id
    with pytest.raises(JobDuplicateError):
        await onboard.as_(Actor(id="u-1"), {"org": "acme"}, on_conflict="error")
    with pytest.raises(InvariantError):
        await onboard.enqueue({"org": "other"}, on_conflict="ignore")  # type: ignore[arg-type]
    assert (await onboard.enqueue({"org": "other"})).deduped is False  # the refusal queued none

    claimed = await driver.claim(ClaimOptions(queues=["default"], limit=2, worker_id="w"))
    [acme] = [c for c in claimed if c.id == first.id]
    assert await driver.ack(acme.id, acme.ref)
    fresh = await onboard.enqueue({"org": "acme"}, on_conflict="error")
    assert fresh.id != first.id
    assert not fresh.deduped
