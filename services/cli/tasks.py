"""``ujobs tasks list | show | pause | resume``: the app's cron tasks, their last and next fire.

``list`` works without a database (the declarations and the next fire, which the scheduler's
own resolver computes); with one it adds each task's last fire and whether it is paused.
``show NAME`` is one task's descriptor (cron, zone, catch-up, description and the jobs its
entries enqueue, in declaration order) beside the same fire and pause facts.

Tenancy: a task is the app's, never a tenant's (its entries stamp their own tenants), and
these commands read the app and the database directly: operator commands, like the api's
operator-token ``/v1/tasks``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ujobs.clock import SYSTEM_CLOCK
from ujobs.drivers.base import TaskFire
from ujobs.errors import TaskUnknownError
from ujobs.introspect import pause_tasks
from ujobs.services.api.task_rows import fires_and_pauses, task_rows
from ujobs.services.cli.common import AppOption, DatabaseUrlOption, JsonOption, operate
from ujobs.services.config.settings import environment, read_common
from ujobs.services.runtime.app_loader import load_api
from ujobs.services.runtime.backends import Backend
from ujobs.services.runtime.output import (
    Progress,
    emit_json,
    print_fields,
    print_table,
    reported,
)

tasks_app = typer.Typer(help="The app's cron tasks.", no_args_is_help=True)


@tasks_app.command("list")
def tasks_list(
    app_spec: AppOption = None, database_url: DatabaseUrlOption = None, as_json: JsonOption = False
) -> None:
    """Each task's cron, zone, catch-up, last fire and next fire. Without DATABASE_URL the
    last fire and the pause are unknown (shown empty)."""
    with reported(as_json=as_json):
        common = read_common(environment(), "cli", app=app_spec, database_url=database_url)
        tasks = list(load_api(common.app).tasks.values())
        fires: dict[str, TaskFire] = {}
        paused: set[str] | None = None
        if common.connections.database_url is not None:

            async def work(backend: Backend, _: Progress) -> tuple[dict[str, TaskFire], set[str]]:
                return await fires_and_pauses(backend.driver)

            fires, paused = operate(
                work, as_json=as_json, label="reading task fires", database_url=database_url
            )
    rows = task_rows(tasks, fires, paused, SYSTEM_CLOCK.now_ms())
    if as_json:
        emit_json({"tasks": rows})
        return
    print_table(
        ("TASK", "CRON", "TZ", "CATCH-UP", "LAST FIRE", "NEXT FIRE", "PAUSED"),
        [
            (
                r["name"],
                r["cron"],
                r["tz"],
                r["catchUp"],
                (r["lastFire"] or {}).get("occurrence"),
                r["nextFire"] or "never",
                "?" if r["paused"] is None else ("yes" if r["paused"] else "no"),
            )
            for r in rows
        ],
    )


TaskArg = Annotated[str, typer.Argument(help="the task's name", show_default=False)]


@tasks_app.command("show")
def tasks_show(
    name: TaskArg,
    app_spec: AppOption = None,
    database_url: DatabaseUrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """One task: its descriptor (cron, zone, catch-up, description, the jobs its entries
    enqueue in declaration order), its last and next fire and whether it is paused."""
    with reported(as_json=as_json):
        common = read_common(environment(), "cli", app=app_spec, database_url=database_url)
        tasks = load_api(common.app).tasks
        handle = tasks.get(name)
        if handle is None:
            declared = sorted(tasks)
            raise TaskUnknownError(
                f"no task is named {name!r} in this app"
                + (f"; declared: {', '.join(declared)}" if declared else ""),
                meta={"task": name, "declared": declared},
            )
        fires: dict[str, TaskFire] = {}
        paused: set[str] | None = None
        if common.connections.database_url is not None:

            async def work(backend: Backend, _: Progress) -> tuple[dict[str, TaskFire], set[str]]:
                return await fires_and_pauses(backend.driver)

            fires, paused = operate(
                work, as_json=as_json, label="reading task fires", database_url=database_url
            )
    [row] = task_rows([handle], fires, paused, SYSTEM_CLOCK.now_ms())
    shown = {**handle.describe(), **row}
    if as_json:
        emit_json(shown)
        return
    print_fields(
        [
            ("task", shown["name"]),
            ("cron", f"{shown['cron']} ({shown['tz']})"),
            ("catch-up", f"{shown['catchUp']} (at most {shown['maxCatchUp']})"),
            ("description", shown["description"]),
            ("jobs", ", ".join(shown["jobs"]) or None),
            ("last fire", (shown["lastFire"] or {}).get("occurrence")),
            ("next fire", shown["nextFire"] or "never"),
            ("paused", "?" if shown["paused"] is None else ("yes" if shown["paused"] else "no")),
        ]
    )


TasksArg = Annotated[list[str], typer.Argument(help="task names", show_default=False)]


def _pause(names: list[str], *, pause: bool, as_json: bool, database_url: str | None) -> None:
    async def work(backend: Backend, _: Progress) -> None:
        await pause_tasks(backend.driver, names, pause=pause)

    operate(
        work,
        as_json=as_json,
        label=f"{'pause' if pause else 'resume'} {', '.join(names)}",
        database_url=database_url,
    )
    if as_json:
        emit_json({"tasks": names, "paused": pause})
        return
    for name in names:
        typer.echo(f"{name}: {'paused — not dispatched' if pause else 'resumed'}")


@tasks_app.command("pause")
def tasks_pause(
    names: TasksArg, database_url: DatabaseUrlOption = None, as_json: JsonOption = False
) -> None:
    """Stop the scheduler dispatching these tasks (checked when each is due)."""
    _pause(names, pause=True, as_json=as_json, database_url=database_url)


@tasks_app.command("resume")
def tasks_resume(
    names: TasksArg, database_url: DatabaseUrlOption = None, as_json: JsonOption = False
) -> None:
    """Dispatch these tasks again; each task's catch_up decides what it missed."""
    _pause(names, pause=False, as_json=as_json, database_url=database_url)


__all__ = ["fires_and_pauses", "task_rows", "tasks_app"]
