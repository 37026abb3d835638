"""Where the api's single enqueues go: ``EnqueueBatcher.enqueue(request)``.

(The group commit of concurrent single enqueues lands in this module; until then each request
is its own statement.)
"""

from __future__ import annotations

from shared.drivers.base import Enqueued, EnqueueRequest, JobDriver


class EnqueueBatcher:
    def __init__(self, driver: JobDriver) -> None:
        self.driver = driver

    async def enqueue(self, request: EnqueueRequest) -> Enqueued:
        return await self.driver.enqueue(request)

    async def close(self) -> None:
        return None


__all__ = ["EnqueueBatcher"]
