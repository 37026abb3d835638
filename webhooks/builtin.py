"""The built-in webhook families: endpoints and subscriptions in Postgres, always registered.

``publish(topic, body, tenant=...)`` stores the event and enqueues one delivery per subscribed
endpoint of that tenant (``ujobs.webhooks`` for an org's endpoints, ``ujobs.webhooks.global``
for endpoints no tenant owns); ``ujobs webhook-deliverer`` runs them. The families read the
store the process installed (``install_store``: the deliverer and the CLI do it from
``DATABASE_URL`` and ``UJOBS_SECRET_KEY``), and an endpoint or event of another tenant than the
delivery's is unknown to it.
"""

from __future__ import annotations

import dataclasses
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from ujobs.drivers.base import Enqueued
from ujobs.errors import DriverUnavailableError, JobDeclarationInvalidError
from ujobs.jobs.job import JobHandle, KeyedConcurrency
from ujobs.jobs.registry import Registry
from ujobs.webhooks.errors import WebhookEndpointUnknownError, WebhookEventUnknownError
from ujobs.webhooks.family import (
    Endpoint,
    Event,
    WebhookInput,
    endpoint_key,
    fan_out_inputs,
    webhook,
)
from ujobs.webhooks.ledger import DeliveryAttempt
from ujobs.webhooks.store_pg import Loaded, PgWebhookStore

ORG_FAMILY = "ujobs.webhooks"
GLOBAL_FAMILY = "ujobs.webhooks.global"
ENDPOINT_CONCURRENCY = 8

_store: PgWebhookStore | None = None


def install_store(store: PgWebhookStore | None) -> None:
    global _store
    _store = store


def current_store() -> PgWebhookStore:
    if _store is None:
        raise DriverUnavailableError(
            "the built-in webhook families need their Postgres store; ujobs webhook-deliverer "
            "and the ujobs webhooks commands install it from DATABASE_URL and UJOBS_SECRET_KEY",
            meta={"variable": "DATABASE_URL"},
        )
    return _store


@dataclass(slots=True)
class _Reads:
    """One attempt's single read of its endpoint and event (``webhooks_delivery_load``)."""

    endpoint_id: str
    event_id: str
    loaded: Loaded | None


# Set by the endpoint seam inside the attempt's own task, read by the event seam and the
# ledger's is_disabled in the same task: three answers, one round trip.
_reads: ContextVar[_Reads | None] = ContextVar("ujobs_webhook_reads", default=None)


async def _endpoint(value: WebhookInput) -> Endpoint | None:
    loaded = await current_store().load(value.endpoint_id, value.event_id)
    _reads.set(_Reads(value.endpoint_id, value.event_id, loaded))
    if loaded is None or loaded.tenant_id != value.org_id:
        return None
    return loaded.endpoint


async def _event(value: WebhookInput) -> Event | None:
    reads = _reads.get()
    if reads is not None and (reads.endpoint_id, reads.event_id) == (
        value.endpoint_id,
        value.event_id,
    ):
        loaded = reads.loaded
        if loaded is None or loaded.event is None or loaded.event_tenant_id != value.org_id:
            return None
        return loaded.event
    found = await current_store().event(value.event_id)
    if found is None or found[1] != value.org_id:
        return None
    return found[0]


class _StoreLedger:
    """The installed store's ledger, looked up per call (the store is installed at start).

    ``is_disabled`` answers from the verdict column this attempt read a moment before (the
    same statement that read the endpoint), once; any other ask reads the column again."""

    async def record(self, attempt: DeliveryAttempt) -> int:
        return await current_store().ledger.record(attempt)

    async def is_disabled(self, endpoint_id: str) -> bool:
        reads = _reads.get()
        if reads is not None and reads.endpoint_id == endpoint_id and reads.loaded is not None:
            _reads.set(None)
            return reads.loaded.endpoint.disabled
        return await current_store().ledger.is_disabled(endpoint_id)

    async def disable(self, endpoint_id: str, reason: str) -> None:
        await current_store().ledger.disable(endpoint_id, reason)


_ledger = _StoreLedger()


class _StorePace:
    """The installed store's pace (``PgPace``): an endpoint's rate holds across every
    deliverer, not per process."""

    async def reserve(self, endpoint_id: str, rate_per_s: float) -> float:
        return await current_store().pace.reserve(endpoint_id, rate_per_s)


_pace = _StorePace()

deliver = webhook(
    name=ORG_FAMILY,
    tenant=lambda value: value.org_id,
    endpoint=_endpoint,
    event=_event,
    ledger=_ledger,
    disable_after=20,
    timeout="60s",
    per_endpoint_concurrency=ENDPOINT_CONCURRENCY,
    pace=_pace,
)

deliver_global = webhook(
    name=GLOBAL_FAMILY,
    tenant="none",
    endpoint=_endpoint,
    event=_event,
    ledger=_ledger,
    disable_after=20,
    timeout="60s",
    per_endpoint_concurrency=ENDPOINT_CONCURRENCY,
    pace=_pace,
)


def families(endpoint_concurrency: int = ENDPOINT_CONCURRENCY) -> Registry:
    """A registry holding the two built-in families (merged into every deliverer's), with at
    most ``endpoint_concurrency`` deliveries to one endpoint in flight fleet-wide (0: no cap,
    for a driver without a lease store). Only the claim reads the cap, so the handles that
    enqueue (``deliver``, ``deliver_global``) stay the same."""
    if isinstance(endpoint_concurrency, bool) or endpoint_concurrency < 0:
        raise JobDeclarationInvalidError(
            f"the per-endpoint cap is a whole number, 0 for none; got {endpoint_concurrency!r}",
            meta={"field": "endpoint_concurrency"},
        )
    cap = (
        KeyedConcurrency(key=endpoint_key, limit=endpoint_concurrency)
        if endpoint_concurrency
        else None
    )
    registry = Registry()
    for handle in (deliver, deliver_global):
        if endpoint_concurrency != ENDPOINT_CONCURRENCY:
            handle = JobHandle(dataclasses.replace(handle.definition, concurrency=cap))
        registry.register_job(handle)
    return registry


@dataclass(frozen=True, slots=True)
class Published:
    event_id: str
    deliveries: list[Enqueued]

    def to_dict(self) -> dict[str, Any]:
        return {
            "eventId": self.event_id,
            "deliveries": [
                {"id": e.id, "runId": e.run_id, "deduped": e.deduped} for e in self.deliveries
            ],
        }


async def publish(
    topic: str,
    body: bytes | str,
    *,
    tenant: str | None = None,
    event_id: str | None = None,
    store: PgWebhookStore | None = None,
) -> Published:
    """Store the event and enqueue one delivery per subscribed endpoint of ``tenant``.

    Publishing the same ``event_id`` again enqueues nothing new for deliveries still queued
    (their idempotency keys dedupe), so a publisher that crashed between the two halves
    publishes again with the same id."""
    found = store if store is not None else current_store()
    ident, pairs = await found.store_event(topic, body, tenant=tenant, event_id=event_id)
    handle = deliver if tenant is not None else deliver_global
    enqueued = await handle.enqueue_many(fan_out_inputs(ident, pairs)) if pairs else []
    return Published(event_id=ident, deliveries=enqueued)


async def redeliver(
    endpoint_id: str,
    *,
    event_id: str | None = None,
    since_ms: int | None = None,
    store: PgWebhookStore | None = None,
) -> list[Enqueued]:
    """Queue again one delivery (``event_id``) or every event the endpoint failed since
    ``since_ms`` and never delivered. Re-enable a disabled endpoint first."""
    found = store if store is not None else current_store()
    got = await found.endpoint(endpoint_id)
    if got is None:
        raise WebhookEndpointUnknownError(
            f"no endpoint {endpoint_id!r}", meta={"endpoint_id": endpoint_id}
        )
    _, tenant = got
    if event_id is not None:
        event = await found.event(event_id)
        if event is None or event[1] != tenant:
            raise WebhookEventUnknownError(
                f"no event {event_id!r} for endpoint {endpoint_id!r}",
                meta={"event_id": event_id, "endpoint_id": endpoint_id},
            )
        events = [event_id]
    else:
        events = await found.failed_events(endpoint_id, since_ms or 0)
    handle = deliver if tenant is not None else deliver_global
    inputs = [item for event in events for item in fan_out_inputs(event, [(endpoint_id, tenant)])]
    return await handle.enqueue_many(inputs) if inputs else []
