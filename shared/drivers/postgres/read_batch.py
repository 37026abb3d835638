"""Coalescing of concurrent reads into one statement.

The twin of ``SettleBatcher`` (the same ``Coalescer`` loop) for reads that answer a value: 32
deliveries starting at once each read their endpoint and event, and one statement for the lot
costs the process one round trip (a socket write that wakes a backend, the protocol's parse)
instead of 32. The first read goes out at once; reads that arrive while a statement is in
flight wait for it and go together in the next one, so no caller is ever answered by a
statement sent before it asked. A key asked twice in one batch is fetched once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import TypeVar

from ujobs.drivers.postgres.settle_batch import Coalescer

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

MAX_BATCH = 500


def _found(found: Mapping[K, V], key: K) -> V | None:
    return found.get(key)


class ReadBatcher(Coalescer[K, Mapping[K, V], V | None]):
    """Runs ``fetch(keys) -> {key: value}`` for every key submitted, at most one at a time; a
    key the answer leaves out reads as None."""

    def __init__(
        self,
        fetch: Callable[[Sequence[K]], Awaitable[Mapping[K, V]]],
        *,
        max_batch: int = MAX_BATCH,
    ) -> None:
        async def distinct(keys: Sequence[K]) -> Mapping[K, V]:
            return await fetch(list(dict.fromkeys(keys)))

        super().__init__(distinct, _found, max_batch=max_batch)

    async def read(self, key: K) -> V | None:
        return await self.submit(key)
