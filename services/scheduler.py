"""``ujobs scheduler`` (the service) and ``ujobs tasks list`` (what it will fire, and when).

The service builds the only safe wiring — ``postgres_driver`` for pauses and counters,
``postgres_scheduler_state`` for durable watermarks, ``postgres_lease_leader`` for one leader
at a time — over ONE pool from ``DATABASE_URL``, starts ``job_scheduler`` for the app's tasks
(``--app`` / ``UJOBS_APP``), drains on SIGTERM/SIGINT and exits 0 after a clean drain (1 when
the drain was abandoned with a round still enqueueing). It applies nothing to the schema:
``ujobs db migrate`` does.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import asyncpg
import typer

from services.app_loader import load_api
from services.logs import configure_logging
from shared.clock import SYSTEM_CLOCK
from shared.cron import next_task_run
from shared.drivers.base import TaskFire
from shared.errors import DriverUnavailableError, UltimateError
from shared.leader import DEFAULT_LEASE_TTL_MS
from shared.lifecycle import DEFAULT_DRAIN_DEADLINE_MS, configure_lifecycle, process_lifecycle
from shared.scheduler import (
    DEFAULT_TICK_INTERVAL_MS,
    job_scheduler,
    postgres_lease_leader,
    postgres_scheduler_state,
)
from shared.tasks import TaskHandle

if TYPE_CHECKING:
    Pool = asyncpg.Pool[Any]

AppOption = Annotated[
    str | None,
    typer.Option("--app", envvar="UJOBS_APP", help="module:attribute of the define_api() value"),
]
DatabaseUrlOption = Annotated[
    str | None,
    typer.Option("--database-url", envvar="DATABASE_URL", help="postgresql://… of the queue"),
]
JsonOption = Annotated[bool, typer.Option("--json", help="print JSON instead of a table")]


def _fail(error: UltimateError, *, as_json: bool) -> None:
    # Imported here: services.cli imports this module to register its commands.
    from services.cli import fail

    fail(error, as_json=as_json)


def _require_url(database_url: str | None) -> str:
    if not database_url:
        raise DriverUnavailableError(
            "the scheduler needs Postgres: set DATABASE_URL (or pass --database-url)",
            meta={"variable": "DATABASE_URL"},
        )
    return database_url


# -- ujobs scheduler -----------------------------------------------------------------------------


def scheduler_command(
    app_spec: AppOption = None,
    database_url: DatabaseUrlOption = None,
    tick_interval_ms: Annotated[
        int,
        typer.Option(envvar="UJOBS_SCHEDULER_TICK_INTERVAL_MS", help="one round every …"),
    ] = DEFAULT_TICK_INTERVAL_MS,
    lease_ttl_ms: Annotated[
        int,
        typer.Option(
            envvar="UJOBS_SCHEDULER_LEASE_TTL_MS",
            help="the leader lease's TTL; renewed every third of it",
        ),
    ] = DEFAULT_LEASE_TTL_MS,
    drain_deadline_ms: Annotated[
        int,
        typer.Option(envvar="UJOBS_DRAIN_DEADLINE_MS", help="the SIGTERM drain's budget"),
    ] = DEFAULT_DRAIN_DEADLINE_MS,
) -> None:
    """Run the scheduler service: fire the app's tasks, one leader at a time."""
    try:
        url = _require_url(database_url)
        tasks = list(load_api(app_spec).tasks.values())
        configure_lifecycle(deadline_ms=drain_deadline_ms)
        code = asyncio.run(_serve(url, tasks, tick_interval_ms, lease_ttl_ms))
    except UltimateError as exc:
        _fail(exc, as_json=False)
        return
    except (OSError, asyncpg.PostgresError) as exc:
        _fail(
            DriverUnavailableError(
                f"the scheduler could not reach Postgres: {exc}",
                meta={"cause": type(exc).__name__},
            ),
            as_json=False,
        )
        return
    raise typer.Exit(code=code)


async def _serve(url: str, tasks: list[TaskHandle], tick_interval_ms: int, ttl_ms: int) -> int:
    from shared.drivers.postgres import postgres_driver

    configure_logging()
    pool = await asyncpg.create_pool(url, min_size=1, max_size=4)
    if pool is None:  # pragma: no cover - asyncpg answers None only with no connection
        raise DriverUnavailableError("asyncpg could not build a pool for DATABASE_URL")
    driver = postgres_driver(pool)
    try:
        scheduler = job_scheduler(
            driver=driver,
            state=postgres_scheduler_state(pool),
            leader=postgres_lease_leader(executor=pool, ttl_ms=ttl_ms),
            tasks=tasks,
            tick_interval_ms=tick_interval_ms,
        )
        lifecycle = process_lifecycle()
        remove_handlers = lifecycle.handle_signals()
        try:
            await scheduler.start()
            await lifecycle.wait_drained()
        finally:
            remove_handlers()
        return 1 if scheduler.drain_abandoned else 0
    finally:
        await driver.close()
        await pool.close()


# -- ujobs tasks list ----------------------------------------------------------------------------

tasks_app = typer.Typer(help="The app's cron tasks.", no_args_is_help=True)


def _iso(ms: int | None) -> str | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat()


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
                    "occurrence": _iso(fire.occurrence_ms),
                    "firedAtMs": fire.fired_at_ms,
                },
                "nextFireMs": next_ms,
                "nextFire": _iso(next_ms),
                "paused": None if paused is None else handle.name in paused,
            }
        )
    return rows


async def _fires_and_pauses(url: str) -> tuple[dict[str, TaskFire], set[str]]:
    from shared.drivers.postgres import postgres_driver

    pool = await asyncpg.create_pool(url, min_size=1, max_size=2)
    if pool is None:  # pragma: no cover
        raise DriverUnavailableError("asyncpg could not build a pool for DATABASE_URL")
    try:
        introspect = postgres_driver(pool).introspect
        fires = {f.task: f for f in await introspect.task_fires()}
        return fires, set(await introspect.paused_tasks())
    finally:
        await pool.close()


@tasks_app.command("list")
def tasks_list(
    app_spec: AppOption = None, database_url: DatabaseUrlOption = None, as_json: JsonOption = False
) -> None:
    """Each task's cron, zone, catch-up, last fire and next fire. Without DATABASE_URL the
    last fire and the pause are unknown (shown empty)."""
    try:
        tasks = list(load_api(app_spec).tasks.values())
        fires: dict[str, TaskFire] = {}
        paused: set[str] | None = None
        if database_url:
            fires, paused = asyncio.run(_fires_and_pauses(database_url))
    except UltimateError as exc:
        _fail(exc, as_json=as_json)
        return
    except (OSError, asyncpg.PostgresError) as exc:
        _fail(
            DriverUnavailableError(f"could not read task fires: {exc}"),
            as_json=as_json,
        )
        return
    rows = task_rows(tasks, fires, paused, SYSTEM_CLOCK.now_ms())
    if as_json:
        from services.cli import emit_json

        emit_json({"tasks": rows})
        return
    _print_table(rows)


def _print_table(rows: list[dict[str, Any]]) -> None:
    header = ("TASK", "CRON", "TZ", "CATCH-UP", "LAST FIRE", "NEXT FIRE", "PAUSED")
    table = [header] + [
        (
            r["name"],
            r["cron"],
            r["tz"],
            r["catchUp"],
            (r["lastFire"] or {}).get("occurrence") or "-",
            r["nextFire"] or "never",
            "?" if r["paused"] is None else ("yes" if r["paused"] else "no"),
        )
        for r in rows
    ]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
    for row in table:
        sys.stdout.write("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
        sys.stdout.write("\n")


__all__ = ["scheduler_command", "task_rows", "tasks_app"]
