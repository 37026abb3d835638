"""Small builders the conformance tests share: requests, claims, and rows in a given state.

Everything here goes through the driver's public operations only, so it works on every driver
(a finished row is made by claiming and settling it, never by writing a table).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from ujobs.drivers.base import (
    ClaimedJob,
    ClaimOptions,
    DriverStats,
    EnqueueRequest,
    ExhaustedJob,
    JobDriver,
    JobIntrospection,
    JobState,
    NackOptions,
    QueueStats,
)

_keys = itertools.count()

VISIBILITY_MS = 30_000


def req(
    name: str = "send-email",
    *,
    key: str | None = None,
    queue: str = "default",
    tenant_id: str | None = None,
    input: Any = None,
    **kw: Any,
) -> EnqueueRequest:
    """A request with a key of its own unless one is given."""
    return EnqueueRequest(
        name=name,
        input={"n": 1} if input is None else input,
        idempotency_key=key if key is not None else f"k{next(_keys)}",
        queue=queue,
        tenant_id=tenant_id,
        **kw,
    )


async def claim(
    driver: JobDriver,
    *queues: str,
    limit: int = 10,
    worker: str = "w1",
    visibility_ms: int = VISIBILITY_MS,
    **kw: Any,
) -> list[ClaimedJob]:
    return await driver.claim(
        ClaimOptions(
            queues=queues or ("default",),
            limit=limit,
            worker_id=worker,
            visibility_ms=visibility_ms,
            **kw,
        )
    )


async def claim_one(driver: JobDriver, *queues: str, **kw: Any) -> ClaimedJob:
    got = await claim(driver, *queues, limit=1, **kw)
    assert len(got) == 1, f"expected one claimable row, got {len(got)}"
    return got[0]


async def queue_stats(driver: JobDriver, queue: str = "default") -> QueueStats:
    stats: DriverStats = await driver.stats()
    return stats.queues.get(queue, QueueStats(queue=queue))


class ExhaustedLog:
    """An ``on_exhausted`` callback that remembers every call."""

    def __init__(self) -> None:
        self.calls: list[list[ExhaustedJob]] = []

    async def __call__(self, rows: Sequence[ExhaustedJob]) -> None:
        self.calls.append(list(rows))


async def make_in_state(
    driver: JobDriver,
    state: JobState,
    request: EnqueueRequest,
    *,
    introspect: JobIntrospection | None = None,
) -> str:
    """Enqueue ``request`` and drive it to ``state`` through public operations; answers the id.

    The request must be due now. ``cancelled`` needs ``introspect``.
    """
    enq = await driver.enqueue(request)
    assert not enq.deduped
    if state == "ready":
        return enq.id
    if state == "cancelled":
        assert introspect is not None
        assert await introspect.cancel(enq.id) is not None
        return enq.id
    job = await claim_one(driver, request.queue)
    assert job.id == enq.id, "make_in_state needs the only due row of its queue"
    if state == "running":
        return enq.id
    if state == "done":
        assert await driver.ack(job.id, job.ref)
    elif state == "dead":
        assert await driver.nack(job.id, job.ref, NackOptions(error="boom", dead_letter=True))
    elif state == "failed":
        assert await driver.nack(job.id, job.ref, NackOptions(error="boom", fail=True))
    elif state == "suspended":
        assert await driver.nack(
            job.id, job.ref, NackOptions(park=True, count=False, run_at_ms=_far(job))
        )
    elif state == "delayed":
        raise AssertionError("enqueue with run_at_ms in the future for a delayed row")
    return enq.id


def _far(job: ClaimedJob) -> int:
    return job.lease_expires_at_ms + 86_400_000
