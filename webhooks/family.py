"""``webhook()``: one event to one endpoint, as a job.

A factory over ``job()``: retry with backoff, dead-lettering, the deadline, leases and the drain
are the queue's; what this adds is the delivery itself, in this order, on every attempt:

1. The tenant: the payload's ``org_id`` must be the run's org (a ``tenant='none'`` family takes
   no ``org_id``), else ``X_JOB_TENANT_MISMATCH``, terminal, before either seam reads.
2. ``endpoint(input)`` and ``event(input)``, read once per attempt and never checkpointed (the
   endpoint carries the secret, and a step's output is written to ``x_job_steps``).
3. ``is_disabled`` (the endpoint row's own flag and the ledger's verdict), asked before every
   socket: a disabled endpoint's delivery dead-letters (``X_WEBHOOK_ENDPOINT_DISABLED``) with
   its event kept, for ``redeliver`` after an operator re-enables it.
4. Build the body the endpoint takes (``ujobs.webhooks.payload``: the Standard Webhooks envelope
   naming the topic, or the published bytes) and sign the exact bytes sent at SEND time; the
   endpoint's own headers merge UNDER ours. A header HTTP forbids (a stored row from before
   the rule) fails the attempt like a refused URL: terminal, recorded, and counted toward
   ``disable_after``.
5. A drain that arrived before the POST stops it; once on the wire a drain never aborts it.
   The deadline and a lost lease cancel it, and that cancelled attempt writes no ledger row.
6. Record the attempt in the ledger, THEN throw: 2xx delivered; 429/503 throttled with the
   ``Retry-After`` it named; 410 rejected (terminal, and the endpoint is disabled); any other
   status, a redirect (never followed) or no answer failed; ``disable_after`` consecutive
   failures disable the endpoint.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.durations import Duration, duration_ms
from ujobs.errors import JobDeclarationInvalidError, JobTenantMismatchError
from ujobs.execution.run import Run
from ujobs.jobs.job import JobHandle, KeyedConcurrency, job
from ujobs.jobs.retry import Retry
from ujobs.webhooks.client import HttpAnswer, TransportError, WebhookClient
from ujobs.webhooks.endpoint_headers import check_headers
from ujobs.webhooks.errors import (
    WebhookDeliveryFailedError,
    WebhookDeliveryRejectedError,
    WebhookDeliveryThrottledError,
    WebhookEndpointDisabledError,
    WebhookEndpointInvalidError,
    WebhookEndpointUnknownError,
    WebhookEventUnknownError,
)
from ujobs.webhooks.ledger import AttemptOutcome, DeliveryAttempt, WebhookLedger, excerpt
from ujobs.webhooks.pace import LocalPace, Pace
from ujobs.webhooks.payload import Payload, delivery_body
from ujobs.webhooks.signature import FRAMEWORK_HEADERS, Scheme, delivery_headers
from ujobs.webhooks.ssrf import GuardPolicy

WEBHOOKS_QUEUE = "webhooks"
DEFAULT_REQUEST_TIMEOUT_MS = 30_000
DEFAULT_RETRY = Retry(attempts=8, backoff="exponential", delay="5s", max_delay="1h")


class WebhookInput(BaseModel):
    """What a delivery job carries: two ids, and the org when the family is org-owned."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoint_id: str = Field(min_length=1, max_length=200)
    event_id: str = Field(min_length=1, max_length=200)
    org_id: str | None = Field(default=None, min_length=1, max_length=200)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where and how to deliver. ``secrets`` is newest first (several during a rotation):
    ``whsec_`` (or ``whsk_`` for ed25519) for the standard scheme, any string for the spec's.
    Its repr never shows a secret, nor the values of its own headers."""

    id: str
    url: str
    secrets: tuple[str, ...] = field(repr=False)
    scheme: Scheme = "standard"
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    disabled: bool = False
    rate_per_s: float | None = None
    """At most this many POSTs a second to this endpoint from one deliverer process."""
    payload: Payload = "raw"
    """``envelope``: the Standard Webhooks ``{"type", "timestamp", "data"}`` around the event;
    ``raw``: the published bytes (``ujobs.webhooks.payload``). The built-in store's endpoints carry
    their own; an endpoint a family's seam builds sends what it always sent unless it says."""

    def __post_init__(self) -> None:
        check_rate(self.id, self.rate_per_s)


def check_rate(endpoint_id: str, rate: float | None) -> None:
    """``X_WEBHOOK_ENDPOINT_INVALID`` unless ``rate`` is None or a positive finite number."""
    if rate is not None and (isinstance(rate, bool) or not 0 < rate < float("inf")):
        raise WebhookEndpointInvalidError(
            f"endpoint {endpoint_id!r}: rate_per_s must be a positive number, got {rate!r}",
            meta={"endpoint_id": endpoint_id, "field": "rate_per_s"},
        )


@dataclass(frozen=True, slots=True)
class Event:
    id: str
    topic: str
    body: bytes | str
    content_type: str = "application/json"
    published_at_ms: int | None = None
    """When it was published: the envelope's ``timestamp`` (the attempt's own time if None)."""


EndpointSeam = Callable[[WebhookInput], Awaitable[Endpoint | None]]
EventSeam = Callable[[WebhookInput], Awaitable[Event | None]]
TenantOf = Callable[[WebhookInput], str | None] | Literal["none"]
ClientSource = WebhookClient | Callable[[], WebhookClient]

_default_client: WebhookClient | None = None


def install_client(client: WebhookClient | None) -> None:
    """The client families without their own use (the deliverer installs one built from its
    config: the SSRF policy, the connection cap)."""
    global _default_client
    _default_client = client


def default_client() -> WebhookClient:
    global _default_client
    if _default_client is None:
        _default_client = WebhookClient(GuardPolicy())
    return _default_client


def _tenant_spec(name: str, tenant: TenantOf) -> Callable[[Any], str | None] | Literal["none"]:
    if tenant == "none":
        return "none"
    if not callable(tenant):
        raise JobDeclarationInvalidError(
            f"webhook {name!r}: tenant must be a function of the input or 'none'",
            meta={"job": name, "field": "tenant"},
        )

    def of(value: WebhookInput) -> str:
        org = tenant(value)
        if not isinstance(org, str) or not org:
            raise JobTenantMismatchError(
                f"webhook {name!r}: tenant(input) names no org for this delivery; an org-owned "
                "delivery carries org_id on its input",
                meta={"job": name},
            )
        if value.org_id is not None and value.org_id != org:
            raise JobTenantMismatchError(
                f"webhook {name!r}: the input's org_id is not the org the run is under",
                meta={"job": name},
            )
        return org

    return of


def retry_after_seconds(value: str | None, date: str | None, now_ms: int) -> float | None:
    """``Retry-After`` as seconds from now: delta-seconds, or an HTTP-date measured against
    the response's own ``Date`` (the receiver's clock) when it sent one. ``0``, a past date or
    anything unparseable is unstated (None)."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        seconds = int(text)
        return float(seconds) if seconds > 0 else None
    try:
        at = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    base_ms = now_ms
    if date is not None:
        try:
            base_ms = int(parsedate_to_datetime(date).timestamp() * 1000)
        except (TypeError, ValueError):
            base_ms = now_ms
    delta = at.timestamp() - base_ms / 1000
    return delta if delta > 0 else None


# Headers the HTTP client owns: an endpoint row that set them would break the request.
TRANSPORT_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "te", "upgrade", "expect"}
)


def merged_headers(endpoint: Mapping[str, str], ours: Mapping[str, str]) -> dict[str, str]:
    """The endpoint's headers UNDER the framework's: one that names a signature (or any header
    the framework or the transport writes), in any case, is dropped."""
    merged = {
        k: v
        for k, v in endpoint.items()
        if k.lower() not in FRAMEWORK_HEADERS and k.lower() not in TRANSPORT_HEADERS
    }
    merged.update(ours)
    return merged


@dataclass(frozen=True, slots=True)
class _Delivery:
    name: str
    endpoint: EndpointSeam
    event: EventSeam
    ledger: WebhookLedger
    disable_after: int | None
    request_timeout_ms: int
    client: ClientSource | None
    clock: Clock
    tenant_none: bool
    pace: Pace

    def _client(self) -> WebhookClient:
        if self.client is None:
            return default_client()
        return self.client if isinstance(self.client, WebhookClient) else self.client()

    async def run(self, run: Run[WebhookInput]) -> dict[str, Any]:
        value = run.input
        if self.tenant_none and value.org_id is not None:
            raise JobTenantMismatchError(
                f"webhook {self.name!r} belongs to no tenant, so its input carries no org_id",
                meta={"job": self.name},
            )
        endpoint = await self.endpoint(value)
        if endpoint is None:
            raise WebhookEndpointUnknownError(
                f"webhook {self.name!r}: no endpoint {value.endpoint_id!r}",
                meta={"endpoint_id": value.endpoint_id},
            )
        event = await self.event(value)
        if event is None:
            raise WebhookEventUnknownError(
                f"webhook {self.name!r}: no event {value.event_id!r}",
                meta={"event_id": value.event_id},
            )
        now_ms = self.clock.now_ms()
        published = event.body.encode() if isinstance(event.body, str) else bytes(event.body)
        body, content_type = delivery_body(
            endpoint.payload,
            topic=event.topic,
            event_id=event.id,
            published_at_ms=event.published_at_ms if event.published_at_ms is not None else now_ms,
            body=published,
            content_type=event.content_type,
        )
        # Signed before the disabled check so a bad id or topic is terminal whatever the state.
        signed = delivery_headers(
            endpoint.scheme,
            endpoint.secrets,
            event_id=event.id,
            topic=event.topic,
            timestamp=now_ms // 1000,
            body=body,
        )
        if endpoint.disabled or await self.ledger.is_disabled(endpoint.id):
            await self._record(
                run,
                endpoint,
                event,
                "skipped",
                None,
                0,
                "",
                now_ms,
                WebhookEndpointDisabledError.code,
            )
            raise WebhookEndpointDisabledError(
                f"webhook {self.name!r}: endpoint {endpoint.id!r} is disabled; its events are "
                "kept — re-enable it, then `ujobs webhooks redeliver`",
                meta={"endpoint_id": endpoint.id, "event_id": event.id},
            )
        if endpoint.rate_per_s is not None:
            wait_s = await self.pace.reserve(endpoint.id, endpoint.rate_per_s)
            if wait_s > 0:
                await asyncio.sleep(wait_s)
                now_ms = self.clock.now_ms()
                signed = delivery_headers(
                    endpoint.scheme,
                    endpoint.secrets,
                    event_id=event.id,
                    topic=event.topic,
                    timestamp=now_ms // 1000,
                    body=body,
                )
        # A drain that arrived before the POST stops it here; once sent, nothing but the
        # deadline or a lost lease (which cancel this task) stops it.
        run.signal.throw_if_aborted()
        try:
            own = check_headers(endpoint.headers)
            headers = merged_headers(own, {"content-type": content_type, **signed})
            answer = await self._client().post(
                endpoint.url, body, headers, timeout_s=self.request_timeout_ms / 1000
            )
        except TransportError as exc:
            error = WebhookDeliveryFailedError(
                f"webhook {self.name!r}: no answer from endpoint {endpoint.id!r} ({exc.kind})",
                meta={"endpoint_id": endpoint.id, "event_id": event.id, "kind": exc.kind},
            )
            await self._failed(run, endpoint, event, None, exc.latency_ms, exc.detail, error)
            raise error from None
        except WebhookEndpointInvalidError as exc:
            await self._failed(run, endpoint, event, None, 0, exc.message, exc)
            raise
        return await self._answered(run, endpoint, event, answer)

    async def _answered(
        self, run: Run[WebhookInput], endpoint: Endpoint, event: Event, answer: HttpAnswer
    ) -> dict[str, Any]:
        status, meta = answer.status, {"endpoint_id": endpoint.id, "event_id": event.id}
        if 200 <= status < 300:
            await self._record(
                run,
                endpoint,
                event,
                "delivered",
                status,
                answer.latency_ms,
                answer.excerpt,
                self.clock.now_ms(),
                None,
            )
            return {"status": status, "latencyMs": answer.latency_ms}
        error: Exception
        if status in (429, 503):
            stated = retry_after_seconds(answer.retry_after, answer.date, self.clock.now_ms())
            error = WebhookDeliveryThrottledError(
                f"webhook {self.name!r}: endpoint {endpoint.id!r} answered {status}",
                meta={**meta, "status": status, "retryAfterSeconds": stated},
            )
        elif status == 410:
            error = WebhookDeliveryRejectedError(
                f"webhook {self.name!r}: endpoint {endpoint.id!r} answered 410 Gone; it is "
                "disabled until an operator re-enables it",
                meta={**meta, "status": status},
            )
        else:
            extra = {"location": answer.location} if 300 <= status < 400 else {}
            error = WebhookDeliveryFailedError(
                f"webhook {self.name!r}: endpoint {endpoint.id!r} answered {status}"
                + (" (redirects are never followed)" if extra else ""),
                meta={**meta, "status": status, **extra},
            )
        await self._failed(run, endpoint, event, status, answer.latency_ms, answer.excerpt, error)
        if status == 410:
            await self.ledger.disable(endpoint.id, "gone")
        raise error

    async def _failed(
        self,
        run: Run[WebhookInput],
        endpoint: Endpoint,
        event: Event,
        status: int | None,
        latency_ms: int,
        text: str,
        error: Exception,
    ) -> None:
        code = getattr(error, "code", None)
        count = await self._record(
            run, endpoint, event, "failed", status, latency_ms, text, self.clock.now_ms(), code
        )
        if self.disable_after is not None and count >= self.disable_after:
            await self.ledger.disable(endpoint.id, "failures")

    async def _record(
        self,
        run: Run[WebhookInput],
        endpoint: Endpoint,
        event: Event,
        outcome: AttemptOutcome,
        status: int | None,
        latency_ms: int,
        text: str,
        at_ms: int,
        code: str | None,
    ) -> int:
        return await self.ledger.record(
            DeliveryAttempt(
                endpoint_id=endpoint.id,
                event_id=event.id,
                job_id=run.job_id,
                attempt=run.attempt,
                outcome=outcome,
                status=status,
                code=code,
                latency_ms=latency_ms,
                response_excerpt=excerpt(text),
                at_ms=at_ms,
            )
        )


def webhook(
    *,
    name: str,
    tenant: TenantOf,
    endpoint: EndpointSeam,
    event: EventSeam,
    ledger: WebhookLedger,
    disable_after: int | None = None,
    timeout: Duration | None = None,
    retry: Retry | Mapping[str, Any] | None = None,
    request_timeout: Duration = DEFAULT_REQUEST_TIMEOUT_MS,
    per_endpoint_concurrency: int | None = None,
    queue: str = WEBHOOKS_QUEUE,
    client: ClientSource | None = None,
    clock: Clock = SYSTEM_CLOCK,
    pace: Pace | None = None,
) -> JobHandle[WebhookInput]:
    """Declare a webhook family: ``enqueue({"endpoint_id", "event_id", "org_id"?})`` delivers
    one event to one endpoint. The fan-out (one enqueue per subscribed endpoint) is yours.

    ``timeout`` is the attempt's deadline (set it below the drain budget); ``request_timeout``
    bounds one POST, and a receiver that overruns it is a counted failure.
    ``per_endpoint_concurrency`` caps the deliveries in flight to one endpoint fleet-wide, so a
    slow partner holds at most that many slots. ``pace`` is where an endpoint's
    ``rate_per_s`` reservations live: this process (``LocalPace``, the default) unless given
    a shared one (the built-in families use ``PgPace``, fleet-wide).
    """
    for seam, label in ((endpoint, "endpoint"), (event, "event")):
        if not callable(seam):
            raise JobDeclarationInvalidError(
                f"webhook {name!r}: {label} must be an async function of the input",
                meta={"job": name, "field": label},
            )
    for method in ("record", "is_disabled", "disable"):
        if not inspect.iscoroutinefunction(getattr(ledger, method, None)):
            raise JobDeclarationInvalidError(
                f"webhook {name!r}: ledger must be a WebhookLedger (async {method} missing)",
                meta={"job": name, "field": "ledger"},
            )
    if disable_after is not None and (
        isinstance(disable_after, bool) or not isinstance(disable_after, int) or disable_after < 1
    ):
        raise JobDeclarationInvalidError(
            f"webhook {name!r}: disable_after must be a whole number of at least 1",
            meta={"job": name, "field": "disable_after"},
        )
    delivery = _Delivery(
        name=name,
        endpoint=endpoint,
        event=event,
        ledger=ledger,
        disable_after=disable_after,
        request_timeout_ms=duration_ms(request_timeout, field="request_timeout"),
        client=client,
        clock=clock,
        tenant_none=tenant == "none",
        pace=pace if pace is not None else LocalPace(),
    )
    concurrency = (
        KeyedConcurrency(key=endpoint_key, limit=per_endpoint_concurrency)
        if per_endpoint_concurrency is not None
        else None
    )
    handle: JobHandle[WebhookInput] = job(
        name=name,
        input=WebhookInput,
        idempotency_key=_delivery_key,
        tenant=_tenant_spec(name, tenant),
        retry=retry if retry is not None else DEFAULT_RETRY,
        queue=queue,
        timeout=timeout,
        concurrency=concurrency,
        run=delivery.run,
        description=f"Deliver one event to one endpoint ({name}).",
    )
    return handle


def _delivery_key(value: WebhookInput) -> str:
    return f"webhook:{value.endpoint_id}:{value.event_id}"


def endpoint_key(value: WebhookInput) -> str:
    return value.endpoint_id


def fan_out_inputs(
    event_id: str, endpoints: Sequence[tuple[str, str | None]]
) -> list[dict[str, Any]]:
    """One delivery input per ``(endpoint_id, org_id)``: the shape ``enqueue_many`` takes."""
    out: list[dict[str, Any]] = []
    for endpoint_id, org_id in endpoints:
        item: dict[str, Any] = {"endpoint_id": endpoint_id, "event_id": event_id}
        if org_id is not None:
            item["org_id"] = org_id
        out.append(item)
    return out
