"""Promises the README and the spec make that had no test: ``rate_per_tenant`` (a token bucket
per org, shedding without burning an attempt — and applying to a ``tenant='none'`` job queued
``as_`` an actor), ``cross_tenant(reason)``, ``X_TENANCY_ACTOR_MISMATCH`` inside a job, and
``/readyz`` answering 503 while the database is down, the api's and a worker's."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from prometheus_client import CollectorRegistry

from tests.support.execute import attempt, frozen_driver
from tests.support.pg_relay import PgRelay
from tests.support.worker import T0, declare, enqueue, frozen, make_worker, row
from ujobs import Actor, Run, job, t
from ujobs.clock import FrozenClock
from ujobs.context import cross_tenant, cross_tenant_reason, require_tenant
from ujobs.errors import InvariantError, JobMaxAttemptsError, TenancyActorMismatchError
from ujobs.execution.settle import HAND_BACK_DELAY_MS
from ujobs.jobs.enqueue_target import set_job_driver
from ujobs.metrics import JobMetrics
from ujobs.services.api.app import create_app
from ujobs.services.config.settings import ApiConfig, WorkerConfig
from ujobs.services.runtime.backends import open_backend
from ujobs.services.runtime.metrics_server import metrics_app
from ujobs.worker.limits import LimitConfig, Limiter, LimitLease, Rate

Client = TestClient[web.Request, web.Application]
MakeClient = Callable[..., Awaitable[Client]]

ORG = "org-a"
OTHER = "org-b"


# --- rate_per_tenant ------------------------------------------------------------------------


def test_rate_per_tenant_is_a_token_bucket_per_org() -> None:
    clock = FrozenClock(T0)
    limiter = Limiter(LimitConfig(rate_per_tenant=Rate(2, window=1_000)), clock=clock)
    assert isinstance(limiter.try_acquire("q", ORG), LimitLease)
    assert isinstance(limiter.try_acquire("q", ORG), LimitLease)
    assert limiter.try_acquire("q", ORG) == "rate_per_tenant"
    assert isinstance(limiter.try_acquire("q", OTHER), LimitLease)  # another org: its own bucket
    assert isinstance(limiter.try_acquire("q", None), LimitLease)  # no tenant: no bucket
    assert limiter.next_token_in_ms(ORG) == 500
    clock.advance(499)
    assert limiter.try_acquire("q", ORG) == "rate_per_tenant"
    clock.advance(1)
    assert isinstance(limiter.try_acquire("q", ORG), LimitLease)


async def _quick(run: Run[Any]) -> None:
    return None


async def test_over_the_rate_a_run_is_handed_back_until_its_org_has_a_token() -> None:
    driver, clock = frozen()
    handle = declare(_quick, tenanted=True)
    first = await enqueue(driver, handle, 1, org=ORG)
    second = await enqueue(driver, handle, 2, org=ORG)
    other = await enqueue(driver, handle, 3, org=OTHER)
    limits = LimitConfig(rate_per_tenant=Rate(1, window=60_000))
    worker = make_worker(driver, [handle], limits=limits)
    await worker.run_once()
    await worker.signals.wait("settled", lambda _: len(worker.signals.emitted("settled")) >= 3)
    assert (await row(driver, first)).state == "done"
    assert (await row(driver, other)).state == "done"
    shed = await row(driver, second)
    assert (shed.state, shed.attempt) == ("ready", 0)  # no attempt burnt
    assert shed.run_at_ms == clock.now_ms() + 60_000  # when org-a has a token again
    assert worker.stats().shed == 1
    await worker.join()


async def test_a_tenant_none_job_queued_as_an_actor_is_rate_limited_per_its_org() -> None:
    driver, clock = frozen()
    set_job_driver(driver)

    @job(input=t.object(n=t.number.int()), idempotency_key=lambda i: f"h:{i.n}", tenant="none")
    async def housekeeping(run: Run[Any]) -> None:
        return None

    first = await housekeeping.as_(Actor(id="u-1", org_id=ORG), {"n": 1})
    second = await housekeeping.as_(Actor(id="u-1", org_id=ORG), {"n": 2})
    worker = make_worker(
        driver, [housekeeping], limits=LimitConfig(rate_per_tenant=Rate(1, window=60_000))
    )
    await worker.run_once()
    await worker.signals.wait("settled", lambda _: len(worker.signals.emitted("settled")) >= 2)
    assert (await row(driver, first.id)).tenant_id == ORG
    assert (await row(driver, first.id)).state == "done"
    assert (await row(driver, second.id)).attempt == 0
    assert (await row(driver, second.id)).run_at_ms > clock.now_ms() + HAND_BACK_DELAY_MS
    await worker.join()


# --- cross_tenant and X_TENANCY_ACTOR_MISMATCH ------------------------------------------------


async def test_a_job_reads_only_its_org_unless_it_says_why_it_crosses() -> None:
    driver, _ = frozen_driver()
    seen: dict[str, Any] = {}

    async def body(run: Run[Any]) -> None:
        seen["own"] = require_tenant(ORG)
        with cross_tenant("nightly usage rollup over every org"):
            seen["reason"] = cross_tenant_reason()
            seen["crossed"] = require_tenant(OTHER)
        seen["after"] = cross_tenant_reason()
        with pytest.raises(InvariantError), cross_tenant("  "):
            pass
        require_tenant(OTHER)  # outside the scope: another org's row is refused

    handle = job(
        input=t.object(org=t.string),
        idempotency_key=lambda i: i.org,
        tenant=lambda i: i.org,
        name="t.tenancy",
        run=body,
        retry={"attempts": 1},
    )
    await driver.enqueue(handle.request({"org": ORG}))
    execution = await attempt(driver, handle)
    assert seen == {
        "own": ORG,
        "reason": "nightly usage rollup over every org",
        "crossed": OTHER,
        "after": None,
    }
    assert execution.outcome == "dead-lettered"
    assert isinstance(execution.error, JobMaxAttemptsError)
    mismatch = execution.error.__cause__
    assert isinstance(mismatch, TenancyActorMismatchError)
    assert mismatch.code == "X_TENANCY_ACTOR_MISMATCH"
    assert mismatch.meta == {"acting": ORG}


# --- /readyz with the database down ----------------------------------------------------------


async def _status(client: Client) -> tuple[int, str | None]:
    response = await client.get("/readyz")
    body = await response.json()
    return response.status, body.get("error", {}).get("code")


async def test_readyz_is_503_while_the_database_is_down(
    aiohttp_client: MakeClient, pg_dsn: str
) -> None:
    relay = await PgRelay(pg_dsn).start()
    try:
        api = await aiohttp_client(
            create_app(
                ApiConfig.load({"DATABASE_URL": relay.dsn}),
                metrics=JobMetrics(CollectorRegistry()),
            )
        )
        config = WorkerConfig.load({"DATABASE_URL": relay.dsn})
        async with open_backend(config.common.connections) as backend:
            worker = await aiohttp_client(
                metrics_app("worker", backend, registry=CollectorRegistry())
            )
            assert await _status(api) == (200, None)
            assert await _status(worker) == (200, None)
            await relay.close()  # the database goes away under both
            assert await _status(api) == (503, "X_DRIVER_UNAVAILABLE")
            assert await _status(worker) == (503, "X_DRIVER_UNAVAILABLE")
            assert (await api.get("/healthz")).status == 200  # alive: do not restart it
    finally:
        await relay.close()
