"""Reading a job's result from Python: ``await handle.result(job_id, timeout="30s")`` and
``await (await handle.enqueue(...)).result(timeout="30s")``.

The wait is the driver's (``ujobs.drivers.results``): woken by the settle that finishes the
row, not by reading it in a loop. What it answers:

| the row | answers |
|---|---|
| ``done`` | the stored result (``None`` when the body returned nothing) |
| ``dead``, ``failed``, ``cancelled`` | raises ``JobFailedError`` carrying the job's own error code
  (``X_JOB_MAX_ATTEMPTS``, an app's ``X_…``) when its last error names one, ``X_JOB_FAILED``
  otherwise; ``meta`` has ``jobId``, ``name`` and ``state`` |
| still live when ``timeout`` runs out | raises ``X_TIMEOUT`` (``meta.state``: where it is) |
| no such row (or another job's, asked through a handle) | raises ``X_JOB_NOT_FOUND`` |

This is trusted code's read, as ``enqueue`` is: no tenant is checked (the HTTP edge checks the
token's). An enqueue staged in an open transaction (the outbox) has no row until the relay
publishes it: its result is ``X_JOB_NOT_FOUND`` until then.
"""

from __future__ import annotations

import re
from typing import Any

from ujobs.drivers.base import JobDriver, JobRow
from ujobs.drivers.results import results_of, wait_settled
from ujobs.durations import Duration, duration_ms
from ujobs.errors import (
    JobFailedError,
    JobNotFoundError,
    NotImplementedByDriverError,
    OperationTimeoutError,
)
from ujobs.jobs.enqueue_target import job_driver

_HEADLINE_CODE = re.compile(r"^(X_[A-Z0-9_]+)\b")


def failure_of(row: JobRow) -> JobFailedError:
    """The error a result read raises for a row that ended without one: its own code when its
    ``last_error`` starts with one, its message without the stack (``error_summary``)."""
    # Imported here: the settle module imports the job handle, which imports this module.
    from ujobs.execution.settle import error_summary

    summary = error_summary(row.last_error) or row.state
    match = _HEADLINE_CODE.match(summary)
    code = match.group(1) if match else None
    message = summary[len(code) + 1 :].strip() if code and summary[len(code)] == ":" else summary
    return JobFailedError(
        f"job {row.name!r} ({row.id}) ended {row.state}: {message}",
        meta={"jobId": row.id, "name": row.name, "state": row.state},
        code=code,
    )


async def job_result(
    job_id: str,
    *,
    timeout: Duration,
    name: str | None = None,
    driver: JobDriver | None = None,
) -> Any:
    """The result of job ``job_id`` once it settles (see the module's table)."""
    wait_ms = duration_ms(timeout, field="timeout")
    chosen = driver if driver is not None else job_driver()
    results = results_of(chosen)
    if results is None:
        raise NotImplementedByDriverError(
            f"the {chosen.name} driver keeps no results to wait for",
            meta={"driver": chosen.name, "capability": "results"},
        )
    row = await wait_settled(results, job_id, wait_ms / 1000)
    if row is None or (name is not None and row.name != name):
        raise JobNotFoundError(
            f"no job{'' if name is None else f' {name!r}'} has the id {job_id!r}",
            meta={"id": job_id},
        )
    if row.state == "done":
        return row.result
    if row.state in ("dead", "failed", "cancelled"):
        raise failure_of(row)
    raise OperationTimeoutError(
        f"job {row.name!r} ({row.id}) did not settle within {wait_ms} ms; it is {row.state}",
        meta={"jobId": row.id, "state": row.state, "timeoutMs": wait_ms},
    )


__all__ = ["failure_of", "job_result"]
