"""Each cron task as a row: its declaration, last fire, next fire and pause. One implementation
for ``ujobs tasks list``, ``GET /v1/tasks`` and the dashboard's tasks page."""

from __future__ import annotations

from typing import Any

from ujobs.drivers.base import JobDriver, TaskFire
from ujobs.introspect import introspection_of
from ujobs.jobs.task import TaskHandle
from ujobs.scheduler.cron import next_task_run
from ujobs.services.runtime.output import iso


def task_rows(
    tasks: list[TaskHandle], fires: dict[str, TaskFire], paused: set[str] | None, now_ms: int
) -> list[dict[str, Any]]:
    """What ``tasks list`` prints, per task (by name): the declaration, the last fire, the
    next fire (``next_task_run``) and whether it is paused (None: no database to ask)."""
    rows = []
    for handle in sorted(tasks, key=lambda t: t.name):
        fire = fires.get(handle.name)
        next_ms = next_task_run(handle, now_ms)
        rows.append(
            {
                "name": handle.name,
                "cron": handle.cron,
                "tz": handle.tz,
                "catchUp": handle.catch_up,
                "maxCatchUp": handle.max_catch_up,
                "lastFire": None
                if fire is None
                else {
                    "occurrenceMs": fire.occurrence_ms,
                    "occurrence": iso(fire.occurrence_ms),
                    "firedAtMs": fire.fired_at_ms,
                },
                "nextFireMs": next_ms,
                "nextFire": iso(next_ms),
                "paused": None if paused is None else handle.name in paused,
            }
        )
    return rows


async def fires_and_pauses(driver: JobDriver) -> tuple[dict[str, TaskFire], set[str]]:
    """Each task's last fire (by name) and the paused tasks: what ``task_rows`` adds from the
    database."""
    introspect = introspection_of(driver)
    fires = {f.task: f for f in await introspect.task_fires()}
    return fires, set(await introspect.paused_tasks())
