"""The webhook pages in headless chromium: endpoints and their delivery attempts as the CLI
reports them, never a secret, disable and enable through the CLI's store (confirmed, audited),
and a tenant token that sees and moves only its own endpoints."""

from __future__ import annotations

import logging

import pytest
from playwright.async_api import Page, expect

from tests.browser.families import seed_webhooks
from tests.browser.support import ORG_A, Dash, cli


async def confirm(page: Page, question: str) -> None:
    await expect(page.locator("#confirm-question")).to_contain_text(question)
    await page.click("#confirm")


def endpoint_of(doc: dict[str, list[dict[str, object]]], endpoint: str) -> dict[str, object]:
    [found] = [e for e in doc["endpoints"] if e["id"] == endpoint]
    return found


async def test_endpoints_and_their_deliveries_show_no_secret(family_dash: Dash) -> None:
    dash = family_dash
    hooks = await seed_webhooks(dash.api)
    page = await dash.page_as(await dash.api.token("read"))
    await (
        page.get_by_role("navigation", name="Sections").get_by_role("link", name="Webhooks").click()
    )
    listed = (await cli(dash.dsn, "webhooks", "endpoints", "list"))["endpoints"]
    shown = await page.locator("#endpoints tbody tr[data-endpoint]").evaluate_all(
        "rows => rows.map(r => r.dataset.endpoint)"
    )
    assert sorted(shown) == sorted(e["id"] for e in listed) == sorted([hooks.a, hooks.b])
    a = page.locator(f'tr[data-endpoint="{hooks.a}"]')
    await expect(a.get_by_text("https://partner-a.example/hooks")).to_be_visible()
    await expect(a.locator(".endpoint-enabled")).to_be_visible()
    await expect(a.locator(".outcome-failed")).to_be_visible()
    await expect(a.locator(".last-status")).to_have_text("503")
    await expect(page.locator(f'tr[data-endpoint="{hooks.b}"] .last-status')).to_have_text("200")
    await expect(a.get_by_role("button", name="Disable")).to_be_visible()
    await dash.shot(page, "webhooks")
    await a.get_by_role("link", name=hooks.a).click()
    attempts = (await cli(dash.dsn, "webhooks", "deliveries", "--endpoint", hooks.a))["deliveries"]
    rows = page.locator("#deliveries tbody tr[data-event]")
    await expect(rows).to_have_count(len(attempts))
    assert len(attempts) == 2
    newest = rows.first
    await expect(newest.locator(".outcome-failed")).to_be_visible()
    cells = [c.strip() for c in await newest.locator("td").all_inner_texts()]
    assert cells[1] == attempts[0]["eventId"]
    assert (cells[3], cells[5], cells[6]) == ("1", "503", "X_WEBHOOK_DELIVERY_FAILED")
    await expect(page.locator("#failures")).to_have_text("1")
    await expect(page.locator("#endpoint-fields").get_by_text("Authorization")).to_be_visible()
    await expect(page.locator("#endpoint-fields").get_by_text("the envelope")).to_be_visible()
    html = await page.content()
    assert hooks.secret_a not in html
    assert hooks.header_value not in html
    await dash.shot(page, "webhook-endpoint")
    await page.click("#show-failed")
    await expect(rows).to_have_count(1)
    # A delivery links to its job.
    await rows.first.locator("a").click()
    await expect(page.locator("#job-id")).to_have_text(hooks.jobs[1])


async def test_disable_and_enable_an_endpoint_change_what_the_cli_reports(
    family_dash: Dash, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ujobs.dashboard")
    dash = family_dash
    hooks = await seed_webhooks(dash.api)
    issued = await dash.api.issue("read", "operate")
    page = await dash.page_as(issued.secret)
    await page.goto(dash.url("/_x/webhooks"))
    row = page.locator(f'tr[data-endpoint="{hooks.a}"]')
    await row.locator('button[data-action="endpoint-disable"]').click()
    await expect(page.locator("#confirm-question")).to_contain_text(
        f"Disable webhook endpoint {hooks.a}?"
    )
    await page.click("#confirm-cancel")
    doc = await cli(dash.dsn, "webhooks", "endpoints", "list")
    assert endpoint_of(doc, hooks.a)["disabledAtMs"] is None
    await row.locator('button[data-action="endpoint-disable"]').click()
    await confirm(page, f"Disable webhook endpoint {hooks.a}?")
    await expect(page.locator("#flash")).to_contain_text("Endpoint disabled")
    await expect(row.locator(".endpoint-disabled")).to_have_text("disabled: operator")
    doc = await cli(dash.dsn, "webhooks", "endpoints", "list")
    assert endpoint_of(doc, hooks.a)["disabledAtMs"] is not None
    assert endpoint_of(doc, hooks.a)["disabledReason"] == "operator"
    assert endpoint_of(doc, hooks.b)["disabledAtMs"] is None
    await row.get_by_role("link", name=hooks.a).click()
    await expect(page.locator("#endpoint-state")).to_have_text("disabled")
    await page.click('button[data-action="endpoint-enable"]')
    await confirm(page, f"Enable webhook endpoint {hooks.a}?")
    await expect(page.locator("#flash")).to_contain_text("Endpoint enabled")
    await expect(page.locator("#endpoint-state")).to_have_text("enabled")
    doc = await cli(dash.dsn, "webhooks", "endpoints", "list")
    assert endpoint_of(doc, hooks.a)["disabledAtMs"] is None
    audit = [
        (r.action, r.target, r.token)  # type: ignore[attr-defined]
        for r in caplog.records
        if r.getMessage() == "ujobs.dashboard.action"
    ]
    assert audit == [
        ("endpoint-disable", hooks.a, issued.record.id),
        ("endpoint-enable", hooks.a, issued.record.id),
    ]


async def test_a_tenant_token_sees_and_moves_only_its_own_endpoints(family_dash: Dash) -> None:
    dash = family_dash
    hooks = await seed_webhooks(dash.api)
    page = await dash.page_as(await dash.api.token("read", "operate", tenant=ORG_A))
    await page.goto(dash.url("/_x/webhooks"))
    await expect(page.locator(f'tr[data-endpoint="{hooks.a}"]')).to_be_visible()
    await expect(page.locator("#endpoints tbody tr[data-endpoint]")).to_have_count(1)
    response = await page.goto(dash.url(f"/_x/webhooks/{hooks.b}"))
    assert response is not None
    assert response.status == 404
    await expect(page.get_by_text("X_WEBHOOK_ENDPOINT_UNKNOWN")).to_be_visible()
    # A form rewritten to name the other tenant's endpoint is refused past its confirmation.
    await page.goto(dash.url(f"/_x/webhooks/{hooks.a}"))
    await page.locator('#endpoint-actions input[name="target"]').evaluate(
        f"el => el.value = {hooks.b!r}"
    )
    await page.click('button[data-action="endpoint-disable"]')
    await page.click("#confirm")
    await expect(page.get_by_text("X_WEBHOOK_ENDPOINT_UNKNOWN")).to_be_visible()
    doc = await cli(dash.dsn, "webhooks", "endpoints", "list")
    assert endpoint_of(doc, hooks.b)["disabledAtMs"] is None
    await dash.shot(page, "webhooks-tenant-refused")


async def test_the_family_pages_read_at_a_phone_width_in_dark_mode(family_dash: Dash) -> None:
    dash = family_dash
    hooks = await seed_webhooks(dash.api)
    page = await dash.page_as(await dash.api.token("read"), width=390, height=800, dark=True)
    for path in ("/_x/webhooks", f"/_x/webhooks/{hooks.a}", "/_x/backfills", "/_x/exports"):
        await page.goto(dash.url(path))
        await expect(page.locator("h1")).to_be_visible()
        await expect(page.locator("table").first).to_be_visible()
        # The page itself never scrolls sideways; a wide table scrolls inside its frame.
        wide = await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert wide <= 0, (path, wide)
    await dash.shot(page, "endpoint-phone-dark")
