"""``ujobs queues list | show | pause | resume`` and ``ujobs workers``.

``queues list`` reads ``driver.stats()`` (every driver has it) plus the paused set; a pause and
a resume are introspection (a row every claim reads), so on a driver without it they answer
``X_NOT_IMPLEMENTED`` naming the Postgres driver.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

import typer

from ujobs.introspect import inspect_queue, inspect_queues, list_workers, pause_queues
from ujobs.services.cli.common import DatabaseUrlOption, DriverOption, JsonOption, operate
from ujobs.services.cli.remote import Remote, remote_get
from ujobs.services.config.parse import parse_queues
from ujobs.services.runtime.backends import Backend
from ujobs.services.runtime.output import Progress, duration, emit_json, note, print_table, when

queues_app = typer.Typer(help="Queues: depth per state, pauses.", no_args_is_help=True)

QueuesArg = Annotated[list[str], typer.Argument(help="queue names (or a,b)", show_default=False)]


@queues_app.command("list")
def queues_list(
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """Every queue with jobs (or a pause): rows per state, how many are due, the oldest.
    Without DATABASE_URL it asks the api at UJOBS_URL (an operator token)."""

    async def work(backend: Backend, _: Progress) -> list[dict[str, Any]]:
        return await inspect_queues(backend.driver, backend.driver.clock.now_ms())

    def remote(target: Remote) -> list[dict[str, Any]]:
        queues: list[dict[str, Any]] = remote_get(target, "/v1/queues")["queues"]
        return queues

    queues = operate(
        work,
        as_json=as_json,
        label="reading queues",
        database_url=database_url,
        driver=driver,
        remote=remote,
    )
    if as_json:
        emit_json({"queues": queues})
        return
    print_table(
        (
            "QUEUE",
            "PAUSED",
            "READY",
            "DELAYED",
            "RUNNING",
            "SUSPENDED",
            "DUE",
            "OLDEST DUE",
            "DEAD",
            "FAILED",
            "DONE",
        ),
        [
            (
                q["queue"],
                "yes" if q["paused"] else "no",
                _figure(q, "ready"),
                _figure(q, "delayed"),
                _figure(q, "running"),
                _figure(q, "suspended"),
                _figure(q, "due"),
                duration(q["oldestDueAgeMs"]),
                _figure(q, "dead"),
                _figure(q, "failed"),
                _figure(q, "done"),
            )
            for q in queues
        ],
    )
    if not queues:
        note("no queue has jobs yet")


@queues_app.command("show")
def queues_show(
    queue: Annotated[str, typer.Argument(help="the queue's name", show_default=False)],
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """One queue: its rows per state, and whose due work waits in it (the tenants with the
    most due jobs, each with its oldest). Without DATABASE_URL it asks the api at UJOBS_URL (an
    operator token)."""

    async def work(backend: Backend, _: Progress) -> dict[str, Any]:
        name = parse_queues("QUEUE", queue)[0]
        return await inspect_queue(backend.driver, name, backend.driver.clock.now_ms())

    def remote(target: Remote) -> dict[str, Any]:
        answer: dict[str, Any] = remote_get(target, f"/v1/queues/{quote(queue, safe='')}")
        return answer

    shown = operate(
        work,
        as_json=as_json,
        label=f"reading queue {queue}",
        database_url=database_url,
        driver=driver,
        remote=remote,
    )
    if as_json:
        emit_json(shown)
        return
    counts = ", ".join(
        f"{key} {_figure(shown, key)}"
        for key in ("ready", "delayed", "running", "suspended", "due", "dead", "failed", "done")
    )
    typer.echo(f"{shown['queue']}{' (paused)' if shown['paused'] else ''}: {counts}")
    typer.echo(f"oldest due: {duration(shown['oldestDueAgeMs'])}")
    if not shown["tenants"]:
        note("nothing is due in this queue")
        return
    capped = "≥" if shown["tenantsCapped"] else ""
    print_table(
        ("TENANT", "DUE", "OLDEST DUE"),
        [
            (t["tenantId"] or "(none)", f"{capped}{t['due']}", duration(t["oldestDueAgeMs"]))
            for t in shown["tenants"]
        ],
    )
    if shown["tenantsCapped"]:
        note("the oldest due jobs only were read: each count is a lower bound")


def _figure(queue: dict[str, Any], key: str) -> str:
    """A count as the table shows it: ``≥`` in front when the read stopped counting there
    (the Postgres driver's cap, ``QueueStats.capped``), so a lower bound never reads as exact."""
    return f"≥{queue[key]}" if key in queue.get("capped", ()) else str(queue[key])


def _pause_command(raw: list[str], *, pause: bool, as_json: bool, **backend: Any) -> None:
    verb = "pause" if pause else "resume"

    async def work(b: Backend, _: Progress) -> list[str]:
        names = [q for part in raw for q in parse_queues("QUEUE", part)]
        await pause_queues(b.driver, names, pause=pause)
        return names

    names = operate(work, as_json=as_json, label=f"{verb} {', '.join(raw)}", **backend)
    if as_json:
        emit_json({"queues": names, "paused": pause})
        return
    for name in names:
        typer.echo(f"{name}: {'paused — no worker claims from it' if pause else 'resumed'}")


@queues_app.command("pause")
def queues_pause(
    queues: QueuesArg,
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """Stop every worker claiming from these queues (enqueues still land)."""
    _pause_command(queues, pause=True, as_json=as_json, database_url=database_url, driver=driver)


@queues_app.command("resume")
def queues_resume(
    queues: QueuesArg,
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """Let workers claim from these queues again."""
    _pause_command(queues, pause=False, as_json=as_json, database_url=database_url, driver=driver)


def workers_command(
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """Every live worker: host, queues, slots, jobs in flight, last heartbeat, draining."""

    async def work(backend: Backend, _: Progress) -> dict[str, Any]:
        rows = await list_workers(backend.driver)
        return {"workers": rows, "nowMs": backend.driver.clock.now_ms()}

    doc = operate(
        work, as_json=as_json, label="reading workers", database_url=database_url, driver=driver
    )
    now = doc.pop("nowMs")
    if as_json:
        emit_json(doc)
        return
    print_table(
        ("ID", "HOST", "PID", "QUEUES", "SLOTS", "IN FLIGHT", "STARTED", "LAST BEAT", "DRAINING"),
        [
            (
                w["id"],
                w["host"],
                w["pid"],
                ",".join(w["queues"]),
                w["slots"],
                len(w["inFlight"]),
                when(w["startedAtMs"], now),
                when(w["lastHeartbeatMs"], now),
                when(w["drainingAtMs"], now) or "no",
            )
            for w in doc["workers"]
        ],
    )
    if not doc["workers"]:
        note("no live worker")
