"""The example ``ujobs dev --example`` runs: the spec's ``onboard_org``, a fan-out, a cron task.

Small on purpose, and shaped so a first run SHOWS the three ideas within a minute:

* **steps replay** — ``onboard_org``'s ``welcome-email`` fails on the first attempt; attempt 2
  replays ``provision`` from storage (its function does not run again) and sends the email.
* **a sleep resumes** — it then sleeps ``SLEEP`` seconds without holding a process, and a
  worker picks it up again to run ``nudge``.
* **a task fires** — ``poll_fleet`` fires every ``TICK_S`` seconds and hands its instant to ONE
  fan-out job (``poll_hosts``), which enqueues one ``poll_host`` child per host, each inside its
  own step so a replay re-enqueues nothing.

Each body says what it is doing on stdout (``example: …``), beside the dev runner's own
job-state lines. Point ``UJOBS_APP`` at ``ujobs.services.example_app:api`` to use it elsewhere.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

from ujobs import Retry, Run, Signal, define_api, job, t, task
from ujobs.jobs.task import TaskEntry

SLEEP = "5s"
TICK_S = 20
HOSTS = ("web-1", "web-2", "db-1")


def say(message: str) -> None:
    sys.stdout.write(f"example: {message}\n")
    sys.stdout.flush()


@job(
    input=t.object(org_id=t.string),
    idempotency_key=lambda i: f"onboard:{i.org_id}",
    tenant=lambda i: i.org_id,
    retry=Retry(attempts=3, backoff="fixed", delay="1s", jitter=False),
)
async def onboard_org(run: Run[Any]) -> dict[str, str]:
    """Provision, welcome (fails once), sleep, nudge: the spec's first example, in seconds."""
    org_id = run.input.org_id
    ran: list[str] = []

    def provision(_: Signal) -> dict[str, str]:
        ran.append("provision")
        say(f"provision {org_id}: creating the org (runs ONCE; a retry replays it from storage)")
        return {"org_id": org_id, "plan": "trial"}

    org = await run.step.run("provision", provision)
    if not ran:
        say(f"attempt {run.attempt}: 'provision' replayed from storage, not run again: {org}")

    def welcome(_: Signal) -> str:
        if run.attempt == 1:
            say("welcome-email: the mail server is down (attempt 1) — the job will retry")
            raise RuntimeError("mail server unavailable")
        say(f"welcome-email: sent to {org_id} on attempt {run.attempt}")
        return "sent"

    await run.step.run("welcome-email", welcome)
    await run.step.run(
        "say-sleeping",
        lambda _: say(f"sleeping {SLEEP}: the run is parked in the queue, no process holds it"),
    )
    await run.step.sleep("wait-before-nudge", SLEEP)
    await run.step.run("nudge", lambda _: say(f"nudge: woke up after {SLEEP}, nudging {org_id}"))
    return {"org_id": org_id, "status": "onboarded"}


@job(
    input=t.object(host_id=t.string, occurrence_ms=t.number.int()),
    idempotency_key=lambda i: f"poll-host:{i.host_id}:{i.occurrence_ms}",
    tenant="none",
    retry=Retry(attempts=3),
)
async def poll_host(run: Run[Any]) -> None:
    """One host: the unit of retry."""
    await run.step.run("probe", lambda _: say(f"poll_host: probed {run.input.host_id}"))


def _enqueue_child(host: str, occurrence_ms: int) -> Callable[[Signal], Awaitable[str]]:
    async def child(_: Signal) -> str:
        enqueued = await poll_host.enqueue({"host_id": host, "occurrence_ms": occurrence_ms})
        return enqueued.id

    return child


@job(
    input=t.object(occurrence_ms=t.number.int()),
    idempotency_key=lambda i: f"poll-hosts:{i.occurrence_ms}",
    tenant="none",
    retry=Retry(attempts=3),
)
async def poll_hosts(run: Run[Any]) -> None:
    """The fan-out: list the rows, enqueue one child per row, one step per child."""
    occurrence = run.input.occurrence_ms
    hosts = await run.step.run("list", lambda _: list(HOSTS))
    children: list[str] = []
    for host in hosts:
        children.append(await run.step.run(f"enqueue:{host}", _enqueue_child(host, occurrence)))
    say(f"poll_hosts: fanned out {len(children)} poll_host jobs")


@task(cron=f"* * * * * */{TICK_S}", tz="UTC", catch_up="skip")
def poll_fleet(occurrence_ms: int) -> list[TaskEntry]:
    """Every TICK_S seconds: hand the tick's instant to ONE fan-out job."""
    return [(poll_hosts, {"occurrence_ms": occurrence_ms})]


api = define_api(jobs=[sys.modules[__name__]], tasks=[sys.modules[__name__]], install=False)
