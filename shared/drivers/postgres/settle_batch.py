"""Coalescing of concurrent settles into one statement.

A worker with 16 slots acks up to 16 jobs at once. Sent one by one, each ack is a commit (one
WAL flush each) and each moves the same counter row, so they queue behind one another's row
lock until commit. The batcher sends the first ack at once; acks that arrive while a
statement is in flight wait for it and then go together in the next one. An idle worker pays
no added latency, a busy one pays one commit per batch instead of per job. Every caller still
gets its own answer (did MY settle land), and nothing is acknowledged before its commit.

``Coalescer`` is that loop for any statement: ``SettleBatcher`` answers each settle whether it
landed, ``read_batch.ReadBatcher`` each read its value.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T", bound=Hashable)
S = TypeVar("S")
R = TypeVar("R")

MAX_BATCH = 1_000


class Coalescer(Generic[T, S, R]):
    """Runs ``flush(items) -> result`` for every item submitted, at most one flush at a time,
    and answers each caller ``answer(result, its item)``; a failed flush fails its batch's
    callers, and the next batch still goes."""

    def __init__(
        self,
        flush: Callable[[Sequence[T]], Awaitable[S]],
        answer: Callable[[S, T], R],
        *,
        max_batch: int,
    ) -> None:
        self._flush = flush
        self._answer = answer
        self._max_batch = max_batch
        self._pending: list[tuple[T, asyncio.Future[R]]] = []
        self._task: asyncio.Task[None] | None = None

    async def submit(self, item: T) -> R:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._pending.append((item, future))
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._drain())
        # A caller cancelled mid-wait cancels only its own future; its item still goes out
        # with the batch (it was submitted), and the others are unaffected.
        return await future

    async def _drain(self) -> None:
        while self._pending:
            batch = self._pending[: self._max_batch]
            del self._pending[: self._max_batch]
            try:
                result = await self._flush([item for item, _ in batch])
            except asyncio.CancelledError:
                for _, future in batch + self._pending:
                    future.cancel()
                self._pending.clear()
                raise
            except Exception as exc:
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for item, future in batch:
                if not future.done():
                    future.set_result(self._answer(result, item))

    async def join(self) -> None:
        """Wait for the items already submitted (``close()`` calls it)."""
        task = self._task
        if task is not None and not task.done():
            await asyncio.wait([task])


def _landed(landed: set[T], item: T) -> bool:
    return item in landed


class SettleBatcher(Coalescer[T, set[T], bool]):
    """Runs ``flush(items) -> landed`` for every item submitted, at most one flush at a time;
    each caller is answered whether its item landed."""

    def __init__(
        self, flush: Callable[[Sequence[T]], Awaitable[set[T]]], *, max_batch: int = MAX_BATCH
    ) -> None:
        super().__init__(flush, _landed, max_batch=max_batch)
