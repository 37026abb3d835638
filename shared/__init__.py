"""ultimate-jobs core: declare jobs and tasks, enqueue them, run them durably.

from ujobs import job, task, t, Retry, Run, define_api, publish_event, Enqueued

The map (each package's ``__init__`` is its own):

- ``jobs``: declaring work: ``job()``, ``task()``, handles, ``t`` schemas, ``Retry``,
  ``define_api()`` and the registry.
- ``execution``: one attempt of one claimed job: the body, steps, settle, outcomes,
  ``on_settled``, progress, the ``Run``.
- ``worker``: ``job_worker()``: pools, the claim loop, claim-ahead, heartbeats, limits, fleet
  concurrency, the drain.
- ``scheduler``: ``job_scheduler()``: cron in a zone, catch-up, leader election, watermarks.
- ``outbox``: the transactional outbox: stores, the staging facade, the relay,
  ``install_outbox``.
- ``wake``: the wake: the Redis channel, Postgres LISTEN/NOTIFY, the announcing driver.
- ``events``: the event bus ``step.wait_for_event`` listens on, ``publish_event()``.
- ``drivers``: the driver contract, then ``memory``, ``postgres`` and ``redis``, one package each.
- ``retention``: ``purge()`` and its targets (the built-in ``x.purge`` sweep).
- ``backfill``: ``backfill()``, its throttle and the ``x_backfills`` ledger.
- ``role``: the one start/stop/drain shape of the worker, the scheduler and the relay;
  ``lifecycle`` the process's two-phase shutdown they register with.
- ``loop_probes``: awaitable signals a loop emits, so tests wait on events, not sleeps.
- ``introspect``: the operator surface as functions (the CLI, the api, a dashboard);
  ``masking`` the one mask of a redacted value and an idempotency key, the enqueue path's too.
- ``results``: a job's result as stored: its JSON encoding, the size limit
  (``UJOBS_RESULT_MAX_BYTES``), ``X_RESULT_TOO_LARGE`` / ``X_RESULT_INVALID``.
- ``testing``: helpers for YOUR test suite: ``drain``, ``enqueued``, a frozen clock.
- ``limits``: what a caller may send (nesting depth, the bytes of a tenant, queue, name,
  key, runId), checked by every enqueue and publish, whichever edge it came through.
- ``errors`` (every ``X_`` code), ``clock``, ``durations``, ``ids``, ``context`` (actor, tenant,
  transaction, trace), ``signal`` (a run's abort signal), ``metrics`` (the Prometheus series),
  ``tracing`` (a run's span, a child of its enqueuer's ``traceparent``).
"""

from __future__ import annotations

from ujobs.clock import Clock, FrozenClock, SystemClock
from ujobs.context import Actor, bind_transaction, cross_tenant, transaction
from ujobs.drivers.records import Enqueued
from ujobs.errors import UltimateError, register_error_retry, retry_for
from ujobs.events.bus import publish_event
from ujobs.execution.run import Run, Settled
from ujobs.jobs.job import JobHandle, KeyedConcurrency, job
from ujobs.jobs.registry import Api, define_api
from ujobs.jobs.retry import Retry, is_final_attempt, retry_schedule
from ujobs.jobs.schema import t
from ujobs.jobs.snooze import Snooze
from ujobs.jobs.task import TaskHandle, task
from ujobs.signal import Signal

__all__ = [
    "Actor",
    "Api",
    "Clock",
    "Enqueued",
    "FrozenClock",
    "JobHandle",
    "KeyedConcurrency",
    "Retry",
    "Run",
    "Settled",
    "Signal",
    "Snooze",
    "SystemClock",
    "TaskHandle",
    "UltimateError",
    "bind_transaction",
    "cross_tenant",
    "define_api",
    "is_final_attempt",
    "job",
    "publish_event",
    "register_error_retry",
    "retry_for",
    "retry_schedule",
    "t",
    "task",
    "transaction",
]
