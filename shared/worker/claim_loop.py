"""The worker's claim loop: one pass at a time, the room split over queues, rotation, backoff.

A PASS reads the room BEFORE it claims (``Slots.room()``: the free pool slots, bounded by the
process cap), so a worker at the cap asks the queue for nothing (claim-ahead aside). Then:

A worker serving ONE queue also claims AHEAD (``ujobs.worker.claim_ahead``): its claim asks for
the free slots plus what the prefetch buffer may still hold, and the rows beyond the free slots
wait there for the next slot (the claim marks them AHEAD: ``ClaimOptions.ahead_after``). The
rest of this applies to every other worker (and to one whose claim-ahead is paused).

* **from empty** (no pass has found work since the loop last idled) it is ONE claim over every
  queue with a free slot, in the driver's order (oldest due row first) — an idle worker costs
  one statement per pass whatever the number of queues. Its limit is the room, bounded by the
  smallest free pool among those queues, so no queue can be handed more than its pool.
* **while there is work** it asks queue by queue, in the worker's order ROTATED to start after
  the last queue given a job, each for ``ceil(room / queues left)`` (bounded by its free pool).
  A queue with less work than its share leaves the rest to the queues after it; a queue that
  filled its share is asked again while room is left. On a worker at the cap, each freed slot
  therefore goes to the next queue in turn that has work: three backlogged queues on
  ``max_in_flight=1`` run a, b, c, a, b, c — never a until it drains. A pass that finds no work
  at all returns the loop to the one-statement claim.

Between passes the loop waits ``poll_interval_ms`` while there is work, and doubles the wait up
to the idle ceiling while there is none (or while the worker is full: a full worker's next pass
is kicked by the run that frees a slot). A ``kick()`` — a freed slot, a wake naming a served
queue, a due timer — ends the wait at once; kicks during a pass ask for ONE more pass behind
it, never a second loop. A row this worker handed back due inside a minute (a retry, a
``step.sleep``, a shed) arms a timer for its due time (``DueTimers``).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ujobs.clock import Clock
from ujobs.drivers.base import ClaimedJob, ClaimOptions, JobDriver, OnExhausted
from ujobs.execution.store_loss import store_loss_report
from ujobs.loop_probes import Signals
from ujobs.worker.options import WorkerOptions
from ujobs.worker.slots import Slots

log = logging.getLogger("ujobs.worker")

TIMER_HORIZON_MS = 60_000
"""A handed-back row due within this long gets a timer; a later one is found by the poll."""
MAX_TIMERS = 1_024

Dispatch = Callable[[ClaimedJob, int], None]
"""Starts one claimed run; called synchronously, with the time the claim was sent."""


@dataclass(frozen=True, slots=True)
class ClaimAsk:
    """One claim statement of a pass: which queues, how many asked, how many came back."""

    queues: tuple[str, ...]
    limit: int
    got: int


@dataclass(slots=True)
class PassResult:
    asks: list[ClaimAsk] = field(default_factory=list)
    claimed: int = 0
    full: bool = False
    failed: bool = False


class DueTimers:
    """One real timer, armed for the earliest due time; firing kicks the loop."""

    def __init__(self, clock: Clock, fire: Callable[[], None]) -> None:
        self._clock = clock
        self._fire = fire
        self._due: list[int] = []
        self._known: set[int] = set()
        self._handle: asyncio.TimerHandle | None = None

    @property
    def next_due_ms(self) -> int | None:
        return self._due[0] if self._due else None

    def add(self, at_ms: int) -> bool:
        """Arm for ``at_ms`` when it is due within ``TIMER_HORIZON_MS``; answers whether armed."""
        if at_ms - self._clock.now_ms() > TIMER_HORIZON_MS or at_ms in self._known:
            return False
        if len(self._due) >= MAX_TIMERS and at_ms >= self._due[0]:
            return False  # plenty armed before it: the pass one of them kicks finds this row too
        earliest = self.next_due_ms
        heapq.heappush(self._due, at_ms)
        self._known.add(at_ms)
        if earliest is None or at_ms < earliest:
            self._arm()
        return True

    def _arm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if not self._due:
            return
        delay_ms = max(0, self._due[0] - self._clock.now_ms())
        self._handle = asyncio.get_running_loop().call_later(delay_ms / 1000, self._on_timer)

    def _on_timer(self) -> None:
        self._handle = None
        now = self._clock.now_ms()
        # The timer this handle was armed for has come (on the real clock), and every other
        # time already past on the injected one.
        first = heapq.heappop(self._due)
        self._known.discard(first)
        while self._due and self._due[0] <= now:
            self._known.discard(heapq.heappop(self._due))
        self._fire()
        self._arm()

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._due.clear()
        self._known.clear()


class ClaimLoop:
    """Passes over the served queues; ``run_once()`` is one pass (tests drive it directly)."""

    def __init__(
        self,
        *,
        driver: JobDriver,
        options: WorkerOptions,
        slots: Slots,
        clock: Clock,
        dispatch: Dispatch,
        on_exhausted: OnExhausted | None,
        drop_exhausted: frozenset[str],
        claim_slots: tuple[tuple[str, int], ...] = (),
        claim_waits: frozenset[str] = frozenset(),
        idle_ceiling_ms: Callable[[], int],
        signals: Signals,
        ahead: Callable[[], int] | None = None,
    ) -> None:
        self.driver = driver
        self._store_loss = store_loss_report(driver)
        self._ahead = ahead
        self.options = options
        self.slots = slots
        self.clock = clock
        self.signals = signals
        self._dispatch = dispatch
        self._on_exhausted = on_exhausted
        self.drop_exhausted = drop_exhausted
        self.claim_slots = claim_slots
        self.claim_waits = claim_waits
        self._ceiling = idle_ceiling_ms
        self._order = {q: i for i, q in enumerate(options.queues)}
        self._busy = False
        self._last_given: str | None = None
        self._idle_wait = options.poll_interval_ms
        self._lock = asyncio.Lock()
        self._kicked = False
        self._waiter: asyncio.Future[None] | None = None
        self._stopped = False
        self._task: asyncio.Task[None] | None = None
        self.timers = DueTimers(clock, self.kick)
        self.passes = 0

    # -- kicks ----------------------------------------------------------------------------------

    def kick(self) -> None:
        """Pass now; during a pass, one more pass right behind it."""
        self._kicked = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def due_at(self, at_ms: int) -> bool:
        """A row this worker handed back falls due at ``at_ms``: a timer when within a minute."""
        if self._stopped:
            return False
        return self.timers.add(at_ms)

    # -- one pass -------------------------------------------------------------------------------

    async def run_once(self) -> PassResult:
        async with self._lock:
            result = PassResult()
            if not self._stopped:
                await self._pass(result)
            self.passes += 1
            self.signals.emit("pass", result)
            return result

    async def _pass(self, result: PassResult) -> None:
        room = self.slots.room()
        ahead = self._ahead() if self._ahead is not None and len(self.options.queues) == 1 else 0
        if ahead > 0:
            # One queue, claiming ahead (``ujobs.worker.claim_ahead``): the free slots plus the
            # rows the buffer may still take, in one statement.
            queue = self.options.queues[0]
            free = max(0, min(room, self.slots.free(queue)))
            self._busy = await self._claim([queue], free + ahead, result, ahead_after=free) > 0
            return
        ready = [q for q in self.options.queues if self.slots.free(q) > 0]
        if room <= 0 or not ready:
            result.full = True
            return
        if not self._busy:
            limit = min(room, *(self.slots.free(q) for q in ready))
            got = await self._claim(ready, limit, result)
            if got == 0:
                return
            self._busy = True
            room -= got
            if got < limit or room <= 0:
                return
            ready = [q for q in ready if self.slots.free(q) > 0]
        await self._rotated(ready, room, result)
        if result.claimed == 0 and not result.failed:
            self._busy = False

    def _rotation(self, queues: Sequence[str]) -> list[str]:
        """``queues`` in the worker's order, starting after the last queue given a job."""
        n = len(self.options.queues)
        start = 0 if self._last_given is None else self._order[self._last_given] + 1
        return sorted(queues, key=lambda q: (self._order[q] - start) % n)

    async def _rotated(self, ready: Sequence[str], room: int, result: PassResult) -> None:
        pending = self._rotation(ready)
        while room > 0 and pending and not result.failed:
            again: list[str] = []
            for index, queue in enumerate(pending):
                if room <= 0 or result.failed:
                    break
                share = math.ceil(room / (len(pending) - index))
                ask = min(share, self.slots.free(queue))
                if ask <= 0:
                    continue
                got = await self._claim([queue], ask, result)
                room -= got
                if got == ask and self.slots.free(queue) > 0:
                    again.append(queue)
            pending = again

    async def _claim(
        self,
        queues: Sequence[str],
        limit: int,
        result: PassResult,
        *,
        ahead_after: int | None = None,
    ) -> int:
        sent_ms = self.clock.now_ms()
        try:
            rows = await self.driver.claim(
                ClaimOptions(
                    queues=tuple(queues),
                    limit=limit,
                    worker_id=self.options.worker_id,
                    visibility_ms=self.options.visibility_timeout_ms,
                    on_exhausted=self._on_exhausted,
                    drop_exhausted=self.drop_exhausted,
                    ahead_after=ahead_after,
                    strict_queues=self.options.strict_queues,
                    slots=self.claim_slots,
                    slots_wait=self.claim_waits,
                )
            )
        except Exception as exc:
            result.failed = True
            log.warning(
                "jobs.worker.claim-failed",
                extra={
                    "worker_id": self.options.worker_id,
                    "queues": list(queues),
                    "error": f"{type(exc).__name__}: {exc}",
                },
            )
            return 0
        if self._store_loss is not None:
            self._store_loss.observe()  # a claim that read a new keyspace mark: reported once
        for row in rows:
            self._dispatch(row, sent_ms)
        if rows:
            self._last_given = rows[-1].queue
        result.asks.append(ClaimAsk(tuple(queues), limit, len(rows)))
        result.claimed += len(rows)
        return len(rows)

    # -- the loop -------------------------------------------------------------------------------

    def _delay_ms(self, result: PassResult) -> int:
        if result.claimed > 0:
            self._idle_wait = self.options.poll_interval_ms
            return self.options.poll_interval_ms
        delay = self._idle_wait
        ceiling = max(self._ceiling(), self.options.poll_interval_ms)
        self._idle_wait = min(delay * 2, ceiling)
        return min(delay, ceiling)

    async def _sleep(self, delay_ms: int) -> None:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiter = waiter
        handle = loop.call_later(delay_ms / 1000, _resolve, waiter)
        try:
            await waiter
        finally:
            handle.cancel()
            self._waiter = None

    async def _run(self) -> None:
        while not self._stopped:
            self._kicked = False
            try:
                result = await self.run_once()
            except Exception as exc:  # a bug in a pass must not end the loop
                log.error(
                    "jobs.worker.pass-failed", extra={"error": f"{type(exc).__name__}: {exc}"}
                )
                result = PassResult(failed=True)
            if self.stopped:
                break
            delay = self._delay_ms(result)
            if self._kicked:
                continue
            self.signals.emit("waiting", delay)
            await self._sleep(delay)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    def halt(self) -> None:
        """Stop claiming, at once: no pass starts after the one in flight (whose rows are still
        dispatched), and the timers are dropped."""
        self._stopped = True
        self.timers.cancel()
        self.kick()

    async def join(self, timeout_s: float | None = None) -> bool:
        """Wait for the loop to end after ``halt()``; False when ``timeout_s`` passed first (a
        claim hanging on the wire), in which case the loop is cancelled."""
        task = self._task
        if task is None or task.done():
            return True
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
        if done:
            return True
        task.cancel()
        await asyncio.wait({task})
        return False

    @property
    def stopped(self) -> bool:
        return self._stopped


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
