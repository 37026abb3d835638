"""The Redis driver's keyspace mark (``ujobs.drivers.keyspace.StoreWatch``).

The mark is ``{prefix}:store``, a random token. ``claim.lua`` reads it (writing the claim's
fresh candidate token when there is none) and answers it with the rows, so every claim stamps
its rows with the mark (``ClaimedJob.store_epoch``) at no extra round trip; ``mark.lua`` reads
it alone, for a worker whose held row was refused and who asks whether the keyspace went.

A token is never reused: each claim and each ``verify`` offers a new one, so a process that
wrote the mark and then saw Redis come back empty cannot write ITS old token again and miss
the loss. ``verify`` calls made while one is on the wire share it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import ujobs.drivers.redis.codec as codec
from ujobs.ids import new_id

RunScript = Callable[[str, list[Any]], Awaitable[Any]]


class KeyspaceMark:
    """The mark as this process last saw it; ``seen`` takes each claim's answer."""

    def __init__(self, run: RunScript, prefix: str) -> None:
        self._run = run
        self._prefix = prefix
        self._epoch: str | None = None
        self._verifying: asyncio.Future[str] | None = None

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def epoch(self) -> str | None:
        return self._epoch

    @staticmethod
    def candidate() -> str:
        """A token offered for the mark (written only if there is none)."""
        return new_id()

    def seen(self, mark: Any) -> str:
        """The mark a script answered: it is the epoch from now on."""
        self._epoch = codec.text(mark)
        return self._epoch

    async def verify(self) -> str:
        pending = self._verifying
        if pending is None:
            pending = asyncio.ensure_future(self._read())
            self._verifying = pending
            pending.add_done_callback(self._verified)
        return await asyncio.shield(pending)

    async def _read(self) -> str:
        return self.seen(await self._run("mark", [self.candidate()]))

    def _verified(self, done: asyncio.Future[str]) -> None:
        if self._verifying is done:
            self._verifying = None
        if not done.cancelled():
            done.exception()  # read here, so a failure nobody awaited is not logged as lost


__all__ = ["KeyspaceMark"]
