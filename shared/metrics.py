"""The Prometheus series of § Metrics, instrumented one layer above the drivers.

Counters move where an attempt is settled (the worker), gauges are read from
``driver.stats()`` by ``refresh_queue_gauges`` (the api/exporter refresh them on scrape or on a
timer). Label values are queue names and outcomes only — never an id, an input or a tenant.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Literal

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, disable_created_metrics

from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.drivers.base import JobDriver

JobsTotalOutcome = Literal["ok", "failed", "dead"]

# `*_created` series double every counter for a timestamp nobody pages on.
disable_created_metrics()  # type: ignore[no-untyped-call]


class JobMetrics:
    """Every series in one object, so a test can build its own on a private registry."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.registry = registry
        self.jobs_total = Counter(
            "jobs",
            "Settled attempts by queue and outcome (ok, failed, dead).",
            ["queue", "outcome"],
            registry=registry,
        )
        self.jobs_snoozed = Counter(
            "jobs_snoozed",
            "Runs put back by Snooze (uncounted, no error), by queue.",
            ["queue"],
            registry=registry,
        )
        self.queue_depth = Gauge(
            "queue_depth", "Jobs due and waiting for a worker.", ["queue"], registry=registry
        )
        self.queue_oldest_ready_seconds = Gauge(
            "queue_oldest_ready_seconds",
            "Age of the oldest due job still waiting.",
            ["queue"],
            registry=registry,
        )
        self.queue_dead_jobs = Gauge(
            "queue_dead_jobs", "Jobs in the dead-letter queue.", ["queue"], registry=registry
        )
        self.queue_top_tenant_due = Gauge(
            "queue_top_tenant_due",
            "Due jobs of the tenant with the most due work in the queue (among the oldest "
            "10,000 due): one series per queue, whatever the number of tenants.",
            ["queue"],
            registry=registry,
        )
        self.queue_top_tenant_share = Gauge(
            "queue_top_tenant_share",
            "That tenant's share of the queue's due jobs read (0 to 1): near 1 while another "
            "tenant waits is one tenant's burst ahead of the rest.",
            ["queue"],
            registry=registry,
        )
        self.job_leases_lost = Counter(
            "job_leases_lost",
            "Leases that lapsed or were taken while this process still ran the job.",
            ["queue"],
            registry=registry,
        )
        self.job_worker_in_flight = Gauge(
            "job_worker_in_flight",
            "Runs held by the live workers of this process (sum).",
            registry=registry,
        )
        self.job_worker_capacity = Gauge(
            "job_worker_capacity",
            "Runs the live workers of this process can hold (sum).",
            registry=registry,
        )
        self._workers: dict[int, tuple[Callable[[], int], Callable[[], int]]] = {}
        self._lock = threading.Lock()
        self.job_worker_in_flight.set_function(self._sum_in_flight)
        self.job_worker_capacity.set_function(self._sum_capacity)

    def record_outcome(self, queue: str, outcome: JobsTotalOutcome) -> None:
        self.jobs_total.labels(queue=queue, outcome=outcome).inc()

    def lease_lost(self, queue: str) -> None:
        self.job_leases_lost.labels(queue=queue).inc()

    def track_worker(
        self, key: object, in_flight: Callable[[], int], capacity: Callable[[], int]
    ) -> Callable[[], None]:
        """Count a live worker in the two gauges; the answer removes it (a stopped worker)."""
        with self._lock:
            self._workers[id(key)] = (in_flight, capacity)

        def untrack() -> None:
            with self._lock:
                self._workers.pop(id(key), None)

        return untrack

    def _sum_in_flight(self) -> float:
        with self._lock:
            return float(sum(f() for f, _ in self._workers.values()))

    def _sum_capacity(self) -> float:
        with self._lock:
            return float(sum(c() for _, c in self._workers.values()))

    async def refresh_queue_gauges(self, driver: JobDriver, clock: Clock = SYSTEM_CLOCK) -> None:
        """Set the queue gauges from one ``driver.stats()`` read."""
        stats = await driver.stats()
        now = clock.now_ms()
        for queue, q in stats.queues.items():
            self.queue_depth.labels(queue=queue).set(q.due)
            oldest = 0.0
            if q.oldest_due_run_at_ms is not None:
                oldest = max(0.0, (now - q.oldest_due_run_at_ms) / 1000)
            self.queue_oldest_ready_seconds.labels(queue=queue).set(oldest)
            self.queue_dead_jobs.labels(queue=queue).set(q.dead)
            await self._refresh_top_tenant(driver, queue, q.due, now)

    async def _refresh_top_tenant(self, driver: JobDriver, queue: str, due: int, now: int) -> None:
        """The largest tenant's due work per queue: a per-queue series (the tenant's name is in
        ``ujobs queues show``, not in a label, so the series count is the queues', never the
        tenants'). A driver without an operator surface sets none."""
        if driver.introspect is None:
            return
        top_due, share = 0, 0.0
        if due:
            found = await driver.introspect.queue_tenants(queue, now, cap=TOP_TENANT_READ, top=1)
            if found.tenants:
                top_due = found.tenants[0].due
                share = top_due / min(due, TOP_TENANT_READ)
        self.queue_top_tenant_due.labels(queue=queue).set(top_due)
        self.queue_top_tenant_share.labels(queue=queue).set(min(1.0, share))


TOP_TENANT_READ = 10_000
"""The due rows per queue the top-tenant gauges read (the first in hand-out order: by priority,
then oldest)."""

_default: JobMetrics | None = None
_default_lock = threading.Lock()


def job_metrics() -> JobMetrics:
    """The process's series on the default registry (created once)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = JobMetrics()
        return _default
