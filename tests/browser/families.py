"""Real rows for the dashboard's family pages: backfill passes in the ``x_backfills`` ledger
beside their jobs, webhook endpoints with delivery attempts, and exports run to their manifest
on the filesystem store."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from tests.browser.support import ORG_A, ORG_B
from tests.exports.export_app.jobs import orders_export
from tests.services.api_support import Api
from tests.services.backfill_app.sweeps import drop_legacy, rewrite_slugs
from ujobs.backfill.declare import definition_of
from ujobs.drivers.base import ClaimOptions, JobDriver
from ujobs.drivers.postgres import postgres_driver
from ujobs.execution.attempt import execute_job
from ujobs.jobs.enqueue_target import reset_job_driver, set_job_driver
from ujobs.webhooks import builtin
from ujobs.webhooks.ledger import DeliveryAttempt
from ujobs.webhooks.secrets import SecretBox
from ujobs.webhooks.store_pg import PgWebhookStore

FAMILIES_APP = "tests.browser.families_app:api"
SECRET_KEY = base64.b64encode(bytes(range(32))).decode()
"""One ``UJOBS_SECRET_KEY`` both families accept: 32 bytes of AES key for the webhook secrets,
and at least 32 characters of HMAC key for the export links."""


@dataclass
class Passes:
    """The backfill rows ``seed_backfills`` wrote: job ids by role."""

    completed: str
    running: str
    failed: str


async def _pass(driver: JobDriver, request: Any) -> tuple[str, str]:
    enqueued = await driver.enqueue(request)
    return enqueued.id, enqueued.run_id


async def seed_backfills(api: Api) -> Passes:
    """``rewrite-slugs``: a completed pass of 42 rows under an older checksum (the declaration
    has moved since), then a forced pass running at 7 rows; ``drop-legacy``: a failed pass.
    ``prod-only`` has no row: it is pending."""
    driver = postgres_driver(api.pool)
    ledger = driver.backfills
    assert ledger is not None
    slugs = definition_of(rewrite_slugs)
    legacy = definition_of(drop_legacy)
    assert slugs is not None
    assert legacy is not None
    completed, run = await _pass(driver, rewrite_slugs.request({}))
    [claimed] = await driver.claim(
        ClaimOptions(queues=[rewrite_slugs.queue], limit=1, worker_id="w-sweep")
    )
    await ledger.begin(slugs.name, run, "c0ffee-older-checksum", "1.4.0")
    await ledger.progress(slugs.name, run, 42, {"id": 42})
    await ledger.finish(slugs.name, run, "completed")
    assert await driver.ack(completed, claimed.ref, duration_ms=900)
    running, run = await _pass(driver, rewrite_slugs.request({"force": True}))
    await ledger.begin(slugs.name, run, slugs.checksum, "1.5.0")
    await ledger.progress(slugs.name, run, 7, {"id": 7})
    failed, run = await _pass(driver, drop_legacy.request({}))
    await ledger.begin(legacy.name, run, legacy.checksum, "1.5.0")
    await ledger.finish(legacy.name, run, "failed", "relation legacy_rows does not exist")
    return Passes(completed=completed, running=running, failed=failed)


@dataclass
class Hooks:
    """The endpoints ``seed_webhooks`` registered, their secrets, and the delivery jobs."""

    a: str
    b: str
    secret_a: str
    header_value: str
    jobs: list[str]


def webhook_store(api: Api) -> PgWebhookStore:
    return PgWebhookStore(api.pool, SecretBox.parse(SECRET_KEY))


async def seed_webhooks(api: Api) -> Hooks:
    """One endpoint for tenant A (an own header carrying a credential) with a delivered, then
    a failed attempt (HTTP 503), and one for tenant B with a delivered attempt."""
    store = webhook_store(api)
    header_value = "Bearer partner-credential-9f2e"
    a = await store.add_endpoint(
        "https://partner-a.example/hooks",
        tenant=ORG_A,
        topics=["orders.paid"],
        headers={"Authorization": header_value},
        description="Partner A's order feed",
    )
    b = await store.add_endpoint("https://partner-b.example/in", tenant=ORG_B)
    set_job_driver(postgres_driver(api.pool))
    try:
        first = await builtin.publish("orders.paid", b'{"order":1}', tenant=ORG_A, store=store)
        second = await builtin.publish("orders.paid", b'{"order":2}', tenant=ORG_A, store=store)
        other = await builtin.publish("orders.paid", b'{"order":3}', tenant=ORG_B, store=store)
    finally:
        reset_job_driver()
    [job1], [job2], [job3] = first.deliveries, second.deliveries, other.deliveries
    base = 1_764_900_000_000

    def attempt(endpoint: str, event: str, job: str, ok: bool, at: int) -> DeliveryAttempt:
        return DeliveryAttempt(
            endpoint_id=endpoint,
            event_id=event,
            job_id=job,
            attempt=1,
            outcome="delivered" if ok else "failed",
            status=200 if ok else 503,
            code=None if ok else "X_WEBHOOK_DELIVERY_FAILED",
            latency_ms=85 if ok else 1_200,
            response_excerpt="ok" if ok else "upstream busy, try later",
            at_ms=base + at,
        )

    await store.ledger.record(attempt(a.id, first.event_id, job1.id, True, 0))
    await store.ledger.record(attempt(a.id, second.event_id, job2.id, False, 1_000))
    await store.ledger.record(attempt(b.id, other.event_id, job3.id, True, 2_000))
    return Hooks(
        a=a.id,
        b=b.id,
        secret_a=a.secret,
        header_value=header_value,
        jobs=[job1.id, job2.id, job3.id],
    )


@dataclass
class Exported:
    """Export job ids: ``a`` and ``b`` finished (25 rows, 3 parts), ``waiting`` not run."""

    a: str
    b: str
    waiting: str


async def _run_export(driver: JobDriver, org: str, export_id: str) -> str:
    order = {"org_id": org, "export_id": export_id, "rows": 25, "slow_ms": 0}
    job_id = (await driver.enqueue(orders_export.request(order, clock=driver.clock))).id
    [claimed] = await driver.claim(
        ClaimOptions(queues=[orders_export.queue], limit=1, worker_id="w1", visibility_ms=60_000)
    )
    assert claimed.id == job_id
    done = await execute_job(claimed, driver=driver, handle=orders_export, context=None)
    assert done.outcome == "completed", done.error
    return job_id


async def seed_exports(api: Api) -> Exported:
    driver = postgres_driver(api.pool)
    a = await _run_export(driver, ORG_A, "e-a")
    b = await _run_export(driver, ORG_B, "e-b")
    order = {"org_id": ORG_A, "export_id": "e-later", "rows": 5, "slow_ms": 0}
    waiting = (await driver.enqueue(orders_export.request(order, clock=driver.clock))).id
    return Exported(a=a, b=b, waiting=waiting)


__all__ = [
    "FAMILIES_APP",
    "SECRET_KEY",
    "Exported",
    "Hooks",
    "Passes",
    "seed_backfills",
    "seed_exports",
    "seed_webhooks",
    "webhook_store",
]
