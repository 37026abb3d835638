"""ultimate-jobs core: declare jobs and tasks, enqueue them, run them durably.

from shared import job, task, t, Retry, Run, define_api, publish_event, Enqueued

Test helpers for your own suite: ``shared.testing``.
"""

from __future__ import annotations

from shared.clock import Clock, FrozenClock, SystemClock
from shared.context import Actor, bind_transaction, cross_tenant, transaction
from shared.drivers.records import Enqueued
from shared.errors import UltimateError, register_error_retry, retry_for
from shared.events.bus import publish_event
from shared.execution.run import Run, Settled
from shared.jobs.job import JobHandle, KeyedConcurrency, job
from shared.jobs.registry import Api, define_api
from shared.jobs.retry import Retry, is_final_attempt, retry_schedule
from shared.jobs.schema import t
from shared.jobs.task import TaskHandle, task
from shared.signal import Signal

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
