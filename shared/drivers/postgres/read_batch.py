"""Coalescing of concurrent reads into one statement.

The twin of ``SettleBatcher`` for reads that answer a value: 32 deliveries starting at once each
read their endpoint and event, and one statement for the lot costs the process one round trip
(a socket write that wakes a backend, the protocol's parse) instead of 32. The first read goes
out at once; reads that arrive while a statement is in flight wait for it and go together in
the next one, so no caller is ever answered by a statement sent before it asked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

MAX_BATCH = 500


class ReadBatcher(Generic[K, V]):
    """Runs ``fetch(keys) -> {key: value}`` for every key submitted, at most one at a time; a
    key the answer leaves out reads as None."""

    def __init__(
        self,
        fetch: Callable[[Sequence[K]], Awaitable[Mapping[K, V]]],
        *,
        max_batch: int = MAX_BATCH,
    ) -> None:
        self._fetch = fetch
        self._max_batch = max_batch
        self._pending: list[tuple[K, asyncio.Future[V | None]]] = []
        self._task: asyncio.Task[None] | None = None

    async def read(self, key: K) -> V | None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[V | None] = loop.create_future()
        self._pending.append((key, future))
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._pending:
            batch = self._pending[: self._max_batch]
            del self._pending[: self._max_batch]
            keys = list(dict.fromkeys(key for key, _ in batch))
            try:
                found = await self._fetch(keys)
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
            for key, future in batch:
                if not future.done():
                    future.set_result(found.get(key))
