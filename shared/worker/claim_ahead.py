"""Claim-ahead: rows claimed beyond the free slots, so the next run starts without a round
trip.

Without it a worker claims only when a slot is free, so on short jobs the claim's round trip
and the bodies never overlap: the slots sit empty while the claim is on the wire. A worker
serving ONE queue (its pool is the whole of its room, so no rotation is at stake) may claim up
to ``claim_ahead`` rows (``WorkerOptions``; at most ``CLAIM_AHEAD_MAX_PER_SLOT``, 16, times
its capacity) more than it has room for;
they wait here, and a slot freed by a settle takes the oldest at once (the freeing kicks a
pass that refills the buffer).

**How many it holds: the worker's pace.** The buffer holds about ``PACE_MS`` (50 ms) of the
runs this worker started lately, re-read at most every ``PACE_WINDOW_MS`` by the pass that asks
for ``room()``. It never holds fewer than ``CLAIM_AHEAD_FLOOR_PER_SLOT`` (3) rows per slot,
nor more than ``claim_ahead``. A worker of slow jobs thus keeps three rows a slot. A worker
of short ones holds more, and each of its claim and ack statements then carries more rows.
A statement costs Postgres about as much to start as to write twenty rows
(bench/RESULTS.md, 2026-12-07), so fewer and larger statements are most of what the drain
gains. Rows are claimed ahead in time, not in number: a run enqueued behind the buffer,
however urgent, waits about 50 ms of this worker's work.

What a buffered row keeps, and how it is never lost:

* **its lease** — the claim bought ``visibility_timeout_ms``; a row waits here at most
  ``max_wait_ms`` (``PREFETCH_MAX_WAIT_MS``, and never more than a quarter of the lease), and
  its heartbeat counts from the claim (``HeldRun(sent_ms=...)``) once it runs. A row that
  waited its limit is HANDED BACK (``hand_back``: an uncounted nack, due now) — the slots are
  held by long runs, and another worker may be free — and claim-ahead pauses for
  ``PREFETCH_COOLDOWN_MS`` so a worker of long jobs does not keep taking rows it cannot run.
* **its attempt** — the claim counted one; every hand-back here is uncounted (the nack gives
  the attempt back), so a row that never ran never spends one.
* **the crash case** — the claim marked the rows past the free slots AHEAD
  (``ClaimOptions.ahead_after``), and a row's mark is cleared (``start_ahead``) only once its
  body has run ``START_MARK_DELAY_MS`` (``ujobs.worker.claimed_run``). A row still marked when its
  lease lapses — its worker died with it here — is claimed again with the SAME attempt and
  never buried, even on its final attempt; so a row on its final attempt is buffered like any
  other. A body that kills its worker before its mark landed looks unstarted too, so those
  uncounted returns are capped per row (``AHEAD_RETURNS_MAX``): a poison pill still exhausts
  its attempts.
* **its fleet slot** — a row of a job with ``concurrency`` whose claim took its slot
  (``ClaimedJob.slot``, Postgres) holds it while it waits here, its TTL counting from the
  claim like the lease; a row handed back unstarted releases it in the nack's own statement
  (or on its own after a nack that did not land).
* **the drain** — ``stop_claiming`` hands every buffered row back at once; a row the pass in
  flight claims after that, with no slot for it, is handed back too. ``settle()`` waits for
  those nacks. A row is popped from the buffer exactly once, to run or to go back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable

from ujobs.drivers.base import ClaimedJob, JobDriver
from ujobs.execution.attempt import hand_back
from ujobs.worker.concurrency import lease_holder

log = logging.getLogger("ujobs.worker")

PREFETCH_MAX_WAIT_MS = 500
"""How long a claimed row may wait for a slot before it is handed back."""
PREFETCH_COOLDOWN_MS = 30_000
"""How long claim-ahead pauses after a row had to be handed back."""
PACE_MS = 50
"""The buffer holds about this long of the worker's recent pace (runs started a second)."""
PACE_WINDOW_MS = 100
"""The pace is re-read at most this often: over a shorter window a pass or two is noise."""


class Prefetch:
    """The rows claimed ahead of a free slot; ``room()`` is how many more the loop may ask."""

    def __init__(
        self,
        *,
        driver: JobDriver,
        limit: int,
        visibility_ms: int,
        start: Callable[[ClaimedJob, int], None],
        can_start: Callable[[str], bool],
        floor: int,
        started: Callable[[], int],
    ) -> None:
        self._driver = driver
        self.limit = max(0, limit)
        """The most rows it may hold (``claim_ahead``)."""
        self.floor = min(self.limit, max(0, floor))
        """The fewest it holds room for, whatever the pace (three per slot)."""
        self.size = self.floor
        """How many it holds room for now: ``PACE_MS`` of the pace, within floor and limit."""
        self._started = started
        self._paced_at = time.monotonic()
        self._paced_count = 0  # ``started`` counts from 0 (it is read first by a pass)
        self.max_wait_ms = min(PREFETCH_MAX_WAIT_MS, visibility_ms // 4)
        self._start = start
        self._can_start = can_start
        self.rows: deque[tuple[ClaimedJob, int, float]] = deque()
        """The buffered rows (claimed, claim sent at ms, buffered at monotonic s), oldest
        first; read, never written, outside this class."""
        self._returning: set[asyncio.Task[None]] = set()
        self._sweep: asyncio.TimerHandle | None = None
        self._paused_until = 0.0
        self._closed = False
        self.returned = 0

    def __len__(self) -> int:
        return len(self.rows)

    def room(self) -> int:
        """How many rows the next claim may take beyond the free slots."""
        now = time.monotonic()
        if self._closed or self.limit <= 0 or now < self._paused_until:
            return 0
        if now - self._paced_at >= PACE_WINDOW_MS / 1000:
            self._pace(now, self._started())
        return max(0, self.size - len(self.rows))

    def _pace(self, now: float, started: int) -> None:
        """Size the buffer to the runs started since the last reading (``PACE_MS`` of them)."""
        per_s = (started - self._paced_count) / (now - self._paced_at)
        self._paced_at, self._paced_count = now, started
        self.size = max(self.floor, min(self.limit, round(per_s * PACE_MS / 1000)))

    def hold(self, claimed: ClaimedJob, sent_ms: int) -> None:
        """A claimed row with no slot free: keep it (or hand it back — see the module)."""
        if self._closed or self.limit <= 0:
            self.give_back(claimed, pause=not self._closed)
            return
        self.rows.append((claimed, sent_ms, time.monotonic()))
        if self._sweep is None:
            self._sweep = asyncio.get_running_loop().call_later(
                self.max_wait_ms / 1000, self._on_sweep
            )

    def feed(self) -> None:
        """Start buffered rows while their queue has a free slot (oldest first)."""
        while self.rows and self._can_start(self.rows[0][0].queue):
            claimed, sent_ms, _ = self.rows.popleft()
            self._start(claimed, sent_ms)

    def _on_sweep(self) -> None:
        self._sweep = None
        horizon = time.monotonic() - self.max_wait_ms / 1000
        while self.rows and self.rows[0][2] <= horizon:
            claimed, _, _ = self.rows.popleft()
            self.give_back(claimed, pause=True)
        if self.rows:
            wait = self.rows[0][2] - horizon
            self._sweep = asyncio.get_running_loop().call_later(max(0.0, wait), self._on_sweep)

    def give_back(self, claimed: ClaimedJob, *, pause: bool) -> None:
        """Hand ``claimed`` back uncounted, due now; ``pause`` stops claiming ahead a while."""
        if pause:
            self._paused_until = time.monotonic() + PREFETCH_COOLDOWN_MS / 1000
        self.returned += 1
        task = asyncio.ensure_future(self._hand_back(claimed))
        self._returning.add(task)
        task.add_done_callback(self._returning.discard)

    async def _hand_back(self, claimed: ClaimedJob) -> None:
        try:
            back = await hand_back(claimed, driver=self._driver, reason="prefetch", delay_ms=0)
            if back.settled:
                return  # its nack released the claim's fleet slot too (``ClaimedJob.slot``)
        except Exception as exc:  # the lease lapses instead: a counted, never final, attempt
            log.warning(
                "jobs.worker.prefetch-return-failed",
                extra={"job_id": claimed.id, "claim": claimed.claim, "error": repr(exc)},
            )
        leases = self._driver.leases
        if claimed.slot is not None and leases is not None:  # the claim took its fleet slot
            try:
                await leases.release(claimed.slot, lease_holder(claimed))
            except Exception as exc:  # it lapses by its TTL instead
                log.warning(
                    "jobs.worker.slot-release-failed",
                    extra={"job_id": claimed.id, "key": claimed.slot, "error": repr(exc)},
                )

    def close(self) -> None:
        """No more rows kept: every buffered row goes back now (the drain)."""
        self._closed = True
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        while self.rows:
            claimed, _, _ = self.rows.popleft()
            self.give_back(claimed, pause=False)

    async def settle(self, timeout_s: float | None) -> None:
        """Wait for the hand-backs on the wire (bounded by ``timeout_s``)."""
        if self._returning:
            await asyncio.wait(set(self._returning), timeout=timeout_s)
