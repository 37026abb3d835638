"""Waiting for a job to settle: the driver's ``results`` capability.

A wait is woken by the settle itself, never by reading the row in a loop:

1. ``listen(job_id)`` registers the wait and makes sure this process hears the store's settle
   announcements (Postgres: one ``LISTEN x_jobs_settled`` session per process, held while any
   wait is open; Redis: one pub/sub subscription; memory: the state's own hook).
2. ``watch(job_id)`` reads the row and, when it is live, marks it (``result_waited``): the
   statement that finishes a marked row (ack, a dead or failed nack, cancel) announces its id.
   Rows nobody waits for announce nothing, so the hot settle pays nothing for this.
3. The wait sleeps until its id is announced or its time runs out, then reads the row once.

The mark and the settle take the row's lock in turn, so whichever lands second sees the other:
there is no window in which a settle is missed. A listening session that drops wakes every
open wait (each reads its row again and, still live, goes back to sleep on a fresh session).
A row buried by a claim after its lease lapsed on its final attempt announces nothing: a wait
on it answers its state when its time runs out.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol, runtime_checkable

from ujobs.drivers.operator_surface import JobRow

FINISHED_STATES = frozenset({"done", "failed", "dead", "cancelled"})


@runtime_checkable
class JobResults(Protocol):
    """What a driver offers a result wait (``driver.results``; None: no waits)."""

    async def read(self, job_id: str) -> JobRow | None:
        """The row with its result, as ``get`` reads it; None when there is none."""
        ...

    async def watch(self, job_id: str) -> JobRow | None:
        """``read``, and a live row marked so its finishing settle announces its id."""
        ...

    def listen(self, job_id: str) -> AbstractAsyncContextManager[SettleTicket]:
        """Register a wait for ``job_id``; entered once this process hears announcements."""
        ...


Rearm = Callable[[], Awaitable[None]]


class SettleTicket:
    """One open wait: ``wait(timeout_s)`` answers True when its id was announced (or the
    session dropped, which the caller treats the same: read the row again). ``rearm`` (a
    listening session's) is awaited before each sleep, so a session that dropped is dialled
    again before the wait trusts it."""

    def __init__(self, rearm: Rearm | None = None) -> None:
        self._event = asyncio.Event()
        self._rearm = rearm

    def ring(self) -> None:
        self._event.set()

    async def rearm(self) -> None:
        """Make sure the session is listening (dialled again after a drop)."""
        if self._rearm is not None:
            await self._rearm()

    async def wait(self, timeout_s: float) -> bool:
        await self.rearm()
        if timeout_s <= 0:
            return self._event.is_set()
        try:
            await asyncio.wait_for(self._event.wait(), timeout_s)
        except TimeoutError:
            return False
        self._event.clear()
        return True


class SettleWaits:
    """The open waits of one process, by job id; what a listening session rings."""

    def __init__(self) -> None:
        self._waits: dict[str, set[SettleTicket]] = {}

    def __len__(self) -> int:
        return sum(len(v) for v in self._waits.values())

    def add(self, job_id: str, rearm: Rearm | None = None) -> SettleTicket:
        ticket = SettleTicket(rearm)
        self._waits.setdefault(job_id, set()).add(ticket)
        return ticket

    def drop(self, job_id: str, ticket: SettleTicket) -> None:
        tickets = self._waits.get(job_id)
        if tickets is None:
            return
        tickets.discard(ticket)
        if not tickets:
            del self._waits[job_id]

    def heard(self, job_id: str) -> None:
        for ticket in tuple(self._waits.get(job_id, ())):
            ticket.ring()

    def ring_all(self) -> None:
        for tickets in tuple(self._waits.values()):
            for ticket in tuple(tickets):
                ticket.ring()


@asynccontextmanager
async def registered(
    waits: SettleWaits,
    job_id: str,
    *,
    session: Rearm | None = None,
    close: Rearm | None = None,
) -> AsyncIterator[SettleTicket]:
    """A ticket in ``waits`` for the block's length: every driver's ``listen``. ``session``
    (a listening session's opener, which also rearms the ticket) is awaited before the block;
    ``close`` runs when the last open wait of ``waits`` leaves, so the session is held while
    any wait is open (the open waits are ``len(waits)``, never a counter of their own)."""
    ticket = waits.add(job_id, session)
    try:
        if session is not None:
            await session()
        yield ticket
    finally:
        waits.drop(job_id, ticket)
        if close is not None and not len(waits):
            await close()


def results_of(driver: object) -> JobResults | None:
    """The driver's ``results`` capability (seen through any wrapper), or None."""
    results = getattr(driver, "results", None)
    return results if isinstance(results, JobResults) else None


async def wait_settled(results: JobResults, job_id: str, timeout_s: float) -> JobRow | None:
    """The row once it is finished, or as it is when ``timeout_s`` has passed; None when
    there is no such row. Woken by the settle's announcement, not by reading in a loop."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, timeout_s)
    async with results.listen(job_id) as ticket:
        row = await results.watch(job_id)
        while row is not None and row.state not in FINISHED_STATES:
            left = deadline - loop.time()
            if left <= 0:
                break
            if not await ticket.wait(left):
                return await results.read(job_id)
            # Announced (or the session dropped): listening again BEFORE the row is read, so
            # a settle after the read is heard; marking again is a no-op.
            await ticket.rearm()
            row = await results.watch(job_id)
        return row


__all__ = [
    "FINISHED_STATES",
    "JobResults",
    "Rearm",
    "SettleTicket",
    "SettleWaits",
    "registered",
    "results_of",
    "wait_settled",
]
