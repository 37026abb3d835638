"""Unit-test helpers: a facade that records what an enqueue would hand the queue."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pytest

from ujobs.drivers.base import Enqueued, EnqueueRequest
from ujobs.jobs.enqueue_target import reset_jobs_facade, set_jobs_facade


class RecordingFacade:
    """A ``JobsFacade`` standing in for storage: it keeps every request it is handed.

    Unit tests use it to see exactly what an enqueue would queue (and that a refused one
    queued nothing) without a driver; drivers themselves are tested in tests/conformance/.
    """

    def __init__(self) -> None:
        self.requests: list[EnqueueRequest] = []

    async def enqueue(self, request: EnqueueRequest) -> Enqueued:
        self.requests.append(request)
        n = len(self.requests)
        return Enqueued(
            id=request.id or f"job-{n}", run_id=request.run_id or f"run-{n}", deduped=False
        )

    async def enqueue_many(self, requests: Iterable[EnqueueRequest]) -> list[Enqueued]:
        return [await self.enqueue(request) for request in requests]


@pytest.fixture
def queued() -> Iterator[RecordingFacade]:
    facade = RecordingFacade()
    set_jobs_facade(facade)
    yield facade
    reset_jobs_facade()
