"""Every dashboard action in headless chromium: confirmed on its own page, then what the CLI
reports has changed, and an audit line names the action and the token; a tenant token sees and
moves only its own tenant's jobs."""

from __future__ import annotations

import logging

import pytest
from playwright.async_api import Page, expect

from tests.browser.support import ORG_A, Dash, cli, seed

APP = "tests.unit.sample_app:api"


async def confirm(page: Page, question: str) -> None:
    await expect(page.locator("#confirm-question")).to_contain_text(question)
    await expect(page.locator("#confirm")).to_be_visible()
    await page.click("#confirm")


def audit(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, str | None]]:
    return [
        (r.action, r.target, r.token)  # type: ignore[attr-defined]
        for r in caplog.records
        if r.getMessage() == "ujobs.dashboard.action"
    ]


async def test_a_dead_letter_retried_from_its_page_is_ready_for_the_cli(
    dash: Dash, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ujobs.dashboard")
    seeded = await seed(dash.api)
    issued = await dash.api.issue("read", "operate")
    page = await dash.page_as(issued.secret)
    await page.goto(dash.url("/_x/dead"))
    await page.locator(f'tr[data-job="{seeded.dead}"] button[data-action="retry"]').click()
    # Keeping it as is changes nothing.
    await expect(page.locator("#confirm-question")).to_contain_text(f"Re-queue job {seeded.dead}")
    await page.click("#confirm-cancel")
    assert (await cli(dash.dsn, "jobs", "show", seeded.dead))["state"] == "dead"
    assert audit(caplog) == []
    await page.locator(f'tr[data-job="{seeded.dead}"] button[data-action="retry"]').click()
    await confirm(page, f"Re-queue job {seeded.dead}")
    await expect(page.locator("#flash")).to_have_text("Job re-queued.")
    await expect(page.locator(f'tr[data-job="{seeded.dead}"]')).to_have_count(0)
    shown = await cli(dash.dsn, "jobs", "show", seeded.dead)
    assert (shown["state"], shown["attempt"], shown["lastError"]) == ("ready", 0, None)
    assert [s["name"] for s in shown["steps"]] == ["fetch", "render", "send"]
    assert audit(caplog) == [("retry", seeded.dead, issued.record.id)]


async def test_retry_from_a_step_drops_it_and_every_later_step(
    dash: Dash, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ujobs.dashboard")
    seeded = await seed(dash.api)
    page = await dash.page_as(await dash.api.token("read", "operate"))
    await page.goto(dash.url(f"/_x/jobs/{seeded.done}"))
    await page.select_option("#from-step", "render")
    await page.click('button[data-action="retry-from-step"]')
    await confirm(page, "dropping step 'render' and every step saved after it")
    await expect(page.locator("#flash")).to_have_text("Job re-queued from the chosen step.")
    await expect(page.locator("h1 .state-ready")).to_be_visible()
    shown = await cli(dash.dsn, "jobs", "show", seeded.done)
    assert shown["state"] == "ready"
    assert [s["name"] for s in shown["steps"]] == ["fetch"]
    [record] = [r for r in caplog.records if r.getMessage() == "ujobs.dashboard.action"]
    assert (record.action, record.step) == ("retry-from-step", "render")  # type: ignore[attr-defined]


async def test_cancel_and_promote_from_a_jobs_page(dash: Dash) -> None:
    seeded = await seed(dash.api)
    page = await dash.page_as(await dash.api.token("read", "operate"))
    ready = seeded.ready_a[1]
    await page.goto(dash.url(f"/_x/jobs/{ready}"))
    await expect(page.locator('button[data-action="promote"]')).to_have_count(0)
    await page.click('button[data-action="cancel"]')
    await confirm(page, f"Cancel job {ready}?")
    await expect(page.locator("#flash")).to_have_text("Job cancelled.")
    shown = await cli(dash.dsn, "jobs", "show", ready)
    assert shown["state"] == "cancelled"
    assert shown["lastError"].startswith("cancelled: from the dashboard by token tok_")

    await page.goto(dash.url(f"/_x/jobs/{seeded.delayed}"))
    before = await cli(dash.dsn, "jobs", "show", seeded.delayed)
    assert before["state"] == "delayed"
    await page.click('button[data-action="promote"]')
    await confirm(page, f"Run job {seeded.delayed} now")
    await expect(page.locator("#flash")).to_have_text("Job promoted: due now.")
    after = await cli(dash.dsn, "jobs", "show", seeded.delayed)
    assert after["state"] == "ready"
    assert after["runAtMs"] < before["runAtMs"]


async def test_pause_and_resume_a_queue_and_a_task(
    dash: Dash, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ujobs.dashboard")
    await seed(dash.api)
    issued = await dash.api.issue("read", "operate")
    page = await dash.page_as(issued.secret)

    def paused_queues(doc: dict[str, list[dict[str, object]]]) -> set[object]:
        return {q["queue"] for q in doc["queues"] if q["paused"]}

    await page.locator('tr[data-queue="mail"] button[data-action="queue-pause"]').click()
    await confirm(page, "Pause queue 'mail'?")
    await expect(page.locator("#flash")).to_have_text("Queue paused.")
    await expect(page.locator('tr[data-queue="mail"] .paused')).to_be_visible()
    assert paused_queues(await cli(dash.dsn, "queues", "list")) == {"mail"}
    await page.locator('tr[data-queue="mail"] button[data-action="queue-resume"]').click()
    await confirm(page, "Resume queue 'mail'?")
    assert paused_queues(await cli(dash.dsn, "queues", "list")) == set()

    def paused_tasks(doc: dict[str, list[dict[str, object]]]) -> dict[object, object]:
        return {t["name"]: t["paused"] for t in doc["tasks"]}

    await page.goto(dash.url("/_x/tasks"))
    await page.click('tr[data-task="nightly_digest"] button[data-action="task-pause"]')
    await confirm(page, "Pause task 'nightly_digest'?")
    await expect(page.locator("#flash")).to_have_text("Task paused.")
    assert paused_tasks(await cli(dash.dsn, "tasks", "list", "--app", APP)) == {
        "nightly_digest": True
    }
    await page.click('tr[data-task="nightly_digest"] button[data-action="task-resume"]')
    await confirm(page, "Resume task 'nightly_digest'?")
    assert paused_tasks(await cli(dash.dsn, "tasks", "list", "--app", APP)) == {
        "nightly_digest": False
    }
    assert [(a, t) for a, t, _ in audit(caplog)] == [
        ("queue-pause", "mail"),
        ("queue-resume", "mail"),
        ("task-pause", "nightly_digest"),
        ("task-resume", "nightly_digest"),
    ]
    assert {token for _, _, token in audit(caplog)} == {issued.record.id}


async def test_a_tenant_token_sees_and_moves_only_its_own_tenants_jobs(dash: Dash) -> None:
    seeded = await seed(dash.api)
    page = await dash.page_as(await dash.api.token("read", "operate", tenant=ORG_A))
    assert page.url.endswith("/_x/jobs")
    await expect(page.locator(".who .badge")).to_have_text(f"tenant {ORG_A}")
    await expect(page.get_by_role("link", name="Queues")).to_have_count(0)
    mine = [j["id"] for j in (await cli(dash.dsn, "jobs", "list", "--tenant", ORG_A))["jobs"]]
    listed = await page.locator("#jobs tbody tr[data-job]").evaluate_all(
        "rows => rows.map(r => r.dataset.job)"
    )
    assert listed == mine
    assert not set(listed) & set(seeded.ready_b)
    # Another tenant's job is "not found", by id and by search; their filter is ignored.
    theirs = seeded.ready_b[0]
    response = await page.goto(dash.url(f"/_x/jobs/{theirs}"))
    assert response is not None
    assert response.status == 404
    await expect(page.get_by_text("X_JOB_NOT_FOUND")).to_be_visible()
    await page.goto(dash.url(f"/_x/jobs?q={theirs}"))
    await expect(page.get_by_text("No jobs match.")).to_be_visible()
    for path in ("/_x/queues", "/_x/workers", "/_x/tasks"):
        response = await page.goto(dash.url(path))
        assert response is not None
        assert response.status == 403, path
        await expect(page.get_by_text("needs an operator token")).to_be_visible()
    await dash.shot(page, "tenant-forbidden")
    # Its own dead letter it may retry.
    await page.goto(dash.url("/_x/dead"))
    await page.locator(f'tr[data-job="{seeded.dead}"] button[data-action="retry"]').click()
    await confirm(page, "Re-queue job")
    assert (await cli(dash.dsn, "jobs", "show", seeded.dead))["state"] == "ready"
    assert (await cli(dash.dsn, "jobs", "show", theirs))["state"] == "ready"


async def test_logging_out_drops_the_cookie(dash: Dash) -> None:
    page = await dash.page_as(await dash.api.token("read"))
    await page.click("text=Log out")
    await expect(page.locator("#token")).to_be_visible()
    await page.goto(dash.url("/_x/jobs"))
    await expect(page.locator("#token")).to_be_visible()
    assert await page.context.cookies() == []
