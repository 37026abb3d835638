"""Each page of the dashboard in headless chromium against real rows: what the operator must
see is visible (not merely in the HTML), it agrees with what the CLI reports, and a
screenshot of each page lands in the test's tmp dir."""

from __future__ import annotations

import pytest
from playwright.async_api import Page, expect

from tests.browser.support import ORG_A, Dash, cli, enqueue, seed
from ujobs.masking import MASK


async def operator_page(dash: Dash, **kw: object) -> Page:
    return await dash.page_as(await dash.api.token("read", "operate"), **kw)  # type: ignore[arg-type]


async def ids_on(page: Page) -> list[str]:
    return [
        str(v)
        for v in await page.locator("#jobs tbody tr[data-job]").evaluate_all(
            "rows => rows.map(r => r.dataset.job)"
        )
    ]


async def test_the_queues_page_shows_depth_oldest_due_pause_and_throughput(dash: Dash) -> None:
    await seed(dash.api)
    page = await operator_page(dash)
    assert page.url.endswith("/_x/queues")
    listed = {q["queue"]: q for q in (await cli(dash.dsn, "queues", "list"))["queues"]}
    mail = page.locator('tr[data-queue="mail"]')
    await expect(mail).to_be_visible()
    cells = [c.strip() for c in await mail.locator("td").all_inner_texts()]
    # ready, due, oldest due, delayed, running, suspended, done, failed, dead, cancelled
    assert cells[0:2] == [str(listed["mail"]["ready"]), str(listed["mail"]["due"])] == ["3", "3"]
    assert (cells[3], cells[6], cells[8]) == ("1", "1", "1")
    assert cells[2] != "—"
    # Throughput: the done and the dead-lettered send_mail finished within the last hour.
    spark = page.locator('#throughput tr[data-job-name="send_mail"]')
    await expect(spark.locator("svg.spark")).to_be_visible()
    finished = [c.strip() for c in await spark.locator("td").all_inner_texts()]
    assert finished[1:4] == ["2", "1", "0"]
    assert finished[5] == "1"
    assert finished[6] == "240ms"
    points = await spark.locator("polyline").get_attribute("points")
    assert len(set((points or "").split())) > 1
    await expect(mail.get_by_role("button", name="Pause")).to_be_visible()
    await dash.shot(page, "queues")
    assert (dash.shots / "queues.png").stat().st_size > 10_000


async def test_the_queues_page_reads_at_a_phone_width_in_dark_mode(dash: Dash) -> None:
    await seed(dash.api)
    page = await operator_page(dash, width=390, height=800, dark=True)
    await expect(page.locator('tr[data-queue="mail"] th')).to_be_visible()
    # The page itself never scrolls sideways; only a wide table scrolls inside its frame.
    assert await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    background = await page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(21, 23, 26)"
    await dash.shot(page, "queues-phone-dark")


async def test_the_jobs_list_filters_searches_and_pages_both_ways(dash: Dash) -> None:
    seeded = await seed(dash.api)
    page = await operator_page(dash)
    newest_first = [j["id"] for j in (await cli(dash.dsn, "jobs", "list"))["jobs"]]
    assert len(newest_first) == 9
    await page.goto(dash.url("/_x/jobs?limit=3"))
    seen = [await ids_on(page)]
    await expect(page.locator("#page-newer")).to_have_count(0)
    while await page.locator("#page-older").count():
        await page.click("#page-older")
        seen.append(await ids_on(page))
    assert [i for chunk in seen for i in chunk] == newest_first
    assert [len(chunk) for chunk in seen] == [3, 3, 3]
    await page.click("#page-newer")
    assert await ids_on(page) == seen[1]
    await page.click("#page-newer")
    assert await ids_on(page) == seen[0]
    await expect(page.locator("#page-newer")).to_have_count(0)
    await dash.shot(page, "jobs")

    await page.goto(dash.url("/_x/jobs"))
    await page.select_option("#state", "dead")
    await page.click("form[role=search] button[type=submit]")
    assert await ids_on(page) == [seeded.dead]
    await expect(page.locator(f'tr[data-job="{seeded.dead}"]')).to_be_visible()

    # A short id (the start of one) lists what starts with it; a whole id opens the job.
    await page.goto(dash.url("/_x/jobs"))
    await page.fill("#q", seeded.ready_b[0][:-4].upper())
    await page.select_option("#state", "")
    await page.click("form[role=search] button[type=submit]")
    prefixed = [i for i in newest_first if i.startswith(seeded.ready_b[0][:-4])]
    assert await ids_on(page) == prefixed
    assert seeded.ready_b[0] in prefixed
    await page.fill("#q", seeded.done)
    await page.click("form[role=search] button[type=submit]")
    assert page.url.endswith(f"/_x/jobs/{seeded.done}")
    tenants = await page.goto(dash.url(f"/_x/jobs?tenant={ORG_A}"))
    assert tenants is not None
    assert tenants.status == 200
    assert len(await ids_on(page)) == 7


async def test_one_jobs_page_shows_steps_attempts_error_and_redacted_input(dash: Dash) -> None:
    seeded = await seed(dash.api)
    page = await operator_page(dash)
    shown = await cli(dash.dsn, "jobs", "show", seeded.dead)
    await page.goto(dash.url(f"/_x/jobs/{seeded.dead}"))
    await expect(page.get_by_role("heading", level=1)).to_contain_text("send_mail")
    await expect(page.locator("h1 .state-dead")).to_be_visible()
    await expect(page.locator("#attempts")).to_have_text(
        f"{shown['attempt']} of {shown['maxAttempts']}"
    )
    await expect(page.locator("#last-error")).to_contain_text("SMTP 550: mailbox unavailable")
    steps = page.locator("#steps tbody tr")
    await expect(steps).to_have_count(3)
    assert [s["name"] for s in shown["steps"]] == ["fetch", "render", "send"]
    for n, step in enumerate(shown["steps"]):
        row = [c.strip() for c in await steps.nth(n).locator("td").all_inner_texts()]
        assert row[1] == step["name"]
        assert row[3] == f"{step['durationMs']}ms"
    assert [s["durationMs"] for s in shown["steps"]] == [40, 80, 120]
    await expect(page.locator("#timeline")).to_be_visible()
    await expect(page.locator("#timeline rect")).to_have_count(3)
    # The input is redacted like `ujobs jobs show`: the keys, never the values.
    text = await page.locator("#input").inner_text()
    assert '"to": "' + MASK + '"' in text
    assert "dead@x.io" not in text
    # The steps' outputs wait behind "Show" for an operator (tests/browser/test_bulk_and_detail.py).
    await expect(page.locator(".step-output").first).to_be_hidden()
    # So is the idempotency key, computed from the input ("mail:dead@x.io:…").
    assert "dead@x.io" not in await page.content()
    # Times in the viewer's zone (Bogota, UTC-5), UTC on hover.
    created = page.locator("time").first
    assert (await created.get_attribute("title") or "").endswith("UTC")
    assert "UTC" not in await created.inner_text()
    # A job page does not refresh under its reader; the lists offer a pause.
    assert await page.get_attribute("body", "data-refresh") == "off"
    await expect(page.locator("#refresh-toggle")).to_be_hidden()
    await expect(page.get_by_role("button", name="Retry", exact=True)).to_be_visible()
    await expect(page.locator("#from-step")).to_be_visible()
    await dash.shot(page, "job")
    await page.goto(dash.url(f"/_x/jobs/{seeded.running}"))
    await expect(page.locator("#progress")).to_have_text("3/10 pages")
    await expect(page.locator("h1 .state-running")).to_be_visible()
    await expect(page.locator('button[data-action="cancel"]')).to_be_visible()
    await expect(page.locator('button[data-action="retry"]')).to_have_count(0)
    await page.goto(dash.url("/_x/jobs"))
    await expect(page.locator("#refresh-toggle")).to_be_visible()
    await page.click("#refresh-toggle")
    await expect(page.locator("#refresh-toggle")).to_have_text("Resume refresh")


async def test_the_dead_letters_workers_and_tasks_pages(dash: Dash) -> None:
    seeded = await seed(dash.api)
    page = await operator_page(dash)
    await page.goto(dash.url("/_x/dead"))
    assert await ids_on(page) == [seeded.dead]
    await expect(page.locator(f'tr[data-job="{seeded.dead}"] button')).to_be_visible()
    await dash.shot(page, "dead")

    await page.goto(dash.url("/_x/workers"))
    workers = {w["id"]: w for w in (await cli(dash.dsn, "workers"))["workers"]}
    worker = workers[seeded.worker]
    assert workers[seeded.draining]["drainingAtMs"] is not None
    row = page.locator(f'tr[data-worker="{seeded.worker}"]')
    await expect(row).to_be_visible()
    await expect(row).to_contain_text(f"{len(worker['inFlight'])} / {worker['slots']}")
    await expect(row).to_contain_text("mail, billing")
    await expect(row).to_contain_text("no")
    draining = page.locator(f'tr[data-worker="{seeded.draining}"]')
    await expect(draining.locator(".paused")).to_have_text("draining")
    await expect(draining).to_contain_text("1 / 2")
    await dash.shot(page, "workers")

    await page.goto(dash.url("/_x/tasks"))
    task = page.locator('tr[data-task="nightly_digest"]')
    await expect(task).to_be_visible()
    await expect(task).to_contain_text("0 3 * * *")
    await expect(task).to_contain_text("America/Bogota")
    await expect(task.locator("time")).to_be_visible()
    await dash.shot(page, "tasks")


async def test_the_dashboard_is_keyboard_reachable(dash: Dash) -> None:
    await seed(dash.api)
    page = await operator_page(dash)
    await page.keyboard.press("Tab")
    skip = page.get_by_text("Skip to content")
    await expect(skip).to_be_focused()
    await expect(skip).to_be_visible()
    await page.keyboard.press("Tab")
    await page.keyboard.press("Tab")
    await expect(page.get_by_role("link", name="Queues")).to_be_focused()
    await page.keyboard.press("Tab")
    await page.keyboard.press("Enter")
    await page.wait_for_url("**/_x/jobs")
    await expect(page.get_by_role("heading", name="Jobs")).to_be_visible()


@pytest.mark.parametrize("path", ["/_x/queues", "/_x/jobs", "/_x/dead"])
async def test_a_page_without_the_cookie_goes_to_the_login_form(dash: Dash, path: str) -> None:
    context = await dash.browser.new_context()
    page = await context.new_page()
    try:
        await page.goto(dash.url(path))
        await expect(page.locator("#token")).to_be_visible()
        assert page.url.endswith("/_x/login?next=" + path.replace("/", "%2F")) or page.url.endswith(
            "/_x/login?next=" + path
        )
        await page.fill("#token", "not-a-token")
        await page.click("button[type=submit]")
        await expect(page.locator("#login-error")).to_be_visible()
    finally:
        await context.close()


async def test_the_jobs_list_refreshes_itself_unless_paused(dash: Dash) -> None:
    seeded = await seed(dash.api)
    page = await operator_page(dash)
    # The page's timers run on Playwright's clock, moved by hand: no real waiting.
    await page.clock.install()
    await page.goto(dash.url("/_x/jobs?queue=mail"))
    assert seeded.ready_a[0] in await ids_on(page)
    await page.click("#refresh-toggle")
    await expect(page.locator("#refresh-toggle")).to_have_text("Resume refresh")
    later = await enqueue(dash.api, ORG_A, "later-one@x.io", queue="mail")
    await page.evaluate("window.notReloaded = true")
    await page.clock.run_for(12_000)
    assert await page.evaluate("window.notReloaded === true")
    assert later not in await ids_on(page)
    await page.click("#refresh-toggle")
    await page.locator("#refresh-toggle").blur()
    async with page.expect_navigation():
        await page.clock.run_for(6_000)
    await expect(page.locator(f'tr[data-job="{later}"]')).to_be_visible()
