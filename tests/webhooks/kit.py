"""A webhook family over a memory driver on a frozen clock, delivering to a real local
receiver, one attempt at a time (the loop the deliverer runs, without the loop)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimOptions
from ujobs.drivers.memory import MemoryDriver, memory_driver
from ujobs.execution.attempt import execute_job
from ujobs.execution.outcome import JobExecution
from ujobs.jobs.job import JobHandle
from ujobs.jobs.retry import Retry
from ujobs.signal import Signal
from ujobs.webhooks.client import WebhookClient
from ujobs.webhooks.family import Endpoint, Event, TenantOf, WebhookInput, webhook
from ujobs.webhooks.ledger import MemoryWebhookLedger
from ujobs.webhooks.signature import generate_secret
from ujobs.webhooks.ssrf import GuardPolicy

T0 = 1_700_000_000_000
LOCAL = GuardPolicy.parse("127.0.0.1/32", allow_http=True)


@dataclass
class Kit:
    driver: MemoryDriver
    clock: FrozenClock
    ledger: MemoryWebhookLedger
    client: WebhookClient
    handle: JobHandle[WebhookInput]
    endpoints: dict[str, Endpoint] = field(default_factory=dict)
    events: dict[str, Event] = field(default_factory=dict)
    seen: list[tuple[str, WebhookInput]] = field(default_factory=list)

    def add_endpoint(self, url: str, *, id: str = "ep_1", **kwargs: Any) -> Endpoint:
        kwargs.setdefault("secrets", (generate_secret(),))
        endpoint = Endpoint(id=id, url=url, **kwargs)
        self.endpoints[id] = endpoint
        return endpoint

    def add_event(
        self, *, id: str = "evt_1", topic: str = "orders.paid", body: str = '{"n":1}'
    ) -> Event:
        event = Event(id=id, topic=topic, body=body)
        self.events[id] = event
        return event

    async def enqueue(self, input: dict[str, Any] | None = None) -> str:
        value = input if input is not None else {"endpoint_id": "ep_1", "event_id": "evt_1"}
        enqueued = await self.driver.enqueue(self.handle.request(value, clock=self.clock))
        return enqueued.id

    async def attempt(self, *, signal: Signal | None = None) -> JobExecution:
        """Claim the due delivery (advancing the clock to it) and run one attempt."""
        claimed = await self.driver.claim(
            ClaimOptions(queues=["webhooks"], limit=1, worker_id="w1", visibility_ms=30_000)
        )
        assert len(claimed) == 1, "expected one due delivery"
        return await execute_job(
            claimed[0], driver=self.driver, handle=self.handle, context=None, signal=signal
        )

    async def due(self, execution: JobExecution) -> None:
        """Move the clock to when a retried delivery is due again."""
        assert execution.resume_at_ms is not None
        self.clock.set(max(self.clock.now_ms(), execution.resume_at_ms))


def make_kit(
    *,
    tenant: TenantOf = "none",
    disable_after: int | None = None,
    timeout: Any = None,
    retry: Retry | None = None,
    request_timeout: Any = "5s",
    name: str = "partner.webhooks",
    policy: GuardPolicy = LOCAL,
) -> Kit:
    clock = FrozenClock(T0)
    driver = memory_driver(clock=clock)
    ledger = MemoryWebhookLedger(capacity=100)
    client = WebhookClient(policy)
    holder: dict[str, Kit] = {}

    async def endpoint(value: WebhookInput) -> Endpoint | None:
        kit = holder["kit"]
        kit.seen.append(("endpoint", value))
        return kit.endpoints.get(value.endpoint_id)

    async def event(value: WebhookInput) -> Event | None:
        kit = holder["kit"]
        kit.seen.append(("event", value))
        return kit.events.get(value.event_id)

    handle = webhook(
        name=name,
        tenant=tenant,
        endpoint=endpoint,
        event=event,
        ledger=ledger,
        disable_after=disable_after,
        timeout=timeout,
        retry=retry if retry is not None else Retry(attempts=5, delay="1s", jitter=False),
        request_timeout=request_timeout,
        client=client,
        clock=clock,
    )
    kit = Kit(driver=driver, clock=clock, ledger=ledger, client=client, handle=handle)
    holder["kit"] = kit
    return kit
