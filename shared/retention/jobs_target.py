"""``jobs_purge_target()``: retention for ``x_jobs`` and what hangs off a finished run.

``done`` rows go after ``done_retention_ms`` (14 days, ``jobs.doneRetentionMs``); ``dead``,
``failed`` and ``cancelled`` rows after ``dead_retention_ms`` (90 days,
``jobs.deadRetentionMs``), measured against ``finished_at`` on the clock the sweep passes in. A
``done`` row enqueued with ``unique_for`` stays while its period still holds its key, however
short the retention. Each row takes its run's ``x_job_steps`` with it once no row of the run
still stands (a run is a ``run_id`` under one tenant: a row of another tenant carrying the same
id keeps nothing alive). A live row is never touched (only finished states are read), nor one an
unpublished ``x_outbox`` row or a ``running`` ``x_backfills`` pass still names.

A pass runs at most ``max_batches`` batches of ``batch_size`` rows, ``skip locked``, walking
``x_jobs_finished_idx`` from the oldest row of each state (each batch from where the last one
reached, so it does not re-read the entries its predecessors left dead until VACUUM): a batch is
one short statement, so a sweep never holds a long lock and never waits on a row a worker holds.
Between two batches it rests ``rest_ratio`` (1) times as long as the last batch took, so a sweep
of a long backlog takes at most half of what the database (and a small machine's cores) can
give; while other sessions of the database are running statements (workers draining, an api
enqueueing: ``jobs_purge_busy``, read before each rest and trusted for ``BUSY_HOLD_S``) it rests
``busy_rest_ratio`` (9) times as long, a tenth of the database at most, so a drain beside the
sweep keeps nearly all its pace and a sweep alone keeps its own (a pass is at most
``max_batches`` batches, so an hourly pass still ends well within its hour). A batch whose run
still had a row it could not see deleted is followed, after its commit, by
``jobs_purge_steps``, so two sweeps that split a run settle its steps after both commit. After
the batches one statement removes up to ``batch_size`` step records whose run has no row left
(what a sweep that died before its follow-up stranded), and one more the fleet-lease rows whose
TTL lapsed.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field

from ujobs.drivers.postgres.plan_settings import JitCheck
from ujobs.drivers.postgres.sql import query
from ujobs.errors import ConfigInvalidError
from ujobs.outbox.store_postgres import PgFetch

_PURGE = query("jobs_purge")
_FOLLOW_UP = query("jobs_purge_steps")
_ORPHANS = query("jobs_purge_orphan_steps")
_LEASES = query("jobs_purge_leases")
_COUNT = query("jobs_purge_count")
_BUSY = query("jobs_purge_busy")

JOBS_PURGE_TARGET = "x_jobs"
DAY_MS = 86_400_000
DEFAULT_DONE_RETENTION_MS = 14 * DAY_MS
DEFAULT_DEAD_RETENTION_MS = 90 * DAY_MS
DEFAULT_PURGE_BATCH_SIZE = 1_000
DEFAULT_PURGE_MAX_BATCHES = 50
DEFAULT_REST_RATIO = 1.0
DEFAULT_BUSY_REST_RATIO = 9.0
BUSY_HOLD_S = 1.0
"""How long one sight of another active session keeps the sweep at its busy pace: a drain's
sessions are between statements much of the time, so one read alone would miss it."""
DEAD_STATES: tuple[str, ...] = ("dead", "failed", "cancelled")


@dataclass(slots=True)
class JobsPurgeCount:
    """What one pass removed, by table (``purge_expired`` answers their sum)."""

    jobs: int = 0
    steps: int = 0
    leases: int = 0
    busy_rests: int = 0
    """Rests taken at ``busy_rest_ratio`` (other sessions were running statements): not rows."""

    @property
    def total(self) -> int:
        return self.jobs + self.steps + self.leases


@dataclass(slots=True)
class JobsPurgeTarget:
    """A ``PurgeTarget``: ``name`` and ``purge_expired(now_ms) -> rows removed``."""

    executor: PgFetch
    done_retention_ms: int = DEFAULT_DONE_RETENTION_MS
    dead_retention_ms: int = DEFAULT_DEAD_RETENTION_MS
    batch_size: int = DEFAULT_PURGE_BATCH_SIZE
    max_batches: int = DEFAULT_PURGE_MAX_BATCHES
    rest_ratio: float = DEFAULT_REST_RATIO
    busy_rest_ratio: float = DEFAULT_BUSY_REST_RATIO
    name: str = JOBS_PURGE_TARGET
    last: JobsPurgeCount = field(default_factory=JobsPurgeCount, compare=False)
    _spent: float = field(default=0.0, compare=False)
    _busy_until: float = field(default=0.0, compare=False)
    _jit: JitCheck = field(
        default_factory=lambda: JitCheck("the jobs purge"), compare=False, repr=False
    )

    def cutoffs(self, now_ms: int) -> list[tuple[str, int]]:
        """Each finished state and the ``finished_at`` it must be older than to go."""
        return [("done", now_ms - self.done_retention_ms)] + [
            (state, now_ms - self.dead_retention_ms) for state in DEAD_STATES
        ]

    async def purge_expired(self, now_ms: int) -> int:
        counted = JobsPurgeCount()
        await self._jit.once(self.executor)
        budget = self.max_batches
        self._spent = 0.0
        for state, cutoff in self.cutoffs(now_ms):
            reached: int | None = None
            while budget > 0:
                if self._spent:  # the last batch was full: rest before the next one
                    counted.busy_rests += await self._rest()
                budget -= 1
                began = time.monotonic()
                rows = await self.executor.fetch(
                    _PURGE, state, cutoff, self.batch_size, reached, now_ms
                )
                deleted = int(rows[0]["deleted"])
                if rows[0]["reached"] is not None:
                    # x_ms rounds to the millisecond: step back one so no row is passed over.
                    reached = int(rows[0]["reached"]) - 1
                counted.jobs += deleted
                counted.steps += int(rows[0]["steps"])
                shared = list(rows[0]["shared"])
                if shared:
                    tenants = list(rows[0]["shared_tenants"])
                    follow = await self.executor.fetch(_FOLLOW_UP, shared, tenants)
                    counted.steps += int(follow[0]["deleted"])
                self._spent = time.monotonic() - began if deleted == self.batch_size else 0.0
                if deleted < self.batch_size:
                    break
        orphans = await self.executor.fetch(_ORPHANS, self.batch_size)
        counted.steps += int(orphans[0]["deleted"])
        leases = await self.executor.fetch(_LEASES, now_ms, self.batch_size)
        counted.leases += int(leases[0]["deleted"])
        self.last = counted
        return counted.total

    async def _rest(self) -> int:
        """Between two batches, ``rest_ratio`` times as long as the last one took, or
        ``busy_rest_ratio`` times while other sessions are running statements: the sweep
        leaves the database (and a small machine's cores) to the claim most of the time.
        Answers 1 for a rest at the busy pace. ``rest_ratio`` 0 never rests nor asks."""
        if self.rest_ratio <= 0:
            return 0
        busy = self.busy_rest_ratio > self.rest_ratio and await self._database_busy()
        await asyncio.sleep(self._spent * (self.busy_rest_ratio if busy else self.rest_ratio))
        return int(busy)

    async def _database_busy(self) -> bool:
        now = time.monotonic()
        rows = await self.executor.fetch(_BUSY)
        if int(rows[0]["active"]) > 0:
            self._busy_until = now + BUSY_HOLD_S
        return now < self._busy_until

    async def count_expired(self, now_ms: int) -> int:
        """The ``x_jobs`` rows a pass at ``now_ms`` would remove (``ujobs db purge --dry-run``),
        not bounded by ``max_batches``."""
        done_cutoff = now_ms - self.done_retention_ms
        dead_cutoff = now_ms - self.dead_retention_ms
        rows = await self.executor.fetch(_COUNT, done_cutoff, dead_cutoff, now_ms)
        return int(rows[0]["expired"])


def jobs_purge_target(
    *,
    executor: PgFetch,
    done_retention_ms: int = DEFAULT_DONE_RETENTION_MS,
    dead_retention_ms: int = DEFAULT_DEAD_RETENTION_MS,
    batch_size: int = DEFAULT_PURGE_BATCH_SIZE,
    max_batches: int = DEFAULT_PURGE_MAX_BATCHES,
    rest_ratio: float = DEFAULT_REST_RATIO,
    busy_rest_ratio: float = DEFAULT_BUSY_REST_RATIO,
) -> JobsPurgeTarget:
    """The ``x_jobs`` retention target; every option but the two rest ratios (finite numbers
    >= 0; ``rest_ratio`` 0: batches back to back, busy or not; a ``busy_rest_ratio`` at or
    below ``rest_ratio``: one pace whatever the load) is a positive whole number."""
    for option, ratio in (("rest_ratio", rest_ratio), ("busy_rest_ratio", busy_rest_ratio)):
        if (
            isinstance(ratio, bool)
            or not isinstance(ratio, int | float)
            or not math.isfinite(ratio)
            or ratio < 0
        ):
            raise ConfigInvalidError(
                f"{option} must be a finite number of at least 0; got {ratio!r}",
                meta={"option": option},
            )
    for option, value in (
        ("done_retention_ms", done_retention_ms),
        ("dead_retention_ms", dead_retention_ms),
        ("batch_size", batch_size),
        ("max_batches", max_batches),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigInvalidError(
                f"{option} must be a positive whole number; got {value!r}",
                meta={"option": option},
            )
    return JobsPurgeTarget(
        executor,
        done_retention_ms,
        dead_retention_ms,
        batch_size,
        max_batches,
        float(rest_ratio),
        float(busy_rest_ratio),
    )
