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

Shutdown is every role's (``ujobs.role``): ``accept`` stops polling, ``close`` waits out the
pass in flight under the drain's deadline (unless ``RelayOptions.drain_on_shutdown`` is False),
and ``await stop(deadline=None)`` does the same by hand (await it before closing the pool: the
pass in flight is a publish and then a mark). The deadline binds late, the earliest winning. A
pass still running at the deadline is cancelled (``jobs.outbox.drain-abandoned``); its rows
wait out their lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.drivers.base import Enqueued, JobDriver, announces_enqueues
from ujobs.lifecycle import Lifecycle
from ujobs.loop_probes import Signals
from ujobs.outbox.contract import OutboxRecord, OutboxStore, OutboxWake
from ujobs.outbox.options import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_CLAIM_LEASE_MS,
    DEFAULT_INTERVAL_MS,
    RelayOptions,
)
from ujobs.role import Role
from ujobs.wake.local import signal_enqueued
from ujobs.wake.protocol import (
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
    "RelayOptions",
    "RelayPass",
    "outbox_relay",
]

log = logging.getLogger("ujobs.outbox")

PASS_HISTORY = 100
"""The relay passes its ``signals`` keep (``ujobs.loop_probes``): a full pass lists a batch's
ids twice, and the default history's ten thousand of them is memory a long-running relay keeps
for nothing."""

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


class OutboxRelay(Role):
    role_name = "outbox-relay"

    def __init__(
        self,
        *,
        store: OutboxStore,
        driver: JobDriver,
        options: RelayOptions,
        wake: OutboxWake | None = None,
        clock: Clock = SYSTEM_CLOCK,
        lifecycle: Lifecycle | None = None,
        on_published: OnPublished | None = None,
    ) -> None:
        super().__init__(lifecycle=lifecycle, drain_on_shutdown=options.drain_on_shutdown)
        self.options = options
        self.store = store
        self.driver = driver
        # An announcing driver already tells this process's workers (and other processes);
        # a bare one does not, so the relay tells this process's workers itself.
        self._signal_locally = not announces_enqueues(driver)
        self.wake = wake if wake is not None else store.wake
        self.clock = clock
        self.on_published = on_published
        # Awaitable hooks: the passes kept are bounded apart from the other events.
        self.signals = Signals(caps={"pass": PASS_HISTORY})
        self._passes = 0
        self._pass_lock = asyncio.Lock()
        self._idle_ms = options.interval_ms
        self._delay_ms = options.interval_ms
        self._woken = asyncio.Event()
        self._loop: asyncio.Task[None] | None = None
        self._abandoned = False

    @property
    def relay_id(self) -> str:
        return self.options.relay_id

    @property
    def batch_size(self) -> int:
        return self.options.batch_size

    @property
    def interval_ms(self) -> int:
        return self.options.interval_ms

    @property
    def claim_lease_ms(self) -> int:
        return self.options.claim_lease_ms

    # -- one pass ---------------------------------------------------------------------------
    @property
    def idle_ceiling_ms(self) -> int:
        """The idle wait's ceiling: declared, else 2 s, or 5 s while the wake is proven live
        (never below the floor, ``interval_ms``)."""
        if self.options.idle_poll_max_ms is not None:
            return self.options.idle_poll_max_ms
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
        while self.phase == "running":
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

    async def _begin(self) -> None:
        """Start polling (and listening, when a wake is given)."""
        if self.wake is not None:
            self.on_stop(self.wake.subscribe(self._on_wake))
        self._loop = asyncio.ensure_future(self._run())
        log.info(
            "jobs.outbox.relay-started",
            extra={"relay_id": self.relay_id, "batch_size": self.batch_size},
        )

    def _halt(self) -> None:
        """Stop polling: no pass starts after the one in flight."""
        log.info("jobs.outbox.draining", extra={"relay_id": self.relay_id})
        self._woken.set()

    async def _wind_down(self) -> None:
        loop_task = self._loop
        assert loop_task is not None
        if not await self.within_deadline(loop_task):
            self._abandoned = True
            log.error(
                "jobs.outbox.drain-abandoned",
                extra={"relay_id": self.relay_id, "reason": "a pass outlived the deadline"},
            )
            loop_task.cancel()
            await asyncio.wait({loop_task})

    def _on_stopped(self) -> None:
        log.info("jobs.outbox.relay-stopped", extra={"relay_id": self.relay_id})
        self.signals.emit("stopped", self._abandoned)


def outbox_relay(
    *,
    store: OutboxStore,
    driver: JobDriver,
    options: RelayOptions | None = None,
    wake: OutboxWake | None = None,
    clock: Clock = SYSTEM_CLOCK,
    lifecycle: Lifecycle | None = None,
    on_published: OnPublished | None = None,
) -> OutboxRelay:
    """The relay role (see the module doc), with ``RelayOptions()`` by default. ``wake``
    defaults to the store's own (memory); for Postgres pass ``postgres_wake(dsn, pool,
    channels=(OUTBOX_WAKE_CHANNEL,))`` (``ujobs.wake.listener``; start it before the relay,
    stop it after). ``on_published`` is awaited between a row's publish and its mark (tests
    stall or kill a relay there)."""
    return OutboxRelay(
        store=store,
        driver=driver,
        options=options if options is not None else RelayOptions(),
        wake=wake,
        clock=clock,
        lifecycle=lifecycle,
        on_published=on_published,
    )
