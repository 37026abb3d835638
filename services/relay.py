"""``ujobs relay``: the outbox relay as its own service.

Publishes committed ``x_outbox`` rows onto the queue — the configured driver, Postgres or
Redis; the outbox itself always stages in Postgres. It is woken by a LISTEN session on
``x_outbox_wake`` (``postgres_wake``, proven by a probe; the poll is the guarantee), and each
publish is announced the way a direct enqueue is (``ujobs.services.runtime.wiring``: the enqueue
statement's
own ``pg_notify`` for LISTEN workers, the Redis wake channel when ``REDIS_URL`` is set). The
drain stops polling, waits out the pass in flight (a publish, then its mark) within the budget,
closes, and exits 0. It applies nothing to the schema: run ``ujobs db migrate`` first.
Standalone it serves /metrics (``outbox_published_total``, ``outbox_pending_rows``,
``outbox_lag_seconds``, …), /healthz and /readyz on ``UJOBS_METRICS_PORT``.
"""

from __future__ import annotations

import sys

from ujobs.outbox import OUTBOX_WAKE_CHANNEL, outbox_relay, postgres_outbox_store
from ujobs.outbox.relay import OutboxRelay, RelayOptions
from ujobs.services.config.settings import RelayConfig
from ujobs.services.runtime.metrics_server import serve_metrics
from ujobs.services.runtime.service_metrics import relay_metrics
from ujobs.services.runtime.service_run import ServiceRun
from ujobs.services.runtime.wiring import Wired, wire
from ujobs.wake.listener import postgres_wake


async def start_relay(
    run: ServiceRun, config: RelayConfig, *, wired: Wired | None = None, say: bool = True
) -> OutboxRelay:
    """Build and start the relay and its wake (on ``wired`` when given: ``ujobs dev`` shares
    one); both drain with the process lifecycle."""
    url = config.common.connections.require_database("the relay")
    standalone = wired is None
    if wired is None:
        wired = await wire(run, config.common.connections, need_database=True, pool_size=4)
    pool = wired.backend.require_pool("the relay")
    metrics = relay_metrics()
    wake = postgres_wake(url, pool, channels=(OUTBOX_WAKE_CHANNEL,))
    await wake.start()
    run.stack.push_async_callback(wake.stop)
    relay = outbox_relay(
        store=postgres_outbox_store(executor=pool),
        driver=wired.driver,
        wake=wake,
        options=RelayOptions(claim_lease_ms=config.claim_lease_ms, batch_size=config.batch_size),
    )
    metrics.track(relay)
    await relay.start()
    run.stack.push_async_callback(relay.stop)
    if standalone:
        await serve_metrics(
            run, config.metrics, wired.backend, refresh=lambda: metrics.refresh(pool)
        )
    if say:
        sys.stdout.write(f"ujobs relay: publishing x_outbox as {relay.relay_id}\n")
        sys.stdout.flush()
    return relay
