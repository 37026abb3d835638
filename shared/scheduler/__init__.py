"""``job_scheduler()``: each task's cron occurrences in its zone, the catch-up policy, one
leader at a time, and the watermarks that make a fire happen once per occurrence.

The map:

- ``catch_up``: Which occurrences a due task fires, per its catch-up policy — a pure decision,
  no I/O.
- ``cron``: Occurrences of a task's cron line in its IANA zone, as epoch-millisecond instants.
- ``job_scheduler``: ``job_scheduler()``: fires each task's occurrences, one leader at a time,
  one round at a time.
- ``leader``: Leader election for the scheduler: the ``Leader`` contract and ``always_leader``.
- ``leader_postgres``: ``postgres_lease_leader``: the scheduler's leader lease, a ROW in
  ``x_job_leases``.
- ``leader_watch``: The scheduler's view of its own leadership: when to ask, and whether it
  still leads.
- ``options``: ``SchedulerOptions``: the scheduler's settings, validated once, frozen.
- ``rounds``: One scheduler round's work while this node leads: what is due, arming, pauses,
  fires.
- ``state``: Where the scheduler keeps its watermarks: the ``SchedulerState`` contract and the
  memory one.
- ``state_postgres``: ``postgres_scheduler_state``: durable watermarks in ``x_scheduler_state``.

What this package exports is the public import path of DESIGN.md; code inside
``shared`` imports the leaf modules instead, so no import cycle can form.
"""

from __future__ import annotations

from ujobs.scheduler.cron import next_task_run
from ujobs.scheduler.job_scheduler import JobScheduler, job_scheduler
from ujobs.scheduler.leader import Leader, always_leader
from ujobs.scheduler.leader_postgres import postgres_lease_leader
from ujobs.scheduler.options import SchedulerOptions
from ujobs.scheduler.rounds import PAUSE_RECHECK_MS, Fired, RoundResult
from ujobs.scheduler.state import SchedulerState, memory_scheduler_state
from ujobs.scheduler.state_postgres import postgres_scheduler_state

__all__ = [
    "PAUSE_RECHECK_MS",
    "Fired",
    "JobScheduler",
    "Leader",
    "RoundResult",
    "SchedulerOptions",
    "SchedulerState",
    "always_leader",
    "job_scheduler",
    "memory_scheduler_state",
    "next_task_run",
    "postgres_lease_leader",
    "postgres_scheduler_state",
]
