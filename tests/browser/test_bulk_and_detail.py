"""What Oban Web and River UI users expect of a job's page and the lists, in headless chromium:
a long traceback wraps and scrolls in its own box at a desktop width, an operator reads each
step's output (a tenant does not), a job is deleted from its page, and the lists select jobs and
act on them together — each through the same tenancy check as one job."""

from __future__ import annotations

import asyncio

import pytest
from playwright.async_api import Page, expect

from tests.browser.support import ORG_A, ORG_B, Dash, cli, enqueue, settle
from tests.support.cli import ujobs


async def operator_page(dash: Dash, **kw: object) -> Page:
    return await dash.page_as(await dash.api.token("read", "operate"), **kw)  # type: ignore[arg-type]


async def dead_job(dash: Dash, org: str, to: str, error: str) -> str:
    job = await enqueue(dash.api, org, to, queue="mail")
    await settle(dash.api, job, "mail", ("fetch",), dead=error)
    return job


async def gone(dash: Dash, job_id: str) -> bool:
    result = await asyncio.to_thread(ujobs, "jobs", "show", job_id, "--json", dsn=dash.dsn)
    return result.exit_code != 0 and "X_JOB_NOT_FOUND" in result.stdout + result.stderr


TRACEBACK = (
    "Traceback (most recent call last):\n"
    + "".join(
        f'  File "/srv/app/deep/module_{n}.py", line {n}, in handler_{n}\n'
        f"    result = await call_{n}(payload, {'x' * 140})\n"
        for n in range(150)
    )
    + "RuntimeError: "
    + "y" * 3000
)


async def test_a_long_traceback_wraps_in_its_box_and_the_job_column_keeps_its_width(
    dash: Dash,
) -> None:
    job = await dead_job(dash, ORG_A, "long@x.io", TRACEBACK)
    page = await operator_page(dash, width=1400, height=900)
    await page.goto(dash.url(f"/_x/jobs/{job}"))
    await expect(page.locator("#last-error")).to_contain_text("RuntimeError")
    # The page never scrolls sideways, and the Job column keeps its half of the grid.
    assert await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    fields = await page.locator("#h-fields").evaluate("h => h.parentElement.offsetWidth")
    error = await page.locator("#last-error").evaluate("e => e.parentElement.offsetWidth")
    assert fields > 400
    assert abs(fields - error) < 40
    # The traceback scrolls inside its own box instead of making the page thousands of px tall.
    box = await page.locator("#last-error").evaluate(
        "e => ({client: e.clientHeight, scroll: e.scrollHeight})"
    )
    assert box["client"] < 700 < box["scroll"]
    assert await page.evaluate("document.documentElement.scrollHeight") < 2500
    await dash.shot(page, "job-long-error")


async def test_an_operator_reads_step_outputs_and_a_tenant_does_not(dash: Dash) -> None:
    job = await enqueue(dash.api, ORG_A, "steps@x.io", queue="mail")
    await settle(dash.api, job, "mail", ("fetch", "render"))
    page = await operator_page(dash)
    await page.goto(dash.url(f"/_x/jobs/{job}"))
    fetch = page.locator('#steps tr[data-step="fetch"]')
    await expect(fetch.locator(".step-output")).to_be_hidden()  # collapsed until asked
    await fetch.locator("summary").click()
    await expect(fetch.locator(".step-output")).to_contain_text('"secret": "out-fetch"')
    tenant = await dash.page_as(await dash.api.token("read", "operate", tenant=ORG_A))
    await tenant.goto(dash.url(f"/_x/jobs/{job}"))
    await expect(tenant.locator("#steps tbody tr")).to_have_count(2)
    assert "out-fetch" not in await tenant.content()


async def test_a_job_deleted_from_its_page_is_gone_for_the_cli(dash: Dash) -> None:
    job = await dead_job(dash, ORG_A, "delete@x.io", "SMTP 550")
    page = await operator_page(dash)
    await page.goto(dash.url(f"/_x/jobs/{job}"))
    await page.locator('#job-actions button[data-action="remove"]').click()
    await expect(page.locator("#confirm-question")).to_contain_text(f"Delete job {job}")
    await page.click("#confirm")
    await expect(page.locator("#flash")).to_have_text("Job deleted.")
    assert page.url.split("?")[0].endswith("/_x/jobs")
    assert await gone(dash, job)


async def test_a_running_job_offers_no_delete(dash: Dash) -> None:
    from tests.browser.support import seed

    seeded = await seed(dash.api)
    page = await operator_page(dash)
    await page.goto(dash.url(f"/_x/jobs/{seeded.running}"))
    await expect(page.locator('#job-actions button[data-action="cancel"]')).to_be_visible()
    await expect(page.locator('#job-actions button[data-action="remove"]')).to_have_count(0)


async def test_dead_letters_selected_together_are_retried_together(dash: Dash) -> None:
    first = await dead_job(dash, ORG_A, "one@x.io", "SMTP 550")
    second = await dead_job(dash, ORG_A, "two@x.io", "SMTP 550")
    kept = await dead_job(dash, ORG_A, "three@x.io", "SMTP 550")
    page = await operator_page(dash)
    await page.goto(dash.url("/_x/dead"))
    for job in (first, second):
        await page.locator(f'tr[data-job="{job}"] input[name="ids"]').check()
    await page.locator('button[data-bulk="retry"]').click()
    await expect(page.locator("#confirm-question")).to_contain_text("Re-queue 2 selected jobs")
    await page.click("#confirm")
    await expect(page.locator("#flash")).to_have_text("2 jobs re-queued.")
    states = {j: (await cli(dash.dsn, "jobs", "show", j))["state"] for j in (first, second, kept)}
    assert states == {first: "ready", second: "ready", kept: "dead"}


async def test_select_all_then_delete_takes_every_job_on_the_page(dash: Dash) -> None:
    jobs = [await dead_job(dash, ORG_A, f"all{n}@x.io", "SMTP 550") for n in range(3)]
    page = await operator_page(dash)
    await page.goto(dash.url("/_x/dead"))
    await page.locator("#select-all").check()
    await page.locator('button[data-bulk="remove"]').click()
    await expect(page.locator("#confirm-question")).to_contain_text("Delete 3 selected jobs")
    await page.click("#confirm")
    await expect(page.locator("#flash")).to_have_text("3 jobs deleted.")
    assert [await gone(dash, j) for j in jobs] == [True, True, True]


async def test_a_tenant_bulk_form_naming_another_tenants_job_moves_only_its_own(
    dash: Dash,
) -> None:
    mine = await dead_job(dash, ORG_A, "mine@x.io", "SMTP 550")
    theirs = await dead_job(dash, ORG_B, "theirs@x.io", "SMTP 550")
    page = await dash.page_as(await dash.api.token("read", "operate", tenant=ORG_A))
    await page.goto(dash.url("/_x/dead"))
    await expect(page.locator(f'tr[data-job="{theirs}"]')).to_have_count(0)
    await page.locator(f'tr[data-job="{mine}"] input[name="ids"]').check()
    # A forged form: B's id added beside A's own.
    await page.evaluate(
        """id => { const i = document.createElement("input");
        i.type = "hidden"; i.name = "ids"; i.value = id;
        document.getElementById("bulk").appendChild(i); }""",
        theirs,
    )
    await page.locator('button[data-bulk="remove"]').click()
    await page.click("#confirm")
    await expect(page.locator("#flash")).to_have_text(
        "1 job deleted. 1 not moved (X_JOB_NOT_FOUND)."
    )
    assert await gone(dash, mine)
    assert (await cli(dash.dsn, "jobs", "show", theirs))["state"] == "dead"


@pytest.mark.parametrize("count", [0, 101])
async def test_a_bulk_form_with_no_job_or_more_than_a_page_is_refused(
    dash: Dash, count: int
) -> None:
    await dead_job(dash, ORG_A, "one@x.io", "SMTP 550")
    page = await operator_page(dash)
    await page.goto(dash.url("/_x/dead"))
    await page.evaluate(
        """n => { const f = document.getElementById("bulk");
        for (let k = 0; k < n; k++) { const i = document.createElement("input");
          i.type = "hidden"; i.name = "ids"; i.value = "job-" + k; f.appendChild(i); } }""",
        count,
    )
    await page.locator('button[data-bulk="retry"]').click()
    await expect(page.locator("body")).to_contain_text("X_INPUT_INVALID")


async def test_a_jobs_page_lists_each_failed_attempts_error(dash: Dash) -> None:
    from ujobs.drivers.base import ClaimOptions, NackOptions
    from ujobs.drivers.postgres import postgres_driver

    job = await enqueue(dash.api, ORG_A, "twice@x.io", queue="mail")
    driver = postgres_driver(dash.api.pool)
    for error, dead in (("X_SMTP: 421 try later", False), ("X_SMTP: 550 no such user", True)):
        [claimed] = await driver.claim(ClaimOptions(queues=["mail"], limit=1, worker_id="w"))
        assert claimed.id == job
        assert await driver.nack(job, claimed.ref, NackOptions(error=error, dead_letter=dead))
    page = await operator_page(dash)
    await page.goto(dash.url(f"/_x/jobs/{job}"))
    rows = page.locator("#attempt-errors tbody tr")
    await expect(rows).to_have_count(2)
    await expect(rows.nth(0)).to_contain_text("421 try later")
    await expect(rows.nth(1)).to_contain_text("550 no such user")
    shown = await cli(dash.dsn, "jobs", "show", job)
    assert [a["attempt"] for a in shown["attempts"]] == [1, 2]


async def test_a_queues_page_shows_whose_due_work_waits_to_an_operator(dash: Dash) -> None:
    for n in range(3):
        await enqueue(dash.api, ORG_A, f"flood{n}@x.io", queue="mail")
    await enqueue(dash.api, ORG_B, "quiet@x.io", queue="mail")
    page = await operator_page(dash)
    await page.goto(dash.url("/_x/queues"))
    await page.locator('a[data-tenants="mail"]').click()
    rows = page.locator("#queue-tenants tbody tr")
    await expect(rows).to_have_count(2)
    await expect(rows.nth(0)).to_contain_text(ORG_A)
    await expect(rows.nth(0).locator("td.num")).to_have_text("3")
    await expect(rows.nth(1)).to_contain_text(ORG_B)
    shown = await cli(dash.dsn, "queues", "show", "mail")
    assert [(t["tenantId"], t["due"]) for t in shown["tenants"]] == [(ORG_A, 3), (ORG_B, 1)]
    # A tenant token reads no other tenant's name: the page is an operator's, as the list is.
    tenant = await dash.page_as(await dash.api.token("read", "operate", tenant=ORG_A))
    await tenant.goto(dash.url("/_x/queues/mail"))
    await expect(tenant.locator("body")).to_contain_text("X_FORBIDDEN")
    assert ORG_B not in await tenant.content()
