"""``ujobs dev``'s running commentary: a line on stdout each time a job changes state or a task
fires, read through the operator surface like ``ujobs jobs list`` would.

It polls ``introspect.list`` (the newest page) and ``task_fires`` twice a second and prints the
difference, so a newcomer watches a run go ``ready → running → suspended → done`` without a
dashboard. Reading rows rather than hooking the worker means it shows exactly what an operator
would see, whichever process moved the row.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ujobs.drivers.base import MAX_JOB_PAGE, JobFilter, JobIntrospection, JobRow
from ujobs.introspect import short_id

POLL_S = 0.5
FINISHED = ("done", "failed", "dead", "cancelled")

Say = Callable[[str], None]


def _stdout(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%H:%M:%S")


def _first(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[0] if lines else ""


def describe(row: JobRow, before: JobRow | None) -> str | None:
    """The line for ``row`` given what was seen before (None: nothing worth saying)."""
    if before is not None and (before.state, before.attempt, before.claim) == (
        row.state,
        row.attempt,
        row.claim,
    ):
        return None
    head = f"{row.name} {short_id(row.id)}"
    if before is None and row.state in ("ready", "delayed"):
        if row.attempt > 0 and row.last_error:
            # First seen after a failed attempt: a retry, not a fresh enqueue.
            return f"{head}: {_retry_line(row, row.attempt)}"
        return f"{head}: enqueued on {row.queue!r}"
    if row.state == "running":
        return f"{head}: running, attempt {row.attempt} of {row.max_attempts}"
    if row.state == "suspended":
        return (
            f"{head}: suspended until {_clock(row.run_at_ms)} (a step.sleep: no process holds it)"
        )
    if row.state in ("ready", "delayed") and before is not None and before.state in FINISHED:
        return f"{head}: re-queued on {row.queue!r}"
    if (
        row.state in ("ready", "delayed")
        and before is not None
        and (before.state == "running" or row.attempt > before.attempt)
    ):
        # Back from running, or a whole attempt (claim, run, failure) fell between two polls.
        return f"{head}: {_retry_line(row, row.attempt)}"
    if row.state == "done":
        return f"{head}: done after {row.attempt} attempt(s)"
    if row.state in ("dead", "failed", "cancelled"):
        return f"{head}: {row.state} — {_first(row.last_error)}"
    return f"{head}: {row.state}"


def _retry_line(row: JobRow, failed_attempt: int) -> str:
    why = f" — {_first(row.last_error)}" if row.last_error else ""
    return (
        f"attempt {failed_attempt} of {row.max_attempts} failed, retry scheduled for "
        f"{_clock(row.run_at_ms)}{why}"
    )


@dataclass
class DevWatch:
    """Prints job and task changes until stopped; ``run_once`` is one poll (tests)."""

    introspect: JobIntrospection
    say: Say = _stdout
    seen: dict[str, JobRow] = field(default_factory=dict)
    fires: dict[str, int] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None

    async def prime(self) -> None:
        """Remember what is there already (a previous run's jobs) without narrating it."""
        page = await self.introspect.list(JobFilter(limit=MAX_JOB_PAGE))
        self.seen.update((row.id, row) for row in page.rows)
        self.fires.update((f.task, f.occurrence_ms) for f in await self.introspect.task_fires())

    async def run_once(self) -> None:
        # Fires first: a fire's jobs may already show as done in the same poll.
        for fire in await self.introspect.task_fires():
            if self.fires.get(fire.task) != fire.occurrence_ms:
                self.fires[fire.task] = fire.occurrence_ms
                self.say(f"task {fire.task}: fired for {_clock(fire.occurrence_ms)}")
        page = await self.introspect.list(JobFilter(limit=MAX_JOB_PAGE))
        for row in reversed(page.rows):  # oldest first, so lines read in order
            line = describe(row, self.seen.get(row.id))
            self.seen[row.id] = row
            if line is not None:
                self.say(line)

    async def _loop(self) -> None:
        while True:
            try:
                await self.run_once()
            except Exception as exc:  # the commentary must never take ujobs dev down
                self.say(f"(watch: {type(exc).__name__}: {exc})")
            await asyncio.sleep(POLL_S)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
