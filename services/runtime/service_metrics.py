"""The relay's and the scheduler's own Prometheus series (the worker's are ``ujobs.metrics``).

| Series | Kind | Answers |
|---|---|---|
| ``outbox_published_total`` | counter | rows this relay published onto the queue (a dedupe counts: the row is retired) |
| ``outbox_publish_failures_total`` | counter | passes that stopped on a failed publish |
| ``outbox_pending_rows`` | gauge | committed rows not yet published (read on scrape) |
| ``outbox_lag_seconds`` | gauge | how long the oldest of them has waited — page when it grows |
| ``scheduler_task_fires_total{task}`` | counter | occurrences this scheduler dispatched |
| ``scheduler_leader`` | gauge | 1 while this scheduler holds the leader lease |

Counters move on the loops' signals (``Signals.subscribe``); the outbox gauges are read from
Postgres when scraped, at most every ``REFRESH_S``. Label values are task names only.
"""  # noqa: E501

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge

from ujobs.drivers.postgres.sql import query
from ujobs.outbox.relay import OutboxRelay, RelayPass
from ujobs.scheduler.job_scheduler import JobScheduler
from ujobs.scheduler.rounds import Fired

if TYPE_CHECKING:
    import asyncpg

    Pool = asyncpg.Pool[Any]

log = logging.getLogger("ujobs.metrics")

REFRESH_S = 1.0
READ_TIMEOUT_S = 2.0
_LAG = query("outbox_lag")


class RelayMetrics:
    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.registry = registry
        self.published = Counter(
            "outbox_published", "Outbox rows published onto the queue.", registry=registry
        )
        self.publish_failures = Counter(
            "outbox_publish_failures",
            "Relay passes that stopped on a failed publish (the rows wait for the next pass).",
            registry=registry,
        )
        self.pending = Gauge(
            "outbox_pending_rows", "Committed outbox rows not yet published.", registry=registry
        )
        self.lag = Gauge(
            "outbox_lag_seconds",
            "How long the oldest unpublished outbox row has waited.",
            registry=registry,
        )
        self._read_at: float | None = None

    def track(self, relay: OutboxRelay) -> None:
        def on(event: str, payload: Any) -> None:
            if event == "pass" and isinstance(payload, RelayPass):
                self.published.inc(len(payload.published) + len(payload.deduped))
                if payload.failed is not None:
                    self.publish_failures.inc()

        relay.signals.subscribe(on)

    async def refresh(self, pool: Pool) -> None:
        """Re-read the backlog gauges (at most every ``REFRESH_S``; a failed read keeps them)."""
        now = time.monotonic()
        if self._read_at is not None and now - self._read_at < REFRESH_S:
            return
        try:
            row = await asyncio.wait_for(pool.fetchrow(_LAG), READ_TIMEOUT_S)
        except Exception as exc:
            log.warning("ujobs.metrics.outbox-read-failed", extra={"error": repr(exc)})
            return
        assert row is not None
        self.pending.set(row["pending"])
        self.lag.set(row["lag_s"])
        self._read_at = now


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.registry = registry
        self.fires = Counter(
            "scheduler_task_fires",
            "Task occurrences this scheduler dispatched.",
            ["task"],
            registry=registry,
        )
        self.leader = Gauge(
            "scheduler_leader", "1 while this scheduler holds the leader lease.", registry=registry
        )

    def track(self, scheduler: JobScheduler) -> None:
        def on(event: str, payload: Any) -> None:
            if event == "fired" and isinstance(payload, Fired):
                self.fires.labels(task=payload.task).inc()

        scheduler.signals.subscribe(on)
        self.leader.set_function(lambda: 1.0 if scheduler.leading else 0.0)


_lock = threading.Lock()
_relay: RelayMetrics | None = None
_scheduler: SchedulerMetrics | None = None


def relay_metrics() -> RelayMetrics:
    """The process's relay series on the default registry (created once)."""
    global _relay
    with _lock:
        if _relay is None:
            _relay = RelayMetrics()
        return _relay


def scheduler_metrics() -> SchedulerMetrics:
    """The process's scheduler series on the default registry (created once)."""
    global _scheduler
    with _lock:
        if _scheduler is None:
            _scheduler = SchedulerMetrics()
        return _scheduler
