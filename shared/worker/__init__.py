"""``job_worker()``: per-queue pools under one optional process cap, claim-ahead, the claim
loop, heartbeats and fleet concurrency, presence in the registry, and the drain.

The map:

- ``claim_ahead``: Claim-ahead: a few rows claimed beyond the free slots, so the next run starts
  without a round trip.
- ``claim_loop``: The worker's claim loop: one pass at a time, the room split over queues,
  rotation, backoff.
- ``claimed_run``: One claimed row, from the claim to the slot freed: what a worker does with
  each run.
- ``concurrency``: Fleet concurrency: the ``concurrency`` slot a run takes at EVERY claim,
  before its body.
- ``drain``: The worker's drain, the parts that are not bookkeeping: the reason every held run
  is aborted with, and the bounded wait for what is left.
- ``heartbeat``: Leases held while a run runs: the row's visibility lease and its fleet slot,
  renewed by ONE timer for the whole worker (not a task per run).
- ``job_worker``: ``job_worker()``: the worker role — per-queue pools under one optional process
  cap, lease heartbeats, fleet concurrency, the two-phase drain.
- ``limits``: ``LimitConfig``: per-PROCESS caps, the fast path in front of the fleet-wide
  ``concurrency``.
- ``options``: ``WorkerOptions``: the worker's settings, validated once, frozen.
- ``presence``: The worker's row in the registry (``x_job_workers``): who it is, what it holds,
  whether it drains.
- ``slots``: The worker's in-flight accounting: per-queue pools under one optional process cap.
- ``stats``: What a worker says about itself: its state and ``stats()`` (the scaler's figures).

What this package exports is the public import path of DESIGN.md; code inside
``shared`` imports the leaf modules instead, so no import cycle can form.
"""

from __future__ import annotations

from ujobs.worker.concurrency import job_lease_key
from ujobs.worker.job_worker import JobWorker, job_worker
from ujobs.worker.options import WorkerOptions
from ujobs.worker.stats import WorkerStats

__all__ = [
    "JobWorker",
    "WorkerOptions",
    "WorkerStats",
    "job_lease_key",
    "job_worker",
]
