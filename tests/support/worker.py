"""Shared helpers for the worker tests: a worker on the memory driver with its own metrics,
lifecycle and registry, jobs that block until told, and small readers of rows and series."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from ujobs import job, t
from ujobs.clock import Clock, FrozenClock
from ujobs.drivers.base import ClaimRef, HeartbeatResult, JobRow
from ujobs.drivers.memory.driver import MemoryDriver, memory_driver
from ujobs.execution.outcome import JobExecution
from ujobs.execution.run import Run
from ujobs.jobs.job import JobHandle
from ujobs.jobs.registry import Registry
from ujobs.lifecycle import Lifecycle
from ujobs.metrics import JobMetrics
from ujobs.worker.job_worker import JobWorker, job_worker

T0 = 1_700_000_000_000


def frozen() -> tuple[MemoryDriver, FrozenClock]:
    clock = FrozenClock(T0)
    return memory_driver(clock=clock), clock


def registry_of(*handles: JobHandle[Any]) -> Registry:
    reg = Registry()
    for handle in handles:
        reg.register_job(handle)
    return reg


def make_worker(
    driver: MemoryDriver,
    handles: Iterable[JobHandle[Any]],
    *,
    clock: Clock | None = None,
    **options: Any,
) -> JobWorker:
    """A worker with its own registry, lifecycle and metrics (nothing process-wide)."""
    options.setdefault("metrics", JobMetrics(CollectorRegistry()))
    options.setdefault("lifecycle", Lifecycle())
    options.setdefault("close_driver", False)
    return job_worker(
        driver=driver,
        context=None,
        registry=registry_of(*handles),
        clock=clock or driver.clock,
        **options,
    )


class Gate:
    """Bodies that wait until the test opens them; records who started."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.started: list[Any] = []
        self.entered = asyncio.Event()

    async def __call__(self, run: Run[Any]) -> None:
        self.started.append(run.input)
        self.entered.set()
        await self.open.wait()


def declare(
    body: Callable[[Run[Any]], Any],
    *,
    name: str = "work",
    queue: str = "default",
    tenanted: bool = False,
    **kw: Any,
) -> JobHandle[Any]:
    """A job over ``{n, tenant?, account?}`` inputs, keyed by ``n`` (so each n is one row)."""
    handle = job(
        name=name,
        run=body,
        queue=queue,
        input=t.object(n=t.number.int(), org=t.optional(t.string), account=t.optional(t.string)),
        idempotency_key=lambda i: f"{name}:{i.n}",
        tenant=(lambda i: i.org) if tenanted else "none",
        **kw,
    )
    assert isinstance(handle, JobHandle)
    return handle


async def enqueue(
    driver: MemoryDriver, handle: JobHandle[Any], n: int, queue: str | None = None, **extra: Any
) -> str:
    request = handle.request({"n": n, **extra}, queue=queue, clock=driver.clock)
    return (await driver.enqueue(request)).id


async def row(driver: MemoryDriver, job_id: str) -> JobRow:
    introspect = driver.introspect
    assert introspect is not None
    found = await introspect.get(job_id)
    assert found is not None
    return found


def records(caplog: pytest.LogCaptureFixture, message: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == message]


def sample(metrics: JobMetrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels or None)
    return 0.0 if value is None else value


async def settled(worker: JobWorker, count: int, *, since: int = 0) -> list[JobExecution]:
    """Wait for ``count`` settled executions after position ``since``."""
    await worker.signals.wait(
        "settled", lambda _: len(worker.signals.emitted("settled", since)) >= count, since=since
    )
    return list(worker.signals.emitted("settled", since))[:count]


class ControlledDriver(MemoryDriver):
    """The memory driver with a database that can hang or fail (the outside world)."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock=clock)
        self.heartbeat_error: Exception | None = None
        self.heartbeat_gate: asyncio.Event | None = None
        self.heartbeat_entered = asyncio.Event()
        self.heartbeats = 0
        self.claim_gate: asyncio.Event | None = None
        self.claim_entered = asyncio.Event()
        self.claims = 0

    async def heartbeat(self, job_id: str, ref: ClaimRef, visibility_ms: int) -> HeartbeatResult:
        self.heartbeats += 1
        self.heartbeat_entered.set()
        if self.heartbeat_gate is not None:
            await self.heartbeat_gate.wait()
        if self.heartbeat_error is not None:
            raise self.heartbeat_error
        return await super().heartbeat(job_id, ref, visibility_ms)

    async def claim(self, options: Any) -> Any:
        self.claims += 1
        self.claim_entered.set()
        if self.claim_gate is not None:
            await self.claim_gate.wait()
        return await super().claim(options)
