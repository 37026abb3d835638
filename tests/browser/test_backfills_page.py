"""The backfills page in headless chromium: the ledger the CLI lists, what is unswept, the
checksum warning, each pass linked to its job; operator tokens only."""

from __future__ import annotations

import asyncio

from playwright.async_api import expect

from tests.browser.families import FAMILIES_APP, seed_backfills
from tests.browser.support import ORG_A, Dash, cli
from tests.support.cli import json_of, ujobs
from ujobs.drivers.postgres import postgres_driver


async def test_the_ledger_pending_passes_and_a_moved_checksum_are_shown(
    family_dash: Dash,
) -> None:
    dash = family_dash
    passes = await seed_backfills(dash.api)
    page = await dash.page_as(await dash.api.token("read"))
    await page.get_by_role("link", name="Backfills").click()
    assert page.url.endswith("/_x/backfills")
    listed = (await cli(dash.dsn, "db", "backfill", "--list"))["backfills"]
    runs = await page.locator("#ledger tbody tr[data-run]").evaluate_all(
        "rows => rows.map(r => r.dataset.run)"
    )
    assert runs == [r["runId"] for r in listed]
    assert [r["status"] for r in listed] == ["failed", "running", "completed"]
    await expect(page.locator("#running-count")).to_have_text("1")
    await expect(page.locator("#pending-names")).to_have_text("unswept: drop-legacy, prod-only")
    slugs = page.locator('#declared tr[data-backfill="rewrite-slugs"]')
    await expect(slugs.locator(".backfill-running")).to_be_visible()
    await expect(slugs.get_by_text("checksum moved")).to_be_visible()
    await expect(
        page.locator('#declared tr[data-backfill="prod-only"] .backfill-pending')
    ).to_be_visible()
    completed = page.locator("#ledger tbody tr").filter(has_text="completed")
    cells = [c.strip() for c in await completed.locator("td").all_inner_texts()]
    assert (cells[1], cells[2]) == ("42", '{"id": 42}')
    await expect(completed.get_by_text("checksum moved")).to_be_visible()
    failed = page.locator('#ledger tr[data-backfill="drop-legacy"]')
    await expect(failed.get_by_text("relation legacy_rows does not exist")).to_be_visible()
    await dash.shot(page, "backfills")
    # Each pass links to its own job.
    await completed.locator(f'a[href$="/jobs/{passes.completed}"]').click()
    await expect(page.locator("#job-id")).to_have_text(passes.completed)
    await page.go_back()
    await page.select_option('select[name="status"]', "failed")
    await page.click('button:text("Filter")')
    await expect(page.locator("#ledger tbody tr[data-run]")).to_have_count(1)
    await expect(page.locator(f'#ledger a[href$="/jobs/{passes.failed}"]')).to_be_visible()


async def test_a_tenant_scoped_backfill_shows_a_row_per_org_as_the_cli_does(
    family_dash: Dash,
) -> None:
    """One org's completed pass completes that org's scope only: the page and ``ujobs db
    backfill --pending`` read one projection, a row per name and org."""
    dash = family_dash
    ledger = postgres_driver(dash.api.pool).backfills
    assert ledger is not None
    await ledger.begin("per-org", "run-a", "c", "1.5.0", "org_a")
    await ledger.finish("per-org", "run-a", "completed", tenant="org_a")
    await ledger.begin("per-org", "run-b", "c", "1.5.0", "org_b")
    await ledger.finish("per-org", "run-b", "failed", "boom", tenant="org_b")
    page = await dash.page_as(await dash.api.token("read"))
    await page.goto(dash.url("/_x/backfills"))
    shown = await page.locator("#declared tbody tr[data-backfill]").evaluate_all(
        "rows => rows.map(r => [r.dataset.backfill, r.dataset.tenant])"
    )
    env = {"UJOBS_APP": FAMILIES_APP, "UJOBS_ENVIRONMENT": "production"}
    pending = await asyncio.to_thread(
        ujobs, "db", "backfill", "--pending", "--json", dsn=dash.dsn, env=env
    )
    listed = [[r["name"], r["tenant"] or ""] for r in json_of(pending)["rows"]]
    assert sorted(shown) == sorted(listed)
    assert ["per-org", "org_a"] in shown
    assert ["per-org", "org_b"] in shown
    org_a = page.locator('#declared tr[data-backfill="per-org"][data-tenant="org_a"]')
    await expect(org_a.locator("td").first).to_have_text("org_a")


async def test_a_tenant_token_cannot_read_the_ledger(family_dash: Dash) -> None:
    dash = family_dash
    await seed_backfills(dash.api)
    page = await dash.page_as(await dash.api.token("read", tenant=ORG_A))
    await expect(page.get_by_role("link", name="Backfills")).to_have_count(0)
    response = await page.goto(dash.url("/_x/backfills"))
    assert response is not None
    assert response.status == 403
    await expect(page.get_by_text("needs an operator token")).to_be_visible()
    await expect(page.locator("#ledger")).to_have_count(0)
