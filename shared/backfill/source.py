"""What a backfill reads and how fast: a keyset ``BatchSource`` and the ``Throttle``.

A source answers one page per call — the rows after a cursor, at most ``limit`` of them, in key
order — and the cursor of a row. Keyset, never OFFSET: page 500 costs what page 1 does, and a
resumed pass reopens at the cursor its last checkpoint left behind. The cursor is stored in the
step's output, so it must be JSON (an id, or a list of the key's columns); a resumed pass gets
it back in its stored form.

``rate`` is batches per second: the throttle spaces the START of each batch ``1 / rate``
seconds after the previous one's, spending the pause inside the step, so a resumed attempt that
replays 500 checkpoints re-pays none of their pauses. A batch that ran longer than the interval
starts the next at once (a rate above what the batches achieve produces no wait): each pause is
what is left of the interval after the batch itself, never negative. The schedule a slow batch
or a stalled machine fell behind is kept for up to ``CATCH_UP_S`` (or one interval, whichever is
longer), so the batches after a stall run back to back until the average is met again; a
longer stall is written off, so a pass never bursts more than that much of its schedule. The
wait unwinds on the run's abort with ``X_ABORTED``.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ujobs.errors import JobAbortedError
from ujobs.signal import Signal

JSONValue = Any
DEFAULT_BACKFILL_RATE = 5
"""Batches per second: 5,000 rows/s at the default batch, one statement every 200 ms."""
DEFAULT_BACKFILL_BATCH = 1_000
CATCH_UP_S = 0.25
"""How far behind its schedule the throttle catches up: at ``rate=200`` the 50 pages a 250 ms
stall of the machine cost; at the default rate one batch (the interval is longer)."""


@runtime_checkable
class BatchSource(Protocol):
    """One page per call, keyset: the rows after ``after`` (None: from the start)."""

    async def page(self, after: JSONValue | None, limit: int) -> Sequence[Any]: ...

    def cursor(self, row: Any) -> JSONValue: ...


Fetch = Callable[[JSONValue | None, int], Awaitable[Sequence[Any]]]


class KeysetSource:
    """``keyset(fetch, key="id")``: ``fetch(after, limit)`` runs the one statement of a page
    (``where id > $1 order by id limit $2``; ``after`` is None on the first); the cursor is the
    last row's ``key`` (a tuple of keys: a list of their values)."""

    def __init__(self, fetch: Fetch, key: str | tuple[str, ...]) -> None:
        self._fetch = fetch
        self._key = key

    async def page(self, after: JSONValue | None, limit: int) -> Sequence[Any]:
        return await self._fetch(after, limit)

    def cursor(self, row: Any) -> JSONValue:
        if isinstance(self._key, tuple):
            return [_field(row, k) for k in self._key]
        return _field(row, self._key)


def keyset(fetch: Fetch, *, key: str | tuple[str, ...] = "id") -> KeysetSource:
    """A ``BatchSource`` over one keyset statement."""
    return KeysetSource(fetch, key)


def _field(row: Any, key: str) -> JSONValue:
    if isinstance(row, Mapping) or hasattr(row, "keys"):
        return row[key]
    return getattr(row, key)


class Throttle:
    """Spaces batch starts ``1 / rate`` seconds apart within one attempt, catching up at most
    ``CATCH_UP_S`` (or one interval) of a schedule it fell behind."""

    def __init__(
        self,
        rate: float,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = 1.0 / rate
        self.catch_up_s = CATCH_UP_S
        self._monotonic = monotonic
        self._due: float | None = None
        self.waits = 0

    async def wait(self, signal: Signal) -> None:
        """Before a batch: wait out the interval since the previous batch's start."""
        now = self._monotonic()
        if self._due is None:
            start = now
        elif self._due > now:
            self.waits += 1
            await _pause(self._due - now, signal)
            start = self._due
        else:
            # Late (the batch took longer than the interval, or the machine stalled): start now,
            # and keep the schedule if it is at most ``catch_up_s`` behind, so the batches
            # after a stall run back to back until the average is met again.
            start = max(self._due, now - max(self.interval, self.catch_up_s))
        self._due = start + self.interval


async def _pause(seconds: float, signal: Signal) -> None:
    if signal.aborted:
        raise _aborted(signal)
    try:
        await asyncio.wait_for(signal.wait(), timeout=seconds)
    except TimeoutError:
        return
    raise _aborted(signal)


def _aborted(signal: Signal) -> JobAbortedError:
    error = JobAbortedError(
        "the backfill's throttle pause ended: the run was aborted",
        meta={"reason": getattr(signal.reason, "code", None)},
    )
    error.__cause__ = signal.reason
    return error


def valid_rate(rate: Any) -> bool:
    """A rate is a finite, positive number of batches per second (fractions too)."""
    return (
        not isinstance(rate, bool)
        and isinstance(rate, int | float)
        and math.isfinite(rate)
        and rate > 0
    )


def valid_batch(batch: Any) -> bool:
    return not isinstance(batch, bool) and isinstance(batch, int) and batch >= 1


async def maybe_await(value: Any) -> Any:
    """A source, count or handle may be sync or async."""
    if inspect.isawaitable(value):
        return await value
    return value
