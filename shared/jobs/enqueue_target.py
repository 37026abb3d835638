"""Where ``handle.enqueue()`` goes: the installed jobs facade, else the installed driver.

The outbox installs a facade that stages inside the caller's transaction; with none installed
an enqueue publishes straight to the driver; with no driver either it is
``X_DRIVER_UNAVAILABLE`` at the call, never a silently dropped job.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from ujobs.drivers.base import Enqueued, EnqueueRequest, JobDriver
from ujobs.errors import DriverUnavailableError


@runtime_checkable
class JobsFacade(Protocol):
    async def enqueue(self, request: EnqueueRequest) -> Enqueued: ...

    async def enqueue_many(self, requests: Iterable[EnqueueRequest]) -> list[Enqueued]: ...


_driver: JobDriver | None = None
_facade: JobsFacade | None = None


def set_job_driver(driver: JobDriver | None) -> None:
    """Install the process's driver; swapping backends is this call and nothing in job code."""
    global _driver
    _driver = driver


def reset_job_driver() -> None:
    set_job_driver(None)


def job_driver() -> JobDriver:
    if _driver is None:
        raise DriverUnavailableError(
            "no job driver is installed; call set_job_driver(postgres_driver(pool)) at boot, "
            "or set DATABASE_URL for the ujobs services"
        )
    return _driver


def has_job_driver() -> bool:
    return _driver is not None


class DirectFacade:
    """The fallback: every enqueue publishes straight to ``job_driver()``."""

    async def enqueue(self, request: EnqueueRequest) -> Enqueued:
        return await job_driver().enqueue(request)

    async def enqueue_many(self, requests: Iterable[EnqueueRequest]) -> list[Enqueued]:
        return await job_driver().enqueue_many(requests)


_DIRECT = DirectFacade()


def set_jobs_facade(facade: JobsFacade | None) -> None:
    global _facade
    _facade = facade


def reset_jobs_facade() -> None:
    set_jobs_facade(None)


def jobs_facade() -> JobsFacade:
    return _facade if _facade is not None else _DIRECT
