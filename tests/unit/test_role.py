"""``ujobs.role.Role``: the worker, the scheduler and the relay start, stop, drain and register
with their lifecycle the same way; a later, earlier deadline bounds a wind-down in flight."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from ujobs.drivers.memory.driver import memory_driver
from ujobs.jobs.registry import Registry
from ujobs.lifecycle import Deadline, Lifecycle
from ujobs.metrics import JobMetrics
from ujobs.outbox import RelayOptions, memory_outbox_store, outbox_relay
from ujobs.role import Role, RolePhase
from ujobs.scheduler import SchedulerOptions, job_scheduler
from ujobs.worker.job_worker import job_worker

Build = Callable[[Lifecycle, bool], Role]


def phase(role: Role) -> RolePhase:
    """Read afresh (a type checker would otherwise keep the phase it last narrowed to)."""
    return role.phase


def _worker(lifecycle: Lifecycle, drain_on_shutdown: bool) -> Role:
    return job_worker(
        driver=memory_driver(),
        context=None,
        queues=["default"],
        registry=Registry(),
        metrics=JobMetrics(CollectorRegistry()),
        lifecycle=lifecycle,
        drain_on_shutdown=drain_on_shutdown,
    )


def _scheduler(lifecycle: Lifecycle, drain_on_shutdown: bool) -> Role:
    return job_scheduler(
        driver=memory_driver(),
        tasks=[],
        lifecycle=lifecycle,
        options=SchedulerOptions(drain_on_shutdown=drain_on_shutdown),
    )


def _relay(lifecycle: Lifecycle, drain_on_shutdown: bool) -> Role:
    return outbox_relay(
        store=memory_outbox_store(),
        driver=memory_driver(),
        lifecycle=lifecycle,
        options=RelayOptions(drain_on_shutdown=drain_on_shutdown),
    )


ROLES = pytest.mark.parametrize("build", [_worker, _scheduler, _relay], ids=lambda b: b.__name__)


@ROLES
async def test_start_registers_one_pair_of_hooks_and_stop_removes_it(build: Build) -> None:
    lifecycle = Lifecycle()
    role = build(lifecycle, True)
    assert phase(role) == "new"
    await role.start()
    await role.start()  # a second call does nothing
    assert phase(role) == "running"
    assert lifecycle.hook_count == 1
    await role.stop(Deadline.after_ms(5_000))
    assert phase(role) == "stopped"
    assert lifecycle.hook_count == 0
    await role.stop()  # safe twice


@ROLES
async def test_without_drain_on_shutdown_nothing_is_registered(build: Build) -> None:
    lifecycle = Lifecycle()
    role = build(lifecycle, False)
    await role.start()
    assert lifecycle.hook_count == 0
    await role.stop()
    assert phase(role) == "stopped"


@ROLES
async def test_drain_runs_both_phases_for_this_role_alone(build: Build) -> None:
    lifecycle = Lifecycle()
    role = build(lifecycle, True)
    await role.drain()  # before start: nothing to do
    assert phase(role) == "new"
    await role.start()
    await role.drain(Deadline.after_ms(5_000))
    assert phase(role) == "stopped"
    assert role.stopping
    assert not lifecycle.draining  # the process lifecycle was not drained
    assert lifecycle.hook_count == 0


@ROLES
async def test_the_process_drain_stops_every_role(build: Build) -> None:
    lifecycle = Lifecycle()
    role = build(lifecycle, True)
    await role.start()
    await lifecycle.drain(5_000)
    assert phase(role) == "stopped"


class Stuck(Role):
    """A role whose work in flight never ends: only the deadline ends its wind-down."""

    def __init__(self) -> None:
        super().__init__(lifecycle=Lifecycle())
        self.work: asyncio.Future[Any] | None = None
        self.finished: bool | None = None

    async def _begin(self) -> None:
        self.work = asyncio.get_running_loop().create_future()

    async def _wind_down(self) -> None:
        assert self.work is not None
        self.finished = await self.within_deadline(self.work)
        self.work.cancel()


async def test_an_earlier_deadline_bounds_a_stop_already_waiting() -> None:
    role = Stuck()
    await role.start()
    unbounded = asyncio.ensure_future(role.stop())  # waits however long the work takes
    await asyncio.sleep(0.05)
    assert not unbounded.done()
    await asyncio.wait_for(role.stop(Deadline.after_ms(20)), 5)
    await asyncio.wait_for(unbounded, 5)  # the same wind-down: it ended too
    assert role.finished is False
    assert phase(role) == "stopped"


async def test_a_later_deadline_never_extends_an_earlier_one() -> None:
    role = Stuck()
    await role.start()
    first = asyncio.ensure_future(role.stop(Deadline.after_ms(30)))
    await asyncio.sleep(0)
    await asyncio.wait_for(role.stop(Deadline.after_ms(600_000)), 5)
    await first
    assert role.finished is False
