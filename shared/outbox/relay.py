"""``outbox_relay()``: publishes committed outbox rows onto the queue, in staging order.

One pass:

1. CLAIM up to ``batch_size`` rows in ``(staged_at, id)`` order — one statement that stamps
   ``claimed_at``/``claimed_by`` (a lease of ``claim_lease_ms``), so a second relay cannot
   take a row inside its lease, and a relay that died mid-batch strands its rows only until
   the lease lapses. Each pass claims under a token of its own (``<relay_id>:<n>``).
2. PUBLISH each row under its own ids (``driver.enqueue(EnqueueRequest(id=row.id, ...))``),
   wake this process's workers (``signal_enqueued``; an ``announcing()`` driver does that and
   tells other processes too — pass the process's announcing driver), THEN mark it
   published, fenced on the token. A crash between the two republishes the row
   later, and that republish meets the job the first publish made (the driver inserts nothing
   under an id that names a row, live or finished) — only a job an operator REMOVED in between
   runs again. Handlers are at-least-once anyway: write them idempotent.
3. A publish that FAILS stops the batch: the rows not yet published are released at once
   (fenced), so the next pass — one interval later, not one lease later — takes them again
   in order, and an app that staged ``create_invoice`` then ``charge_card`` never sees the
   charge run first. A mark that finds the row no longer ours means the lease lapsed under us
   and another relay holds the batch: we own nothing, so the pass ends there.

A pass that raises is logged ``jobs.outbox.tick-failed`` and the loop re-arms.

Idle cost (spec § Idle cost): after a pass that published, the next is ``interval_ms`` later
(200 ms) — at once when the batch came back FULL, so a backlog drains at publish speed rather
than ``batch_size`` per interval; after an empty (or failed) pass the wait doubles up to the
idle ceiling: ``idle_poll_max_ms`` when given, else 2 s, or 5 s while the wake is PROVEN live.
A wake (the stage's NOTIFY on commit heard through ``postgres_wake(dsn, pool,
channels=(OUTBOX_WAKE_CHANNEL,))``, or the memory store's stage) passes now and drops the
wait back to the floor; a wake during a pass asks for ONE more pass behind it.

Ordering holds per relay. Two relays compose batches in the same order, but they publish in
parallel, so rows that straddle their two batches can land out of order; run one relay where
the order across transactions matters (rows of one transaction sit in one batch unless that
transaction staged more than ``batch_size`` rows).

Shutdown: ``start()`` registers the two hooks every role registers — ``accept`` stops polling,
``close`` waits out the pass in flight under the drain's deadline — unless
``drain_on_shutdown=False``. ``await stop(deadline_at=None)`` does the same by hand and joins
the pass in flight (await it before closing the pool: the pass in flight is a publish and then
a mark). The deadline binds LATE: a shutdown landing on a manual ``stop()`` bounds the wait
already in flight, and the earliest deadline wins. A pass still running at the deadline is
cancelled (``jobs.outbox.drain-abandoned``); its rows wait out their lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from shared.clock import SYSTEM_CLOCK, Clock
from shared.drivers.base import Enqueued, JobDriver
from shared.errors import ConfigInvalidError, InvariantError, UltimateError
from shared.ids import new_id
from shared.lifecycle import Deadline, Lifecycle, process_lifecycle
from shared.loop_probes import Signals
from shared.outbox.contract import OutboxRecord, OutboxStore, OutboxWake
from shared.wake.announce import AnnouncingDriver
from shared.wake.local import signal_enqueued
from shared.wake.protocol import (
    IDLE_POLL_CEILING_MS,
    WAKE_DUE_WITHIN_MS,
    WOKEN_IDLE_POLL_CEILING_MS,
    idle_ceiling_ms,
)

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_CLAIM_LEASE_MS",
    "DEFAULT_INTERVAL_MS",
    "IDLE_POLL_CEILING_MS",
    "WOKEN_IDLE_POLL_CEILING_MS",
    "OnPublished",
    "OutboxRelay",
    "RelayPass",
    "outbox_relay",
]

log = logging.getLogger("ujobs.outbox")

DEFAULT_CLAIM_LEASE_MS = 30_000
DEFAULT_BATCH_SIZE = 100
DEFAULT_INTERVAL_MS = 200

OnPublished = Callable[[OutboxRecord, Enqueued], Awaitable[None]]


@dataclass(slots=True)
class RelayPass:
    """What one pass did (``run_once()`` answers it; the ``pass`` signal carries it)."""

    claimant: str
    claimed: list[str] = field(default_factory=list)
    published: list[str] = field(default_factory=list)
    deduped: list[str] = field(default_factory=list)
    failed: str | None = None
    released: int = 0
    lost: str | None = None
    """The row whose mark found it claimed by someone else: the batch was no longer ours."""


def _whole_ms(value: object, option: str, *, code: type[UltimateError] = ConfigInvalidError) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise code(
            f"{option} must be a positive whole number of milliseconds; got {value!r}",
            meta={"option": option},
        )
    return value


class OutboxRelay:
    def __init__(
        self,
        *,
        store: OutboxStore,
        driver: JobDriver,
        claim_lease_ms: int = DEFAULT_CLAIM_LEASE_MS,
        batch_size: int = DEFAULT_BATCH_SIZE,
        interval_ms: int = DEFAULT_INTERVAL_MS,
        idle_poll_max_ms: int | None = None,
        wake: OutboxWake | None = None,
        clock: Clock = SYSTEM_CLOCK,
        relay_id: str | None = None,
        drain_on_shutdown: bool = True,
        lifecycle: Lifecycle | None = None,
        on_published: OnPublished | None = None,
    ) -> None:
        self.claim_lease_ms = _whole_ms(claim_lease_ms, "claim_lease_ms", code=InvariantError)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigInvalidError(
                f"batch_size must be a whole number of at least 1; got {batch_size!r}",
                meta={"option": "batch_size"},
            )
        self.batch_size = batch_size
        self.interval_ms = _whole_ms(interval_ms, "interval_ms")
        self.idle_poll_max_ms = (
            None if idle_poll_max_ms is None else _whole_ms(idle_poll_max_ms, "idle_poll_max_ms")
        )
        if self.idle_poll_max_ms is not None and self.idle_poll_max_ms < self.interval_ms:
            raise ConfigInvalidError(
                f"idle_poll_max_ms ({idle_poll_max_ms}) is the idle CEILING and cannot be below "
                f"interval_ms ({interval_ms}), the floor",
                meta={"option": "idle_poll_max_ms"},
            )
        self.store = store
        self.driver = driver
        # An announcing driver already tells this process's workers (and other processes);
        # a bare one does not, so the relay tells this process's workers itself.
        self._signal_locally = not isinstance(driver, AnnouncingDriver)
        self.wake = wake if wake is not None else store.wake
        self.clock = clock
        self.relay_id = relay_id or f"{socket.gethostname()}:{os.getpid()}:{new_id()[-6:]}"
        self.drain_on_shutdown = drain_on_shutdown
        self.on_published = on_published
        self.signals = Signals()
        self._lifecycle = lifecycle
        self._passes = 0
        self._pass_lock = asyncio.Lock()
        self._idle_ms = self.interval_ms
        self._delay_ms = self.interval_ms
        self._woken = asyncio.Event()
        self._stopping = False
        self._loop: asyncio.Task[None] | None = None
        self._closing: asyncio.Task[None] | None = None
        self._deadline: Deadline | None = None
        self._deadline_moved = asyncio.Event()
        self._unregister: list[Callable[[], None]] = []

    # -- one pass ---------------------------------------------------------------------------
    @property
    def idle_ceiling_ms(self) -> int:
        """The idle wait's ceiling: declared, else 2 s, or 5 s while the wake is proven live
        (never below the floor, ``interval_ms``)."""
        if self.idle_poll_max_ms is not None:
            return self.idle_poll_max_ms
        return max(idle_ceiling_ms(self.wake), self.interval_ms)

    @property
    def delay_ms(self) -> int:
        """How long the loop waits after the last pass (0: it passes again at once)."""
        return self._delay_ms

    async def run_once(self) -> RelayPass:
        """One pass: claim, publish each row then mark it, stop on the first failure. A pass
        that raises re-raises (the loop logs it ``jobs.outbox.tick-failed``)."""
        async with self._pass_lock:
            self._passes += 1
            result = RelayPass(claimant=f"{self.relay_id}:{self._passes}")
            try:
                await self._pass(result)
            except Exception:
                self._arm(result, failed=True)
                raise
            self._arm(result, failed=False)
            self.signals.emit("pass", result)
            return result

    async def _pass(self, result: RelayPass) -> None:
        rows = await self.store.claim(
            result.claimant,
            self.batch_size,
            now_ms=self.clock.now_ms(),
            lease_ms=self.claim_lease_ms,
        )
        result.claimed = [r.id for r in rows]
        for index, row in enumerate(rows):
            try:
                answer = await self.driver.enqueue(row.request())
            except Exception as exc:
                result.failed = row.id
                result.released = await self._release(rows[index:], result.claimant)
                log.warning(
                    "jobs.outbox.publish-failed",
                    extra={
                        "id": row.id,
                        "job": row.name,
                        "error": repr(exc),
                        "released": result.released,
                    },
                )
                return
            if answer.deduped:
                result.deduped.append(row.id)
            elif self._signal_locally and self._due_soon(row):
                signal_enqueued(row.queue)  # this process's workers start it at once
            try:
                if self.on_published is not None:
                    await self.on_published(row, answer)
                marked = await self.store.mark_published(
                    row.id, result.claimant, now_ms=self.clock.now_ms()
                )
            except Exception:
                # Published but not retired: hand back the rest (this row too — its republish
                # meets the job just made) so they cost an interval, not a lease window.
                with contextlib.suppress(Exception):
                    await self._release(rows[index:], result.claimant)
                raise
            if not marked:
                result.lost = row.id
                log.warning(
                    "jobs.outbox.claim-lost",
                    extra={"id": row.id, "claimant": result.claimant},
                )
                return
            result.published.append(row.id)

    def _due_soon(self, row: OutboxRecord) -> bool:
        return row.run_at_ms is None or row.run_at_ms <= self.clock.now_ms() + WAKE_DUE_WITHIN_MS

    async def _release(self, rows: list[OutboxRecord], claimant: str) -> int:
        return await self.store.release([r.id for r in rows], claimant)

    def _arm(self, result: RelayPass, *, failed: bool) -> None:
        """Choose the wait after this pass (spec § Idle cost)."""
        if not failed and result.published and result.failed is None:
            self._idle_ms = self.interval_ms
            self._delay_ms = 0 if len(result.claimed) >= self.batch_size else self.interval_ms
        elif not failed and result.published:
            # Work, then a failed publish: retry the released rows one interval later.
            self._idle_ms = self.interval_ms
            self._delay_ms = self.interval_ms
        else:
            self._delay_ms = min(self._idle_ms, self.idle_ceiling_ms)
            self._idle_ms = min(self._idle_ms * 2, self.idle_ceiling_ms)

    def _on_wake(self, _payload: str) -> None:
        self._woken.set()
        self.signals.emit("woken")

    # -- the loop ---------------------------------------------------------------------------
    async def _run(self) -> None:
        while not self._stopping:
            self._woken.clear()
            try:
                await self.run_once()
            except Exception as exc:
                log.error("jobs.outbox.tick-failed", extra={"error": repr(exc)})
                self.signals.emit("tick-failed", exc)
            if self.stopping:  # a drain began during the pass
                break
            if self._delay_ms > 0 and not self._woken.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._woken.wait(), self._delay_ms / 1000)
            if self._woken.is_set():
                # Woken (now, or during the pass): pass at once, then wait the floor again.
                self._idle_ms = self.interval_ms

    @property
    def running(self) -> bool:
        return self._loop is not None and not self._loop.done()

    @property
    def stopping(self) -> bool:
        return self._stopping

    async def start(self) -> None:
        """Start polling (and listening, when a wake is given); a second call does nothing."""
        if self._loop is not None:
            return
        if self.wake is not None:
            self._unregister.append(self.wake.subscribe(self._on_wake))
        if self.drain_on_shutdown:
            lifecycle = self._lifecycle if self._lifecycle is not None else process_lifecycle()
            self._unregister.append(
                lifecycle.register(accept=self._accept, close=self._close, name="outbox-relay")
            )
        self._loop = asyncio.ensure_future(self._run())
        log.info(
            "jobs.outbox.relay-started",
            extra={"relay_id": self.relay_id, "batch_size": self.batch_size},
        )

    def _accept(self) -> None:
        """Stop polling: no pass starts after the one in flight."""
        if not self._stopping:
            self._stopping = True
            log.info("jobs.outbox.draining", extra={"relay_id": self.relay_id})
        self._woken.set()

    async def _close(self, deadline: Deadline) -> None:
        await self._join(deadline)

    async def stop(self, deadline_at: Deadline | None = None) -> None:
        """Stop polling and join the pass in flight; with no deadline, however long it takes
        (unless a shutdown's deadline lands meanwhile — the earliest wins). Safe twice, and
        before ``start()``."""
        if self._loop is None:
            return
        self._accept()
        await self._join(deadline_at)

    async def _join(self, deadline: Deadline | None) -> None:
        if self._loop is None:
            return
        if deadline is not None and (self._deadline is None or deadline.at < self._deadline.at):
            self._deadline = deadline
            self._deadline_moved.set()
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close_once(self._loop))
        await asyncio.shield(self._closing)

    async def _close_once(self, loop_task: asyncio.Task[None]) -> None:
        abandoned = False
        while not loop_task.done():
            self._deadline_moved.clear()
            moved = asyncio.ensure_future(self._deadline_moved.wait())
            timeout = self._deadline.remaining_s() if self._deadline is not None else None
            done, _ = await asyncio.wait(
                {loop_task, moved}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            moved.cancel()
            await asyncio.wait({moved})
            if loop_task in done or moved in done:
                continue
            abandoned = True
            log.error(
                "jobs.outbox.drain-abandoned",
                extra={"relay_id": self.relay_id, "reason": "a pass outlived the deadline"},
            )
            loop_task.cancel()
            await asyncio.wait({loop_task})
        for unregister in self._unregister:
            unregister()
        self._unregister.clear()
        log.info("jobs.outbox.relay-stopped", extra={"relay_id": self.relay_id})
        self.signals.emit("stopped", abandoned)


def outbox_relay(
    *,
    store: OutboxStore,
    driver: JobDriver,
    claim_lease_ms: int = DEFAULT_CLAIM_LEASE_MS,
    batch_size: int = DEFAULT_BATCH_SIZE,
    interval_ms: int = DEFAULT_INTERVAL_MS,
    idle_poll_max_ms: int | None = None,
    wake: OutboxWake | None = None,
    clock: Clock = SYSTEM_CLOCK,
    relay_id: str | None = None,
    drain_on_shutdown: bool = True,
    lifecycle: Lifecycle | None = None,
    on_published: OnPublished | None = None,
) -> OutboxRelay:
    """The relay role (see the module doc). ``claim_lease_ms`` that is not a positive whole
    number is ``X_INVARIANT`` here, at construction. ``wake`` defaults to the store's own
    (memory); for Postgres pass ``postgres_wake(dsn, pool, channels=(OUTBOX_WAKE_CHANNEL,))``
    (``shared.wake.listener``; start it before the relay, stop it after). ``on_published`` is
    awaited between a row's publish and its mark (tests stall or kill a relay there)."""
    return OutboxRelay(
        store=store,
        driver=driver,
        claim_lease_ms=claim_lease_ms,
        batch_size=batch_size,
        interval_ms=interval_ms,
        idle_poll_max_ms=idle_poll_max_ms,
        wake=wake,
        clock=clock,
        relay_id=relay_id,
        drain_on_shutdown=drain_on_shutdown,
        lifecycle=lifecycle,
        on_published=on_published,
    )
