"""The memory driver: the whole contract in one heap, for ``ujobs dev`` and tests.

The map:

- ``backfills``: The backfill ledger in memory: the twin of ``x_backfills``, one row per pass.
- ``bulk``: The operator's row moves in memory: requeue, and the bulk requeue/remove/promote.
- ``children``: Children in memory: the parent recorded on the row, the wait's mark and read.
- ``counters``: Per-job counter history in memory: reads and the tier rollup over
  ``x_job_counters``' twin.
- ``driver``: The memory driver: the whole contract in one heap, for ``ujobs dev`` and tests.
- ``introspect``: The operator surface of the memory driver: every member of
  ``JobIntrospection``.
- ``leases``: Fleet slots in memory: the twin of ``x_job_leases`` (one row per held slot).
- ``state``: The memory driver's tables: the twins of x_jobs, x_job_steps, x_job_pauses,
  x_job_counters.
- ``workers``: The worker registry in memory: the twin of ``x_job_workers``.

What this package exports is the public import path of DESIGN.md; code inside
``shared`` imports the leaf modules instead, so no import cycle can form.
"""

from __future__ import annotations

from ujobs.drivers.memory.driver import MemoryDriver, memory_driver

__all__ = [
    "MemoryDriver",
    "memory_driver",
]
