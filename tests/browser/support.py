"""The browser tests' kit: Debian's chromium under Playwright, the api on a real port with
real rows in Postgres, a logged-in page per token, and the CLI to check what actions did."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playwright.async_api import Browser, Page

from tests.services.api_support import ORG_A, ORG_B, Api, mail
from tests.support.cli import json_of, ujobs
from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimOptions, NackOptions, WorkerInfo
from ujobs.drivers.postgres import postgres_driver

README_SHOTS = ("queues", "job")
"""The screenshots the README shows; ``DASHBOARD_README_SHOTS=<dir>`` copies them there too (the
README names the command)."""

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
"""Debian's chromium (``.ci/run`` installs it); Playwright drives it by ``executable_path``."""


@dataclass
class Seeded:
    """The rows ``seed`` wrote, by role."""

    done: str
    dead: str
    delayed: str
    ready_a: list[str]
    ready_b: list[str]
    running: str
    worker: str
    draining: str
    steps: tuple[str, ...] = ("fetch", "render", "send")


@dataclass
class Dash:
    """The api under test on a real port, a browser, and where screenshots go."""

    api: Api
    base: str
    browser: Browser
    dsn: str
    shots: Path
    pages: list[Page] = field(default_factory=list)

    def url(self, path: str) -> str:
        return self.base + path

    async def page_as(
        self, secret: str, *, width: int = 1280, height: int = 860, dark: bool = False
    ) -> Page:
        """A fresh browser context logged in through the form with ``secret``."""
        context = await self.browser.new_context(
            viewport={"width": width, "height": height},
            color_scheme="dark" if dark else "light",
            timezone_id="America/Bogota",
        )
        page = await context.new_page()
        page.set_default_timeout(15_000)
        await page.goto(self.url("/_x/"))
        await page.fill("#token", secret)
        await page.click("button[type=submit]")
        await page.wait_for_load_state()
        self.pages.append(page)
        return page

    async def shot(self, page: Page, name: str) -> Path:
        path = self.shots / f"{name}.png"
        await page.screenshot(path=str(path), full_page=True)
        readme = os.environ.get("DASHBOARD_README_SHOTS")
        if readme and name in README_SHOTS:
            shutil.copyfile(path, Path(readme) / path.name)
        return path


async def cli(dsn: str, *args: str) -> Any:
    """``ujobs *args --json`` against ``dsn`` (in a thread: the CLI runs its own loop)."""
    result = await asyncio.to_thread(ujobs, *args, "--json", dsn=dsn)
    assert result.exit_code == 0, result.stdout + result.stderr
    return json_of(result)


async def enqueue(api: Api, org: str, to: str, **extra: Any) -> str:
    token = await api.token("enqueue:*")
    status, body = await api.call(
        "POST", "/v1/jobs/send_mail", token, {"input": mail(org, to=to), **extra}
    )
    assert status == 202, body
    return str(body["id"])


async def settle(
    api: Api, job_id: str, queue: str, steps: tuple[str, ...], *, dead: str | None = None
) -> None:
    """Claim ``job_id`` (the only due row of ``queue``), save ``steps`` 40, 80, 120 ms apart
    on a frozen clock, then ack it, or dead-letter it with ``dead`` as its error."""
    clock = FrozenClock(int(time.time() * 1000) + 1_000)
    driver = postgres_driver(api.pool, clock=clock)
    [claimed] = await driver.claim(ClaimOptions(queues=[queue], limit=1, worker_id="w-seed"))
    assert claimed.id == job_id
    for n, name in enumerate(steps, 1):
        started = clock.now_ms()
        clock.advance(40 * n)
        output = {"secret": f"out-{name}"}
        assert await driver.save_step(
            job_id, claimed.ref, claimed.run_id, name, output, started_at_ms=started
        )
    if dead is None:
        assert await driver.ack(job_id, claimed.ref, duration_ms=240)
    else:
        assert await driver.nack(job_id, claimed.ref, NackOptions(error=dead, dead_letter=True))


async def seed(api: Api) -> Seeded:
    """Real jobs in real states: one done with three steps, one dead letter, one delayed, three
    ready for tenant A in ``mail``, two for tenant B in ``billing``, one running in ``reports``
    at 3/10 of its progress; one worker, and a draining one holding the running job."""
    done = await enqueue(api, ORG_A, "done@x.io", queue="mail")
    await settle(api, done, "mail", ("fetch", "render", "send"))
    dead = await enqueue(api, ORG_A, "dead@x.io", queue="mail")
    await settle(
        api, dead, "mail", ("fetch", "render", "send"), dead="SMTP 550: mailbox unavailable"
    )
    delayed = await enqueue(api, ORG_A, "later@x.io", queue="mail", delay="1h")
    ready_a = [await enqueue(api, ORG_A, f"a{n}@x.io", queue="mail") for n in range(3)]
    ready_b = [await enqueue(api, ORG_B, f"b{n}@x.io", queue="billing") for n in range(2)]
    running = await enqueue(api, ORG_A, "big@x.io", queue="reports")
    driver = postgres_driver(api.pool)
    [claimed] = await driver.claim(ClaimOptions(queues=["reports"], limit=1, worker_id="w-2"))
    assert driver.introspect is not None
    progress = {"done": 3, "total": 10, "note": "pages"}
    assert await driver.introspect.record_progress(running, claimed.ref, progress, force=True)
    info = WorkerInfo(
        id="w-host-1-4242",
        host="host-1",
        pid=4242,
        started_at_ms=int(time.time() * 1000),
        queues=("mail", "billing"),
        slots=8,
    )
    await driver.workers.beat(info, ready_a[:1], 60_000)
    draining = WorkerInfo(
        id="w-host-2-7",
        host="host-2",
        pid=7,
        started_at_ms=info.started_at_ms + 1,
        queues=("reports",),
        slots=2,
    )
    await driver.workers.beat(draining, [running], 60_000, draining=True)
    return Seeded(
        done=done,
        dead=dead,
        delayed=delayed,
        ready_a=ready_a,
        ready_b=ready_b,
        running=running,
        worker=info.id,
        draining=draining.id,
    )


__all__ = [
    "CHROMIUM",
    "ORG_A",
    "ORG_B",
    "Dash",
    "Seeded",
    "cli",
    "enqueue",
    "seed",
    "settle",
]
