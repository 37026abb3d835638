"""Steps belong to one run of ONE tenant: a caller-chosen ``runId`` is a namespace of its
tenant, so the same id under two tenants never shares, reads or deletes the other's steps, and
tenant-less jobs are a namespace of their own (issue 34, item 1)."""

from __future__ import annotations

import pytest

from tests.support.conformance import claim_one, req
from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimedJob, JobDriver, JobIntrospection, NackOptions
from ujobs.errors import StepNotFoundError
from ujobs.execution.steps import Step
from ujobs.introspect import job_document, retry_job
from ujobs.signal import Signal

RUN = "order-42"  # a readable id, as the README invites: the one two tenants will both pick
TENANT_A = "org-a"
TENANT_B = "org-b"


async def _run_of(driver: JobDriver, tenant: str | None, key: str) -> ClaimedJob:
    """Enqueue a job of ``tenant`` under the shared ``RUN`` and claim it."""
    queued = await driver.enqueue(req(key=key, tenant_id=tenant, run_id=RUN))
    assert queued.run_id == RUN
    job = await claim_one(driver)
    assert (job.id, job.tenant_id) == (queued.id, tenant)
    return job


async def _save(driver: JobDriver, job: ClaimedJob, clock: FrozenClock, **outputs: str) -> None:
    for name, output in outputs.items():
        started = clock.now_ms()
        clock.advance(5)
        assert await driver.save_step(
            job.id, job.ref, job.run_id, name, output, started_at_ms=started
        )


async def _names(driver: JobDriver, tenant: str | None) -> list[str]:
    return [s.name for s in await driver.load_steps(RUN, tenant_id=tenant)]


async def test_the_same_run_id_under_two_tenants_is_two_runs(
    driver: JobDriver, clock: FrozenClock
) -> None:
    a = await _run_of(driver, TENANT_A, "a")
    await _save(driver, a, clock, quote="A's price", charge="A's card")
    assert await driver.ack(a.id, a.ref)

    b = await _run_of(driver, TENANT_B, "b")
    assert await driver.load_steps(b.run_id, tenant_id=b.tenant_id) == []
    await _save(driver, b, clock, quote="B's price")
    assert [(s.name, s.output) for s in await driver.load_steps(RUN, tenant_id=TENANT_B)] == [
        ("quote", "B's price")
    ]
    assert [(s.name, s.output) for s in await driver.load_steps(RUN, tenant_id=TENANT_A)] == [
        ("quote", "A's price"),
        ("charge", "A's card"),
    ]


async def test_tenant_less_jobs_are_a_namespace_of_their_own(
    driver: JobDriver, clock: FrozenClock
) -> None:
    a = await _run_of(driver, TENANT_A, "a")
    await _save(driver, a, clock, quote="A's price")
    assert await driver.ack(a.id, a.ref)
    plain = await _run_of(driver, None, "plain")
    assert await driver.load_steps(RUN, tenant_id=None) == []
    await _save(driver, plain, clock, quote="nobody's price")
    assert [s.output for s in await driver.load_steps(RUN, tenant_id=None)] == ["nobody's price"]
    assert [s.output for s in await driver.load_steps(RUN, tenant_id=TENANT_A)] == ["A's price"]


async def test_b_runs_its_own_step_instead_of_replaying_a_stored_output(
    driver: JobDriver, clock: FrozenClock
) -> None:
    a = await _run_of(driver, TENANT_A, "a")
    await _save(driver, a, clock, quote="A's price")
    assert await driver.ack(a.id, a.ref)

    b = await _run_of(driver, TENANT_B, "b")
    step = await Step.load(
        driver=driver,
        job_id=b.id,
        run_id=b.run_id,
        tenant_id=b.tenant_id,
        ref=b.ref,
        signal=Signal(),
        clock=clock,
    )
    assert await step.run("quote", lambda _signal: "B's price") == "B's price"
    assert (step.ran, step.replayed) == (["quote"], [])
    assert [s.output for s in await driver.load_steps(RUN, tenant_id=TENANT_A)] == ["A's price"]


async def test_b_s_job_shows_only_its_own_steps(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    a = await _run_of(driver, TENANT_A, "a")
    await _save(driver, a, clock, quote="A's price", charge="A's card")
    assert await driver.ack(a.id, a.ref)
    b = await _run_of(driver, TENANT_B, "b")
    await _save(driver, b, clock, quote="B's price")
    row = await introspect.get(b.id)
    assert row is not None
    doc = await job_document(driver, row)
    assert [s["name"] for s in doc["steps"]] == ["quote"]


async def test_b_s_retry_from_a_step_leaves_a_s_steps_intact(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    a = await _run_of(driver, TENANT_A, "a")
    await _save(driver, a, clock, quote="A's price", charge="A's card")
    assert await driver.nack(a.id, a.ref, NackOptions(error="x", dead_letter=True))
    b = await _run_of(driver, TENANT_B, "b")
    await _save(driver, b, clock, quote="B's price", charge="B's card")
    assert await driver.nack(b.id, b.ref, NackOptions(error="x", dead_letter=True))

    moved = await retry_job(driver, b.id, from_step="quote")
    assert moved.state == "ready"
    assert await _names(driver, TENANT_B) == []
    assert await _names(driver, TENANT_A) == ["quote", "charge"]


async def test_b_cannot_retry_from_a_step_only_a_recorded(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    a = await _run_of(driver, TENANT_A, "a")
    await _save(driver, a, clock, quote="A's price", charge="A's card")
    assert await driver.ack(a.id, a.ref)
    b = await _run_of(driver, TENANT_B, "b")
    await driver.nack(b.id, b.ref, NackOptions(error="x", dead_letter=True))
    # B's cancel + retry --from-step: a step only A recorded is not one of B's run.
    with pytest.raises(StepNotFoundError):
        await retry_job(driver, b.id, from_step="quote")
    assert await _names(driver, TENANT_A) == ["quote", "charge"]


async def test_removing_one_tenant_s_job_takes_only_its_own_steps(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    a = await _run_of(driver, TENANT_A, "a")
    await _save(driver, a, clock, quote="A's price")
    assert await driver.ack(a.id, a.ref)
    b = await _run_of(driver, TENANT_B, "b")
    await _save(driver, b, clock, quote="B's price")
    assert await driver.ack(b.id, b.ref)

    # B's row still carries the run_id, but it is another tenant's run: A's steps go with A's.
    assert await introspect.remove(a.id)
    assert await _names(driver, TENANT_A) == []
    assert [s.output for s in await driver.load_steps(RUN, tenant_id=TENANT_B)] == ["B's price"]
    assert await introspect.remove(b.id)
    assert await _names(driver, TENANT_B) == []


async def test_a_tenant_and_a_run_id_never_blur_into_another_pair(
    driver: JobDriver, clock: FrozenClock
) -> None:
    # Joined with a separator, ("org:a", "42") and ("org", "a:42") would be one run.
    await driver.enqueue(req(key="x", tenant_id="org:a", run_id="42"))
    x = await claim_one(driver)
    await _save(driver, x, clock, quote="x")
    await driver.enqueue(req(key="y", tenant_id="org", run_id="a:42"))
    y = await claim_one(driver)
    assert await driver.load_steps("a:42", tenant_id="org") == []
    await _save(driver, y, clock, quote="y")
    assert [s.output for s in await driver.load_steps("42", tenant_id="org:a")] == ["x"]
    assert [s.output for s in await driver.load_steps("a:42", tenant_id="org")] == ["y"]
