"""Group commit of the api's single enqueues: concurrent ``POST /v1/jobs/{name}`` requests
share one ``enqueue_many`` statement (one commit) instead of one statement each.

Natural batching, no timer: a request finding a statement slot free is sent at once, alone,
so an idle api adds no wait at all; requests that arrive while ``max_in_flight`` statements
are running queue up and leave together, up to ``max_batch``, as soon as a slot frees. The
added wait is therefore at most one statement's time (about a millisecond on a local
Postgres), and only under load, which is exactly when a shared commit pays.

Durability is unchanged: each request's future is resolved by the statement that carried
its row, after that statement committed, so a 202 is never sent for a row that could still
roll back. A statement that fails is re-run one request at a time, so a refused request
answers its own error and every other request of its group still lands (inputs are validated
before they get here; what can still fail is the database).
"""

from __future__ import annotations

import asyncio
from collections import deque

from shared.drivers.base import Enqueued, EnqueueRequest, JobDriver
from shared.errors import InvariantError

DEFAULT_MAX_BATCH = 256
DEFAULT_MAX_IN_FLIGHT = 1

_Waiter = tuple[EnqueueRequest, "asyncio.Future[Enqueued]"]


class EnqueueBatcher:
    """``enqueue(request)`` answers once the request's own row is committed."""

    def __init__(
        self,
        driver: JobDriver,
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    ) -> None:
        if max_batch < 1 or max_in_flight < 1:
            raise InvariantError(
                "max_batch and max_in_flight must be at least 1",
                meta={"max_batch": max_batch, "max_in_flight": max_in_flight},
            )
        self.driver = driver
        self.max_batch = max_batch
        self.max_in_flight = max_in_flight
        self._waiting: deque[_Waiter] = deque()
        self._in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self.statements = 0
        """Statements sent so far (a test and the bench read how well requests coalesce)."""

    async def enqueue(self, request: EnqueueRequest) -> Enqueued:
        if self._in_flight < self.max_in_flight and not self._waiting:
            # A free slot and nobody waiting: send it from this task, no hand-off to another.
            self._in_flight += 1
            self.statements += 1
            try:
                return await self.driver.enqueue(request)
            finally:
                self._in_flight -= 1
                self._send()
        future: asyncio.Future[Enqueued] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_retrieved)
        self._waiting.append((request, future))
        self._send()
        # A client that hangs up cancels its handler, not the statement its row rides in.
        return await asyncio.shield(future)

    def _send(self) -> None:
        while self._waiting and self._in_flight < self.max_in_flight:
            count = min(len(self._waiting), self.max_batch)
            batch = [self._waiting.popleft() for _ in range(count)]
            self._in_flight += 1
            task = asyncio.get_running_loop().create_task(self._flush(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _flush(self, batch: list[_Waiter]) -> None:
        try:
            if len(batch) == 1:
                await self._one(batch[0])
                return
            self.statements += 1
            try:
                answers = await self.driver.enqueue_many([request for request, _ in batch])
            except Exception:
                # One bad row fails the statement: give each request its own answer.
                await asyncio.gather(*(self._one(waiter) for waiter in batch))
                return
            for (_, future), answer in zip(batch, answers, strict=True):
                if not future.done():
                    future.set_result(answer)
        finally:
            self._in_flight -= 1
            self._send()

    async def _one(self, waiter: _Waiter) -> None:
        request, future = waiter
        self.statements += 1
        try:
            answer = await self.driver.enqueue(request)
        except Exception as exc:
            if not future.done():
                future.set_exception(exc)
            return
        if not future.done():
            future.set_result(answer)

    async def close(self) -> None:
        """Wait for the statements in flight (the api's drain)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


def _retrieved(future: asyncio.Future[Enqueued]) -> None:
    """Mark a failure seen even when its client hung up (no "never retrieved" warning)."""
    if not future.cancelled():
        future.exception()


__all__ = ["DEFAULT_MAX_BATCH", "DEFAULT_MAX_IN_FLIGHT", "EnqueueBatcher"]
