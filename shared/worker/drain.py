"""The worker's drain, the parts that are not bookkeeping: the reason every held run is aborted
with, and the bounded wait for what is left.

§ Roles: the ``accept`` phase aborts each held run's signal with ``X_DRAINING`` — a
``JobDrainedError`` naming the worker and the signal — so a body that unwinds is
``interrupted`` (back to ready, its attempt uncounted). The ``close`` phase waits for the runs
still going within the drain deadline; at the deadline they are ABANDONED: logged
``jobs.worker.drain-abandoned``, no longer renewed, their tasks cancelled unsettled — the
leases lapse and the queue delivers them again, which is what at-least-once already promises.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Mapping

from ujobs.errors import JobDrainedError
from ujobs.lifecycle import Deadline
from ujobs.loop_probes import Signals
from ujobs.worker.heartbeat import HeldRun

log = logging.getLogger("ujobs.worker")

ABANDON_WAIT_S = 0.25
"""After the deadline, how long the cancelled runs get to unwind before the worker closes —
well inside the lifecycle's ``CLOSE_GRACE_MS``, so the close itself is never cut off."""


def drain_reason(worker_id: str, signal_name: str | None) -> JobDrainedError:
    name = signal_name or "drain"
    return JobDrainedError(
        f"worker {worker_id} is draining ({name}); the attempt goes back to the queue uncounted",
        meta={"worker": worker_id, "signal": name},
    )


def remaining_s(deadline: Deadline) -> float | None:
    """Seconds left, or None for a manual ``stop()`` (no budget)."""
    return None if math.isinf(deadline.at) else deadline.remaining_s()


async def wait_out(
    held: Mapping[tuple[str, int], HeldRun], deadline: Deadline, *, worker_id: str, signals: Signals
) -> None:
    """Wait for every held run within ``deadline``; abandon the ones still going."""
    tasks = {h.task for h in held.values() if h.task is not None}
    if not tasks:
        return
    _, pending = await asyncio.wait(tasks, timeout=remaining_s(deadline))
    if not pending:
        return
    stuck = [h for h in held.values() if h.task in pending]
    log.error(
        "jobs.worker.drain-abandoned",
        extra={
            "worker_id": worker_id,
            "job_ids": [h.claimed.id for h in stuck],
            "in_flight": len(stuck),
            "fix": "raise configure_lifecycle(deadline_ms=...) past the slowest job, or make "
            "the job read run.signal",
        },
    )
    for run in stuck:
        run.stopped = True
        if run.task is not None:
            run.task.cancel()
    signals.emit("drain-abandoned", [h.claimed.id for h in stuck])
    await asyncio.wait(pending, timeout=ABANDON_WAIT_S)
